// Losses as modules: loss(input, target), configured by the options struct of their functional form
// (PyTorch's names; MSELoss and L1Loss take only the reduction). Class weights are buffers, so
// to(device) moves them.
//
//   nn::CrossEntropyLoss criterion({.label_smoothing = 0.1});
//   Tensor loss = criterion(logits, target);
#pragma once

#include "functional.h"
#include "module.h"

namespace nabla::nn {

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(F::CrossEntropyOptions options = {});
  Tensor forward(Tensor input, Tensor target) override;
  F::CrossEntropyOptions options;
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(F::NLLLossOptions options = {});
  Tensor forward(Tensor input, Tensor target) override;
  F::NLLLossOptions options;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  Tensor forward(Tensor input, Tensor target) override { return F::mse_loss(input, target, reduction); }
  Reduction reduction;
};

class L1Loss : public Module {
 public:
  explicit L1Loss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  Tensor forward(Tensor input, Tensor target) override { return F::l1_loss(input, target, reduction); }
  Reduction reduction;
};

class SmoothL1Loss : public Module {
 public:
  explicit SmoothL1Loss(F::SmoothL1LossOptions options = {}) : options(options) {}
  Tensor forward(Tensor input, Tensor target) override { return F::smooth_l1_loss(input, target, options); }
  F::SmoothL1LossOptions options;
};

class HuberLoss : public Module {
 public:
  explicit HuberLoss(F::HuberLossOptions options = {}) : options(options) {}
  Tensor forward(Tensor input, Tensor target) override { return F::huber_loss(input, target, options); }
  F::HuberLossOptions options;
};

class BCELoss : public Module {
 public:
  explicit BCELoss(F::BCEOptions options = {});
  Tensor forward(Tensor input, Tensor target) override;
  F::BCEOptions options;
};

class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(F::BCEWithLogitsOptions options = {});
  Tensor forward(Tensor input, Tensor target) override;
  F::BCEWithLogitsOptions options;
};

class KLDivLoss : public Module {
 public:
  explicit KLDivLoss(F::KLDivLossOptions options = {}) : options(options) {}
  Tensor forward(Tensor input, Tensor target) override { return F::kl_div(input, target, options); }
  F::KLDivLossOptions options;
};

}  // namespace nabla::nn
