// Identity, Linear, Bilinear, Flatten and Unflatten.
#pragma once

#include "module.h"

namespace nabla::nn {

// Returns its input unchanged (a placeholder, e.g. for a removed classifier head).
class Identity : public Module {
 public:
  Tensor forward(Tensor x) override { return x; }
};

struct LinearOptions {
  bool bias = true;
};

// y = x W^T + b. x: (*, in_features) -> (*, out_features).
// weight (out, in) and bias (out) start as U(-1/sqrt(in), 1/sqrt(in)), as PyTorch's.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  LinearOptions options;
  Tensor weight, bias;
};

// y = x1^T A x2 + b. x1: (*, in1), x2: (*, in2) -> (*, out). weight (out, in1, in2) and bias start
// as U(-1/sqrt(in1), 1/sqrt(in1)).
class Bilinear : public Module {
 public:
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, LinearOptions options = {});
  Tensor forward(Tensor x1, Tensor x2) override;
  void reset_parameters() override;
  std::string extra_repr() const override;

  int64_t in1_features, in2_features, out_features;
  LinearOptions options;
  Tensor weight, bias;
};

// Flattens dims [start_dim, end_dim] into one; by default all but the batch dim.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(Tensor x) override { return x.flatten(start_dim, end_dim); }
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

// Splits dim into `sizes` (one of them may be -1).
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, std::vector<int64_t> sizes) : dim(dim), sizes(std::move(sizes)) {}
  Tensor forward(Tensor x) override { return x.unflatten(dim, sizes); }
  std::string extra_repr() const override;
  int64_t dim;
  std::vector<int64_t> sizes;
};

}  // namespace nabla::nn
