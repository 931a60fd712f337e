// MobileNetV2 and MobileNetV3 (small and large), as torchvision.models.mobilenetv2/v3, with their
// state dict names (features.1.conv.0.0.weight, features.4.block.2.fc1.weight, classifier.3.bias).
//
//   auto model = vision::mobilenet_v3_large();   // x: (N, 3, H, W) -> (N, 1000), any H, W >= 1
//
// Differences from torchvision: the block and norm_layer callables are not options (the
// architectures use their fixed ones); v3's reduced_tail and dilated options are there.
#pragma once

#include <memory>
#include <vector>

#include "../nn/container.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "layers.h"

namespace nabla::vision {

// ---- MobileNetV2 ----------------------------------------------------------------------------------
// conv: [1x1 expansion ConvBNReLU6 (if expand_ratio != 1)], 3x3 depthwise ConvBNReLU6, 1x1 Conv, BN;
// a residual connection when stride is 1 and the channels match.
class InvertedResidual : public nn::Module {
 public:
  InvertedResidual(int64_t inp, int64_t oup, int64_t stride, int64_t expand_ratio);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> conv;
  bool use_res_connect;
};

struct MobileNetV2Options {
  int64_t num_classes = 1000;
  double width_mult = 1.0;
  int64_t round_nearest = 8;
  double dropout = 0.2;
};

class MobileNetV2 : public nn::Module {
 public:
  explicit MobileNetV2(MobileNetV2Options options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features, classifier;
  int64_t last_channel;
};

std::shared_ptr<MobileNetV2> mobilenet_v2(MobileNetV2Options options = {});

// ---- MobileNetV3 ----------------------------------------------------------------------------------
// torchvision's InvertedResidualConfig (channels already adjusted by width_mult).
struct InvertedResidualConfig {
  int64_t input_channels = 0, kernel = 0, expanded_channels = 0, out_channels = 0;
  bool use_se = false, use_hs = false;  // squeeze-excitation; Hardswish (else ReLU)
  int64_t stride = 1, dilation = 1;
};

// block: [1x1 expansion], kxk depthwise, [SqueezeExcitation with Hardsigmoid], 1x1 projection
// (each a Conv2dNormActivation); a residual connection when stride is 1 and the channels match.
class InvertedResidualV3 : public nn::Module {
 public:
  InvertedResidualV3(const InvertedResidualConfig& cnf, const NormFactory& norm_layer);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> block;
  bool use_res_connect;
};

struct MobileNetV3Options {
  int64_t num_classes = 1000;
  double width_mult = 1.0;
  bool reduced_tail = false;  // halves the channels of the last blocks
  bool dilated = false;       // dilation 2 instead of stride 2 in the last stage
  double dropout = 0.2;
};

class MobileNetV3 : public nn::Module {
 public:
  MobileNetV3(const std::vector<InvertedResidualConfig>& setting, int64_t last_channel,
              MobileNetV3Options options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;
};

std::shared_ptr<MobileNetV3> mobilenet_v3_large(MobileNetV3Options options = {});
std::shared_ptr<MobileNetV3> mobilenet_v3_small(MobileNetV3Options options = {});

}  // namespace nabla::vision
