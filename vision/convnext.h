// ConvNeXt (convnext_tiny), as torchvision.models.convnext: state dict names such as
// features.1.0.block.0.weight, features.1.0.layer_scale, features.2.0.weight (a LayerNorm2d),
// classifier.2.weight.
//
//   auto model = vision::convnext_tiny();   // x: (N, 3, H, W) -> (N, 1000), H and W >= 32
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "../nn/container.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "layers.h"

namespace nabla::vision {

// block: 7x7 depthwise Conv2d, Permute to channels last, LayerNorm (eps 1e-6), Linear 4x, GELU,
// Linear back, Permute; the result scaled per channel by layer_scale (C, 1, 1), through
// StochasticDepth, plus the input.
class CNBlock : public nn::Module {
 public:
  CNBlock(int64_t dim, double layer_scale, double stochastic_depth_prob);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> block;
  Tensor layer_scale;
  std::shared_ptr<StochasticDepth> stochastic_depth;
};

struct CNBlockConfig {
  int64_t input_channels = 0;
  std::optional<int64_t> out_channels{};  // a downsampling layer to this many channels after the stage
  int64_t num_layers = 0;
};

struct ConvNeXtOptions {
  int64_t num_classes = 1000;
  double stochastic_depth_prob = 0.1;  // convnext_tiny's (the class's own default is 0)
  double layer_scale = 1e-6;
};

class ConvNeXt : public nn::Module {
 public:
  ConvNeXt(const std::vector<CNBlockConfig>& setting, ConvNeXtOptions options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;
};

std::shared_ptr<ConvNeXt> convnext_tiny(ConvNeXtOptions options = {});

}  // namespace nabla::vision
