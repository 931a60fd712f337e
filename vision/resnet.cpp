#include "vision/resnet.h"

#include "core/error.h"
#include "nn/activation.h"
#include "nn/init.h"

namespace nabla::vision {

namespace {
std::shared_ptr<nn::Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride = 1, int64_t groups = 1,
                                    int64_t dilation = 1) {
  return std::make_shared<nn::Conv2d>(
      in, out, 3,
      nn::Conv2dOptions{.stride = stride, .padding = dilation, .dilation = dilation, .groups = groups, .bias = false});
}
std::shared_ptr<nn::Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 1, nn::Conv2dOptions{.stride = stride, .bias = false});
}
}  // namespace

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> ds,
                       int64_t groups, int64_t base_width, int64_t dilation) {
  NABLA_CHECK(ValueError, groups == 1 && base_width == 64,
              "BasicBlock: only supports groups=1 and base_width=64, got groups=", groups, ", base_width=", base_width);
  NABLA_CHECK(NotImplemented, dilation <= 1, "BasicBlock: dilation > 1 is not supported (as in torchvision)");
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  register_module("relu", std::make_shared<nn::ReLU>());
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor BasicBlock::forward(Tensor x) {
  Tensor identity = downsample ? (*downsample)(x) : x;
  Tensor out = relu((*bn1)((*conv1)(x)));
  out = (*bn2)((*conv2)(out));
  return relu(out + identity);
}

Bottleneck::Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<nn::Sequential> ds,
                       int64_t groups, int64_t base_width, int64_t dilation) {
  int64_t width = static_cast<int64_t>(static_cast<double>(planes) * (static_cast<double>(base_width) / 64.0)) * groups;
  conv1 = register_module("conv1", conv1x1(inplanes, width));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(width));
  conv2 = register_module("conv2", conv3x3(width, width, stride, groups, dilation));
  bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(width));
  conv3 = register_module("conv3", conv1x1(width, planes * expansion));
  bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(planes * expansion));
  register_module("relu", std::make_shared<nn::ReLU>());
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor Bottleneck::forward(Tensor x) {
  Tensor identity = downsample ? (*downsample)(x) : x;
  Tensor out = relu((*bn1)((*conv1)(x)));
  out = relu((*bn2)((*conv2)(out)));
  out = (*bn3)((*conv3)(out));
  return relu(out + identity);
}

ResNet::ResNet(ResNetBlock block, std::array<int64_t, 4> layers, ResNetOptions opts) : options(opts) {
  NABLA_CHECK(ValueError, options.num_classes > 0 && options.groups > 0 && options.width_per_group > 0,
              "ResNet: num_classes, groups and width_per_group must be positive, got ", options.num_classes, ", ",
              options.groups, ", ", options.width_per_group);
  conv1 = register_module(
      "conv1", std::make_shared<nn::Conv2d>(3, 64, 7, nn::Conv2dOptions{.stride = 2, .padding = 3, .bias = false}));
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(64));
  register_module("relu", std::make_shared<nn::ReLU>());
  maxpool =
      register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .padding = 1}));
  const auto& d = options.replace_stride_with_dilation;
  layer1 = register_module("layer1", make_layer(block, 64, layers[0], 1, false));
  layer2 = register_module("layer2", make_layer(block, 128, layers[1], 2, d[0]));
  layer3 = register_module("layer3", make_layer(block, 256, layers[2], 2, d[1]));
  layer4 = register_module("layer4", make_layer(block, 512, layers[3], 2, d[2]));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  int64_t expansion = block == ResNetBlock::basic ? BasicBlock::expansion : Bottleneck::expansion;
  fc = register_module("fc", std::make_shared<nn::Linear>(512 * expansion, options.num_classes));

  // torchvision's initialisation: kaiming_normal_(fan_out, relu) convolutions, BatchNorm 1 and 0
  // (BatchNorm2d's own), Linear as nn.Linear.
  for (const auto& m : modules()) {
    if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m))
      nn::init::kaiming_normal_(c->weight, 0, nn::init::FanMode::fan_out, nn::init::Nonlinearity::relu);
  }
  if (options.zero_init_residual) {
    for (const auto& m : modules()) {
      if (auto b = std::dynamic_pointer_cast<Bottleneck>(m)) nn::init::zeros_(b->bn3->weight);
      if (auto b = std::dynamic_pointer_cast<BasicBlock>(m)) nn::init::zeros_(b->bn2->weight);
    }
  }
}

std::shared_ptr<nn::Sequential> ResNet::make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride,
                                                   bool dilate) {
  int64_t expansion = block == ResNetBlock::basic ? BasicBlock::expansion : Bottleneck::expansion;
  int64_t previous_dilation = dilation_;
  if (dilate) {
    dilation_ *= stride;
    stride = 1;
  }
  std::shared_ptr<nn::Sequential> ds;
  if (stride != 1 || inplanes_ != planes * expansion)
    ds = std::make_shared<nn::Sequential>(conv1x1(inplanes_, planes * expansion, stride),
                                          std::make_shared<nn::BatchNorm2d>(planes * expansion));
  auto make = [&](int64_t inplanes, int64_t s, std::shared_ptr<nn::Sequential> down,
                  int64_t dil) -> std::shared_ptr<nn::Module> {
    if (block == ResNetBlock::basic)
      return std::make_shared<BasicBlock>(inplanes, planes, s, std::move(down), options.groups, options.width_per_group,
                                          dil);
    return std::make_shared<Bottleneck>(inplanes, planes, s, std::move(down), options.groups, options.width_per_group,
                                        dil);
  };
  auto layer = std::make_shared<nn::Sequential>();
  layer->push_back(make(inplanes_, stride, std::move(ds), previous_dilation));
  inplanes_ = planes * expansion;
  for (int64_t i = 1; i < blocks; ++i) layer->push_back(make(inplanes_, 1, nullptr, dilation_));
  return layer;
}

Tensor ResNet::features(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, "ResNet: expected input (N, 3, H, W), got ", x.sizes());
  x = (*maxpool)(relu((*bn1)((*conv1)(x))));
  x = (*layer4)((*layer3)((*layer2)((*layer1)(x))));
  return (*avgpool)(x).flatten(1);
}

Tensor ResNet::forward(Tensor x) { return (*fc)(features(std::move(x))); }

std::shared_ptr<ResNet> resnet18(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::array<int64_t, 4>{2, 2, 2, 2}, o);
}
std::shared_ptr<ResNet> resnet34(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::array<int64_t, 4>{3, 4, 6, 3}, o);
}
std::shared_ptr<ResNet> resnet50(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, o);
}
std::shared_ptr<ResNet> resnet101(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::array<int64_t, 4>{3, 4, 23, 3}, o);
}
std::shared_ptr<ResNet> resnet152(ResNetOptions o) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::array<int64_t, 4>{3, 8, 36, 3}, o);
}
std::shared_ptr<ResNet> resnext50_32x4d(ResNetOptions o) {
  o.groups = 32;
  o.width_per_group = 4;
  return resnet50(o);
}
std::shared_ptr<ResNet> wide_resnet50_2(ResNetOptions o) {
  o.width_per_group = 128;
  return resnet50(o);
}

}  // namespace nabla::vision
