// The device abstraction. An op's front-end (core/*.cpp) checks its arguments, allocates the output
// and calls one virtual kernel of the Backend for the tensors' device; one virtual call per op, never
// per element. The CPU backend (core/cpu/) fills every entry; the CUDA backend (cuda/) registers
// itself when compiled in. An entry a device does not provide throws NotImplemented.
//
// Kernel conventions: outputs are allocated by the caller with the right shape and dtype (usually
// contiguous); inputs may have any strides (broadcast dims have stride 0). Binary and ternary
// kernels receive inputs already expanded to the output's shape and converted to one dtype.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "core/allocator.h"
#include "core/elementwise_ops.h"
#include "core/tensor.h"

namespace nabla {

class Generator;
struct Conv2dParams;
struct Pool2dParams;

enum class ReduceOp : uint8_t { sum, prod, max, min, any, all };
enum class ScanOp : uint8_t { cumsum, cumprod };
enum class RandomOp : uint8_t { uniform, normal, bernoulli };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual Allocator& allocator(Device device) = 0;

  // dst = src, same shape, any strides, converting dtype. For the CUDA backend either side may be
  // on the host (that is how tensors move between devices).
  virtual void copy(const Tensor& src, const Tensor& dst, bool non_blocking = false);
  virtual void fill(const Tensor& dst, Scalar value);

  // out = op(x); x already has out's compute dtype unless op is a bool predicate.
  virtual void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1);
  // out = op(a, b); a and b are expanded to out's shape and share one dtype.
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha);
  // out = cond ? a : b; all expanded to out's shape, a and b in out's dtype, cond bool.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

  // out (x's shape with `dims` reduced to size 1, i.e. keepdim) = reduction of x over dims.
  // Sums of float tensors accumulate in at least double precision per output element block.
  virtual void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out);
  // max/min over one dim with the index of the first extreme element (keepdim shapes).
  virtual void arg_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices);
  virtual void scan(ScanOp op, const Tensor& x, int64_t dim, const Tensor& out);
  virtual void sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices);
  virtual void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices);
  // Numerically stable softmax (or log-softmax) along dim, and its backward given y = output.
  virtual void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& out);
  virtual void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& out);

  // out = x.index_select(dim, index) (index: 1-D int64, checked in range by the front-end).
  virtual void index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
  // out[.., index[i], ..] += src[.., i, ..] along dim (out is modified in place).
  virtual void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
  virtual void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
  // In place on `out`: out[index] = src (accumulate=false) or += src. src may be expanded.
  virtual void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate);
  // Indices (n, ndim) of nonzero elements of x.
  virtual Tensor nonzero(const Tensor& x);

  virtual void random(RandomOp op, const Tensor& out, double p0, double p1, Generator& gen);
  // Integers uniformly in [low, high).
  virtual void random_int(const Tensor& out, int64_t low, int64_t high, Generator& gen);

  // out = alpha * a @ b + beta * out for 3-D (batch, m, k) x (batch, k, n) -> (batch, m, n); any strides
  // (stride-0 batch dims allowed in a and b). beta == 0 ignores out's old contents, even NaN.
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta);

  virtual void conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p,
                      const Tensor& out);
  virtual void conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Conv2dParams& p,
                                 const Tensor& grad_in);
  virtual void conv2d_weight_grad(const Tensor& x, const Tensor& grad_out, const Conv2dParams& p,
                                  const Tensor& grad_weight);
  // indices (int64) hold each max's flat position within its (H, W) input plane.
  virtual void max_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& indices);
  virtual void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in);
  virtual void avg_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out);
  virtual void avg_pool2d_backward(const Tensor& grad_out, const Pool2dParams& p, const Tensor& grad_in);

  // Fused batch normalization of x (N, C, ...) over every dim but 1, with per-channel weight and
  // bias (either may be undefined: 1 and 0). training: normalizes with the batch mean and biased
  // variance, writes them as save_mean and save_invstd = 1 / sqrt(var + eps) (C), and updates
  // running_mean/running_var in place when defined (running = (1 - momentum) * running +
  // momentum * batch statistic, with the unbiased variance); otherwise normalizes with the running
  // statistics. Only where has_fused_batch_norm() says so: elsewhere the front-end composes batch
  // norm from Tensor ops.
  virtual bool has_fused_batch_norm(const Tensor& x, double eps) const { return false; }
  virtual void batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                          const Tensor& running_var, bool training, double momentum, double eps, const Tensor& out,
                          const Tensor& save_mean, const Tensor& save_invstd);
  // Training-mode gradients from the saved statistics; grad_weight and grad_bias may be undefined.
  virtual void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                                   const Tensor& save_mean, const Tensor& save_invstd, double eps,
                                   const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias);

  // One fused Adam/AdamW update in place (the algorithm of optim::Adam):
  //   g = (maximize ? -grad : grad) (+ weight_decay * param unless decoupled)
  //   param *= 1 - lr * weight_decay (decoupled only); exp_avg = beta1 * exp_avg + (1 - beta1) * g
  //   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
  //   amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), which takes exp_avg_sq's place below
  //   param -= step_size * exp_avg / (sqrt(exp_avg_sq) / bias_correction2_sqrt + eps)
  // for contiguous tensors of one floating dtype (max_exp_avg_sq is undefined without amsgrad).
  // Returns false where the backend has no fused kernel for them, having written nothing: the
  // optimizer then composes the update from Tensor ops. The fused steps below keep the same contract.
  struct AdamStep {
    double lr, beta1, beta2, eps, weight_decay, step_size, bias_correction2_sqrt;
    bool decoupled, maximize, amsgrad;
  };
  virtual bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const Tensor& max_exp_avg_sq, const AdamStep& a) {
    return false;
  }

  // One fused RMSprop update in place (the algorithm of optim::RMSprop):
  //   g = (maximize ? -grad : grad) + weight_decay * param
  //   square_avg = alpha * square_avg + (1 - alpha) * g * g
  //   centered: grad_avg = alpha * grad_avg + (1 - alpha) * g; avg = sqrt(square_avg - grad_avg^2) + eps
  //   otherwise avg = sqrt(square_avg) + eps
  //   momentum > 0: buf = momentum * buf + g / avg; param -= lr * buf; otherwise param -= lr * g / avg
  // (grad_avg is undefined unless centered, momentum_buffer unless momentum > 0).
  struct RmspropStep {
    double lr, alpha, eps, weight_decay, momentum;
    bool centered, maximize;
  };
  virtual bool rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                            const Tensor& momentum_buffer, const RmspropStep& r) {
    return false;
  }

  // One fused Adagrad update in place (optim::Adagrad; clr is the step's decayed learning rate):
  //   g = (maximize ? -grad : grad) + weight_decay * param; sum += g * g
  //   param -= clr * g / (sqrt(sum) + eps)
  struct AdagradStep {
    double clr, eps, weight_decay;
    bool maximize;
  };
  virtual bool adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a) {
    return false;
  }

  // One fused Adadelta update in place (optim::Adadelta):
  //   g = (maximize ? -grad : grad) + weight_decay * param
  //   square_avg = rho * square_avg + (1 - rho) * g * g
  //   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
  //   acc_delta = rho * acc_delta + (1 - rho) * delta * delta; param -= lr * delta
  struct AdadeltaStep {
    double lr, rho, eps, weight_decay;
    bool maximize;
  };
  virtual bool adadelta_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                             const Tensor& acc_delta, const AdadeltaStep& a) {
    return false;
  }

  // One fused SGD update in place (the algorithm of optim::SGD):
  //   g = (maximize ? -grad : grad) + weight_decay * param
  //   momentum != 0: buf = g if first_step else momentum * buf + (1 - dampening) * g;
  //                  g = nesterov ? g + momentum * buf : buf
  //   param -= lr * g
  // for contiguous tensors of one floating dtype (momentum_buffer is undefined when momentum is 0,
  // and uninitialised on the first step). Returns false where the backend has no fused kernel for
  // them, having written nothing: the optimizer then composes the update from Tensor ops.
  struct SgdStep {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize, first_step;
  };
  virtual bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
    return false;
  }

 protected:
  [[noreturn]] void not_implemented(const char* op) const;
};

// The backend that owns `device`'s memory and kernels; throws DeviceError when it is not there
// (e.g. a CUDA tensor requested from a build without CUDA or a machine without a GPU).
Backend& backend_for(Device device);
// Called by backends at load time.
void register_backend(DeviceType type, Backend* backend);
bool has_backend(DeviceType type);

}  // namespace nabla
