#include "nn/models/layers.h"

#include "core/error.h"

namespace nabla::vision {

NormFactory batch_norm2d(nn::BatchNormOptions options) {
  return [options](int64_t c) { return std::make_shared<nn::BatchNorm2d>(c, options); };
}

Conv2dNormActivation::Conv2dNormActivation(int64_t in_channels, int64_t out_channels_, Conv2dNormActivationOptions o)
    : out_channels(out_channels_) {
  int64_t padding = o.padding ? *o.padding : (o.kernel_size - 1) / 2 * o.dilation;
  bool bias = o.bias ? *o.bias : !o.norm_layer;
  push_back(std::make_shared<nn::Conv2d>(in_channels, out_channels, o.kernel_size,
                                         nn::Conv2dOptions{.stride = o.stride, .padding = padding, .dilation = o.dilation,
                                                           .groups = o.groups, .bias = bias}));
  if (o.norm_layer) push_back(o.norm_layer(out_channels));
  if (o.activation_layer) push_back(o.activation_layer());
}

SqueezeExcitation::SqueezeExcitation(int64_t input_channels, int64_t squeeze_channels, ActivationFactory act,
                                     ActivationFactory scale_act) {
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  fc1 = register_module("fc1", std::make_shared<nn::Conv2d>(input_channels, squeeze_channels, 1));
  fc2 = register_module("fc2", std::make_shared<nn::Conv2d>(squeeze_channels, input_channels, 1));
  activation = register_module("activation", act());
  scale_activation = register_module("scale_activation", scale_act());
}

Tensor SqueezeExcitation::forward(Tensor x) {
  // x: (N, C, H, W); scale: (N, C, 1, 1)
  Tensor scale = (*scale_activation)((*fc2)((*activation)((*fc1)((*avgpool)(x)))));
  return scale * x;
}

int64_t make_divisible(double v, int64_t divisor, std::optional<int64_t> min_value) {
  int64_t lo = min_value ? *min_value : divisor;
  int64_t new_v = std::max(lo, static_cast<int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor);
  if (static_cast<double>(new_v) < 0.9 * v) new_v += divisor;
  return new_v;
}

}  // namespace nabla::vision
