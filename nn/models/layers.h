// Building blocks of the zoo's architectures, as torchvision.ops.misc has them: ordinary nn
// modules (registered in tests/opinfo_vision.cpp with gradchecks and PyTorch twins), usable on
// their own.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "nn/activation.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/normalization.h"
#include "nn/pooling.h"

namespace nabla::vision {

// Makes a normalization layer for a number of channels (torchvision's norm_layer callables).
using NormFactory = std::function<std::shared_ptr<nn::Module>(int64_t channels)>;
// Makes an activation layer (torchvision's activation_layer callables).
using ActivationFactory = std::function<std::shared_ptr<nn::Module>()>;

// BatchNorm2d with the given options (torchvision's partial(nn.BatchNorm2d, eps=..., momentum=...)).
NormFactory batch_norm2d(nn::BatchNormOptions options = {});
template <class M>
ActivationFactory activation() {
  return [] { return std::make_shared<M>(); };
}

struct Conv2dNormActivationOptions {
  int64_t kernel_size = 3, stride = 1;
  std::optional<int64_t> padding;  // default (kernel_size - 1) / 2 * dilation: "same" for odd kernels at stride 1
  int64_t groups = 1;
  NormFactory norm_layer = batch_norm2d();             // null: no normalization
  ActivationFactory activation_layer = activation<nn::ReLU>();  // null: no activation
  int64_t dilation = 1;
  std::optional<bool> bias;  // default: a bias only when there is no normalization
};

// torchvision.ops.Conv2dNormActivation: a Sequential of Conv2d ("0"), the normalization ("1") and
// the activation (next index), so its state dict names are torchvision's.
class Conv2dNormActivation : public nn::Sequential {
 public:
  Conv2dNormActivation(int64_t in_channels, int64_t out_channels, Conv2dNormActivationOptions options = {});
  int64_t out_channels;
};

// torchvision.ops.SqueezeExcitation: x * scale_activation(fc2(activation(fc1(avgpool(x))))), with
// fc1/fc2 1x1 convolutions (input_channels -> squeeze_channels -> input_channels). x: (N, C, H, W).
class SqueezeExcitation : public nn::Module {
 public:
  SqueezeExcitation(int64_t input_channels, int64_t squeeze_channels, ActivationFactory activation = vision::activation<nn::ReLU>(),
                    ActivationFactory scale_activation = vision::activation<nn::Sigmoid>());
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Conv2d> fc1, fc2;
  std::shared_ptr<nn::Module> activation, scale_activation;
};

// torchvision's _make_divisible: v rounded to the nearest multiple of divisor (at least min_value,
// default divisor), never more than 10% below v.
int64_t make_divisible(double v, int64_t divisor, std::optional<int64_t> min_value = std::nullopt);

}  // namespace nabla::vision
