// Rprop (torch.optim.Rprop): resilient backpropagation, a step size per element that grows while
// the gradient keeps its sign and shrinks when it flips. For each parameter p with gradient g:
//   g = -g if maximize
//   s = sign(g * prev):  step = clamp(step * etaplus, max)  where s > 0
//                        step = clamp(step * etaminus, min), g = 0  where s < 0
//   p = p - sign(g) * step;  prev = g
// step starts at lr, prev at 0. No weight decay (as PyTorch's).
#pragma once

#include <utility>

#include "optimizer.h"

namespace nabla::optim {

struct RpropOptions {
  double lr = 1e-2;
  std::pair<double, double> etas = {0.5, 1.2};          // (etaminus, etaplus): 0 < etaminus < 1 < etaplus
  std::pair<double, double> step_sizes = {1e-6, 50.0};  // (min, max) step size
  bool maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("etaminus", etas.first);
    f("etaplus", etas.second);
    f("step_size_min", step_sizes.first);
    f("step_size_max", step_sizes.second);
    f("maximize", maximize);
  }
};

struct RpropParamState {
  int64_t step = 0;
  Tensor prev, step_size;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("prev", prev);
    f("step_size", step_size);
  }
};

class Rprop : public OptimizerImpl<RpropOptions, RpropParamState> {
 public:
  Rprop(std::vector<Tensor> params, RpropOptions defaults = {}) : OptimizerImpl("Rprop", std::move(params), defaults) {}
  Rprop(std::vector<ParamGroup> groups, RpropOptions defaults = {})
      : OptimizerImpl("Rprop", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
