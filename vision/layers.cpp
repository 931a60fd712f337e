#include "vision/layers.h"

#include "core/error.h"
#include "nn/dropout.h"
#include "nn/linear.h"

namespace nabla::vision {

NormFactory batch_norm2d(nn::BatchNormOptions options) {
  return [options](int64_t c) { return std::make_shared<nn::BatchNorm2d>(c, options); };
}

Conv2dNormActivation::Conv2dNormActivation(int64_t in_channels, int64_t out_channels_, Conv2dNormActivationOptions o)
    : out_channels(out_channels_) {
  int64_t padding = o.padding ? *o.padding : (o.kernel_size - 1) / 2 * o.dilation;
  bool bias = o.bias ? *o.bias : !o.norm_layer;
  push_back(std::make_shared<nn::Conv2d>(
      in_channels, out_channels, o.kernel_size,
      nn::Conv2dOptions{
          .stride = o.stride, .padding = padding, .dilation = o.dilation, .groups = o.groups, .bias = bias}));
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

StochasticDepth::StochasticDepth(double p_, std::string mode_) : p(p_), mode(std::move(mode_)) {
  NABLA_CHECK(ValueError, p >= 0.0 && p <= 1.0, "StochasticDepth: drop probability has to be between 0 and 1, but got ",
              p);
  NABLA_CHECK(ValueError, mode == "row" || mode == "batch",
              "StochasticDepth: mode has to be either 'batch' or 'row', but got '", mode, "'");
}

Tensor StochasticDepth::forward(Tensor x) { return stochastic_depth(x, p, mode, is_training()); }

std::string StochasticDepth::extra_repr() const { return "p=" + nn::repr_double(p) + ", mode=" + mode; }

Tensor stochastic_depth(const Tensor& x, double p, const std::string& mode, bool training) {
  NABLA_CHECK(ValueError, p >= 0.0 && p <= 1.0,
              "stochastic_depth: drop probability has to be between 0 and 1, but got ", p);
  NABLA_CHECK(ValueError, mode == "row" || mode == "batch",
              "stochastic_depth: mode has to be either 'batch' or 'row', but got '", mode, "'");
  if (!training || p == 0.0) return x;
  double survival = 1.0 - p;
  // noise: (N, 1, ..., 1) per sample ("row") or all ones ("batch")
  std::vector<int64_t> size(static_cast<size_t>(x.dim()), 1);
  if (mode == "row" && x.dim() > 0) size[0] = x.size(0);
  // The mask is drawn in float32 whatever x's dtype, so the same seed gives the same mask in float32
  // and float64.
  Tensor noise = bernoulli(full(size, survival, dtype(kFloat32).device(x.device()))).to(x.dtype());
  if (survival > 0.0) noise = noise / survival;
  return x * noise;
}

Tensor ChannelShuffle::forward(Tensor x) { return channel_shuffle(x, groups); }

Tensor channel_shuffle(const Tensor& x, int64_t groups) {
  NABLA_CHECK(ShapeError, x.dim() == 4, "channel_shuffle: expected input (N, C, H, W), got ", x.sizes());
  NABLA_CHECK(ValueError, groups > 0 && x.size(1) % groups == 0, "channel_shuffle: ", x.size(1),
              " channels cannot be split into ", groups, " groups");
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.reshape({n, groups, c / groups, h, w}).transpose(1, 2).reshape({n, c, h, w});
}

Tensor LayerNorm2d::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() == 4, "LayerNorm2d: expected input (N, C, H, W), got ", x.sizes());
  return nn::LayerNorm::forward(x.permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
}

MLP::MLP(int64_t in_channels, const std::vector<int64_t>& hidden, ActivationFactory act, double dropout, bool bias) {
  NABLA_CHECK(ValueError, !hidden.empty(), "MLP: hidden_channels should not be empty");
  int64_t in_dim = in_channels;
  for (size_t i = 0; i + 1 < hidden.size(); ++i) {
    push_back(std::make_shared<nn::Linear>(in_dim, hidden[i], nn::LinearOptions{.bias = bias}));
    push_back(act());
    push_back(std::make_shared<nn::Dropout>(dropout));
    in_dim = hidden[i];
  }
  push_back(std::make_shared<nn::Linear>(in_dim, hidden.back(), nn::LinearOptions{.bias = bias}));
  push_back(std::make_shared<nn::Dropout>(dropout));
}

int64_t make_divisible(double v, int64_t divisor, std::optional<int64_t> min_value) {
  int64_t lo = min_value ? *min_value : divisor;
  int64_t new_v = std::max(lo, static_cast<int64_t>(v + static_cast<double>(divisor) / 2) / divisor * divisor);
  if (static_cast<double>(new_v) < 0.9 * v) new_v += divisor;
  return new_v;
}

}  // namespace nabla::vision
