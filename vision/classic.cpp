#include "vision/classic.h"

#include <regex>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::vision {

namespace {
using nn::init::FanMode;
using nn::init::Nonlinearity;

void check_image(const char* who, const Tensor& x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, who, ": expected input (N, 3, H, W), got ", x.sizes());
}
}  // namespace

// ---- VGG ------------------------------------------------------------------------------------------
VGG::VGG(const std::vector<int64_t>& cfg, bool batch_norm, VGGOptions o) {
  features = register_module("features", std::make_shared<nn::Sequential>());
  int64_t in = 3;
  for (int64_t v : cfg) {
    if (v == 0) {
      features->push_back(std::make_shared<nn::MaxPool2d>(2, nn::MaxPool2dOptions{.stride = 2}));
      continue;
    }
    features->push_back(std::make_shared<nn::Conv2d>(in, v, 3, nn::Conv2dOptions{.padding = 1}));
    if (batch_norm) features->push_back(std::make_shared<nn::BatchNorm2d>(v));
    features->push_back(std::make_shared<nn::ReLU>());
    in = v;
  }
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(7));
  classifier = register_module("classifier",
                               std::make_shared<nn::Sequential>(
                                   std::make_shared<nn::Linear>(512 * 7 * 7, 4096), std::make_shared<nn::ReLU>(),
                                   std::make_shared<nn::Dropout>(o.dropout), std::make_shared<nn::Linear>(4096, 4096),
                                   std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(o.dropout),
                                   std::make_shared<nn::Linear>(4096, o.num_classes)));
  if (o.init_weights) {
    for (const auto& m : modules()) {
      if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
        nn::init::kaiming_normal_(c->weight, 0, FanMode::fan_out, Nonlinearity::relu);
        nn::init::zeros_(c->bias);
      } else if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
        nn::init::normal_(l->weight, 0, 0.01);
        nn::init::zeros_(l->bias);
      }
    }
  }
}

Tensor VGG::forward(Tensor x) {
  check_image("VGG", x);
  return (*classifier)((*avgpool)((*features)(x)).flatten(1));
}

namespace {
const std::vector<int64_t> kA = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int64_t> kB = {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int64_t> kD = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
const std::vector<int64_t> kE = {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                 512, 512, 512, 512, 0,   512, 512, 512, 512, 0};
}  // namespace

std::shared_ptr<VGG> vgg11(VGGOptions o) { return std::make_shared<VGG>(kA, false, o); }
std::shared_ptr<VGG> vgg11_bn(VGGOptions o) { return std::make_shared<VGG>(kA, true, o); }
std::shared_ptr<VGG> vgg13(VGGOptions o) { return std::make_shared<VGG>(kB, false, o); }
std::shared_ptr<VGG> vgg13_bn(VGGOptions o) { return std::make_shared<VGG>(kB, true, o); }
std::shared_ptr<VGG> vgg16(VGGOptions o) { return std::make_shared<VGG>(kD, false, o); }
std::shared_ptr<VGG> vgg16_bn(VGGOptions o) { return std::make_shared<VGG>(kD, true, o); }
std::shared_ptr<VGG> vgg19(VGGOptions o) { return std::make_shared<VGG>(kE, false, o); }
std::shared_ptr<VGG> vgg19_bn(VGGOptions o) { return std::make_shared<VGG>(kE, true, o); }

// ---- AlexNet --------------------------------------------------------------------------------------
AlexNet::AlexNet(AlexNetOptions o) {
  auto conv = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t p) {
    return std::make_shared<nn::Conv2d>(in, out, k, nn::Conv2dOptions{.stride = s, .padding = p});
  };
  auto pool = [] { return std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2}); };
  auto relu = [] { return std::make_shared<nn::ReLU>(); };
  features = register_module("features", std::make_shared<nn::Sequential>(
                                             conv(3, 64, 11, 4, 2), relu(), pool(), conv(64, 192, 5, 1, 2), relu(),
                                             pool(), conv(192, 384, 3, 1, 1), relu(), conv(384, 256, 3, 1, 1), relu(),
                                             conv(256, 256, 3, 1, 1), relu(), pool()));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(6));
  classifier = register_module(
      "classifier", std::make_shared<nn::Sequential>(
                        std::make_shared<nn::Dropout>(o.dropout), std::make_shared<nn::Linear>(256 * 6 * 6, 4096),
                        relu(), std::make_shared<nn::Dropout>(o.dropout), std::make_shared<nn::Linear>(4096, 4096),
                        relu(), std::make_shared<nn::Linear>(4096, o.num_classes)));
}

Tensor AlexNet::forward(Tensor x) {
  check_image("AlexNet", x);
  return (*classifier)((*avgpool)((*features)(x)).flatten(1));
}

std::shared_ptr<AlexNet> alexnet(AlexNetOptions o) { return std::make_shared<AlexNet>(o); }

// ---- SqueezeNet -----------------------------------------------------------------------------------
Fire::Fire(int64_t inplanes, int64_t sq, int64_t e1, int64_t e3) {
  squeeze = register_module("squeeze", std::make_shared<nn::Conv2d>(inplanes, sq, 1));
  register_module("squeeze_activation", std::make_shared<nn::ReLU>());
  expand1x1 = register_module("expand1x1", std::make_shared<nn::Conv2d>(sq, e1, 1));
  register_module("expand1x1_activation", std::make_shared<nn::ReLU>());
  expand3x3 = register_module("expand3x3", std::make_shared<nn::Conv2d>(sq, e3, 3, nn::Conv2dOptions{.padding = 1}));
  register_module("expand3x3_activation", std::make_shared<nn::ReLU>());
}

Tensor Fire::forward(Tensor x) {
  x = relu((*squeeze)(x));
  return cat({relu((*expand1x1)(x)), relu((*expand3x3)(x))}, 1);
}

SqueezeNet::SqueezeNet(const std::string& version, SqueezeNetOptions o) {
  auto pool = [] { return std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .ceil_mode = true}); };
  auto fire = [](int64_t a, int64_t b, int64_t c, int64_t d) { return std::make_shared<Fire>(a, b, c, d); };
  auto relu = [] { return std::make_shared<nn::ReLU>(); };
  if (version == "1_0") {
    features = register_module(
        "features", std::make_shared<nn::Sequential>(
                        std::make_shared<nn::Conv2d>(3, 96, 7, nn::Conv2dOptions{.stride = 2}), relu(), pool(),
                        fire(96, 16, 64, 64), fire(128, 16, 64, 64), fire(128, 32, 128, 128), pool(),
                        fire(256, 32, 128, 128), fire(256, 48, 192, 192), fire(384, 48, 192, 192),
                        fire(384, 64, 256, 256), pool(), fire(512, 64, 256, 256)));
  } else if (version == "1_1") {
    features = register_module(
        "features", std::make_shared<nn::Sequential>(
                        std::make_shared<nn::Conv2d>(3, 64, 3, nn::Conv2dOptions{.stride = 2}), relu(), pool(),
                        fire(64, 16, 64, 64), fire(128, 16, 64, 64), pool(), fire(128, 32, 128, 128),
                        fire(256, 32, 128, 128), pool(), fire(256, 48, 192, 192), fire(384, 48, 192, 192),
                        fire(384, 64, 256, 256), fire(512, 64, 256, 256)));
  } else {
    throw ValueError("SqueezeNet: unsupported version '" + version + "': 1_0 or 1_1 expected");
  }
  auto final_conv = std::make_shared<nn::Conv2d>(512, o.num_classes, 1);
  classifier = register_module(
      "classifier", std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(o.dropout), final_conv, relu(),
                                                     std::make_shared<nn::AdaptiveAvgPool2d>(1)));
  for (const auto& m : modules()) {
    if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) {
      if (c == final_conv) nn::init::normal_(c->weight, 0, 0.01);
      else nn::init::kaiming_uniform_(c->weight);
      nn::init::zeros_(c->bias);
    }
  }
}

Tensor SqueezeNet::forward(Tensor x) {
  check_image("SqueezeNet", x);
  return (*classifier)((*features)(x)).flatten(1);
}

std::shared_ptr<SqueezeNet> squeezenet1_0(SqueezeNetOptions o) { return std::make_shared<SqueezeNet>("1_0", o); }
std::shared_ptr<SqueezeNet> squeezenet1_1(SqueezeNetOptions o) { return std::make_shared<SqueezeNet>("1_1", o); }

// ---- DenseNet -------------------------------------------------------------------------------------
DenseLayer::DenseLayer(int64_t in, int64_t growth_rate, int64_t bn_size, double drop_rate_) : drop_rate(drop_rate_) {
  norm1 = register_module("norm1", std::make_shared<nn::BatchNorm2d>(in));
  register_module("relu1", std::make_shared<nn::ReLU>());
  conv1 = register_module("conv1",
                          std::make_shared<nn::Conv2d>(in, bn_size * growth_rate, 1, nn::Conv2dOptions{.bias = false}));
  norm2 = register_module("norm2", std::make_shared<nn::BatchNorm2d>(bn_size * growth_rate));
  register_module("relu2", std::make_shared<nn::ReLU>());
  conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(bn_size * growth_rate, growth_rate, 3,
                                                                nn::Conv2dOptions{.padding = 1, .bias = false}));
}

Tensor DenseLayer::forward(Tensor x) {
  Tensor bottleneck = (*conv1)(relu((*norm1)(x)));
  Tensor out = (*conv2)(relu((*norm2)(bottleneck)));
  if (drop_rate > 0) out = nn::functional::dropout(out, drop_rate, is_training());
  return out;
}

DenseBlock::DenseBlock(int64_t num_layers, int64_t in, int64_t bn_size, int64_t growth_rate, double drop_rate) {
  for (int64_t i = 0; i < num_layers; ++i)
    layers.push_back(
        register_module("denselayer" + std::to_string(i + 1),
                        std::make_shared<DenseLayer>(in + i * growth_rate, growth_rate, bn_size, drop_rate)));
}

Tensor DenseBlock::forward(Tensor x) {
  std::vector<Tensor> features = {x};
  for (const auto& layer : layers) features.push_back((*layer)(features.size() == 1 ? x : cat(features, 1)));
  return cat(features, 1);
}

DenseNet::DenseNet(DenseNetOptions o) {
  nn::OrderedDict<std::shared_ptr<nn::Module>> f;
  f.insert("conv0", std::make_shared<nn::Conv2d>(3, o.num_init_features, 7,
                                                 nn::Conv2dOptions{.stride = 2, .padding = 3, .bias = false}));
  f.insert("norm0", std::make_shared<nn::BatchNorm2d>(o.num_init_features));
  f.insert("relu0", std::make_shared<nn::ReLU>());
  f.insert("pool0", std::make_shared<nn::MaxPool2d>(3, nn::MaxPool2dOptions{.stride = 2, .padding = 1}));
  int64_t n = o.num_init_features;
  for (size_t i = 0; i < o.block_config.size(); ++i) {
    f.insert("denseblock" + std::to_string(i + 1),
             std::make_shared<DenseBlock>(o.block_config[i], n, o.bn_size, o.growth_rate, o.drop_rate));
    n += o.block_config[i] * o.growth_rate;
    if (i + 1 != o.block_config.size()) {
      nn::OrderedDict<std::shared_ptr<nn::Module>> t;  // torchvision's _Transition
      t.insert("norm", std::make_shared<nn::BatchNorm2d>(n));
      t.insert("relu", std::make_shared<nn::ReLU>());
      t.insert("conv", std::make_shared<nn::Conv2d>(n, n / 2, 1, nn::Conv2dOptions{.bias = false}));
      t.insert("pool", std::make_shared<nn::AvgPool2d>(2, nn::AvgPool2dOptions{.stride = 2}));
      f.insert("transition" + std::to_string(i + 1), std::make_shared<nn::Sequential>(t));
      n /= 2;
    }
  }
  f.insert("norm5", std::make_shared<nn::BatchNorm2d>(n));
  features = register_module("features", std::make_shared<nn::Sequential>(f));
  auto fc = std::make_shared<nn::Linear>(n, o.num_classes);
  classifier = register_module("classifier", fc);
  for (const auto& m : modules())
    if (auto c = std::dynamic_pointer_cast<nn::Conv2d>(m)) nn::init::kaiming_normal_(c->weight);
  nn::init::zeros_(fc->bias);
}

Tensor DenseNet::forward(Tensor x) {
  check_image("DenseNet", x);
  Tensor out = relu((*features)(x));
  return (*classifier)(adaptive_avg_pool2d(out, {1, 1}).flatten(1));
}

std::shared_ptr<DenseNet> densenet121(DenseNetOptions o) { return std::make_shared<DenseNet>(o); }

nn::StateDict rename_legacy_densenet_keys(const nn::StateDict& state) {
  // torchvision: r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$"
  static const std::regex pattern(
      R"(^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$)");
  nn::StateDict out;
  for (const auto& [k, v] : state) {
    std::smatch m;
    if (std::regex_match(k, m, pattern)) out.insert(m[1].str() + m[2].str(), v);
    else out.insert(k, v);
  }
  return out;
}

}  // namespace nabla::vision
