// Conv1d, Conv2d, Conv3d and ConvTranspose1d/2d/3d (zero padding).
//
//   nn::Conv2d conv(1, 32, 3, {.padding = 1});
//   nn::Conv2d conv2(nn::Conv2dOptions{.in_channels = 32, .out_channels = 64, .kernel_size = {3, 5}, .stride = 2});
#pragma once

#include <string>

#include "module.h"

namespace nabla::nn {

struct Conv1dOptions {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel_size = 0;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
  // "zeros", or "reflect", "replicate" or "circular": the input is padded in that mode (F::pad) by
  // `padding` on each side and convolved without padding, as PyTorch's padding_mode.
  std::string padding_mode = "zeros";
};

struct Conv2dOptions {
  int64_t in_channels = 0, out_channels = 0;
  ExpandingArray<2> kernel_size = 0;
  ExpandingArray<2> stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  // "zeros", or "reflect", "replicate" or "circular": the input is padded in that mode (F::pad) by
  // `padding` on each side and convolved without padding, as PyTorch's padding_mode.
  std::string padding_mode = "zeros";
};

struct Conv3dOptions {
  int64_t in_channels = 0, out_channels = 0;
  ExpandingArray<3> kernel_size = 0;
  ExpandingArray<3> stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  // "zeros", or "reflect", "replicate" or "circular": the input is padded in that mode (F::pad) by
  // `padding` on each side and convolved without padding, as PyTorch's padding_mode.
  std::string padding_mode = "zeros";
};

struct ConvTranspose2dOptions {
  int64_t in_channels = 0, out_channels = 0;
  ExpandingArray<2> kernel_size = 0;
  ExpandingArray<2> stride = 1, padding = 0, output_padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

struct ConvTranspose1dOptions {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel_size = 0;
  int64_t stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

struct ConvTranspose3dOptions {
  int64_t in_channels = 0, out_channels = 0;
  ExpandingArray<3> kernel_size = 0;
  ExpandingArray<3> stride = 1, padding = 0, output_padding = 0, dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// x: (N, C_in, L) -> (N, C_out, L_out). weight (C_out, C_in / groups, k), bias (C_out); both start
// as U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = C_in / groups * k, as PyTorch's.
class Conv1d : public Module {
 public:
  explicit Conv1d(Conv1dOptions options);
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv1dOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  Conv1dOptions options;
  Tensor weight, bias;
};

// x: (N, C_in, H, W) -> (N, C_out, H_out, W_out). weight (C_out, C_in / groups, kH, kW).
class Conv2d : public Module {
 public:
  explicit Conv2d(Conv2dOptions options);
  Conv2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size, Conv2dOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  Conv2dOptions options;
  Tensor weight, bias;
};

// x: (N, C_in, D, H, W) -> (N, C_out, D_out, H_out, W_out). weight (C_out, C_in / groups, kD, kH, kW).
class Conv3d : public Module {
 public:
  explicit Conv3d(Conv3dOptions options);
  Conv3d(int64_t in_channels, int64_t out_channels, ExpandingArray<3> kernel_size, Conv3dOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  Conv3dOptions options;
  Tensor weight, bias;
};

// The gradient of a Conv2d with respect to its input, as a layer (upsampling "deconvolution").
// weight (C_in, C_out / groups, kH, kW).
class ConvTranspose2d : public Module {
 public:
  explicit ConvTranspose2d(ConvTranspose2dOptions options);
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
                  ConvTranspose2dOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  ConvTranspose2dOptions options;
  Tensor weight, bias;
};

// weight (C_in, C_out / groups, k): x (N, C_in, L) or (C_in, L).
class ConvTranspose1d : public Module {
 public:
  explicit ConvTranspose1d(ConvTranspose1dOptions options);
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvTranspose1dOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  ConvTranspose1dOptions options;
  Tensor weight, bias;
};

// weight (C_in, C_out / groups, kD, kH, kW): x (N, C_in, D, H, W) or (C_in, D, H, W).
class ConvTranspose3d : public Module {
 public:
  explicit ConvTranspose3d(ConvTranspose3dOptions options);
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, ExpandingArray<3> kernel_size,
                  ConvTranspose3dOptions options = {});
  Tensor forward(Tensor x) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  ConvTranspose3dOptions options;
  Tensor weight, bias;
};

}  // namespace nabla::nn
