// The CUDA backend's kernel entry points (internal to cuda/). cuda/backend.cpp forwards each Backend
// entry to one of these; each selects the tensors' device and queues its work on the current stream
// of that device. Conventions are those of core/backend.h.
#pragma once

#include "core/backend.h"
#include "core/ops.h"

namespace nabla::cuda {

// copy.cu
void copy(const Tensor& src, const Tensor& dst, bool non_blocking);
void device_copy(const Tensor& src, const Tensor& dst);  // both on one device, any strides and dtypes
void fill(const Tensor& dst, Scalar value);
// A contiguous copy of a CUDA tensor (itself when already contiguous), optionally in another dtype.
Tensor contiguous(const Tensor& x, DType dtype);
inline Tensor contiguous(const Tensor& x) { return contiguous(x, x.dtype()); }

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

// softmax.cu (cuDNN for strided lines: cudnn.cpp)
void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& out);
void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& out);
bool cudnn_softmax(const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, const Tensor& out);
bool cudnn_softmax_backward(const Tensor& g, const Tensor& y, int64_t outer, int64_t len, int64_t inner, bool log,
                            const Tensor& out);

// index.cu
void index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate);
Tensor nonzero(const Tensor& x);

// random.cu
void random(RandomOp op, const Tensor& out, double p0, double p1, Generator& gen);
void random_int(const Tensor& out, int64_t low, int64_t high, Generator& gen);

// blas.cpp (cuBLAS), matmul_int.cu (integer dtypes)
void matmul(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta);
void matmul_integer(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta);

// cudnn.cpp
void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& out);
void conv2d_input_grad(const Tensor& gy, const Tensor& w, const Conv2dParams& p, const Tensor& gx);
void conv2d_weight_grad(const Tensor& x, const Tensor& gy, const Conv2dParams& p, const Tensor& gw);

// cudnn.cpp: batch normalization (see Backend::batch_norm)
bool batch_norm_supported(const Tensor& x, double eps);
void batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, const Tensor& out,
                const Tensor& save_mean, const Tensor& save_invstd);
void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, double eps, const Tensor& grad_x, const Tensor& grad_weight,
                         const Tensor& grad_bias);

// pool.cu
void max_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& indices);
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx);
void avg_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out);
void avg_pool2d_backward(const Tensor& gy, const Pool2dParams& p, const Tensor& gx);

// optim.cu: fused optimizer updates (see Backend::sgd_step and the steps after it)
bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s);
bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const Backend::AdamStep& a);
bool rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const Backend::RmspropStep& r);
bool adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, const Backend::AdagradStep& a);
bool adadelta_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                   const Backend::AdadeltaStep& a);

// index.cu: the device-side record of out-of-range indices (see index_checks() in
// core/cuda_api.h). Kernels get flag(); after them, check() throws IndexError naming `op`.
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
};

}  // namespace nabla::cuda
