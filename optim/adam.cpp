#include "optim/adam.h"
#include "optim/fused.h"

#include <cmath>

#include "core/backend.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"

namespace nabla::optim {

Tensor adam_effective_grad(Tensor& p, double lr, double weight_decay, bool maximize, bool decoupled) {
  Tensor g = maximize ? -p.grad() : p.grad();
  if (weight_decay != 0) {
    if (decoupled) p.mul_(1 - lr * weight_decay);
    else g = g.add(p, weight_decay);
  }
  return g;
}

void adam_update_moments(const Tensor& p, const Tensor& g, Tensor& m, Tensor& v, double beta1, double beta2) {
  if (!m.defined()) {
    m = zeros_like(p);
    v = zeros_like(p);
  }
  m.mul_(beta1).add_(g, 1 - beta1);
  v.mul_(beta2).add_(g * g, 1 - beta2);
}

namespace {

// One Adam update of p (see adam.h); decoupled: AdamW's weight decay.
template <class O>
void adam_update(Tensor& p, AdamParamState& s, const O& o, bool decoupled) {
  auto [beta1, beta2] = o.betas;
  if (!s.exp_avg.defined()) {
    s.exp_avg = zeros_like(p);
    s.exp_avg_sq = zeros_like(p);
  }
  if (o.amsgrad && !s.max_exp_avg_sq.defined()) s.max_exp_avg_sq = zeros_like(p);
  s.step += 1;
  const double t = static_cast<double>(s.step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, t));
  const double step_size = o.lr / bias_correction1;
  // One fused pass where the backend has it (contiguous tensors), else the same update in Tensor ops.
  if (fused_steps(p.device())
          .adam_step(p, p.grad(), s.exp_avg, s.exp_avg_sq, s.max_exp_avg_sq,
                     {o.lr, beta1, beta2, o.eps, o.weight_decay, step_size, bias_correction2_sqrt, decoupled,
                      o.maximize, o.amsgrad})) {
    internal::bump_version(p);  // as the in-place ops of the composed update would
    return;
  }
  Tensor g = adam_effective_grad(p, o.lr, o.weight_decay, o.maximize, decoupled);
  adam_update_moments(p, g, s.exp_avg, s.exp_avg_sq, beta1, beta2);
  Tensor denom;
  if (o.amsgrad) {
    s.max_exp_avg_sq.copy_(maximum(s.max_exp_avg_sq, s.exp_avg_sq));
    denom = s.max_exp_avg_sq.sqrt();
  } else {
    denom = s.exp_avg_sq.sqrt();
  }
  denom.div_(bias_correction2_sqrt).add_(o.eps);
  p.add_(s.exp_avg / denom, -step_size);
}

}  // namespace

void Adam::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi)
    for (Tensor& p : mutable_params(gi))
      if (p.grad().defined()) adam_update(p, state(p), options(gi), false);
}

void AdamW::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi)
    for (Tensor& p : mutable_params(gi))
      if (p.grad().defined()) adam_update(p, state(p), options(gi), true);
}

}  // namespace nabla::optim
