// Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay
// (torch.optim.SGD). For each parameter p with gradient g:
//   g = -g if maximize;  g = g + weight_decay * p
//   momentum != 0:  b = g on the first step, else b = momentum * b + (1 - dampening) * g
//                   g = g + momentum * b (nesterov) or g = b
//   p = p - lr * g
#pragma once

#include "optimizer.h"

namespace nabla::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("momentum", momentum);
    f("dampening", dampening);
    f("weight_decay", weight_decay);
    f("nesterov", nesterov);
    f("maximize", maximize);
  }
};

struct SGDParamState {
  Tensor momentum_buffer;
  template <class F>
  void visit(F&& f) {
    f("momentum_buffer", momentum_buffer);
  }
};

class SGD : public OptimizerImpl<SGDOptions, SGDParamState> {
 public:
  SGD(std::vector<Tensor> params, SGDOptions defaults = {}) : OptimizerImpl("SGD", std::move(params), defaults) {}
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {}) : OptimizerImpl("SGD", std::move(groups), defaults) {}
  using Optimizer::step;
  void step() override;
};

}  // namespace nabla::optim
