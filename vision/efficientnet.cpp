#include "vision/efficientnet.h"

#include <cmath>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace nabla::vision {

namespace {
void check_image(const char* who, const Tensor& x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, who, ": expected input (N, 3, H, W), got ", x.sizes());
}
int64_t adjust_channels(double channels, double width_mult) { return make_divisible(channels * width_mult, 8); }
}  // namespace

// ---- EfficientNet ---------------------------------------------------------------------------------
MBConvConfig::MBConvConfig(double e, int64_t k, int64_t s, int64_t in, int64_t out, int64_t n, double width_mult,
                           double depth_mult)
    : expand_ratio(e),
      kernel(k),
      stride(s),
      input_channels(adjust_channels(static_cast<double>(in), width_mult)),
      out_channels(adjust_channels(static_cast<double>(out), width_mult)),
      num_layers(static_cast<int64_t>(std::ceil(static_cast<double>(n) * depth_mult))) {}

MBConv::MBConv(const MBConvConfig& c, double sd_prob, const NormFactory& norm) {
  NABLA_CHECK(ValueError, c.stride == 1 || c.stride == 2, "MBConv: illegal stride value ", c.stride);
  use_res_connect = c.stride == 1 && c.input_channels == c.out_channels;
  auto silu = activation<nn::SiLU>();
  int64_t expanded = adjust_channels(static_cast<double>(c.input_channels), c.expand_ratio);
  block = register_module("block", std::make_shared<nn::Sequential>());
  if (expanded != c.input_channels)
    block->push_back(std::make_shared<Conv2dNormActivation>(
        c.input_channels, expanded,
        Conv2dNormActivationOptions{.kernel_size = 1, .norm_layer = norm, .activation_layer = silu}));
  block->push_back(std::make_shared<Conv2dNormActivation>(expanded, expanded,
                                                          Conv2dNormActivationOptions{.kernel_size = c.kernel,
                                                                                      .stride = c.stride,
                                                                                      .groups = expanded,
                                                                                      .norm_layer = norm,
                                                                                      .activation_layer = silu}));
  block->push_back(std::make_shared<SqueezeExcitation>(expanded, std::max<int64_t>(1, c.input_channels / 4), silu));
  block->push_back(std::make_shared<Conv2dNormActivation>(
      expanded, c.out_channels,
      Conv2dNormActivationOptions{.kernel_size = 1, .norm_layer = norm, .activation_layer = nullptr}));
  stochastic_depth = register_module("stochastic_depth", std::make_shared<StochasticDepth>(sd_prob, "row"));
}

Tensor MBConv::forward(Tensor x) {
  Tensor r = (*block)(x);
  if (use_res_connect) r = (*stochastic_depth)(r) + x;
  return r;
}

EfficientNet::EfficientNet(const std::vector<MBConvConfig>& setting, EfficientNetOptions o,
                           std::optional<int64_t> last_channel) {
  NABLA_CHECK(ValueError, !setting.empty(), "EfficientNet: the inverted residual setting should not be empty");
  NormFactory norm = batch_norm2d();
  auto silu = activation<nn::SiLU>();
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<Conv2dNormActivation>(
      3, setting[0].input_channels,
      Conv2dNormActivationOptions{.stride = 2, .norm_layer = norm, .activation_layer = silu}));
  int64_t total = 0, id = 0;
  for (const auto& c : setting) total += c.num_layers;
  for (const auto& c : setting) {
    auto stage = std::make_shared<nn::Sequential>();
    for (int64_t i = 0; i < c.num_layers; ++i) {
      MBConvConfig b = c;
      if (i > 0) {
        b.input_channels = b.out_channels;
        b.stride = 1;
      }
      double sd = o.stochastic_depth_prob * static_cast<double>(id) / static_cast<double>(total);
      stage->push_back(std::make_shared<MBConv>(b, sd, norm));
      ++id;
    }
    features->push_back(stage);
  }
  int64_t last_in = setting.back().out_channels, last_out = last_channel ? *last_channel : 4 * last_in;
  features->push_back(std::make_shared<Conv2dNormActivation>(
      last_in, last_out, Conv2dNormActivationOptions{.kernel_size = 1, .norm_layer = norm, .activation_layer = silu}));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  classifier = register_module("classifier",
                               std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(o.dropout),
                                                                std::make_shared<nn::Linear>(last_out, o.num_classes)));
  for (const auto& m : modules()) {
    if (auto cv = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
      nn::init::kaiming_normal_(cv->weight, 0, nn::init::FanMode::fan_out);
      if (cv->bias.defined()) nn::init::zeros_(cv->bias);
    } else if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
      double r = 1.0 / std::sqrt(static_cast<double>(l->out_features));
      nn::init::uniform_(l->weight, -r, r);
      nn::init::zeros_(l->bias);
    }
  }
}

Tensor EfficientNet::forward(Tensor x) {
  check_image("EfficientNet", x);
  return (*classifier)((*avgpool)((*features)(x)).flatten(1));
}

std::shared_ptr<EfficientNet> efficientnet_b0(EfficientNetOptions o) {
  std::vector<MBConvConfig> s = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},  {6, 5, 2, 24, 40, 2},
                                 {6, 3, 2, 40, 80, 3},  {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4},
                                 {6, 3, 1, 192, 320, 1}};
  return std::make_shared<EfficientNet>(s, o);
}

// ---- ShuffleNetV2 ---------------------------------------------------------------------------------
ShuffleInvertedResidual::ShuffleInvertedResidual(int64_t inp, int64_t oup, int64_t stride_) : stride(stride_) {
  NABLA_CHECK(ValueError, stride >= 1 && stride <= 3, "ShuffleNetV2 InvertedResidual: illegal stride value ", stride);
  int64_t bf = oup / 2;
  NABLA_CHECK(ValueError, stride != 1 || inp == bf * 2, "ShuffleNetV2 InvertedResidual: invalid combination of stride ",
              stride, ", inp ", inp, " and oup ", oup, " (at stride 1 inp must equal oup // 2 * 2)");
  auto dw = [](int64_t c, int64_t s) {
    return std::make_shared<nn::Conv2d>(c, c, 3,
                                        nn::Conv2dOptions{.stride = s, .padding = 1, .groups = c, .bias = false});
  };
  auto pw = [](int64_t i, int64_t o) {
    return std::make_shared<nn::Conv2d>(i, o, 1, nn::Conv2dOptions{.bias = false});
  };
  auto bn = [](int64_t c) { return std::make_shared<nn::BatchNorm2d>(c); };
  auto relu = [] { return std::make_shared<nn::ReLU>(); };
  branch1 = register_module(
      "branch1", stride > 1 ? std::make_shared<nn::Sequential>(dw(inp, stride), bn(inp), pw(inp, bf), bn(bf), relu())
                            : std::make_shared<nn::Sequential>());
  branch2 =
      register_module("branch2", std::make_shared<nn::Sequential>(pw(stride > 1 ? inp : bf, bf), bn(bf), relu(),
                                                                  dw(bf, stride), bn(bf), pw(bf, bf), bn(bf), relu()));
}

Tensor ShuffleInvertedResidual::forward(Tensor x) {
  Tensor out;
  if (stride == 1) {
    auto halves = chunk(x, 2, 1);
    out = cat({halves[0], (*branch2)(halves[1])}, 1);
  } else {
    out = cat({(*branch1)(x), (*branch2)(x)}, 1);
  }
  return channel_shuffle(out, 2);
}

ShuffleNetV2::ShuffleNetV2(std::vector<int64_t> repeats, std::vector<int64_t> channels, ShuffleNetV2Options o) {
  NABLA_CHECK(ValueError, repeats.size() == 3, "ShuffleNetV2: expected stages_repeats as a list of 3 ints, got ",
              repeats.size());
  NABLA_CHECK(ValueError, channels.size() == 5, "ShuffleNetV2: expected stages_out_channels as a list of 5 ints, got ",
              channels.size());
  int64_t in = channels[0];
  conv1 = register_module(
      "conv1", std::make_shared<nn::Sequential>(
                   std::make_shared<nn::Conv2d>(3, in, 3, nn::Conv2dOptions{.stride = 2, .padding = 1, .bias = false}),
                   std::make_shared<nn::BatchNorm2d>(in), std::make_shared<nn::ReLU>()));
  maxpool =
      register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .padding = 1}));
  std::shared_ptr<nn::Sequential>* stages[3] = {&stage2, &stage3, &stage4};
  for (int i = 0; i < 3; ++i) {
    auto seq = std::make_shared<nn::Sequential>();
    int64_t out = channels[static_cast<size_t>(i) + 1];
    seq->push_back(std::make_shared<ShuffleInvertedResidual>(in, out, 2));
    for (int64_t r = 1; r < repeats[static_cast<size_t>(i)]; ++r)
      seq->push_back(std::make_shared<ShuffleInvertedResidual>(out, out, 1));
    *stages[i] = register_module("stage" + std::to_string(i + 2), seq);
    in = out;
  }
  int64_t out = channels.back();
  conv5 = register_module("conv5", std::make_shared<nn::Sequential>(
                                       std::make_shared<nn::Conv2d>(in, out, 1, nn::Conv2dOptions{.bias = false}),
                                       std::make_shared<nn::BatchNorm2d>(out), std::make_shared<nn::ReLU>()));
  fc = register_module("fc", std::make_shared<nn::Linear>(out, o.num_classes));
}

Tensor ShuffleNetV2::forward(Tensor x) {
  check_image("ShuffleNetV2", x);
  x = (*maxpool)((*conv1)(x));
  x = (*conv5)((*stage4)((*stage3)((*stage2)(x))));
  return (*fc)(x.mean({2, 3}));
}

std::shared_ptr<ShuffleNetV2> shufflenet_v2_x0_5(ShuffleNetV2Options o) {
  return std::make_shared<ShuffleNetV2>(std::vector<int64_t>{4, 8, 4}, std::vector<int64_t>{24, 48, 96, 192, 1024}, o);
}
std::shared_ptr<ShuffleNetV2> shufflenet_v2_x1_0(ShuffleNetV2Options o) {
  return std::make_shared<ShuffleNetV2>(std::vector<int64_t>{4, 8, 4}, std::vector<int64_t>{24, 116, 232, 464, 1024},
                                        o);
}

}  // namespace nabla::vision
