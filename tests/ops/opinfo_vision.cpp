// Registry entries for the model zoo's building blocks (nn/models/layers.h; see opinfo.h): each is
// called as a module whose parameters are replaced by the sample's inputs, so gradcheck
// differentiates through its forward, and its PyTorch twin is written with torch.nn.functional
// (the differential suite's Python need not have torchvision).
#include <gtest/gtest.h>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;

// ViT's EncoderBlock with 2 heads, in eval mode. x: the input (N, L, E) alone (parameters from the
// seeded generator: small enough for gradgradcheck), or with the 12 parameters in state-dict order:
// ln_1 weight/bias, in_proj_weight (3E, E), in_proj_bias, out_proj weight/bias, ln_2 weight/bias,
// mlp.0 weight (M, E)/bias, mlp.3 weight (E, M)/bias.
Outputs vit_encoder_block(I x) {
  manual_seed(23);
  const int64_t e = x[0].size(-1), m = x.size() > 1 ? x[9].size(0) : 3;
  vision::EncoderBlock b(2, e, m, 0.0, 0.0);
  b.eval();
  b.to(x[0].device(), x[0].dtype());
  if (x.size() > 1) {
    b.ln_1->weight = x[1];
    b.ln_1->bias = x[2];
    b.self_attention->in_proj_weight = x[3];
    b.self_attention->in_proj_bias = x[4];
    b.self_attention->out_proj->weight = x[5];
    b.self_attention->out_proj->bias = x[6];
    b.ln_2->weight = x[7];
    b.ln_2->bias = x[8];
    b.mlp->at<nn::Linear>(0)->weight = x[9];
    b.mlp->at<nn::Linear>(0)->bias = x[10];
    b.mlp->at<nn::Linear>(3)->weight = x[11];
    b.mlp->at<nn::Linear>(3)->bias = x[12];
  }
  return Outputs{b(x[0])};
}

// Swin's shifted_window_attention on x (B, H, W, C) with qkv_weight (3C, C), proj_weight (C, C),
// relative_position_bias (1, heads, L, L), qkv_bias (3C), proj_bias (C): heads from the bias's
// shape; window [2, 2] and shift [1, 1] when L is 4, else window [2, 1] and shift [1, 0]
// (twins.py's shifted_window_attention chooses the same).
Outputs swin_attention(I x) {
  const int64_t len = x[3].size(-1);
  std::vector<int64_t> window = len == 4 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{2, 1};
  std::vector<int64_t> shift = len == 4 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{1, 0};
  return Outputs{
      vision::shifted_window_attention(x[0], x[1], x[2], x[3], window, x[3].size(1), shift, 0.0, 0.0, x[4], x[5])};
}

std::vector<ArgSpec> vit_block_params(int64_t e, int64_t m) {
  return {arg({e}, 0.5, 1.5), arg({e}), arg({3 * e, e}), arg({3 * e}), arg({e, e}), arg({e}),
          arg({e}, 0.5, 1.5), arg({e}), arg({m, e}),     arg({m}),     arg({e, m}), arg({e})};
}

std::vector<ArgSpec> with_input(ArgSpec x, std::vector<ArgSpec> rest) {
  rest.insert(rest.begin(), std::move(x));
  return rest;
}

std::vector<OpInfo> vision_ops() {
  std::vector<OpInfo> ops;
  // x (N, C, H, W), fc1 weight (S, C, 1, 1) and bias (S), fc2 weight (C, S, 1, 1) and bias (C).
  ops.push_back(
      {.name = "vision.SqueezeExcitation",
       .torch =
           "x[0] * torch.sigmoid(F.conv2d(F.relu(F.conv2d(F.adaptive_avg_pool2d(x[0], 1), x[1], x[2])), x[3], x[4]))",
       .fn =
           [](I x) {
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
  ops.push_back(
      {.name = "vision.SqueezeExcitation_hard",
       .torch =
           "x[0] * F.hardsigmoid(F.conv2d(F.relu(F.conv2d(F.adaptive_avg_pool2d(x[0], 1), x[1], x[2])), x[3], x[4]))",
       .fn =
           [](I x) {
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
                 .fn =
                     [](I x) {
                       vision::Conv2dNormActivation m(x[0].size(1), x[1].size(0),
                                                      {.activation_layer = vision::activation<nn::ReLU6>()});
                       m.to(x[0].device(), x[0].dtype());  // batch norm's running statistics
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
                 .fn =
                     [](I x) {
                       int64_t c = x[0].size(1);
                       vision::Conv2dNormActivation m(c, c,
                                                      {.stride = 2,
                                                       .groups = c,
                                                       .norm_layer = nullptr,
                                                       .activation_layer = vision::activation<nn::Hardswish>()});
                       m.at<nn::Conv2d>(0)->weight = x[1];
                       m.at<nn::Conv2d>(0)->bias = x[2];
                       return Outputs{m(x[0])};
                     },
                 .samples = {{{arg({1, 2, 4, 4}), arg({2, 1, 3, 3}), arg({2})}, "small"},
                             {{arg({1, 2, 3, 3}), arg({2, 1, 3, 3}), arg({2})}, "tiny"}}});
  ops.push_back(
      {.name = "vision.ChannelShuffle",
       // torchvision's channel_shuffle (PyTorch 1.13's F.channel_shuffle has no derivative)
       .torch =
           "x[0].reshape(x[0].shape[0], 3, x[0].shape[1] // 3, *x[0].shape[2:]).transpose(1, 2).reshape(x[0].shape)",
       .fn = [](I x) { return Outputs{vision::ChannelShuffle(3)(x[0])}; },
       .samples = {{{arg({2, 6, 2, 1})}, "small"}, {{arg({1, 3, 1, 2})}, "one_per_group"}}});
  // Training mode draws a mask from nabla's generator (seeded here, so gradcheck sees one function);
  // evaluation mode is the identity, which the twin checks.
  ops.push_back(
      {.name = "vision.StochasticDepth",
       .no_torch =
           "random: nabla's generator draws other masks than PyTorch's (the registry checks the mask's gradient)",
       .fn =
           [](I x) {
             manual_seed(77);
             vision::StochasticDepth row(0.5, "row"), batch(0.3, "batch");
             return Outputs{row(x[0]), batch(x[0])};
           },
       .samples = {{{arg({4, 2, 2, 1})}, "4d"}, {{arg({3, 2})}, "2d"}}});
  ops.push_back({.name = "vision.StochasticDepth_eval",
                 .torch = "x[0]",
                 .fn =
                     [](I x) {
                       vision::StochasticDepth m(0.5);
                       m.eval();
                       return Outputs{m(x[0])};
                     },
                 .samples = {{{arg({2, 3, 2, 2})}, "4d"}}});
  ops.push_back(
      {.name = "vision.LayerNorm2d",
       .torch = "F.layer_norm(x[0].permute(0, 2, 3, 1), (x[0].shape[1],), x[1], x[2], 1e-6).permute(0, 3, 1, 2)",
       .fn =
           [](I x) {
             vision::LayerNorm2d m(x[0].size(1), {.eps = 1e-6});
             m.weight = x[1];
             m.bias = x[2];
             return Outputs{m(x[0])};
           },
       .samples = {{{arg({2, 3, 2, 2}), arg({3}), arg({3})}, "small"},
                   {{arg({1, 4, 1, 3}), arg({4}), arg({4})}, "wide"}}});
  ops.push_back({.name = "vision.Permute",
                 .torch = "x[0].permute(0, 2, 3, 1)",
                 .fn =
                     [](I x) {
                       return Outputs{vision::Permute({0, 2, 3, 1})(x[0])};
                     },
                 .samples = {{{arg({2, 3, 2, 1})}, "4d"}}});
  ops.push_back({.name = "vision.MLPBlock",
                 .torch = "F.linear(F.gelu(F.linear(x[0], x[1], x[2])), x[3], x[4])",
                 .fn =
                     [](I x) {
                       vision::MLPBlock m(x[0].size(-1), x[1].size(0), 0.0);
                       m.at<nn::Linear>(0)->weight = x[1];
                       m.at<nn::Linear>(0)->bias = x[2];
                       m.at<nn::Linear>(3)->weight = x[3];
                       m.at<nn::Linear>(3)->bias = x[4];
                       return Outputs{m(x[0])};
                     },
                 .samples = {{{arg({2, 3}), arg({4, 3}), arg({4}), arg({3, 4}), arg({3})}, "2d"},
                             {{arg({2, 2, 3}), arg({5, 3}), arg({5}), arg({3, 5}), arg({3})}, "3d"}}});
  ops.push_back({.name = "vision.EncoderBlock",
                 .torch = "T.vit_encoder_block(x)",
                 .fn = vit_encoder_block,
                 .samples = {{{arg({1, 3, 4})}, "small"},
                             {with_input(arg({2, 3, 4}), vit_block_params(4, 6)), "all_parameters"},
                             {with_input(arg({1, 5, 2}), vit_block_params(2, 3)), "head_dim_1"}}});
  ops.push_back(
      {.name = "vision.shifted_window_attention",
       .torch = "T.shifted_window_attention(x)",
       .fn = swin_attention,
       // 3x3 padded to 4x4 (windows 2x2, shifted by 1 both ways), 2 heads of 1 channel
       .samples = {
           {{arg({1, 3, 3, 2}), arg({6, 2}), arg({2, 2}), arg({1, 2, 4, 4}), arg({6}), arg({2})}, "padded_shifted"},
           // 4x2 with windows 2x2 (no padding), shifted, batch 2
           {{arg({2, 4, 2, 2}), arg({6, 2}), arg({2, 2}), arg({1, 2, 4, 4}), arg({6}), arg({2})}, "batch2"},
           // 3x1 in windows 2x1, shifted in H only: small enough for gradgradcheck
           {{arg({1, 3, 1, 2}), arg({6, 2}), arg({2, 2}), arg({1, 1, 2, 2}), arg({6}), arg({2})}, "small"}}});
  // The module: the bias table's rows picked by relative_position_index (an embedding-like gather).
  ops.push_back(
      {.name = "vision.ShiftedWindowAttention",
       .torch = "T.shifted_window_attention_module(x)",
       .fn =
           [](I x) {
             vision::ShiftedWindowAttention m(x[0].size(-1), {2, 2}, {1, 1}, x[5].size(1));
             m.to(x[0].device(), x[0].dtype());  // relative_position_index
             m.qkv->weight = x[1];
             m.qkv->bias = x[2];
             m.proj->weight = x[3];
             m.proj->bias = x[4];
             m.relative_position_bias_table = x[5];
             return Outputs{m(x[0])};
           },
       .samples = {{{arg({1, 5, 3, 2}), arg({6, 2}), arg({6}), arg({2, 2}), arg({2}), arg({9, 2})}, "padded_shifted"},
                   {{arg({1, 3, 3, 1}), arg({3, 1}), arg({3}), arg({1, 1}), arg({1}), arg({9, 1})}, "one_channel"}}});
  ops.push_back({.name = "vision.PatchMerging",
                 .torch = "T.patch_merging(x)",
                 .fn =
                     [](I x) {
                       vision::PatchMerging m(x[0].size(-1));
                       m.norm->weight = x[1];
                       m.norm->bias = x[2];
                       m.reduction->weight = x[3];
                       return Outputs{m(x[0])};
                     },
                 .samples = {{{arg({1, 3, 3, 2}), arg({8}, 0.5, 1.5), arg({8}), arg({4, 8})}, "odd_padded"},
                             {{arg({2, 2, 4, 1}), arg({4}, 0.5, 1.5), arg({4}), arg({2, 4})}, "even_batch2"}}});
  // Parameters from the seeded generator (the parts have twins above; tests/vision/ compares
  // whole models with torchvision).
  ops.push_back({.name = "vision.SwinTransformerBlock",
                 .no_torch =
                     "its parameters come from nabla's generator; vision.shifted_window_attention, vision.MLPBlock and "
                     "tests/vision/ (swin_t against torchvision) cover it with PyTorch",
                 .fn =
                     [](I x) {
                       manual_seed(29);
                       vision::SwinTransformerBlock b(x[0].size(-1), 2, {2, 2}, {1, 1});
                       b.to(x[0].device(), x[0].dtype());
                       return Outputs{b(x[0])};
                     },
                 .samples = {{{arg({1, 3, 3, 4})}, "padded_shifted"}, {{arg({1, 2, 2, 2})}, "one_window"}}});
  return ops;
}

Registrar vision_registrar(vision_ops());

}  // namespace
}  // namespace nabla::testing
