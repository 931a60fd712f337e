// --amp off|bf16|fp16 of the example programs: mixed precision as a PyTorch user writes it. The
// forward and the loss run under autocast (`with torch.autocast(device_type, dtype=...)`), the
// weights and the optimizer's state stay float32, backward runs after the region ends, and fp16
// training steps through a GradScaler (bfloat16 has float32's range and needs none).
//
//   const std::string amp = examples::amp_mode(flags);                 // "off", "bf16" or "fp16"
//   { auto region = examples::amp_region(amp, device); loss = ...; }   // the forward and the loss
//   examples::AmpStep stepper(amp);                                    // the scaler for fp16
//   stepper.step(loss, optimizer, [&] { clip_grad_norm_(...); });      // backward, unscale, update
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "examples/flags.h"
#include "nabla.h"

namespace examples {

// The value of --amp, checked (the program's usage message otherwise).
inline std::string amp_mode(Flags& flags) {
  std::string amp = flags.str("amp", "off");
  if (amp != "off" && amp != "bf16" && amp != "fp16") flags.usage("--amp is off, bf16 or fp16, got '" + amp + "'");
  return amp;
}

// The autocast region of a forward (none for off).
inline std::optional<nabla::AutocastGuard> amp_region(const std::string& amp, nabla::Device device) {
  std::optional<nabla::AutocastGuard> region;
  if (amp != "off") region.emplace(nabla::autocast(device, amp == "bf16" ? nabla::kBFloat16 : nabla::kFloat16));
  return region;
}

// What a run header says about --amp ("" for off); `training` adds fp16's GradScaler.
inline std::string amp_description(const std::string& amp, bool training = true) {
  if (amp == "off") return "";
  return std::string("mixed precision: forward under autocast to ") + (amp == "bf16" ? "bfloat16" : "float16") +
         ", float32 weights" + (training && amp == "fp16" ? ", loss scaled by a GradScaler" : "");
}

// A training step's backward and update: loss.backward() and optimizer.step(), or for fp16
// scaler.scale(loss).backward(), unscale_ (before `before_step`, e.g. gradient clipping, sees the
// gradients), scaler.step and scaler.update, as PyTorch's recipe.
class AmpStep {
 public:
  explicit AmpStep(const std::string& amp) {
    if (amp == "fp16") scaler_.emplace();
  }
  void step(const nabla::Tensor& loss, nabla::optim::Optimizer& optimizer,
            const std::function<void()>& before_step = {}) {
    if (!scaler_) {
      loss.backward();
      if (before_step) before_step();
      optimizer.step();
      return;
    }
    scaler_->scale(loss).backward();
    if (before_step) {
      scaler_->unscale_(optimizer);
      before_step();
    }
    scaler_->step(optimizer);
    scaler_->update();
  }
  // The scaler (fp16 only), e.g. to save its state with a checkpoint.
  nabla::amp::GradScaler* scaler() { return scaler_ ? &*scaler_ : nullptr; }

 private:
  std::optional<nabla::amp::GradScaler> scaler_;
};

}  // namespace examples
