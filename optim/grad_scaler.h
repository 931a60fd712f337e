// Gradient scaling for mixed-precision training, as PyTorch's torch.amp.GradScaler
// (torch.cuda.amp.GradScaler): the loss is multiplied by a large factor before backward so that
// small low-precision gradients do not flush to zero, the gradients are divided by it again before
// the optimizer uses them, and a step whose gradients hold an inf or NaN is skipped while the
// factor backs off.
//
//   amp::GradScaler scaler;                       // init_scale 2^16, growth_interval 2000, ...
//   for (...) {
//     opt.zero_grad();
//     Tensor loss = loss_fn(model->forward(x), y);   // e.g. under autocast
//     scaler.scale(loss).backward();              // scaler.scale(loss).backward()
//     scaler.unscale_(opt);                       // optional: to clip or inspect real gradients
//     nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//     scaler.step(opt);                           // opt.step() unless a gradient was inf/NaN
//     scaler.update();                            // back off on inf, grow after growth_interval
//   }
//
// The rules, as PyTorch's:
// - unscale_(opt) at most once per optimizer between update()s, after all of its gradients have
//   been accumulated (gradient accumulation: scale each micro-batch's loss, backward each, then
//   unscale_/step/update once). step(opt) unscales first when unscale_ was not called. A second
//   unscale_, an unscale_ after step, or a second step before update() throw ValueError.
// - Several optimizers: each has its own stage (ready, unscaled, stepped) and its own found-inf
//   flag; step(opt) skips only the optimizer whose gradients were non-finite, and update() backs the
//   scale off when any optimizer that was checked this iteration found one.
// - unscale_ checks and unscales each gradient in one pass: x *= 1/scale (the reciprocal taken in
//   float64 and rounded to float32, as PyTorch's), noting whether any x was inf or NaN. On the CPU,
//   contiguous float32/float64 gradients take a fused loop (vectorized integer test of the
//   exponent bits, split over the cores); other gradients (strided, bfloat16, CUDA) use Tensor ops
//   (isfinite(g).all(), then g.mul_(1/scale)), with one host read per optimizer for the flag.
// - update() follows torch._amp_update_scale_: on a found inf, scale *= backoff_factor and the
//   growth tracker resets to 0; otherwise the tracker counts the finite step and, on reaching
//   growth_interval, scale *= growth_factor (kept only when it stays finite in float32) and the
//   tracker resets. The scale is a float32 number, as PyTorch's scale tensor. update(new_scale)
//   sets the scale and leaves the tracker alone.
// - float16 gradients are refused ("Attempting to unscale FP16 gradients", ValueError), as
//   PyTorch does: a float16 gradient belongs to a float16 parameter, and an optimizer stepping
//   float16 weights with an update as small as lr * grad loses it to rounding whatever the scaling;
//   keep the parameters (master weights) in float32 and run the float16 compute under autocast,
//   which casts per op. bfloat16 gradients are unscaled (through Tensor ops).
// - A disabled scaler (enabled = false) returns scale()'s input unchanged, makes unscale_ and
//   update no-ops, step(opt) a plain opt.step(), get_scale() 1, and state_dict() empty.
// - With DDP, the gradients the scaler sees have already been all-reduced in backward, so every
//   rank finds the same infs, skips the same steps and keeps the same scale: no extra
//   communication, as in PyTorch. (Gradients that differ per rank, such as ZeRO/FSDP shards, need
//   the found-inf flags all-reduced, PyTorch's ShardedGradScaler; nabla has no such scaler yet.)
// Deliberate differences from PyTorch: the scale lives on the host (nabla's CPU path has no device
// scalar to keep; on CUDA the step reads the flag, as PyTorch's step() does with .item()), so
// scale(loss) multiplies by a number and keeps the loss's shape (PyTorch's 0-d loss times its
// 1-element scale tensor has shape [1]); a float16/bfloat16 output is scaled in float32, the dtype
// PyTorch's promotion gives it. step() has no closure form (PyTorch refuses closures as well).
//
// state_dict() holds PyTorch's keys as 0-d tensors: scale, growth_factor, backoff_factor (float64),
// growth_interval, _growth_tracker (int64); optim::save_checkpoint stores it with the model and the
// optimizer (Checkpoint::scaler). Take it after update().
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "../core/ordered_dict.h"
#include "../core/tensor.h"
#include "optimizer.h"

namespace nabla::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // < 1
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // outputs * scale (the input itself when disabled). The first call starts the scale at init_scale.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);

  // Divides the optimizer's gradients by the scale in place and records whether any was inf/NaN.
  void unscale_(optim::Optimizer& optimizer);
  // Unscales (unless unscale_ was called) and calls optimizer.step() when every gradient was
  // finite; returns whether it stepped. Disabled: optimizer.step(), true.
  bool step(optim::Optimizer& optimizer);
  // Updates the scale from this iteration's checks and starts the next iteration.
  void update();
  void update(double new_scale);

  // The current scale (init_scale before the first scale(); 1 when disabled).
  double get_scale() const;
  bool is_enabled() const { return enabled_; }
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double factor) { growth_factor_ = factor; }
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double factor) { backoff_factor_ = factor; }
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t interval) { growth_interval_ = interval; }
  // Consecutive finite steps since the last growth or backoff (PyTorch's _get_growth_tracker()).
  int64_t get_growth_tracker() const;

  // Whether step(optimizer) found an inf/NaN in this iteration (false before its check).
  bool found_inf(const optim::Optimizer& optimizer) const;

  // {} when disabled. load_state_dict checks every value before changing anything; a disabled
  // scaler ignores it, an enabled one refuses an empty dict.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& state);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct OptState {
    Stage stage = Stage::ready;
    bool checked = false;  // a gradient was checked (PyTorch: found_inf_per_device is not empty)
    bool found_inf = false;
  };
  void check_started(const char* what) const;

  bool enabled_;
  double init_scale_;
  double growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  bool started_ = false;  // PyTorch's _scale is not None
  float scale_ = 0.0f;
  int64_t growth_tracker_ = 0;
  std::unordered_map<const optim::Optimizer*, OptState> per_optimizer_;
};

}  // namespace nabla::amp
