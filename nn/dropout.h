// Dropout and Dropout2d: active in training mode only; masks come from nabla's default generator.
#pragma once

#include "module.h"

namespace nabla::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  double p;
};

// Zeroes whole channels of (N, C, H, W) or (C, H, W) inputs.
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  double p;
};

}  // namespace nabla::nn
