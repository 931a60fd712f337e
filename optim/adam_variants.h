// Adamax, NAdam and RAdam (torch.optim.Adamax / NAdam / RAdam). For each parameter p with
// gradient g, at step t = 1, 2, ... (g = -g first if maximize):
//
// Adamax (Adam with the infinity norm):
//   g = g + weight_decay * p
//   m = beta1 m + (1 - beta1) g;   u = max(beta2 u, |g| + eps)
//   p = p - lr / (1 - beta1^t) * m / u
// NAdam (Adam with Nesterov momentum, Dozat; momentum schedule mu_t = beta1 (1 - 0.96^(t psi) / 2)
// with psi = momentum_decay, and P_t = mu_1 ... mu_t):
//   g = g + weight_decay * p, or p = p (1 - lr weight_decay) if decoupled_weight_decay (NAdamW)
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2;   d = sqrt(v / (1 - beta2^t)) + eps
//   p = p - lr (1 - mu_t) / (1 - P_t) * g / d - lr mu_{t+1} / (1 - P_t mu_{t+1}) * m / d
// RAdam (rectified Adam, Liu et al.; rho_inf = 2 / (1 - beta2) - 1,
// rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)):
//   weight decay as NAdam's;  m, v as Adam's;  m^ = m / (1 - beta1^t)
//   rho_t > 5:  r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
//               p = p - lr * m^ * r * sqrt(1 - beta2^t) / (sqrt(v) + eps)
//   otherwise:  p = p - lr * m^                  (plain momentum while the variance is unreliable)
// The moments start at zero. The updates are composed of Tensor ops, so they run on any device.
#pragma once

#include "adam.h"

namespace nabla::optim {

struct AdamaxOptions {
  double lr = 2e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8, weight_decay = 0;
  bool maximize = false;

  void check() const { check_adam_options(*this, "Adamax"); }
  template <class F>
  void visit(F&& f) {
    visit_adam_fields(*this, f);
    f("maximize", maximize);
  }
};

struct AdamaxParamState {
  int64_t step = 0;
  Tensor exp_avg, exp_inf;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("exp_avg", exp_avg);
    f("exp_inf", exp_inf);
  }
};

class Adamax : public OptimizerImpl<AdamaxOptions, AdamaxParamState> {
 public:
  Adamax(std::vector<Tensor> params, AdamaxOptions defaults = {})
      : OptimizerImpl("Adamax", std::move(params), defaults) {}
  Adamax(std::vector<ParamGroup> groups, AdamaxOptions defaults = {})
      : OptimizerImpl("Adamax", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

struct NAdamOptions {
  double lr = 2e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3;
  bool decoupled_weight_decay = false, maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    visit_adam_fields(*this, f);
    f("momentum_decay", momentum_decay);
    f("decoupled_weight_decay", decoupled_weight_decay);
    f("maximize", maximize);
  }
};

struct NAdamParamState {
  int64_t step = 0;
  double mu_product = 1;
  Tensor exp_avg, exp_avg_sq;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("mu_product", mu_product);
    f("exp_avg", exp_avg);
    f("exp_avg_sq", exp_avg_sq);
  }
};

class NAdam : public OptimizerImpl<NAdamOptions, NAdamParamState> {
 public:
  NAdam(std::vector<Tensor> params, NAdamOptions defaults = {}) : OptimizerImpl("NAdam", std::move(params), defaults) {}
  NAdam(std::vector<ParamGroup> groups, NAdamOptions defaults = {})
      : OptimizerImpl("NAdam", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

struct RAdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false, maximize = false;

  void check() const { check_adam_options(*this, "RAdam"); }
  template <class F>
  void visit(F&& f) {
    visit_adam_fields(*this, f);
    f("decoupled_weight_decay", decoupled_weight_decay);
    f("maximize", maximize);
  }
};

struct RAdamParamState {
  int64_t step = 0;
  Tensor exp_avg, exp_avg_sq;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("exp_avg", exp_avg);
    f("exp_avg_sq", exp_avg_sq);
  }
};

class RAdam : public OptimizerImpl<RAdamOptions, RAdamParamState> {
 public:
  RAdam(std::vector<Tensor> params, RAdamOptions defaults = {}) : OptimizerImpl("RAdam", std::move(params), defaults) {}
  RAdam(std::vector<ParamGroup> groups, RAdamOptions defaults = {})
      : OptimizerImpl("RAdam", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
