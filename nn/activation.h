// Activations as modules: ReLU, LeakyReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax, ELU.
#pragma once

#include <string>

#include "nn/module.h"

namespace nabla::nn {

class ReLU : public Module {
 public:
  Tensor forward(Tensor x) override { return relu(x); }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(Tensor x) override { return leaky_relu(x, negative_slope); }
  std::string extra_repr() const override { return "negative_slope=" + repr_double(negative_slope); }
  double negative_slope;
};

// approximate: "none" (erf) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(Tensor x) override { return gelu(x, approximate); }
  std::string extra_repr() const override { return "approximate='" + approximate + "'"; }
  std::string approximate;
};

class SiLU : public Module {
 public:
  Tensor forward(Tensor x) override { return silu(x); }
};

class Sigmoid : public Module {
 public:
  Tensor forward(Tensor x) override { return sigmoid(x); }
};

class Tanh : public Module {
 public:
  Tensor forward(Tensor x) override { return tanh(x); }
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(Tensor x) override { return softmax(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(Tensor x) override { return log_softmax(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(Tensor x) override { return elu(x, alpha); }
  std::string extra_repr() const override { return "alpha=" + repr_double(alpha); }
  double alpha;
};

}  // namespace nabla::nn
