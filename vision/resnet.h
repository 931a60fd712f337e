// ResNet, ResNeXt and Wide ResNet, as torchvision.models.resnet: the same module tree, so the
// state dict names are torchvision's (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc, ...)
// and a torchvision checkpoint loads with strict = true.
//
//   auto model = vision::resnet50();                       // random weights (torchvision's init)
//   vision::load_weights(*model, "resnet50.pth");          // torchvision's file (or .safetensors)
//   model->eval();
//   Tensor logits = (*model)(images);                      // images: (N, 3, H, W) -> (N, 1000)
//   model->fc = model->replace_module("fc", std::make_shared<nn::Linear>(2048, 10));   // a new head
//
// Any input size whose stride-32 feature map is at least 1x1 works (the pooling is adaptive).
// Differences from torchvision: norm_layer is always BatchNorm2d (torchvision takes a callable).
#pragma once

#include <array>
#include <memory>

#include "../nn/container.h"
#include "../nn/conv.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "../nn/normalization.h"
#include "../nn/pooling.h"

namespace nabla::vision {

struct ResNetOptions {
  int64_t num_classes = 1000;
  // The last BatchNorm of each residual branch starts at zero, so every block starts as the identity.
  bool zero_init_residual = false;
  int64_t groups = 1;            // ResNeXt: groups of the 3x3 convolutions
  int64_t width_per_group = 64;  // ResNeXt / Wide ResNet: width of each group
  // For layer2..layer4: a dilated convolution instead of the stride-2 one (as in DeepLab).
  std::array<bool, 3> replace_stride_with_dilation{false, false, false};
};

// Two 3x3 convolutions (resnet18/34). conv1 carries the stride.
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t expansion = 1;
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> downsample,
             int64_t groups, int64_t base_width, int64_t dilation);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Sequential> downsample;  // null when the shapes already match
};

// 1x1 -> 3x3 (stride, groups, dilation) -> 1x1 with 4x the channels (resnet50 and deeper, as
// torchvision's "ResNet V1.5": the stride is on the 3x3 convolution).
class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t expansion = 4;
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> downsample,
             int64_t groups, int64_t base_width, int64_t dilation);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::Conv2d> conv1, conv2, conv3;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<nn::Sequential> downsample;
};

enum class ResNetBlock { basic, bottleneck };

// x: (N, 3, H, W) -> (N, num_classes).
class ResNet : public nn::Module {
 public:
  ResNet(ResNetBlock block, std::array<int64_t, 4> layers, ResNetOptions options = {});
  Tensor forward(Tensor x) override;
  // Everything up to and including the global average pooling, flattened: (N, 512 * expansion).
  Tensor features(Tensor x);

  ResNetOptions options;
  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  // The classifier head; replace it with `fc = replace_module("fc", new_head)` (any module).
  std::shared_ptr<nn::Module> fc;

 private:
  std::shared_ptr<nn::Sequential> make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride,
                                             bool dilate);
  int64_t inplanes_ = 64, dilation_ = 1;
};

std::shared_ptr<ResNet> resnet18(ResNetOptions options = {});
std::shared_ptr<ResNet> resnet34(ResNetOptions options = {});
std::shared_ptr<ResNet> resnet50(ResNetOptions options = {});
std::shared_ptr<ResNet> resnet101(ResNetOptions options = {});
std::shared_ptr<ResNet> resnet152(ResNetOptions options = {});
// resnet50 with 32 groups of width 4 (options.groups and width_per_group are set by the builder).
std::shared_ptr<ResNet> resnext50_32x4d(ResNetOptions options = {});
// resnet50 with twice the bottleneck width (width_per_group 128).
std::shared_ptr<ResNet> wide_resnet50_2(ResNetOptions options = {});

}  // namespace nabla::vision
