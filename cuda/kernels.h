// The CUDA backend's kernels (internal to cuda/). cuda/backend.cpp puts each in the Backend's table;
// each selects the tensors' device and queues its work on the current stream of that device.
// Conventions are those of core/backend.h.
#pragma once

#include "core/backend.h"
#include "core/ops.h"
#include "cuda/deferred_checks.h"

namespace nabla::cuda {

// Every kernel of core/backend.h's list that the CUDA backend has (cuda/backend.cpp fills one entry
// per kernel): copy.cu (copy, fill), unary.cu, binary.cu (unary, binary, where), reduce.cu,
// scan_sort.cu (scan, sort, topk), softmax.cu, index.cu (index_select, index_add, gather, scatter,
// nonzero), random.cu, blas.cpp (matmul, through cuBLAS), cudnn.cpp (conv and its gradients, 2-D and 3-D,
// has_fused_batch_norm, batch_norm, batch_norm_backward), pool.cu. (optim.cu registers the fused
// optimizer updates with optim/fused.h.)
#define NABLA_DECLARE_KERNEL(name, ret, params, missing) ret name params;
NABLA_KERNELS(NABLA_DECLARE_KERNEL)
#undef NABLA_DECLARE_KERNEL

// copy.cu
void device_copy(const Tensor& src, const Tensor& dst);  // both on one device, any strides and dtypes
// A contiguous copy of a CUDA tensor (itself when already contiguous), optionally in another dtype.
Tensor contiguous(const Tensor& x, DType dtype);
inline Tensor contiguous(const Tensor& x) { return contiguous(x, x.dtype()); }

// softmax.cu through cuDNN for strided lines (cudnn.cpp)
bool cudnn_softmax(const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, const Tensor& out);
bool cudnn_softmax_backward(const Tensor& g, const Tensor& y, int64_t outer, int64_t len, int64_t inner, bool log,
                            const Tensor& out);

// matmul_int.cu: matmul of integer dtypes
void matmul_integer(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta);

// index.cu: out[..., index[..., j, ...], ...] += src[..., j, ...] along dim, each destination adding
// in index order without atomics (scatter_add under use_deterministic_algorithms; max_pool2d's
// backward). check_index false: the indices are known to be in range (no check, no synchronization).
void scatter_add_ordered(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool check_index);

// index.cu: the device-side record of out-of-range indices (see IndexChecks in core/cuda_api.h).
// Kernels get flag(); after them, check() throws IndexError naming `op` (immediate mode) or leaves
// the record to be reported at the next synchronization of the stream (deferred mode).
class IndexChecker {
 public:
  IndexChecker(int device, const char* op);
  int64_t* flag() const { return flag_; }  // [0]: 1 when an index was bad, [1]: the bad value, [2]: dim size
  void check(int64_t dim);
 private:
  Tensor buf_;
  int64_t* flag_ = nullptr;
  const char* op_;
  int device_;
  int slot_ = -1;  // deferred: the record's slot (cuda/deferred_checks.h)
};

// deferred_checks.cpp: deferred checks' records (the rules are in cuda/deferred_checks.h).
// A zeroed record of 4 int64 on `stream` for one check; *slot names it for arm_deferred_check.
int64_t* deferred_check_slot(int device, void* stream, int* slot);  // stream: a cudaStream_t
void arm_deferred_check(int device, int slot, CheckReport report);
// After `stream` (or the whole device) was synchronized: reads back its checks' records and runs
// their reports (the first error is thrown).
void report_deferred_checks(int device, void* stream);
void report_all_deferred_checks(int device);
// cuda::check_later's deferred mode (core/cuda_api.h).
void defer_value_check(const Tensor& values, std::function<void(const Tensor&)> report);

}  // namespace nabla::cuda
