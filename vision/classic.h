// The plain convolutional classifiers of torchvision: VGG (vgg11/16 and their _bn variants),
// AlexNet, SqueezeNet 1.1 and DenseNet-121, with torchvision's module trees and state dict names
// (features.0.weight, classifier.6.bias, features.denseblock1.denselayer1.norm1.weight, ...).
//
//   auto model = vision::vgg16_bn();      // x: (N, 3, H, W) -> (N, 1000)
//
// Input sizes: VGG needs H, W >= 32, AlexNet >= 63, SqueezeNet >= 17 (its max pools use
// ceil_mode), DenseNet >= 29. Differences from torchvision: DenseNet's memory_efficient
// (checkpointing) option is absent, and dense layers take the concatenated features instead of
// the list of them (the same computation: torchvision concatenates first thing).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "../nn/container.h"
#include "../nn/conv.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "../nn/normalization.h"
#include "../nn/pooling.h"

namespace nabla::vision {

// ---- VGG ------------------------------------------------------------------------------------------
struct VGGOptions {
  int64_t num_classes = 1000;
  bool init_weights = true;  // torchvision's initialisation (else the layers' defaults)
  double dropout = 0.5;
};

// features (3x3 convolutions, BatchNorm when batch_norm, ReLU, 2x2 max pools), avgpool to 7x7,
// classifier (Linear 25088 -> 4096 -> 4096 -> num_classes with ReLU and Dropout).
class VGG : public nn::Module {
 public:
  // cfg: channel counts, 0 for a max pool (torchvision's "M").
  VGG(const std::vector<int64_t>& cfg, bool batch_norm, VGGOptions options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;
};

std::shared_ptr<VGG> vgg11(VGGOptions options = {});
std::shared_ptr<VGG> vgg11_bn(VGGOptions options = {});
std::shared_ptr<VGG> vgg13(VGGOptions options = {});
std::shared_ptr<VGG> vgg13_bn(VGGOptions options = {});
std::shared_ptr<VGG> vgg16(VGGOptions options = {});
std::shared_ptr<VGG> vgg16_bn(VGGOptions options = {});
std::shared_ptr<VGG> vgg19(VGGOptions options = {});
std::shared_ptr<VGG> vgg19_bn(VGGOptions options = {});

// ---- AlexNet --------------------------------------------------------------------------------------
struct AlexNetOptions {
  int64_t num_classes = 1000;
  double dropout = 0.5;
};

class AlexNet : public nn::Module {
 public:
  explicit AlexNet(AlexNetOptions options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Sequential> classifier;
};

std::shared_ptr<AlexNet> alexnet(AlexNetOptions options = {});

// ---- SqueezeNet -----------------------------------------------------------------------------------
// squeeze (1x1) then expand1x1 and expand3x3 concatenated, each followed by ReLU.
class Fire : public nn::Module {
 public:
  Fire(int64_t inplanes, int64_t squeeze_planes, int64_t expand1x1_planes, int64_t expand3x3_planes);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Conv2d> squeeze, expand1x1, expand3x3;
};

struct SqueezeNetOptions {
  int64_t num_classes = 1000;
  double dropout = 0.5;
};

class SqueezeNet : public nn::Module {
 public:
  // version "1_0" or "1_1".
  explicit SqueezeNet(const std::string& version, SqueezeNetOptions options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features, classifier;
};

std::shared_ptr<SqueezeNet> squeezenet1_0(SqueezeNetOptions options = {});
std::shared_ptr<SqueezeNet> squeezenet1_1(SqueezeNetOptions options = {});

// ---- DenseNet -------------------------------------------------------------------------------------
// norm1, relu1, conv1 (1x1 to bn_size * growth_rate), norm2, relu2, conv2 (3x3 to growth_rate).
class DenseLayer : public nn::Module {
 public:
  DenseLayer(int64_t num_input_features, int64_t growth_rate, int64_t bn_size, double drop_rate);
  // x: the concatenation of the block's input and the previous layers' outputs.
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::BatchNorm2d> norm1, norm2;
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  double drop_rate;
};

// denselayer1..N; each sees every earlier output, concatenated along the channels.
class DenseBlock : public nn::Module {
 public:
  DenseBlock(int64_t num_layers, int64_t num_input_features, int64_t bn_size, int64_t growth_rate, double drop_rate);
  Tensor forward(Tensor x) override;
  std::vector<std::shared_ptr<DenseLayer>> layers;
};

struct DenseNetOptions {
  int64_t growth_rate = 32;
  std::array<int64_t, 4> block_config{6, 12, 24, 16};
  int64_t num_init_features = 64;
  int64_t bn_size = 4;
  double drop_rate = 0;
  int64_t num_classes = 1000;
};

class DenseNet : public nn::Module {
 public:
  explicit DenseNet(DenseNetOptions options = {});
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::Module> classifier;
};

std::shared_ptr<DenseNet> densenet121(DenseNetOptions options = {});

// torchvision's densenet weight files use old names ("denselayer1.norm.1.weight"); torchvision
// renames them when loading. This does the same ("norm.1" -> "norm1", "conv.2" -> "conv2", ...);
// vision::load_weights applies it to DenseNet models.
nn::StateDict rename_legacy_densenet_keys(const nn::StateDict& state);

}  // namespace nabla::vision
