// The fused optimizer updates: one pass over a parameter, its gradient and its state instead of a
// chain of Tensor ops (each a pass over memory and a temporary). optim/ owns this table; the CPU
// kernels (optim/cpu/fused_steps.cpp, one per CPU build) and the CUDA ones (cuda/optim.cu, which
// registers them) fill it. An optimizer asks fused_steps(device) for its update; an empty entry,
// or a kernel that answers false (non-contiguous tensors, mixed dtypes), means the optimizer
// composes the same update from Tensor ops. The per-element formulas are optim/fused_math.h.
// The CPU's updates also take float16/bfloat16 parameters (state in the parameter's dtype): each
// element is updated in float32 and rounded once. Differs from PyTorch's default (foreach) path,
// which rounds after every op; it is what PyTorch's fused=True optimizers compute.
#pragma once

#include "../core/backend.h"

namespace nabla::optim {

// Parameters of each update, with its algorithm.
// Adam/AdamW (the algorithm of optim::Adam):
//   g = (maximize ? -grad : grad) (+ weight_decay * param unless decoupled)
//   param *= 1 - lr * weight_decay (decoupled only); exp_avg = beta1 * exp_avg + (1 - beta1) * g
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
//   amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), which takes exp_avg_sq's place below
//   param -= step_size * exp_avg / (sqrt(exp_avg_sq) / bias_correction2_sqrt + eps)
struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay, step_size, bias_correction2_sqrt;
  bool decoupled, maximize, amsgrad;
};
// RMSprop (optim::RMSprop):
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
// Adagrad (optim::Adagrad; clr is the step's decayed learning rate):
//   g = (maximize ? -grad : grad) + weight_decay * param; sum += g * g
//   param -= clr * g / (sqrt(sum) + eps)
struct AdagradStep {
  double clr, eps, weight_decay;
  bool maximize;
};
// Adadelta (optim::Adadelta):
//   g = (maximize ? -grad : grad) + weight_decay * param
//   square_avg = rho * square_avg + (1 - rho) * g * g
//   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
//   acc_delta = rho * acc_delta + (1 - rho) * delta * delta; param -= lr * delta
struct AdadeltaStep {
  double lr, rho, eps, weight_decay;
  bool maximize;
};
// SGD (optim::SGD):
//   g = (maximize ? -grad : grad) + weight_decay * param
//   momentum != 0: buf = g if first_step else momentum * buf + (1 - dampening) * g;
//                  g = nesterov ? g + momentum * buf : buf
//   param -= lr * g
// (momentum_buffer is undefined when momentum is 0, and uninitialised on the first step).
struct SgdStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, first_step;
};

// X(name, bool, (parameters), no), core/device_table.h's list shape: each entry answers whether it
// did the update (for contiguous tensors of one floating dtype; false where it has no kernel for
// them, having written nothing; an entry a device does not fill answers false too).
#define NABLA_FUSED_STEPS(X)                                                                                        \
  X(sgd_step, bool, (const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s), no) \
  X(adam_step, bool,                                                                                                \
    (const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,                      \
     const Tensor& max_exp_avg_sq, const AdamStep& a),                                                              \
    no)                                                                                                             \
  X(rmsprop_step, bool,                                                                                             \
    (const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,                     \
     const Tensor& momentum_buffer, const RmspropStep& r),                                                          \
    no)                                                                                                             \
  X(adagrad_step, bool, (const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a), no)     \
  X(adadelta_step, bool,                                                                                            \
    (const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,                    \
     const AdadeltaStep& a),                                                                                        \
    no)

// One device's updates (core/device_table.h), filled from the list by optim/cpu/fused_steps.cpp and
// cuda/optim.cu.
struct FusedSteps {
  NABLA_DEVICE_ENTRIES(NABLA_FUSED_STEPS)
};

// The updates for tensors on `device` (every entry answers false for a device without fused kernels).
const FusedSteps& fused_steps(Device device);
// Called by a backend at load time (the CUDA backend; the CPU's are built in).
void register_fused_steps(DeviceType type, const FusedSteps* steps);

}  // namespace nabla::optim
