// Building blocks of the zoo's architectures, as torchvision.ops.misc has them: ordinary nn
// modules (registered in tests/ops/opinfo_vision.cpp with gradchecks and PyTorch twins), usable on
// their own.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../nn/activation.h"
#include "../nn/container.h"
#include "../nn/conv.h"
#include "../nn/normalization.h"
#include "../nn/pooling.h"

namespace nabla::vision {

// Makes a normalization layer for a number of channels (torchvision's norm_layer callables).
using NormFactory = std::function<std::shared_ptr<nn::Module>(int64_t channels)>;
// Makes an activation layer (torchvision's activation_layer callables).
using ActivationFactory = std::function<std::shared_ptr<nn::Module>()>;

// BatchNorm2d with the given options (torchvision's partial(nn.BatchNorm2d, eps=..., momentum=...)).
NormFactory batch_norm2d(nn::BatchNormOptions options = {});
template <class M>
ActivationFactory activation() {
  return [] { return std::make_shared<M>(); };
}

struct Conv2dNormActivationOptions {
  int64_t kernel_size = 3, stride = 1;
  std::optional<int64_t> padding{};  // default (kernel_size - 1) / 2 * dilation: "same" for odd kernels at stride 1
  int64_t groups = 1;
  NormFactory norm_layer = batch_norm2d();                      // null: no normalization
  ActivationFactory activation_layer = activation<nn::ReLU>();  // null: no activation
  int64_t dilation = 1;
  std::optional<bool> bias{};  // default: a bias only when there is no normalization
};

// torchvision.ops.Conv2dNormActivation: a Sequential of Conv2d ("0"), the normalization ("1") and
// the activation (next index), so its state dict names are torchvision's.
class Conv2dNormActivation : public nn::Sequential {
 public:
  Conv2dNormActivation(int64_t in_channels, int64_t out_channels, Conv2dNormActivationOptions options = {});
  int64_t out_channels;
};

// torchvision.ops.SqueezeExcitation: x * scale_activation(fc2(activation(fc1(avgpool(x))))), with
// fc1/fc2 1x1 convolutions (input_channels -> squeeze_channels -> input_channels). x: (N, C, H, W).
class SqueezeExcitation : public nn::Module {
 public:
  SqueezeExcitation(int64_t input_channels, int64_t squeeze_channels,
                    ActivationFactory activation = vision::activation<nn::ReLU>(),
                    ActivationFactory scale_activation = vision::activation<nn::Sigmoid>());
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Conv2d> fc1, fc2;
  std::shared_ptr<nn::Module> activation, scale_activation;
};

// torchvision.ops.StochasticDepth: in training, zeroes the whole residual branch with probability p
// per sample ("row") or for the whole batch ("batch"), scaling what survives by 1 / (1 - p);
// the identity in evaluation or when p is 0. The draws come from nabla's default generator (so they
// differ from PyTorch's for the same seed).
class StochasticDepth : public nn::Module {
 public:
  explicit StochasticDepth(double p, std::string mode = "row");
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  double p;
  std::string mode;
};
Tensor stochastic_depth(const Tensor& x, double p, const std::string& mode, bool training);

// ShuffleNet's channel shuffle: x (N, C, H, W) viewed as (N, groups, C / groups, H, W), the two
// channel dims transposed, flattened back (nn.ChannelShuffle in PyTorch).
class ChannelShuffle : public nn::Module {
 public:
  explicit ChannelShuffle(int64_t groups) : groups(groups) {}
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override { return "groups=" + std::to_string(groups); }
  int64_t groups;
};
Tensor channel_shuffle(const Tensor& x, int64_t groups);

// torchvision.ops.Permute: x.permute(dims).
class Permute : public nn::Module {
 public:
  explicit Permute(std::vector<int64_t> dims) : dims(std::move(dims)) {}
  Tensor forward(Tensor x) override { return x.permute(dims); }
  std::vector<int64_t> dims;
};

// ConvNeXt's LayerNorm2d: LayerNorm over the channels of x (N, C, H, W) (permuted to channels
// last, normalized, permuted back). Parameters weight and bias (C), as nn::LayerNorm({C}).
class LayerNorm2d : public nn::LayerNorm {
 public:
  explicit LayerNorm2d(int64_t channels, nn::LayerNormOptions options = {}) : nn::LayerNorm({channels}, options) {}
  Tensor forward(Tensor x) override;
};

// torchvision.ops.MLP: a Sequential of, for each hidden size but the last, Linear, activation and
// Dropout, then Linear to the last size and Dropout (children "0", "1", ...: ViT's and Swin's
// mlp.0 and mlp.3). No norm_layer (none of the zoo's models uses one).
class MLP : public nn::Sequential {
 public:
  MLP(int64_t in_channels, const std::vector<int64_t>& hidden_channels,
      ActivationFactory activation_layer = activation<nn::ReLU>(), double dropout = 0.0, bool bias = true);
};

// torchvision's _make_divisible: v rounded to the nearest multiple of divisor (at least min_value,
// default divisor), never more than 10% below v.
int64_t make_divisible(double v, int64_t divisor, std::optional<int64_t> min_value = std::nullopt);

}  // namespace nabla::vision
