// Activations as modules, as torch.nn's: ReLU, ReLU6, LeakyReLU, PReLU, GELU, SiLU, Mish, Sigmoid,
// LogSigmoid, Hardsigmoid, Hardswish, Hardtanh, Tanh, Tanhshrink, Softsign, Softplus, ELU, CELU,
// SELU, Threshold, GLU, Softmax, Softmin, LogSoftmax.
#pragma once

#include <string>

#include "functional.h"
#include "module.h"

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

// A module for a parameter-free activation f(x) (a class per activation, so models print as
// PyTorch's: "ReLU6()").
#define NABLA_SIMPLE_ACTIVATION(Name, expr)            \
  class Name : public Module {                         \
   public:                                             \
    Tensor forward(Tensor x) override { return expr; } \
  };
NABLA_SIMPLE_ACTIVATION(ReLU6, relu6(x))
NABLA_SIMPLE_ACTIVATION(Mish, mish(x))
NABLA_SIMPLE_ACTIVATION(SELU, selu(x))
NABLA_SIMPLE_ACTIVATION(LogSigmoid, logsigmoid(x))
NABLA_SIMPLE_ACTIVATION(Hardsigmoid, hardsigmoid(x))
NABLA_SIMPLE_ACTIVATION(Hardswish, hardswish(x))
NABLA_SIMPLE_ACTIVATION(Softsign, functional::softsign(x))
NABLA_SIMPLE_ACTIVATION(Tanhshrink, functional::tanhshrink(x))
#undef NABLA_SIMPLE_ACTIVATION

// log(1 + exp(beta x)) / beta, linear (x) where beta x > threshold.
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0) : beta(beta), threshold(threshold) {}
  Tensor forward(Tensor x) override { return softplus(x, beta, threshold); }
  std::string extra_repr() const override {
    return "beta=" + repr_double(beta) + ", threshold=" + repr_double(threshold);
  }
  double beta, threshold;
};

// x clamped to [min_val, max_val].
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(Tensor x) override { return hardtanh(x, min_val, max_val); }
  std::string extra_repr() const override {
    return "min_val=" + repr_double(min_val) + ", max_val=" + repr_double(max_val);
  }
  double min_val, max_val;
};

class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(Tensor x) override { return functional::celu(x, alpha); }
  std::string extra_repr() const override { return "alpha=" + repr_double(alpha); }
  double alpha;
};

// x where x > threshold, else value.
class Threshold : public Module {
 public:
  Threshold(double threshold, double value) : threshold(threshold), value(value) {}
  Tensor forward(Tensor x) override { return functional::threshold(x, threshold, value); }
  std::string extra_repr() const override {
    return "threshold=" + repr_double(threshold) + ", value=" + repr_double(value);
  }
  double threshold, value;
};

// Gated linear unit: a * sigmoid(b), the halves of x along dim.
class GLU : public Module {
 public:
  explicit GLU(int64_t dim = -1) : dim(dim) {}
  Tensor forward(Tensor x) override { return functional::glu(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};

// Leaky ReLU with a learned slope: one for all channels, or one per channel (num_parameters = C,
// the size of dim 1 of the input), initialised to `init`.
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(Tensor x) override { return functional::prelu(x, weight); }
  std::string extra_repr() const override { return "num_parameters=" + std::to_string(num_parameters); }
  int64_t num_parameters;
  Tensor weight;
};

class Softmin : public Module {
 public:
  explicit Softmin(int64_t dim) : dim(dim) {}
  Tensor forward(Tensor x) override { return functional::softmin(x, dim); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};

}  // namespace nabla::nn
