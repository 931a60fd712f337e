#include "optim/adam_variants.h"

#include <cmath>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::optim {

void Adamax::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const AdamaxOptions& o = options(gi);
    auto [beta1, beta2] = o.betas;
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      AdamaxParamState& s = state(p);
      if (!s.exp_avg.defined()) {
        s.exp_avg = zeros_like(p);
        s.exp_inf = zeros_like(p);
      }
      s.step += 1;
      Tensor g = adam_effective_grad(p, o.lr, o.weight_decay, o.maximize, false);
      s.exp_avg.mul_(beta1).add_(g, 1 - beta1);
      s.exp_inf.copy_(maximum(s.exp_inf * beta2, g.abs() + o.eps));
      const double clr = o.lr / (1 - std::pow(beta1, static_cast<double>(s.step)));
      p.add_(s.exp_avg / s.exp_inf, -clr);
    }
  }
}

void NAdamOptions::check() const {
  check_adam_options(*this, "NAdam");
  NABLA_CHECK(ValueError, momentum_decay >= 0, "NAdam: invalid momentum_decay ", momentum_decay, " (must be >= 0)");
}

void NAdam::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const NAdamOptions& o = options(gi);
    auto [beta1, beta2] = o.betas;
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      NAdamParamState& s = state(p);
      s.step += 1;
      const double t = static_cast<double>(s.step);
      Tensor g = adam_effective_grad(p, o.lr, o.weight_decay, o.maximize, o.decoupled_weight_decay);
      const double mu = beta1 * (1 - 0.5 * std::pow(0.96, t * o.momentum_decay));
      const double mu_next = beta1 * (1 - 0.5 * std::pow(0.96, (t + 1) * o.momentum_decay));
      s.mu_product *= mu;
      adam_update_moments(p, g, s.exp_avg, s.exp_avg_sq, beta1, beta2);
      Tensor denom = (s.exp_avg_sq / (1 - std::pow(beta2, t))).sqrt_().add_(o.eps);
      p.add_(g / denom, -o.lr * (1 - mu) / (1 - s.mu_product));
      p.add_(s.exp_avg / denom, -o.lr * mu_next / (1 - s.mu_product * mu_next));
    }
  }
}

void RAdam::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const RAdamOptions& o = options(gi);
    auto [beta1, beta2] = o.betas;
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      RAdamParamState& s = state(p);
      s.step += 1;
      const double t = static_cast<double>(s.step);
      Tensor g = adam_effective_grad(p, o.lr, o.weight_decay, o.maximize, o.decoupled_weight_decay);
      adam_update_moments(p, g, s.exp_avg, s.exp_avg_sq, beta1, beta2);
      const double bias_correction1 = 1 - std::pow(beta1, t), bias_correction2 = 1 - std::pow(beta2, t);
      const double rho_inf = 2 / (1 - beta2) - 1;
      const double rho_t = rho_inf - 2 * t * std::pow(beta2, t) / bias_correction2;
      if (rho_t > 5) {
        const double rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        Tensor denom = s.exp_avg_sq.sqrt().add_(o.eps);
        p.add_(s.exp_avg / denom, -o.lr / bias_correction1 * rect * std::sqrt(bias_correction2));
      } else {
        p.add_(s.exp_avg, -o.lr / bias_correction1);
      }
    }
  }
}

}  // namespace nabla::optim
