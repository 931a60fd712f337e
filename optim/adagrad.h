// Adagrad (torch.optim.Adagrad). For each parameter p with gradient g, at step t = 1, 2, ...:
//   g = -g if maximize;  g = g + weight_decay * p
//   clr = lr / (1 + (t - 1) * lr_decay)
//   s = s + g^2                       (s starts at initial_accumulator_value)
//   p = p - clr * g / (sqrt(s) + eps)
#pragma once

#include "optimizer.h"

namespace nabla::optim {

struct AdagradOptions {
  double lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
  bool maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("lr_decay", lr_decay);
    f("weight_decay", weight_decay);
    f("initial_accumulator_value", initial_accumulator_value);
    f("eps", eps);
    f("maximize", maximize);
  }
};

struct AdagradParamState {
  int64_t step = 0;
  Tensor sum;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("sum", sum);
  }
};

class Adagrad : public OptimizerImpl<AdagradOptions, AdagradParamState> {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions defaults = {})
      : OptimizerImpl("Adagrad", std::move(params), defaults) {}
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults = {})
      : OptimizerImpl("Adagrad", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
