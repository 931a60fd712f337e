// Adadelta (torch.optim.Adadelta). For each parameter p with gradient g:
//   g = -g if maximize;  g = g + weight_decay * p
//   v = rho * v + (1 - rho) * g^2
//   d = sqrt(u + eps) / sqrt(v + eps) * g
//   u = rho * u + (1 - rho) * d^2
//   p = p - lr * d
// v and u start at zero.
#pragma once

#include "optimizer.h"

namespace nabla::optim {

struct AdadeltaOptions {
  double lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0;
  bool maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("rho", rho);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("maximize", maximize);
  }
};

struct AdadeltaParamState {
  int64_t step = 0;
  Tensor square_avg, acc_delta;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("square_avg", square_avg);
    f("acc_delta", acc_delta);
  }
};

class Adadelta : public OptimizerImpl<AdadeltaOptions, AdadeltaParamState> {
 public:
  Adadelta(std::vector<Tensor> params, AdadeltaOptions defaults = {})
      : OptimizerImpl("Adadelta", std::move(params), defaults) {}
  Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions defaults = {})
      : OptimizerImpl("Adadelta", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
