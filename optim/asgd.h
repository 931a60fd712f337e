// ASGD (torch.optim.ASGD): averaged stochastic gradient descent. For each parameter p with gradient
// g, at step t = 1, 2, ...:
//   g = -g if maximize;  g = g + weight_decay * p
//   p = p * (1 - lambd * eta) - eta * g
//   ax = p if mu == 1, else ax + mu * (p - ax)      (the running average, state "ax")
//   eta = lr / (1 + lambd * lr * t)^alpha;  mu = 1 / max(1, t - t0)
// eta starts at lr and mu at 1. eta and mu are rounded to float32 after each step, as PyTorch keeps
// them in float32 tensors, so that float64 trajectories match PyTorch's.
#pragma once

#include "optimizer.h"

namespace nabla::optim {

struct ASGDOptions {
  double lr = 1e-2, lambd = 1e-4, alpha = 0.75, t0 = 1e6, weight_decay = 0;
  bool maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("lambd", lambd);
    f("alpha", alpha);
    f("t0", t0);
    f("weight_decay", weight_decay);
    f("maximize", maximize);
  }
};

struct ASGDParamState {
  int64_t step = 0;
  double eta = -1, mu = 1;  // set to lr and 1 by the first step (which creates ax)
  Tensor ax;
  template <class F>
  void visit(F&& f) {
    f("step", step);
    f("eta", eta);
    f("mu", mu);
    f("ax", ax);
  }
};

class ASGD : public OptimizerImpl<ASGDOptions, ASGDParamState> {
 public:
  ASGD(std::vector<Tensor> params, ASGDOptions defaults = {}) : OptimizerImpl("ASGD", std::move(params), defaults) {}
  ASGD(std::vector<ParamGroup> groups, ASGDOptions defaults = {})
      : OptimizerImpl("ASGD", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
