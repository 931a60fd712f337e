// MaxPool2d, AvgPool2d and AdaptiveAvgPool2d. x: (N, C, H, W) or (C, H, W).
#pragma once

#include <optional>

#include "nn/module.h"

namespace nabla::nn {

struct MaxPool2dOptions {
  std::optional<ExpandingArray<2>> stride;  // defaults to kernel_size
  ExpandingArray<2> padding = 0, dilation = 1;
  bool ceil_mode = false;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ExpandingArray<2> kernel_size, MaxPool2dOptions options = {});
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  ExpandingArray<2> kernel_size, stride;
  MaxPool2dOptions options;
};

struct AvgPool2dOptions {
  std::optional<ExpandingArray<2>> stride;  // defaults to kernel_size
  ExpandingArray<2> padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(ExpandingArray<2> kernel_size, AvgPool2dOptions options = {});
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  ExpandingArray<2> kernel_size, stride;
  AvgPool2dOptions options;
};

// Averages over adaptive windows so the output is output_size (e.g. 1 for global average pooling).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(ExpandingArray<2> output_size) : output_size(output_size) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  ExpandingArray<2> output_size;
};

}  // namespace nabla::nn
