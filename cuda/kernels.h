// The CUDA backend's kernels (internal to cuda/). cuda/backend.cpp puts each in the Backend's table;
// each selects the tensors' device and queues its work on the current stream of that device.
// Conventions are those of core/backend.h.
#pragma once

#include "../core/backend.h"
#include "../core/ops.h"
#include "deferred_checks.h"

namespace nabla::cuda {

// The kernels of core/backend.h's list (NABLA_KERNELS) that CUDA has, declared by hand, by file:
// cuda/backend.cpp fills the Backend from the list, so a kernel of the list that is neither declared
// here nor on NABLA_CUDA_LACKS below is a compile error there, and one declared with another
// signature than the list's too. (optim.cu registers the fused optimizer updates with optim/fused.h,
// solver.cpp the linear algebra solver with core/linalg/solver.h.)
// copy.cu
void copy(const Tensor& src, const Tensor& dst, bool non_blocking);
void fill(const Tensor& dst, Scalar value);
// unary.cu, binary.cu
void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
// reduce.cu
void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out);
void arg_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices);
// scan_sort.cu
void scan(ScanOp op, const Tensor& x, int64_t dim, const Tensor& out);
void sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices);
void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices);
// softmax.cu
void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& out);
void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& out);
// index.cu
void index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate);
Tensor nonzero(const Tensor& x);
// random.cu
void random(RandomOp op, const Tensor& out, double p0, double p1, Generator& gen);
void random_int(const Tensor& out, int64_t low, int64_t high, Generator& gen);
// blas.cpp (cuBLAS)
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta);
// cudnn.cpp: convolution and its gradients (2-D and 3-D), batch norm (float32 and float64)
void conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvParams& p, const Tensor& out);
void conv_input_grad(const Tensor& grad_out, const Tensor& weight, const ConvParams& p, const Tensor& grad_in);
void conv_weight_grad(const Tensor& x, const Tensor& grad_out, const ConvParams& p, const Tensor& grad_weight);
bool has_fused_batch_norm(const Tensor& x, bool training, double eps);
void batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, const Tensor& out,
                const Tensor& save_mean, const Tensor& save_invstd);
void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, double eps, const Tensor& grad_x, const Tensor& grad_weight,
                         const Tensor& grad_bias);
// pool.cu
void max_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& indices);
void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in);
void avg_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out);
void avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p, const Tensor& grad_in);

// What the CUDA backend lacks on purpose: X(kernel, "reason"), one line per kernel of
// NABLA_KERNELS that CUDA goes without, with the reason (the entry stays empty and raises
// NotImplemented with it on CUDA tensors, or answers false).
#define NABLA_CUDA_LACKS(X)                                                                                        \
  X(has_flash_attention,                                                                                           \
    "no fused attention kernel on CUDA yet: scaled_dot_product_attention takes its "                               \
    "math path (cuBLAS matmuls and the softmax kernel) there")                                                     \
  X(flash_attention, "no fused attention kernel on CUDA yet (flash_attention runs its math formulation)")          \
  X(flash_attention_backward, "no fused attention kernel on CUDA yet (flash_attention runs its math formulation)") \
  X(fft, "cuFFT is not wired in yet: move the tensor to the CPU for nabla::fft")
NABLA_CUDA_LACKS(NABLA_DECLARE_LACKING)

// Points every entry of the CUDA Backend at the function above of its name, from NABLA_KERNELS
// (cuda/backend.cpp; plain C++, so tests/compile_fail/cuda_kernel_*.cpp compile it without nvcc).
// A compile error "'name' is not a member of 'impl'" here means a kernel of the list has
// neither a declaration above nor a NABLA_CUDA_LACKS line: write it, or list it with the reason;
// "no matching function for call to 'fill_entry'" means its declaration's signature is not the list's.
inline void fill_kernels(Backend& table) {
  namespace impl = nabla::cuda;
  NABLA_KERNELS(NABLA_FILL_ENTRY)
}

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
