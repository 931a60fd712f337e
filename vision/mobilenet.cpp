#include "vision/mobilenet.h"

#include <cmath>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace nabla::vision {

namespace {
// torchvision's MobileNet initialisation: kaiming_normal_(fan_out) convolutions with zero bias,
// norms 1 and 0, Linear N(0, 0.01) with zero bias.
void init_mobilenet(nn::Module& model) {
  for (const auto& m : model.modules()) {
    if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
      nn::init::kaiming_normal_(c->weight, 0, nn::init::FanMode::fan_out);
      if (c->bias.defined()) nn::init::zeros_(c->bias);
    } else if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
      nn::init::normal_(l->weight, 0, 0.01);
      nn::init::zeros_(l->bias);
    }
  }
}
void check_image(const char* who, const Tensor& x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, who, ": expected input (N, 3, H, W), got ", x.sizes());
}
}  // namespace

// ---- MobileNetV2 ----------------------------------------------------------------------------------
InvertedResidual::InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio) {
  NABLA_CHECK(ValueError, stride == 1 || stride == 2, "InvertedResidual: stride should be 1 or 2, got ", stride);
  int64_t hidden = static_cast<int64_t>(std::round(static_cast<double>(inp * expand_ratio)));
  use_res_connect = stride == 1 && inp == oup;
  conv = register_module("conv", std::make_shared<nn::Sequential>());
  auto relu6 = activation<nn::ReLU6>();
  if (expand_ratio != 1)
    conv->push_back(std::make_shared<Conv2dNormActivation>(
        inp, hidden, Conv2dNormActivationOptions{.kernel_size = 1, .activation_layer = relu6}));
  conv->push_back(std::make_shared<Conv2dNormActivation>(
      hidden, hidden, Conv2dNormActivationOptions{.stride = stride, .groups = hidden, .activation_layer = relu6}));
  conv->push_back(std::make_shared<nn::Conv2d>(hidden, oup, 1, nn::Conv2dOptions{.bias = false}));
  conv->push_back(std::make_shared<nn::BatchNorm2d>(oup));
}

Tensor InvertedResidual::forward(Tensor x) { return use_res_connect ? x + (*conv)(x) : (*conv)(x); }

MobileNetV2::MobileNetV2(MobileNetV2Options o) {
  const int64_t setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                 {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t input_channel = make_divisible(32 * o.width_mult, o.round_nearest);
  last_channel = make_divisible(1280 * std::max(1.0, o.width_mult), o.round_nearest);
  auto relu6 = activation<nn::ReLU6>();
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<Conv2dNormActivation>(
      3, input_channel, Conv2dNormActivationOptions{.stride = 2, .activation_layer = relu6}));
  for (const auto& s : setting) {
    int64_t out = make_divisible(static_cast<double>(s[1]) * o.width_mult, o.round_nearest);
    for (int64_t i = 0; i < s[2]; ++i) {
      features->push_back(std::make_shared<InvertedResidual>(input_channel, out, i == 0 ? s[3] : 1, s[0]));
      input_channel = out;
    }
  }
  features->push_back(std::make_shared<Conv2dNormActivation>(
      input_channel, last_channel, Conv2dNormActivationOptions{.kernel_size = 1, .activation_layer = relu6}));
  classifier = register_module(
      "classifier", std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(o.dropout),
                                                     std::make_shared<nn::Linear>(last_channel, o.num_classes)));
  init_mobilenet(*this);
}

Tensor MobileNetV2::forward(Tensor x) {
  check_image("MobileNetV2", x);
  return (*classifier)(adaptive_avg_pool2d((*features)(x), {1, 1}).flatten(1));
}

std::shared_ptr<MobileNetV2> mobilenet_v2(MobileNetV2Options o) { return std::make_shared<MobileNetV2>(o); }

// ---- MobileNetV3 ----------------------------------------------------------------------------------
InvertedResidualV3::InvertedResidualV3(const InvertedResidualConfig& c, const NormFactory& norm) {
  NABLA_CHECK(ValueError, c.stride == 1 || c.stride == 2, "InvertedResidual: illegal stride value ", c.stride);
  use_res_connect = c.stride == 1 && c.input_channels == c.out_channels;
  ActivationFactory act = c.use_hs ? activation<nn::Hardswish>() : activation<nn::ReLU>();
  block = register_module("block", std::make_shared<nn::Sequential>());
  if (c.expanded_channels != c.input_channels)
    block->push_back(std::make_shared<Conv2dNormActivation>(
        c.input_channels, c.expanded_channels,
        Conv2dNormActivationOptions{.kernel_size = 1, .norm_layer = norm, .activation_layer = act}));
  block->push_back(
      std::make_shared<Conv2dNormActivation>(c.expanded_channels, c.expanded_channels,
                                             Conv2dNormActivationOptions{.kernel_size = c.kernel,
                                                                         .stride = c.dilation > 1 ? 1 : c.stride,
                                                                         .groups = c.expanded_channels,
                                                                         .norm_layer = norm,
                                                                         .activation_layer = act,
                                                                         .dilation = c.dilation}));
  if (c.use_se)
    block->push_back(std::make_shared<SqueezeExcitation>(
        c.expanded_channels, make_divisible(static_cast<double>(c.expanded_channels / 4), 8), activation<nn::ReLU>(),
        activation<nn::Hardsigmoid>()));
  block->push_back(std::make_shared<Conv2dNormActivation>(
      c.expanded_channels, c.out_channels,
      Conv2dNormActivationOptions{.kernel_size = 1, .norm_layer = norm, .activation_layer = nullptr}));
}

Tensor InvertedResidualV3::forward(Tensor x) {
  Tensor r = (*block)(x);
  return use_res_connect ? r + x : r;
}

MobileNetV3::MobileNetV3(const std::vector<InvertedResidualConfig>& setting, int64_t last_channel,
                         MobileNetV3Options o) {
  NABLA_CHECK(ValueError, !setting.empty(), "MobileNetV3: the inverted residual setting should not be empty");
  NormFactory norm = batch_norm2d({.eps = 0.001, .momentum = 0.01});
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<Conv2dNormActivation>(
      3, setting[0].input_channels,
      Conv2dNormActivationOptions{.stride = 2, .norm_layer = norm, .activation_layer = activation<nn::Hardswish>()}));
  for (const auto& c : setting) features->push_back(std::make_shared<InvertedResidualV3>(c, norm));
  int64_t last_in = setting.back().out_channels, last_out = 6 * last_in;
  features->push_back(std::make_shared<Conv2dNormActivation>(
      last_in, last_out,
      Conv2dNormActivationOptions{
          .kernel_size = 1, .norm_layer = norm, .activation_layer = activation<nn::Hardswish>()}));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  classifier = register_module(
      "classifier",
      std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(last_out, last_channel),
                                       std::make_shared<nn::Hardswish>(), std::make_shared<nn::Dropout>(o.dropout),
                                       std::make_shared<nn::Linear>(last_channel, o.num_classes)));
  init_mobilenet(*this);
}

Tensor MobileNetV3::forward(Tensor x) {
  check_image("MobileNetV3", x);
  return (*classifier)((*avgpool)((*features)(x)).flatten(1));
}

namespace {
std::pair<std::vector<InvertedResidualConfig>, int64_t> v3_config(bool large, const MobileNetV3Options& o) {
  int64_t rd = o.reduced_tail ? 2 : 1, dil = o.dilated ? 2 : 1;
  auto adj = [&](int64_t c) { return make_divisible(static_cast<double>(c) * o.width_mult, 8); };
  // (input, kernel, expanded, out, use_se, "HS", stride, dilation) as torchvision's bneck_conf
  auto b = [&](int64_t in, int64_t k, int64_t exp, int64_t out, bool se, bool hs, int64_t s, int64_t d) {
    return InvertedResidualConfig{adj(in), k, adj(exp), adj(out), se, hs, s, d};
  };
  if (large)
    return {{b(16, 3, 16, 16, false, false, 1, 1), b(16, 3, 64, 24, false, false, 2, 1),
             b(24, 3, 72, 24, false, false, 1, 1), b(24, 5, 72, 40, true, false, 2, 1),
             b(40, 5, 120, 40, true, false, 1, 1), b(40, 5, 120, 40, true, false, 1, 1),
             b(40, 3, 240, 80, false, true, 2, 1), b(80, 3, 200, 80, false, true, 1, 1),
             b(80, 3, 184, 80, false, true, 1, 1), b(80, 3, 184, 80, false, true, 1, 1),
             b(80, 3, 480, 112, true, true, 1, 1), b(112, 3, 672, 112, true, true, 1, 1),
             b(112, 5, 672, 160 / rd, true, true, 2, dil), b(160 / rd, 5, 960 / rd, 160 / rd, true, true, 1, dil),
             b(160 / rd, 5, 960 / rd, 160 / rd, true, true, 1, dil)},
            adj(1280 / rd)};
  return {
      {b(16, 3, 16, 16, true, false, 2, 1), b(16, 3, 72, 24, false, false, 2, 1), b(24, 3, 88, 24, false, false, 1, 1),
       b(24, 5, 96, 40, true, true, 2, 1), b(40, 5, 240, 40, true, true, 1, 1), b(40, 5, 240, 40, true, true, 1, 1),
       b(40, 5, 120, 48, true, true, 1, 1), b(48, 5, 144, 48, true, true, 1, 1),
       b(48, 5, 288, 96 / rd, true, true, 2, dil), b(96 / rd, 5, 576 / rd, 96 / rd, true, true, 1, dil),
       b(96 / rd, 5, 576 / rd, 96 / rd, true, true, 1, dil)},
      adj(1024 / rd)};
}
}  // namespace

std::shared_ptr<MobileNetV3> mobilenet_v3_large(MobileNetV3Options o) {
  auto [s, last] = v3_config(true, o);
  return std::make_shared<MobileNetV3>(s, last, o);
}
std::shared_ptr<MobileNetV3> mobilenet_v3_small(MobileNetV3Options o) {
  auto [s, last] = v3_config(false, o);
  return std::make_shared<MobileNetV3>(s, last, o);
}

}  // namespace nabla::vision
