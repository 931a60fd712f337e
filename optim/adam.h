// Adam and AdamW (torch.optim.Adam / AdamW), with amsgrad. For each parameter p with gradient g,
// at step t = 1, 2, ...:
//   g = -g if maximize
//   Adam:  g = g + weight_decay * p          (L2 penalty in the gradient)
//   AdamW: p = p * (1 - lr * weight_decay)   (decoupled weight decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   amsgrad: v_max = max(v_max, v), and v_max replaces v below
//   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// m, v (and v_max) start at zero.
#pragma once

#include <utility>

#include "optimizer.h"

namespace nabla::optim {

// The checks every Adam-like optimizer's options share (lr, eps, betas, weight_decay).
template <class O>
void check_adam_options(const O& o, const char* name) {
  NABLA_CHECK(ValueError, o.lr >= 0, name, ": invalid learning rate ", o.lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, o.eps >= 0, name, ": invalid eps ", o.eps, " (must be >= 0)");
  NABLA_CHECK(ValueError, o.betas.first >= 0 && o.betas.first < 1, name, ": invalid beta1 ", o.betas.first,
              " (must be in [0, 1))");
  NABLA_CHECK(ValueError, o.betas.second >= 0 && o.betas.second < 1, name, ": invalid beta2 ", o.betas.second,
              " (must be in [0, 1))");
  NABLA_CHECK(ValueError, o.weight_decay >= 0, name, ": invalid weight_decay ", o.weight_decay, " (must be >= 0)");
}

// The steps the Adam family's composed (Tensor-op) updates share.
// The gradient with maximize applied, and weight decay: coupled (g + weight_decay * p) or
// decoupled (p *= 1 - lr * weight_decay, in place).
Tensor adam_effective_grad(Tensor& p, double lr, double weight_decay, bool maximize, bool decoupled);
// m = beta1 m + (1 - beta1) g and v = beta2 v + (1 - beta2) g^2, creating them at zero.
void adam_update_moments(const Tensor& p, const Tensor& g, Tensor& m, Tensor& v, double beta1, double beta2);

// lr, beta1, beta2, eps and weight_decay: the fields every Adam-like optimizer's options list first
// (in state dicts and checkpoints), written once for all of them.
template <class O, class F>
void visit_adam_fields(O& o, F&& f) {
  f("lr", o.lr);
  f("beta1", o.betas.first);
  f("beta2", o.betas.second);
  f("eps", o.eps);
  f("weight_decay", o.weight_decay);
}

// Adam's and AdamW's options: the same fields, with each one's PyTorch default weight decay (0 for
// Adam, where it is an L2 penalty in the gradient; 1e-2 for AdamW, where it is decoupled).
template <class Defaults>
struct AdamFamilyOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8, weight_decay = Defaults::weight_decay;
  bool amsgrad = false, maximize = false;

  void check() const { check_adam_options(*this, Defaults::name); }
  template <class F>
  void visit(F&& f) {
    visit_adam_fields(*this, f);
    f("amsgrad", amsgrad);
    f("maximize", maximize);
  }
};
struct AdamDefaults {
  static constexpr const char* name = "Adam";
  static constexpr double weight_decay = 0;
};
struct AdamWDefaults {
  static constexpr const char* name = "AdamW";
  static constexpr double weight_decay = 1e-2;
};
using AdamOptions = AdamFamilyOptions<AdamDefaults>;
using AdamWOptions = AdamFamilyOptions<AdamWDefaults>;

struct AdamParamState {
  int64_t step = 0;
  Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("exp_avg", exp_avg);
    f("exp_avg_sq", exp_avg_sq);
    f("max_exp_avg_sq", max_exp_avg_sq);
  }
};

class Adam : public OptimizerImpl<AdamOptions, AdamParamState> {
 public:
  Adam(std::vector<Tensor> params, AdamOptions defaults = {}) : OptimizerImpl("Adam", std::move(params), defaults) {}
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {})
      : OptimizerImpl("Adam", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

class AdamW : public OptimizerImpl<AdamWOptions, AdamParamState> {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = {}) : OptimizerImpl("AdamW", std::move(params), defaults) {}
  AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {})
      : OptimizerImpl("AdamW", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
