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

// Losses of three tensors: loss(a, b, c) runs forward(a, b, c) (without hooks, which take one or two).
class MarginRankingLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  explicit MarginRankingLoss(double margin = 0.0, Reduction reduction = Reduction::mean)
      : margin(margin), reduction(reduction) {}
  Tensor forward(Tensor x1, Tensor x2, Tensor y) { return F::margin_ranking_loss(x1, x2, y, margin, reduction); }
  Tensor operator()(Tensor x1, Tensor x2, Tensor y) { return forward(x1, x2, y); }
  double margin;
  Reduction reduction;
};

class HingeEmbeddingLoss : public Module {
 public:
  explicit HingeEmbeddingLoss(double margin = 1.0, Reduction reduction = Reduction::mean)
      : margin(margin), reduction(reduction) {}
  Tensor forward(Tensor x, Tensor y) override { return F::hinge_embedding_loss(x, y, margin, reduction); }
  double margin;
  Reduction reduction;
};

class CosineEmbeddingLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  explicit CosineEmbeddingLoss(double margin = 0.0, Reduction reduction = Reduction::mean)
      : margin(margin), reduction(reduction) {}
  Tensor forward(Tensor x1, Tensor x2, Tensor y) { return F::cosine_embedding_loss(x1, x2, y, margin, reduction); }
  Tensor operator()(Tensor x1, Tensor x2, Tensor y) { return forward(x1, x2, y); }
  double margin;
  Reduction reduction;
};

class TripletMarginLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  explicit TripletMarginLoss(F::TripletMarginLossOptions options = {}) : options(options) {}
  Tensor forward(Tensor a, Tensor p, Tensor n) { return F::triplet_margin_loss(a, p, n, options); }
  Tensor operator()(Tensor a, Tensor p, Tensor n) { return forward(a, p, n); }
  F::TripletMarginLossOptions options;
};

class TripletMarginWithDistanceLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  explicit TripletMarginWithDistanceLoss(F::TripletMarginWithDistanceLossOptions options = {})
      : options(std::move(options)) {}
  Tensor forward(Tensor a, Tensor p, Tensor n) { return F::triplet_margin_with_distance_loss(a, p, n, options); }
  Tensor operator()(Tensor a, Tensor p, Tensor n) { return forward(a, p, n); }
  F::TripletMarginWithDistanceLossOptions options;
};

class SoftMarginLoss : public Module {
 public:
  explicit SoftMarginLoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
  Tensor forward(Tensor x, Tensor y) override { return F::soft_margin_loss(x, y, reduction); }
  Reduction reduction;
};

// The class weight is a buffer (moves with to(device)).
class MultiLabelSoftMarginLoss : public Module {
 public:
  explicit MultiLabelSoftMarginLoss(Tensor weight = {}, Reduction reduction = Reduction::mean) : reduction(reduction) {
    if (weight.defined()) this->weight = register_buffer("weight", weight);
  }
  Tensor forward(Tensor x, Tensor y) override { return F::multilabel_soft_margin_loss(x, y, weight, reduction); }
  Tensor weight;
  Reduction reduction;
};

class MultiMarginLoss : public Module {
 public:
  explicit MultiMarginLoss(F::MultiMarginLossOptions options = {}) : options(options) {
    if (options.weight.defined()) this->options.weight = register_buffer("weight", options.weight);
  }
  Tensor forward(Tensor x, Tensor y) override { return F::multi_margin_loss(x, y, options); }
  F::MultiMarginLossOptions options;
};

// CTCLoss: F::ctc_loss with its options held; forward(log_probs, targets, input_lengths, target_lengths).
class CTCLoss : public Module {
 public:
  explicit CTCLoss(F::CTCLossOptions options = {}) : options(options) {}
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths) {
    return F::ctc_loss(log_probs, targets, input_lengths, target_lengths, options);
  }
  Tensor operator()(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                    const Tensor& target_lengths) {
    return forward(log_probs, targets, input_lengths, target_lengths);
  }
  std::string extra_repr() const override {
    return options.blank == 0 ? std::string() : "blank=" + std::to_string(options.blank);
  }
  F::CTCLossOptions options;
};

class PoissonNLLLoss : public Module {
 public:
  explicit PoissonNLLLoss(F::PoissonNLLLossOptions options = {}) : options(options) {}
  Tensor forward(Tensor input, Tensor target) override { return F::poisson_nll_loss(input, target, options); }
  F::PoissonNLLLossOptions options;
};

class GaussianNLLLoss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  explicit GaussianNLLLoss(F::GaussianNLLLossOptions options = {}) : options(options) {}
  Tensor forward(Tensor input, Tensor target, Tensor var) { return F::gaussian_nll_loss(input, target, var, options); }
  Tensor operator()(Tensor input, Tensor target, Tensor var) { return forward(input, target, var); }
  F::GaussianNLLLossOptions options;
};

}  // namespace nabla::nn
