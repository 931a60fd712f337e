// EfficientNet-B0 and ShuffleNetV2 x1.0, as torchvision's (state dict names such as
// features.1.0.block.1.fc1.weight and stage2.0.branch1.0.weight).
//
//   auto model = vision::efficientnet_b0();     // x: (N, 3, H, W) -> (N, 1000), any H, W >= 1
//
// Differences from torchvision: efficientnet_b1..b7 and the V2 variants are not here (the classes
// take their configurations, FusedMBConv is missing); the stochastic depth masks come from nabla's
// generator.
#pragma once

#include <memory>
#include <vector>

#include "../nn/container.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "layers.h"

namespace nabla::vision {

// ---- EfficientNet ---------------------------------------------------------------------------------
// torchvision's MBConvConfig (channels adjusted by width_mult, layers by depth_mult).
struct MBConvConfig {
  double expand_ratio = 1;
  int64_t kernel = 0, stride = 1, input_channels = 0, out_channels = 0, num_layers = 0;
  MBConvConfig(double expand_ratio, int64_t kernel, int64_t stride, int64_t input_channels, int64_t out_channels,
               int64_t num_layers, double width_mult = 1.0, double depth_mult = 1.0);
};

// block: [1x1 expansion], kxk depthwise (SiLU), SqueezeExcitation (SiLU), 1x1 projection; a
// residual connection through StochasticDepth when stride is 1 and the channels match.
class MBConv : public nn::Module {
 public:
  MBConv(const MBConvConfig& cnf, double stochastic_depth_prob, const NormFactory& norm_layer);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> block;
  std::shared_ptr<StochasticDepth> stochastic_depth;
  bool use_res_connect;
};

struct EfficientNetOptions {
  int64_t num_classes = 1000;
  double dropout = 0.2;
  double stochastic_depth_prob = 0.2;  // grows linearly from 0 to this over the blocks
};

class EfficientNet : public nn::Module {
 public:
  EfficientNet(const std::vector<MBConvConfig>& setting, EfficientNetOptions options = {},
               std::optional<int64_t> last_channel = std::nullopt);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;
};

std::shared_ptr<EfficientNet> efficientnet_b0(EfficientNetOptions options = {});

// ---- ShuffleNetV2 ---------------------------------------------------------------------------------
// branch1 (stride 2 only: depthwise 3x3, BN, 1x1, BN, ReLU) and branch2 (1x1, BN, ReLU, depthwise
// 3x3, BN, 1x1, BN, ReLU); at stride 1 the input's first half passes through untouched. The two
// halves are concatenated and channel-shuffled with 2 groups.
class ShuffleInvertedResidual : public nn::Module {
 public:
  ShuffleInvertedResidual(int64_t inp, int64_t oup, int64_t stride);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> branch1, branch2;
  int64_t stride;
};

struct ShuffleNetV2Options {
  int64_t num_classes = 1000;
};

class ShuffleNetV2 : public nn::Module {
 public:
  ShuffleNetV2(std::vector<int64_t> stages_repeats, std::vector<int64_t> stages_out_channels,
               ShuffleNetV2Options options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> conv1, stage2, stage3, stage4, conv5;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::shared_ptr<nn::Module> fc;
};

std::shared_ptr<ShuffleNetV2> shufflenet_v2_x0_5(ShuffleNetV2Options options = {});
std::shared_ptr<ShuffleNetV2> shufflenet_v2_x1_0(ShuffleNetV2Options options = {});

}  // namespace nabla::vision
