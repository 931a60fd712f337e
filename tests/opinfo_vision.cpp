// Registry entries for the model zoo's building blocks (nn/models/layers.h; see opinfo.h): each is
// called as a module whose parameters are replaced by the sample's inputs, so gradcheck
// differentiates through its forward, and its PyTorch twin is written with torch.nn.functional
// (the differential suite's Python need not have torchvision).
#include <gtest/gtest.h>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;

std::vector<OpInfo> vision_ops() {
  std::vector<OpInfo> ops;
  // x (N, C, H, W), fc1 weight (S, C, 1, 1) and bias (S), fc2 weight (C, S, 1, 1) and bias (C).
  ops.push_back({.name = "vision.SqueezeExcitation",
                 .torch = "x[0] * torch.sigmoid(F.conv2d(F.relu(F.conv2d(F.adaptive_avg_pool2d(x[0], 1), x[1], x[2])), x[3], x[4]))",
                 .fn = [](I x) {
                   vision::SqueezeExcitation m(x[0].size(1), x[1].size(0));
                   m.fc1->weight = x[1];
                   m.fc1->bias = x[2];
                   m.fc2->weight = x[3];
                   m.fc2->bias = x[4];
                   return Outputs{m(x[0])};
                 },
                 .samples = {{{arg({2, 3, 2, 2}), arg({2, 3, 1, 1}), arg({2}), arg({3, 2, 1, 1}), arg({3})}, "small"},
                             {{arg({1, 4, 3, 2}), arg({2, 4, 1, 1}), arg({2}), arg({4, 2, 1, 1}), arg({4})}, "batch1"},
                             {{arg({1, 2, 2, 2}), arg({1, 2, 1, 1}), arg({1}), arg({2, 1, 1, 1}), arg({2})}, "tiny"}}});
  ops.push_back({.name = "vision.SqueezeExcitation_hard",
                 .torch = "x[0] * F.hardsigmoid(F.conv2d(F.relu(F.conv2d(F.adaptive_avg_pool2d(x[0], 1), x[1], x[2])), x[3], x[4]))",
                 .fn = [](I x) {
                   vision::SqueezeExcitation m(x[0].size(1), x[1].size(0), vision::activation<nn::ReLU>(),
                                               vision::activation<nn::Hardsigmoid>());
                   m.fc1->weight = x[1];
                   m.fc1->bias = x[2];
                   m.fc2->weight = x[3];
                   m.fc2->bias = x[4];
                   return Outputs{m(x[0])};
                 },
                 .samples = {{{arg({2, 3, 2, 2}), arg({2, 3, 1, 1}), arg({2}), arg({3, 2, 1, 1}), arg({3})}, "small"},
                             {{arg({1, 2, 2, 2}), arg({1, 2, 1, 1}), arg({1}), arg({2, 1, 1, 1}), arg({2})}, "tiny"}}});
  // Conv2d (3x3, "same" padding, no bias), BatchNorm2d in training mode, ReLU6.
  ops.push_back({.name = "vision.Conv2dNormActivation",
                 .torch = "F.relu6(F.batch_norm(F.conv2d(x[0], x[1], None, 1, 1), None, None, x[2], x[3], True))",
                 .fn = [](I x) {
                   vision::Conv2dNormActivation m(x[0].size(1), x[1].size(0),
                                                  {.activation_layer = vision::activation<nn::ReLU6>()});
                   m.at<nn::Conv2d>(0)->weight = x[1];
                   auto bn = m.at<nn::BatchNorm2d>(1);
                   bn->weight = x[2];
                   bn->bias = x[3];
                   return Outputs{m(x[0])};
                 },
                 .samples = {{{arg({2, 2, 3, 3}), arg({3, 2, 3, 3}), arg({3}, 0.5, 1.5), arg({3})}, "small"},
                             {{arg({2, 1, 2, 2}), arg({2, 1, 3, 3}), arg({2}, 0.5, 1.5), arg({2})}, "tiny"}}});
  // Depthwise, stride 2, no normalization (so the convolution has a bias), Hardswish.
  ops.push_back({.name = "vision.Conv2dNormActivation_depthwise",
                 .torch = "F.hardswish(F.conv2d(x[0], x[1], x[2], 2, 1, 1, x[0].shape[1]))",
                 .fn = [](I x) {
                   int64_t c = x[0].size(1);
                   vision::Conv2dNormActivation m(c, c, {.stride = 2, .groups = c, .norm_layer = nullptr,
                                                         .activation_layer = vision::activation<nn::Hardswish>()});
                   m.at<nn::Conv2d>(0)->weight = x[1];
                   m.at<nn::Conv2d>(0)->bias = x[2];
                   return Outputs{m(x[0])};
                 },
                 .samples = {{{arg({1, 2, 4, 4}), arg({2, 1, 3, 3}), arg({2})}, "small"},
                             {{arg({1, 2, 3, 3}), arg({2, 1, 3, 3}), arg({2})}, "tiny"}}});
  ops.push_back({.name = "vision.ChannelShuffle",
                 // torchvision's channel_shuffle (PyTorch 1.13's F.channel_shuffle has no derivative)
                 .torch = "x[0].reshape(x[0].shape[0], 3, x[0].shape[1] // 3, *x[0].shape[2:]).transpose(1, 2).reshape(x[0].shape)",
                 .fn = [](I x) { return Outputs{vision::ChannelShuffle(3)(x[0])}; },
                 .samples = {{{arg({2, 6, 2, 1})}, "small"}, {{arg({1, 3, 1, 2})}, "one_per_group"}}});
  // Training mode draws a mask from nabla's generator (seeded here, so gradcheck sees one function);
  // evaluation mode is the identity, which the twin checks.
  ops.push_back({.name = "vision.StochasticDepth",
                 .no_torch = "random: nabla's generator draws other masks than PyTorch's (the registry checks the mask's gradient)",
                 .fn = [](I x) {
                   manual_seed(77);
                   vision::StochasticDepth row(0.5, "row"), batch(0.3, "batch");
                   return Outputs{row(x[0]), batch(x[0])};
                 },
                 .samples = {{{arg({4, 2, 2, 1})}, "4d"}, {{arg({3, 2})}, "2d"}}});
  ops.push_back({.name = "vision.StochasticDepth_eval", .torch = "x[0]",
                 .fn = [](I x) {
                   vision::StochasticDepth m(0.5);
                   m.eval();
                   return Outputs{m(x[0])};
                 },
                 .samples = {{{arg({2, 3, 2, 2})}, "4d"}}});
  ops.push_back({.name = "vision.LayerNorm2d", .torch = "F.layer_norm(x[0].permute(0, 2, 3, 1), (x[0].shape[1],), x[1], x[2], 1e-6).permute(0, 3, 1, 2)",
                 .fn = [](I x) {
                   vision::LayerNorm2d m(x[0].size(1), {.eps = 1e-6});
                   m.weight = x[1];
                   m.bias = x[2];
                   return Outputs{m(x[0])};
                 },
                 .samples = {{{arg({2, 3, 2, 2}), arg({3}), arg({3})}, "small"}, {{arg({1, 4, 1, 3}), arg({4}), arg({4})}, "wide"}}});
  ops.push_back({.name = "vision.Permute", .torch = "x[0].permute(0, 2, 3, 1)",
                 .fn = [](I x) { return Outputs{vision::Permute({0, 2, 3, 1})(x[0])}; },
                 .samples = {{{arg({2, 3, 2, 1})}, "4d"}}});
  return ops;
}

Registrar vision_registrar(vision_ops());

// Every building block of the zoo has float64 gradcheck samples.
TEST(OpRegistry, every_vision_layer_is_registered) {
  std::string missing;
  for (const char* n : {"vision.SqueezeExcitation", "vision.Conv2dNormActivation", "vision.ChannelShuffle", "vision.StochasticDepth",
                        "vision.LayerNorm2d", "vision.Permute"}) {
    const OpInfo* op = find_op(n);
    if (!op || op->samples.empty() || !op->differentiable) missing += std::string(" ") + n;
  }
  EXPECT_TRUE(missing.empty()) << "vision layers without gradcheck samples:" << missing;
}

}  // namespace
}  // namespace nabla::testing
