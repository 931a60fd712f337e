// RegNet (regnet_y_400mf), as torchvision.models.regnet: state dict names such as stem.0.weight,
// trunk_output.block1.block1-0.proj.0.weight, trunk_output.block2.block2-1.f.se.fc1.weight, fc.bias.
//
//   auto model = vision::regnet_y_400mf();   // x: (N, 3, H, W) -> (N, 1000), any H, W >= 1
//
// Differences from torchvision: the stem, block, norm and activation callables are fixed
// (SimpleStemIN, ResBottleneckBlock, BatchNorm2d, ReLU), as every torchvision builder uses them.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "../nn/container.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "layers.h"

namespace nabla::vision {

// torchvision's BlockParams: per-stage depth, width, group width, bottleneck multiplier, stride.
struct BlockParams {
  std::vector<int64_t> depths{}, widths{}, group_widths{};
  std::vector<double> bottleneck_multipliers{};
  std::vector<int64_t> strides{};
  std::optional<double> se_ratio{};
  // The quantized linear width schedule of the RegNet paper, computed in float32 as torchvision
  // computes it with torch ops (so the rounding is the same).
  static BlockParams from_init_params(int64_t depth, int64_t w_0, double w_a, double w_m, int64_t group_width,
                                      double bottleneck_multiplier = 1.0,
                                      std::optional<double> se_ratio = std::nullopt);
};

// f: a (1x1), b (3x3 grouped, stride), se (SqueezeExcitation, when se_ratio), c (1x1, no activation);
// proj (1x1 with stride) on the shortcut when the shape changes; ReLU after the sum.
class ResBottleneckBlock : public nn::Module {
 public:
  ResBottleneckBlock(int64_t width_in, int64_t width_out, int64_t stride, int64_t group_width,
                     double bottleneck_multiplier, std::optional<double> se_ratio);
  Tensor forward(Tensor x) override;
  std::shared_ptr<Conv2dNormActivation> proj;  // null when the shapes match
  std::shared_ptr<nn::Sequential> f;
};

struct RegNetOptions {
  int64_t num_classes = 1000;
  int64_t stem_width = 32;
};

class RegNet : public nn::Module {
 public:
  explicit RegNet(const BlockParams& params, RegNetOptions options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<Conv2dNormActivation> stem;
  std::shared_ptr<nn::Sequential> trunk_output;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Module> fc;
};

std::shared_ptr<RegNet> regnet_y_400mf(RegNetOptions options = {});

}  // namespace nabla::vision
