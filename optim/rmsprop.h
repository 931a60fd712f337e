// RMSprop (torch.optim.RMSprop), centered and with momentum. For each parameter p with gradient g:
//   g = -g if maximize;  g = g + weight_decay * p
//   v = alpha * v + (1 - alpha) * g^2
//   centered: a = alpha * a + (1 - alpha) * g;  d = sqrt(v - a^2) + eps;  else d = sqrt(v) + eps
//   momentum > 0: b = momentum * b + g / d;  p = p - lr * b
//   else:         p = p - lr * g / d
// v, a and b start at zero.
#pragma once

#include "optimizer.h"

namespace nabla::optim {

struct RMSpropOptions {
  double lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("alpha", alpha);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("momentum", momentum);
    f("centered", centered);
    f("maximize", maximize);
  }
};

struct RMSpropParamState {
  int64_t step = 0;
  Tensor square_avg, momentum_buffer, grad_avg;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("square_avg", square_avg);
    f("momentum_buffer", momentum_buffer);
    f("grad_avg", grad_avg);
  }
};

class RMSprop : public OptimizerImpl<RMSpropOptions, RMSpropParamState> {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions defaults = {})
      : OptimizerImpl("RMSprop", std::move(params), defaults) {}
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = {})
      : OptimizerImpl("RMSprop", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
