#include "vision/regnet.h"

#include <cmath>
#include <set>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/init.h"

namespace nabla::vision {

BlockParams BlockParams::from_init_params(int64_t depth, int64_t w_0, double w_a, double w_m, int64_t group_width,
                                          double bottleneck_multiplier, std::optional<double> se_ratio) {
  NABLA_CHECK(ValueError, !(w_a < 0 || w_0 <= 0 || w_m <= 1 || w_0 % 8 != 0), "RegNet: invalid settings w_0=", w_0,
              ", w_a=", w_a, ", w_m=", w_m);
  const float quant = 8;
  // torch: widths_cont = arange(depth) * w_a + w_0; block_capacity = round(log(widths_cont / w_0) / log(w_m));
  // block_widths = round(w_0 * pow(w_m, block_capacity) / 8) * 8, all in float32 (round: half to even).
  std::vector<int64_t> block_widths;
  for (int64_t i = 0; i < depth; ++i) {
    float wc = static_cast<float>(i) * static_cast<float>(w_a) + static_cast<float>(w_0);
    float cap = std::nearbyint(std::log(wc / static_cast<float>(w_0)) / static_cast<float>(std::log(w_m)));
    float w = static_cast<float>(w_0) * std::pow(static_cast<float>(w_m), cap);
    block_widths.push_back(static_cast<int64_t>(std::nearbyint(w / quant) * quant));
  }
  BlockParams p;
  p.se_ratio = se_ratio;
  // A new stage starts where the width changes.
  std::vector<int64_t> starts;
  for (int64_t i = 0; i <= depth; ++i) {
    int64_t w = i < depth ? block_widths[static_cast<size_t>(i)] : 0,
            wp = i > 0 ? block_widths[static_cast<size_t>(i - 1)] : 0;
    if (w != wp) {
      starts.push_back(i);
      if (i < depth) p.widths.push_back(w);
    }
  }
  for (size_t s = 1; s < starts.size(); ++s) p.depths.push_back(starts[s] - starts[s - 1]);
  size_t n = p.widths.size();
  p.strides.assign(n, 2);
  p.bottleneck_multipliers.assign(n, bottleneck_multiplier);
  // torchvision's _adjust_widths_groups_compatibilty
  for (size_t s = 0; s < n; ++s) {
    int64_t w_bot = static_cast<int64_t>(static_cast<double>(p.widths[s]) * bottleneck_multiplier);
    int64_t g = std::min(group_width, w_bot);
    p.group_widths.push_back(g);
    p.widths[s] = static_cast<int64_t>(static_cast<double>(make_divisible(static_cast<double>(w_bot), g)) /
                                       bottleneck_multiplier);
  }
  return p;
}

ResBottleneckBlock::ResBottleneckBlock(int64_t w_in, int64_t w_out, int64_t stride, int64_t group_width, double bm,
                                       std::optional<double> se_ratio) {
  if (w_in != w_out || stride != 1)
    proj = register_module(
        "proj",
        std::make_shared<Conv2dNormActivation>(
            w_in, w_out, Conv2dNormActivationOptions{.kernel_size = 1, .stride = stride, .activation_layer = nullptr}));
  // Python's round is half to even, as nearbyint in the default rounding mode.
  int64_t w_b = static_cast<int64_t>(std::nearbyint(static_cast<double>(w_out) * bm));
  int64_t g = w_b / group_width;
  nn::OrderedDict<std::shared_ptr<nn::Module>> layers;  // torchvision's BottleneckTransform
  layers.insert("a", std::make_shared<Conv2dNormActivation>(w_in, w_b, Conv2dNormActivationOptions{.kernel_size = 1}));
  layers.insert("b", std::make_shared<Conv2dNormActivation>(
                         w_b, w_b, Conv2dNormActivationOptions{.stride = stride, .groups = g}));
  if (se_ratio && *se_ratio != 0.0)
    layers.insert("se", std::make_shared<SqueezeExcitation>(
                            w_b, static_cast<int64_t>(std::nearbyint(*se_ratio * static_cast<double>(w_in)))));
  layers.insert("c", std::make_shared<Conv2dNormActivation>(
                         w_b, w_out, Conv2dNormActivationOptions{.kernel_size = 1, .activation_layer = nullptr}));
  f = register_module("f", std::make_shared<nn::Sequential>(layers));
  register_module("activation", std::make_shared<nn::ReLU>());
}

Tensor ResBottleneckBlock::forward(Tensor x) {
  Tensor shortcut = proj ? (*proj)(x) : x;
  return relu(shortcut + (*f)(x));
}

RegNet::RegNet(const BlockParams& p, RegNetOptions o) {
  stem = register_module(
      "stem", std::make_shared<Conv2dNormActivation>(3, o.stem_width, Conv2dNormActivationOptions{.stride = 2}));
  int64_t width = o.stem_width;
  nn::OrderedDict<std::shared_ptr<nn::Module>> stages;
  for (size_t i = 0; i < p.widths.size(); ++i) {
    nn::OrderedDict<std::shared_ptr<nn::Module>> blocks;  // torchvision's AnyStage
    std::string stage = "block" + std::to_string(i + 1);
    for (int64_t d = 0; d < p.depths[i]; ++d)
      blocks.insert(
          stage + "-" + std::to_string(d),
          std::make_shared<ResBottleneckBlock>(d == 0 ? width : p.widths[i], p.widths[i], d == 0 ? p.strides[i] : 1,
                                               p.group_widths[i], p.bottleneck_multipliers[i], p.se_ratio));
    stages.insert(stage, std::make_shared<nn::Sequential>(blocks));
    width = p.widths[i];
  }
  trunk_output = register_module("trunk_output", std::make_shared<nn::Sequential>(stages));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  fc = register_module("fc", std::make_shared<nn::Linear>(width, o.num_classes));
  for (const auto& m : modules()) {
    if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
      double fan_out = static_cast<double>(c->weight.size(2) * c->weight.size(3) * c->weight.size(0));
      nn::init::normal_(c->weight, 0, std::sqrt(2.0 / fan_out));
    } else if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
      nn::init::normal_(l->weight, 0, 0.01);
      nn::init::zeros_(l->bias);
    }
  }
}

Tensor RegNet::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, "RegNet: expected input (N, 3, H, W), got ", x.sizes());
  return (*fc)((*avgpool)((*trunk_output)((*stem)(x))).flatten(1));
}

std::shared_ptr<RegNet> regnet_y_400mf(RegNetOptions o) {
  return std::make_shared<RegNet>(BlockParams::from_init_params(16, 48, 27.89, 2.09, 8, 1.0, 0.25), o);
}

}  // namespace nabla::vision
