// Pooling modules: MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d.
// 2-d: x (N, C, H, W) or (C, H, W); 1-d: x (N, C, L) or (C, L).
#pragma once

#include <concepts>
#include <optional>

#include "module.h"

namespace nabla::nn {

struct MaxPool2dOptions {
  std::optional<ExpandingArray<2>> stride{};  // defaults to kernel_size
  ExpandingArray<2> padding = 0, dilation = 1;
  bool ceil_mode = false;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ExpandingArray<2> kernel_size, MaxPool2dOptions options = {});
  // PyTorch's positional order, with the same stride, padding and dilation along both axes:
  // MaxPool2d(2, 2) is kernel 2, stride 2; MaxPool2d(3, 2, 1) adds padding 1.
  template <std::integral S>
  MaxPool2d(ExpandingArray<2> kernel_size, S stride, int64_t padding = 0, int64_t dilation = 1)
      : MaxPool2d(
            kernel_size,
            {.stride = ExpandingArray<2>(static_cast<int64_t>(stride)), .padding = padding, .dilation = dilation}) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  ExpandingArray<2> kernel_size, stride;
  MaxPool2dOptions options;
};

struct AvgPool2dOptions {
  std::optional<ExpandingArray<2>> stride{};  // defaults to kernel_size
  ExpandingArray<2> padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(ExpandingArray<2> kernel_size, AvgPool2dOptions options = {});
  // PyTorch's positional order, with the same stride and padding along both axes: AvgPool2d(2, 2)
  // is kernel 2, stride 2.
  template <std::integral S>
  AvgPool2d(ExpandingArray<2> kernel_size, S stride, int64_t padding = 0)
      : AvgPool2d(kernel_size, {.stride = ExpandingArray<2>(static_cast<int64_t>(stride)), .padding = padding}) {}
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

// Maxima over adaptive windows so the output is output_size.
class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(ExpandingArray<2> output_size) : output_size(output_size) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  ExpandingArray<2> output_size;
};

struct MaxPool1dOptions {
  std::optional<int64_t> stride{};  // defaults to kernel_size
  int64_t padding = 0, dilation = 1;
  bool ceil_mode = false;
};

class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(int64_t kernel_size, MaxPool1dOptions options = {});
  // PyTorch's positional order: MaxPool1d(2, 2) is kernel 2, stride 2.
  template <std::integral S>
  MaxPool1d(int64_t kernel_size, S stride, int64_t padding = 0, int64_t dilation = 1)
      : MaxPool1d(kernel_size, {.stride = stride, .padding = padding, .dilation = dilation}) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  int64_t kernel_size, stride;
  MaxPool1dOptions options;
};

struct AvgPool1dOptions {
  std::optional<int64_t> stride{};  // defaults to kernel_size
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(int64_t kernel_size, AvgPool1dOptions options = {});
  // PyTorch's positional order: AvgPool1d(2, 2) is kernel 2, stride 2.
  template <std::integral S>
  AvgPool1d(int64_t kernel_size, S stride, int64_t padding = 0)
      : AvgPool1d(kernel_size, {.stride = stride, .padding = padding}) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  int64_t kernel_size, stride;
  AvgPool1dOptions options;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size) : output_size(output_size) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override { return "output_size=" + std::to_string(output_size); }
  int64_t output_size;
};

class AdaptiveMaxPool1d : public Module {
 public:
  explicit AdaptiveMaxPool1d(int64_t output_size) : output_size(output_size) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override { return "output_size=" + std::to_string(output_size); }
  int64_t output_size;
};

}  // namespace nabla::nn
