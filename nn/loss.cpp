#include "nn/loss.h"

namespace nabla::nn {

// The option structs hold the same tensor handles as the registered buffers, and to(device)
// changes buffers in place, so both stay in step.
CrossEntropyLoss::CrossEntropyLoss(F::CrossEntropyOptions o) : options(std::move(o)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}
Tensor CrossEntropyLoss::forward(Tensor input, Tensor target) { return F::cross_entropy(input, target, options); }

NLLLoss::NLLLoss(F::NLLLossOptions o) : options(std::move(o)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}
Tensor NLLLoss::forward(Tensor input, Tensor target) { return F::nll_loss(input, target, options); }

BCELoss::BCELoss(F::BCEOptions o) : options(std::move(o)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
}
Tensor BCELoss::forward(Tensor input, Tensor target) { return F::binary_cross_entropy(input, target, options); }

BCEWithLogitsLoss::BCEWithLogitsLoss(F::BCEWithLogitsOptions o) : options(std::move(o)) {
  if (options.weight.defined()) options.weight = register_buffer("weight", options.weight);
  if (options.pos_weight.defined()) options.pos_weight = register_buffer("pos_weight", options.pos_weight);
}
Tensor BCEWithLogitsLoss::forward(Tensor input, Tensor target) {
  return F::binary_cross_entropy_with_logits(input, target, options);
}

}  // namespace nabla::nn
