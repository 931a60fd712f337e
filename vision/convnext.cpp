#include "vision/convnext.h"

#include "core/error.h"
#include "nn/activation.h"
#include "nn/init.h"

namespace nabla::vision {

CNBlock::CNBlock(int64_t dim, double ls, double sd_prob) {
  block = register_module(
      "block",
      std::make_shared<nn::Sequential>(
          std::make_shared<nn::Conv2d>(dim, dim, 7, nn::Conv2dOptions{.padding = 3, .groups = dim}),
          std::make_shared<Permute>(std::vector<int64_t>{0, 2, 3, 1}),
          std::make_shared<nn::LayerNorm>(std::vector<int64_t>{dim}, nn::LayerNormOptions{.eps = 1e-6}),
          std::make_shared<nn::Linear>(dim, 4 * dim), std::make_shared<nn::GELU>(),
          std::make_shared<nn::Linear>(4 * dim, dim), std::make_shared<Permute>(std::vector<int64_t>{0, 3, 1, 2})));
  layer_scale = register_parameter("layer_scale", full({dim, 1, 1}, ls));
  stochastic_depth = register_module("stochastic_depth", std::make_shared<StochasticDepth>(sd_prob, "row"));
}

Tensor CNBlock::forward(Tensor x) {
  // x: (N, C, H, W); layer_scale (C, 1, 1) broadcasts over H and W
  return (*stochastic_depth)(layer_scale * (*block)(x)) + x;
}

ConvNeXt::ConvNeXt(const std::vector<CNBlockConfig>& setting, ConvNeXtOptions o) {
  NABLA_CHECK(ValueError, !setting.empty(), "ConvNeXt: the block setting should not be empty");
  NormFactory norm = [](int64_t c) { return std::make_shared<LayerNorm2d>(c, nn::LayerNormOptions{.eps = 1e-6}); };
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<Conv2dNormActivation>(
      3, setting[0].input_channels,
      Conv2dNormActivationOptions{
          .kernel_size = 4, .stride = 4, .padding = 0, .norm_layer = norm, .activation_layer = nullptr, .bias = true}));
  int64_t total = 0, id = 0;
  for (const auto& c : setting) total += c.num_layers;
  for (const auto& c : setting) {
    auto stage = std::make_shared<nn::Sequential>();
    for (int64_t i = 0; i < c.num_layers; ++i, ++id)
      stage->push_back(std::make_shared<CNBlock>(
          c.input_channels, o.layer_scale,
          o.stochastic_depth_prob * static_cast<double>(id) / (static_cast<double>(total) - 1.0)));
    features->push_back(stage);
    if (c.out_channels)
      features->push_back(std::make_shared<nn::Sequential>(
          norm(c.input_channels),
          std::make_shared<nn::Conv2d>(c.input_channels, *c.out_channels, 2, nn::Conv2dOptions{.stride = 2})));
  }
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  int64_t last = setting.back().out_channels ? *setting.back().out_channels : setting.back().input_channels;
  classifier = register_module("classifier",
                               std::make_shared<nn::Sequential>(norm(last), std::make_shared<nn::Flatten>(1),
                                                                std::make_shared<nn::Linear>(last, o.num_classes)));
  for (const auto& m : modules()) {
    if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
      nn::init::trunc_normal_(c->weight, 0, 0.02);
      if (c->bias.defined()) nn::init::zeros_(c->bias);
    } else if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
      nn::init::trunc_normal_(l->weight, 0, 0.02);
      if (l->bias.defined()) nn::init::zeros_(l->bias);
    }
  }
}

Tensor ConvNeXt::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, "ConvNeXt: expected input (N, 3, H, W), got ", x.sizes());
  return (*classifier)((*avgpool)((*features)(x)));
}

std::shared_ptr<ConvNeXt> convnext_tiny(ConvNeXtOptions o) {
  return std::make_shared<ConvNeXt>(
      std::vector<CNBlockConfig>{{96, 192, 3}, {192, 384, 3}, {384, 768, 9}, {768, std::nullopt, 3}}, o);
}

}  // namespace nabla::vision
