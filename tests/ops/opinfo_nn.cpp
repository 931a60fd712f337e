// Registry entries for nn's layers and losses (see opinfo.h): every layer with parameters is
// called as a module whose parameter members are replaced by the sample's inputs, so gradcheck
// differentiates through Module::forward with respect to input, weight and bias.
#include <gtest/gtest.h>

#include <set>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;
namespace F = nn::functional;
using nn::Reduction;

Outputs one(Tensor t) { return {std::move(t)}; }
Outputs reductions(const std::function<Tensor(Reduction)>& f) {
  return {f(Reduction::mean), f(Reduction::sum), f(Reduction::none)};
}

// ---- layers with parameters -------------------------------------------------------------------------
std::vector<OpInfo> layer_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "nn.Linear",
                 .ops = {OpId::linear},
                 .torch = "F.linear(x[0], x[1], x[2])",
                 .fn =
                     [](I x) {
                       nn::Linear m(x[1].size(1), x[1].size(0));
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({3, 4}), arg({2, 4}), arg({2})}, "2d"},
                             {{arg({2, 3, 4}), arg({2, 4}), arg({2})}, "3d"},
                             {{arg_t({4, 3}), arg_t({2, 3}), arg({2})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.Bilinear",
                 .ops = {OpId::bilinear},
                 .torch = "F.bilinear(x[0], x[1], x[2], x[3])",
                 .fn =
                     [](I x) {
                       nn::Bilinear m(x[2].size(1), x[2].size(2), x[2].size(0));
                       m.weight = x[2];
                       m.bias = x[3];
                       return one(m(x[0], x[1]));
                     },
                 .samples = {{{arg({3, 2}), arg({3, 4}), arg({2, 2, 4}), arg({2})}, "2d"},
                             {{arg({2, 2, 3}), arg({2, 2, 2}), arg({3, 3, 2}), arg({3})}, "3d"}}});
  ops.push_back({.name = "nn.Conv1d",
                 .ops = {OpId::conv1d},
                 .torch = "F.conv1d(x[0], x[1], x[2], stride=2, padding=1, groups=2)",
                 .fn =
                     [](I x) {
                       nn::Conv1d m(4, 2, 3, {.stride = 2, .padding = 1, .groups = 2});
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({2, 4, 7}), arg({2, 2, 3}), arg({2})}, "stride_pad_groups"},
                             {{arg({1, 4, 5}), arg({2, 2, 3}), arg({2})}, "small"},
                             {{arg_t({4, 3}), arg({2, 2, 3}), arg({2})}, "small_unbatched"}}});
  ops.push_back({.name = "nn.Conv2d",
                 .ops = {OpId::conv2d},
                 .torch = "F.conv2d(x[0], x[1], x[2], stride=(2, 1), padding=1, dilation=(1, 2), groups=x[0].shape[-3] "
                          "// x[1].shape[1])",
                 .fn =
                     [](I x) {
                       // Channels, groups and kernel size follow the sample's shapes:
                       // x (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW).
                       int64_t c_in = x[0].size(-3), groups = c_in / x[1].size(1);
                       nn::Conv2d m(c_in, x[1].size(0), {x[1].size(2), x[1].size(3)},
                                    {.stride = {2, 1}, .padding = 1, .dilation = {1, 2}, .groups = groups});
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({2, 2, 5, 5}), arg({3, 2, 3, 2}), arg({3})}, "stride_pad_dilation"},
                             {{arg({2, 5, 4}), arg({3, 2, 3, 2}), arg({3})}, "unbatched"},
                             {{arg({1, 1, 4, 4}), arg({2, 1, 3, 2}), arg({2})}, "small"},
                             {{arg({1, 2, 3, 3}), arg({2, 1, 3, 2}), arg({2})}, "small_groups2"}}});
  ops.push_back({.name = "nn.Conv3d",
                 .ops = {OpId::conv3d},
                 .torch = "F.conv3d(x[0], x[1], x[2], stride=(1, 2, 1), padding=1, dilation=(2, 1, 1), groups=2)",
                 .fn =
                     [](I x) {
                       nn::Conv3d m(x[0].size(-4), x[1].size(0), {x[1].size(2), x[1].size(3), x[1].size(4)},
                                    {.stride = {1, 2, 1}, .padding = 1, .dilation = {2, 1, 1}, .groups = 2});
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({1, 2, 2, 2, 2}), arg({2, 1, 2, 2, 1}), arg({2})}, "small"},
                             {{arg({2, 4, 3, 4, 3}), arg({4, 2, 2, 3, 2}), arg({4})}, "batch2"},
                             {{arg({4, 3, 3, 2}), arg({2, 2, 1, 2, 2}), arg({2})}, "unbatched"}}});
  ops.push_back({.name = "nn.ConvTranspose2d",
                 .ops = {OpId::conv_transpose2d},
                 .torch = "F.conv_transpose2d(x[0], x[1], x[2], stride=2, padding=1, output_padding=1, groups=2)",
                 .fn =
                     [](I x) {
                       // weight (C_in, C_out / groups, kH, kW) with groups 2
                       nn::ConvTranspose2d m(x[1].size(0), x[1].size(1) * 2, {x[1].size(2), x[1].size(3)},
                                             {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2});
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({1, 2, 3, 3}), arg({2, 2, 3, 3}), arg({4})}, "stride_outpad_groups"},
                             {{arg({1, 2, 2, 2}), arg({2, 1, 3, 3}), arg({2})}, "small"},
                             {{arg({2, 2, 2}), arg({2, 1, 2, 3}), arg({2})}, "small_unbatched_2x3_kernel"}}});
  ops.push_back({.name = "nn.BatchNorm1d",
                 .torch = "F.batch_norm(x[0], torch.zeros(x[0].shape[1], dtype=x[0].dtype), torch.ones(x[0].shape[1], "
                          "dtype=x[0].dtype), x[1], x[2], True)",
                 .fn =
                     [](I x) {
                       nn::BatchNorm1d m(x[0].size(1));
                       m.to(x[0].device(), x[0].dtype());  // the running statistics follow the input
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({4, 3}), arg({3}), arg({3})}, "2d"},
                             {{arg({2, 2, 3}), arg({2}), arg({2})}, "3d"},
                             {{arg_t({3, 4}), arg({4}), arg({4})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.BatchNorm2d",
                 .torch = "F.batch_norm(x[0], None, None, x[1], x[2], True)",
                 .fn =
                     [](I x) {
                       nn::BatchNorm2d m(x[0].size(1), {.momentum = std::nullopt});
                       m.to(x[0].device(), x[0].dtype());
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({2, 3, 3, 2}), arg({3}), arg({3})}, "4d"},
                             {{arg({2, 2, 2, 2}), arg({2}), arg({2})}, "small"}}});
  ops.push_back({.name = "nn.BatchNorm2d_eval",
                 .torch = "T.batch_norm_eval(x[0], x[1], x[2], x[3], x[4])",
                 .fn =
                     [](I x) {
                       nn::BatchNorm2d m(x[0].size(1));
                       m.eval();
                       m.weight = x[1];
                       m.bias = x[2];
                       m.running_mean = x[3];
                       m.running_var = x[4];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({2, 3, 2, 2}), arg({3}), arg({3}), arg({3}), arg({3}, 0.5, 2)}, "eval"}}});
  ops.push_back(
      {.name = "nn.BatchNorm_no_running_stats",
       .torch = "F.batch_norm(x[0], None, None, x[1], x[2], True, 0.1, 1e-3)",
       .fn = [](I x) { return one(F::batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], /*training=*/true, 0.1, 1e-3)); },
       .samples = {{{arg({5, 2}), arg({2}), arg({2})}, "2d"}}});
  ops.push_back({.name = "nn.LayerNorm",
                 .ops = {OpId::layer_norm},
                 .torch = "F.layer_norm(x[0], x[1].shape, x[1], x[2])",
                 .fn =
                     [](I x) {
                       std::vector<int64_t> shape(x[1].sizes().begin(), x[1].sizes().end());
                       nn::LayerNorm m(shape);
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({3, 4}), arg({4}), arg({4})}, "last_dim"},
                             {{arg({2, 3, 2}), arg({3, 2}), arg({3, 2})}, "two_dims"},
                             {{arg_t({4, 3}), arg({3}), arg({3})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.LayerNorm_no_affine",
                 .torch = "F.layer_norm(x[0], (4,), eps=1e-2)",
                 .fn = [](I x) { return one(F::layer_norm(x[0], {4}, Tensor(), Tensor(), 1e-2)); },
                 .samples = {{{arg({3, 4})}, "2d"}}});
  ops.push_back({.name = "nn.RMSNorm",
                 .torch = "T.rms_norm(x[0], x[1].shape, x[1])",
                 .fn =
                     [](I x) {
                       std::vector<int64_t> shape(x[1].sizes().begin(), x[1].sizes().end());
                       nn::RMSNorm m(shape);
                       m.weight = x[1];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({3, 4}), arg({4})}, "last_dim"},
                             {{arg({2, 3, 2}), arg({3, 2})}, "two_dims"},
                             {{arg_t({4, 3}), arg({3})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.RMSNorm_no_affine",
                 .torch = "T.rms_norm(x[0], (4,), None, 1e-2)",
                 .fn = [](I x) { return one(F::rms_norm(x[0], {4}, Tensor(), 1e-2)); },
                 .samples = {{{arg({3, 4})}, "2d"}}});
  ops.push_back(
      {.name = "nn.GroupNorm",
       .ops = {OpId::group_norm},
       .torch = "F.group_norm(x[0], 2, x[1], x[2])",
       .fn =
           [](I x) {
             nn::GroupNorm m(2, x[0].size(1));
             m.weight = x[1];
             m.bias = x[2];
             return one(m(x[0]));
           },
       .samples = {{{arg({2, 4, 3}), arg({4}), arg({4})}, "3d"}, {{arg({1, 4, 2, 2}), arg({4}), arg({4})}, "4d"}}});
  ops.push_back({.name = "nn.InstanceNorm2d",
                 .ops = {OpId::instance_norm},
                 .torch = "F.instance_norm(x[0], weight=x[1], bias=x[2])",
                 .fn =
                     [](I x) {
                       nn::InstanceNorm2d m(x[0].size(1), {.affine = true});
                       m.weight = x[1];
                       m.bias = x[2];
                       return one(m(x[0]));
                     },
                 .samples = {{{arg({2, 3, 2, 3}), arg({3}), arg({3})}, "4d"},
                             {{arg({1, 2, 2, 2}), arg({2}), arg({2})}, "small"}}});
  // The functional form: with input statistics (updating running statistics given as constants) and
  // normalizing with given running statistics.
  ops.push_back(
      {.name = "nn.instance_norm",
       .torch =
           "[F.instance_norm(x[0], x[3].clone(), x[4].clone(), x[1], x[2], use_input_stats=True, "
           "momentum=0.3, eps=1e-3), F.instance_norm(x[0], x[3], x[4], x[1], x[2], use_input_stats=False, eps=1e-3)]",
       .fn =
           [](I x) {
             Tensor rm = x[3].detach().clone(), rv = x[4].detach().clone();
             return Outputs{F::instance_norm(x[0], rm, rv, x[1], x[2], true, 0.3, 1e-3),
                            F::instance_norm(x[0], x[3], x[4], x[1], x[2], false, 0.1, 1e-3)};
           },
       .samples = {{{arg({2, 3, 4}), arg({3}), arg({3}), const_arg({3}), const_arg({3}, 0.5, 2)}, "3d"},
                   {{arg({1, 2, 3}), arg({2}), arg({2}), const_arg({2}), const_arg({2}, 0.5, 2)}, "small"}}});
  // The running statistics it updates (no gradient flows into them), as PyTorch's F.instance_norm
  // updates its running_mean/var arguments.
  ops.push_back({.name = "nn.instance_norm_running_stats",
                 .ops = {OpId::instance_norm},
                 .torch = "T.instance_norm_stats(x[0], x[1], x[2], x[3], x[4])[1:3]",
                 .fn =
                     [](I x) {
                       Tensor rm = x[3].detach().clone(), rv = x[4].detach().clone();
                       F::instance_norm(x[0], rm, rv, x[1], x[2], true, 0.3, 1e-3);
                       return Outputs{rm, rv};
                     },
                 .samples = {{{arg({2, 3, 4}), arg({3}), arg({3}), const_arg({3}), const_arg({3}, 0.5, 2)}, "3d"}},
                 .differentiable = false});
  ops.push_back({.name = "nn.PixelShuffle",
                 .ops = {OpId::pixel_shuffle, OpId::pixel_unshuffle},
                 .torch = "[F.pixel_shuffle(x[0], 2), F.pixel_unshuffle(x[1], 2)]",
                 .fn =
                     [](I x) {
                       return Outputs{nn::PixelShuffle(2)(x[0]), nn::PixelUnshuffle(2)(x[1])};
                     },
                 .samples = {{{arg({2, 8, 2, 3}), arg({3, 4, 2})}, "batched_and_unbatched"},
                             {{arg({2, 1, 4, 1, 2}), arg({1, 2, 2, 2, 4})}, "two_batch_dims"},
                             {{arg({1, 4, 1, 2}), arg({1, 2, 2})}, "small"}}});
  ops.push_back({.name = "nn.affine_grid",
                 .torch = "[F.affine_grid(x[0], (2, 3, 4, 5), align_corners=False), "
                          "F.affine_grid(x[0], (2, 3, 4, 5), align_corners=True), "
                          "F.affine_grid(x[1], (2, 1, 3, 4, 2), align_corners=False)]",
                 .fn =
                     [](I x) {
                       return Outputs{F::affine_grid(x[0], {2, 3, 4, 5}), F::affine_grid(x[0], {2, 3, 4, 5}, true),
                                      F::affine_grid(x[1], {2, 1, 3, 4, 2})};
                     },
                 .samples = {{{arg({2, 2, 3}), arg({2, 3, 4})}, "2d_and_3d"}}});
  ops.push_back({.name = "nn.Embedding",
                 .ops = {OpId::embedding},
                 .torch = "F.embedding(x[1], x[0])",
                 .fn =
                     [](I x) {
                       nn::Embedding m(x[0].size(0), x[0].size(1));
                       m.weight = x[0];
                       return one(m(x[1]));
                     },
                 .samples = {{{arg({5, 3}), fixed_index({2, 3}, {0, 4, 1, 1, 2, 4})}, "2d_indices"}}});
  return ops;
}

// ---- layers without parameters ----------------------------------------------------------------------
template <class M, class... A>
std::function<Outputs(I)> module_fn(A... args) {
  return [=](I x) {
    M m(args...);
    return one(m(x[0]));
  };
}

std::vector<OpInfo> stateless_ops() {
  std::vector<Sample> act = {
      {{arg({3, 4}, -2, 2)}, "2d"}, {{arg_t({4, 3}, -2, 2)}, "noncontiguous"}, {{arg({2, 1, 3}, -2, 2)}, "3d"}};
  std::vector<Sample> img = {{{arg({1, 2, 5, 5})}, "4d"}, {{arg({2, 4, 4})}, "unbatched"}};
  std::vector<OpInfo> ops;
  ops.push_back({.name = "nn.ReLU", .torch = "torch.relu(x[0])", .fn = module_fn<nn::ReLU>(), .samples = act});
  ops.push_back({.name = "nn.LeakyReLU",
                 .torch = "F.leaky_relu(x[0], 0.2)",
                 .fn = module_fn<nn::LeakyReLU>(0.2),
                 .samples = act});
  ops.push_back({.name = "nn.GELU", .torch = "F.gelu(x[0])", .fn = module_fn<nn::GELU>("none"), .samples = act});
  ops.push_back({.name = "nn.GELU_tanh",
                 .torch = "F.gelu(x[0], approximate='tanh')",
                 .fn = module_fn<nn::GELU>("tanh"),
                 .samples = act});
  ops.push_back({.name = "nn.SiLU", .torch = "F.silu(x[0])", .fn = module_fn<nn::SiLU>(), .samples = act});
  ops.push_back({.name = "nn.Sigmoid", .torch = "torch.sigmoid(x[0])", .fn = module_fn<nn::Sigmoid>(), .samples = act});
  ops.push_back({.name = "nn.Tanh", .torch = "torch.tanh(x[0])", .fn = module_fn<nn::Tanh>(), .samples = act});
  ops.push_back(
      {.name = "nn.Softmax", .torch = "torch.softmax(x[0], 1)", .fn = module_fn<nn::Softmax>(1), .samples = act});
  ops.push_back({.name = "nn.LogSoftmax",
                 .torch = "torch.log_softmax(x[0], -1)",
                 .fn = module_fn<nn::LogSoftmax>(-1),
                 .samples = act});
  ops.push_back({.name = "nn.ELU", .torch = "F.elu(x[0], 0.7)", .fn = module_fn<nn::ELU>(0.7), .samples = act});
  ops.push_back({.name = "nn.ReLU6",
                 .ops = {OpId::relu6},
                 .torch = "F.relu6(x[0])",
                 .fn = module_fn<nn::ReLU6>(),
                 .samples = act});
  ops.push_back({.name = "nn.Mish", .torch = "F.mish(x[0])", .fn = module_fn<nn::Mish>(), .samples = act});
  ops.push_back({.name = "nn.SELU", .torch = "torch.selu(x[0])", .fn = module_fn<nn::SELU>(), .samples = act});
  ops.push_back({.name = "nn.CELU",
                 .ops = {OpId::celu},
                 .torch = "F.celu(x[0], 0.5)",
                 .fn = module_fn<nn::CELU>(0.5),
                 .samples = act});
  ops.push_back(
      {.name = "nn.LogSigmoid", .torch = "F.logsigmoid(x[0])", .fn = module_fn<nn::LogSigmoid>(), .samples = act});
  ops.push_back(
      {.name = "nn.Hardsigmoid", .torch = "F.hardsigmoid(x[0])", .fn = module_fn<nn::Hardsigmoid>(), .samples = act});
  ops.push_back(
      {.name = "nn.Hardswish", .torch = "F.hardswish(x[0])", .fn = module_fn<nn::Hardswish>(), .samples = act});
  ops.push_back({.name = "nn.Hardtanh",
                 .torch = "F.hardtanh(x[0], -0.7, 0.9)",
                 .fn = module_fn<nn::Hardtanh>(-0.7, 0.9),
                 .samples = act});
  ops.push_back({.name = "nn.Softsign",
                 .ops = {OpId::softsign},
                 .torch = "F.softsign(x[0])",
                 .fn = module_fn<nn::Softsign>(),
                 .samples = act});
  ops.push_back({.name = "nn.Tanhshrink",
                 .ops = {OpId::tanhshrink},
                 .torch = "F.tanhshrink(x[0])",
                 .fn = module_fn<nn::Tanhshrink>(),
                 .samples = act});
  ops.push_back({.name = "nn.Softplus",
                 .torch = "F.softplus(x[0], 2.0, 3.0)",
                 .fn = module_fn<nn::Softplus>(2.0, 3.0),
                 .samples = act});
  ops.push_back({.name = "nn.Threshold",
                 .ops = {OpId::threshold},
                 .torch = "F.threshold(x[0], 0.3, -5.0)",
                 .fn = module_fn<nn::Threshold>(0.3, -5.0),
                 .samples = act});
  ops.push_back({.name = "nn.GLU",
                 .ops = {OpId::glu},
                 .torch = "F.glu(x[0], -1)",
                 .fn = module_fn<nn::GLU>(-1),
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg({2, 3, 6})}, "3d"}, {{arg_t({4, 2})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.Softmin",
                 .ops = {OpId::softmin},
                 .torch = "F.softmin(x[0], 1)",
                 .fn = module_fn<nn::Softmin>(1),
                 .samples = act});
  // PReLU's slopes are an input, one per channel (dim 1) or one for all.
  ops.push_back({.name = "nn.PReLU",
                 .ops = {OpId::prelu},
                 .torch = "F.prelu(x[0], x[1])",
                 .fn = [](I x) { return one(F::prelu(x[0], x[1])); },
                 .samples = {{{arg({3, 4}, -2, 2), arg({4}, 0.1, 0.5)}, "per_channel"},
                             {{arg({2, 3, 2}, -2, 2), arg({1}, 0.1, 0.5)}, "shared"},
                             {{arg_t({4, 3}, -2, 2), arg({3}, 0.1, 0.5)}, "noncontiguous"}}});
  ops.push_back({.name = "nn.Identity", .torch = "x[0]", .fn = module_fn<nn::Identity>(), .samples = act});
  ops.push_back({.name = "nn.Flatten",
                 .torch = "torch.flatten(x[0], 1)",
                 .fn = module_fn<nn::Flatten>(),
                 .samples = {{{arg({2, 3, 2})}, "3d"}}});
  ops.push_back({.name = "nn.Unflatten",
                 .torch = "x[0].unflatten(1, (2, -1))",
                 .fn =
                     [](I x) {
                       return one(nn::Unflatten(1, {2, -1})(x[0]));
                     },
                 .samples = {{{arg({3, 4})}, "2d"}}});
  ops.push_back({.name = "nn.MaxPool2d",
                 .torch = "F.max_pool2d(x[0], 3, 2, 1, ceil_mode=True)",
                 .fn = [](I x) { return one(nn::MaxPool2d(3, {.stride = 2, .padding = 1, .ceil_mode = true})(x[0])); },
                 .samples = img});
  ops.push_back(
      {.name = "nn.AvgPool2d",
       .torch = "F.avg_pool2d(x[0], 2, 1, 1, count_include_pad=False)",
       .fn = [](I x) { return one(nn::AvgPool2d(2, {.stride = 1, .padding = 1, .count_include_pad = false})(x[0])); },
       .samples = img});
  std::vector<Sample> seq = {
      {{arg({2, 3, 7})}, "3d"}, {{arg({3, 6})}, "unbatched"}, {{arg_t({7, 3})}, "noncontiguous"}};
  ops.push_back({.name = "nn.MaxPool1d",
                 .ops = {OpId::max_pool1d},
                 .torch = "F.max_pool1d(x[0], 3, 2, 1, ceil_mode=True)",
                 .fn = [](I x) { return one(nn::MaxPool1d(3, {.stride = 2, .padding = 1, .ceil_mode = true})(x[0])); },
                 .samples = seq});
  ops.push_back({.name = "nn.AvgPool1d",
                 .ops = {OpId::avg_pool1d},
                 .torch = "(F.avg_pool1d(x[0], 3, 2, 1), F.avg_pool1d(x[0], 2, 1, 1, count_include_pad=False))",
                 .fn =
                     [](I x) {
                       return Outputs{nn::AvgPool1d(3, {.stride = 2, .padding = 1})(x[0]),
                                      nn::AvgPool1d(2, {.stride = 1, .padding = 1, .count_include_pad = false})(x[0])};
                     },
                 .samples = seq});
  ops.push_back({.name = "nn.AdaptiveAvgPool1d",
                 .ops = {OpId::adaptive_avg_pool1d},
                 .torch = "(F.adaptive_avg_pool1d(x[0], 1), F.adaptive_avg_pool1d(x[0], 4))",
                 .fn =
                     [](I x) {
                       return Outputs{nn::AdaptiveAvgPool1d(1)(x[0]), nn::AdaptiveAvgPool1d(4)(x[0])};
                     },
                 .samples = seq});
  ops.push_back({.name = "nn.AdaptiveMaxPool1d",
                 .ops = {OpId::adaptive_max_pool1d},
                 .torch = "(F.adaptive_max_pool1d(x[0], 1), F.adaptive_max_pool1d(x[0], 4))",
                 .fn =
                     [](I x) {
                       return Outputs{nn::AdaptiveMaxPool1d(1)(x[0]), nn::AdaptiveMaxPool1d(4)(x[0])};
                     },
                 .samples = seq});
  ops.push_back({.name = "nn.AdaptiveMaxPool2d",
                 .torch = "(F.adaptive_max_pool2d(x[0], 1), F.adaptive_max_pool2d(x[0], (2, 3)))",
                 .fn =
                     [](I x) {
                       return Outputs{nn::AdaptiveMaxPool2d(1)(x[0]), nn::AdaptiveMaxPool2d({2, 3})(x[0])};
                     },
                 .samples = img});
  ops.push_back({.name = "nn.AdaptiveAvgPool2d",
                 .torch = "(F.adaptive_avg_pool2d(x[0], 1), F.adaptive_avg_pool2d(x[0], (2, 3)))",
                 .fn =
                     [](I x) {
                       return Outputs{nn::AdaptiveAvgPool2d(1)(x[0]), nn::AdaptiveAvgPool2d({2, 3})(x[0])};
                     },
                 .samples = img});
  // Dropout: a fixed seed per call, so every evaluation draws the same mask.
  ops.push_back(
      {.name = "nn.Dropout",
       .ops = {OpId::dropout},
       .no_torch =
           "random: nabla's generator draws other masks than PyTorch's (the registry checks the mask's gradient)",
       .fn =
           [](I x) {
             manual_seed(1234);
             return one(nn::Dropout(0.4)(x[0]));
           },
       .samples = act});
  ops.push_back(
      {.name = "nn.Dropout2d",
       .ops = {OpId::dropout2d},
       .no_torch =
           "random: nabla's generator draws other masks than PyTorch's (the registry checks the mask's gradient)",
       .fn =
           [](I x) {
             manual_seed(4321);
             return one(nn::Dropout2d(0.5)(x[0]));
           },
       .samples = {{{arg({3, 4, 2, 2})}, "4d"}, {{arg({4, 2, 3})}, "unbatched"}}});
  ops.push_back({.name = "nn.Sequential",
                 .torch = "torch.softmax(torch.tanh(torch.flatten(x[0], 1)), 1)",
                 .fn =
                     [](I x) {
                       nn::Sequential s(nn::Flatten(), nn::Tanh(), nn::Softmax(1));
                       return one(s(x[0]));
                     },
                 .samples = {{{arg({2, 2, 3})}, "3d"}}});
  return ops;
}

// ---- losses -----------------------------------------------------------------------------------------
std::vector<OpInfo> loss_ops() {
  std::vector<OpInfo> ops;
  auto cls = [](std::vector<double> t) {
    int64_t n = static_cast<int64_t>(t.size());
    return fixed_index({n}, std::move(t));
  };
  // ctc_loss on log_softmax outputs: there PyTorch's gradient is the exact one (see F::ctc_loss).
  ops.push_back(
      {.name = "nn.ctc_loss",
       .torch = "[F.ctc_loss(x[0].log_softmax(2), x[1], (6, 4), (3, 2), reduction=r) for r in ('mean', 'sum', 'none')]"
                " + [F.ctc_loss(x[0].log_softmax(2), x[2], (6, 4), (3, 2), blank=4),"
                " F.ctc_loss(x[0].log_softmax(2), x[1], (2, 4), (3, 2), reduction='sum', zero_infinity=True),"
                " F.ctc_loss(x[0][:, 0].log_softmax(1), x[1][0, :2], torch.tensor(5), torch.tensor(2))]",
       .fn =
           [](I x) {
             Tensor lp = x[0].log_softmax(2);
             Outputs out;
             for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
               out.push_back(F::ctc_loss(lp, x[1], {6, 4}, {3, 2}, {.reduction = r}));
             out.push_back(F::ctc_loss(lp, x[2], {6, 4}, {3, 2}, {.blank = 4}));
             out.push_back(F::ctc_loss(lp, x[1], {2, 4}, {3, 2}, {.reduction = Reduction::sum, .zero_infinity = true}));
             out.push_back(F::ctc_loss(x[0].select(1, 0).log_softmax(1), x[1].select(0, 0).narrow(0, 0, 2), {5}, {2}));
             return out;
           },
       .samples = {{{arg({6, 2, 5}, -2, 2), fixed_index({2, 3}, {1, 2, 2, 3, 3, 0}), fixed_index({5}, {1, 2, 2, 3, 3})},
                    "repeats_and_padding"},
                   {{arg_t({6, 2, 5}, -2, 2), fixed_index({2, 3}, {3, 1, 3, 2, 4, 0}),
                     fixed_index({5}, {0, 1, 0, 2, 0})},
                    "noncontiguous"}},
       .twice_differentiable = false});
  ops.push_back({.name = "nn.interpolate",
                 .torch = "T.interpolate(x[0])",
                 .fn =
                     [](I x) {
                       const int64_t n = x[0].dim();
                       const char* linear = n == 3 ? "linear" : n == 4 ? "bilinear" : "trilinear";
                       return Outputs{
                           F::interpolate(x[0], {.scale_factor = {2}}),
                           F::interpolate(x[0], {.size = {3}, .mode = linear}),
                           F::interpolate(x[0], {.scale_factor = {1.5}, .mode = linear, .align_corners = true})};
                     },
                 .samples = {{{arg({1, 2, 3})}, "3d"},
                             {{arg({1, 1, 2, 3})}, "4d"},
                             {{arg_t({1, 1, 3, 2})}, "noncontiguous"},
                             {{arg({1, 1, 2, 2, 2})}, "5d"}}});
  ops.push_back({.name = "nn.normalize",
                 .torch = "(F.normalize(x[0]), F.normalize(x[0], 1, -1), F.normalize(x[0], 3, 0))",
                 .fn =
                     [](I x) {
                       return Outputs{F::normalize(x[0]), F::normalize(x[0], 1, -1), F::normalize(x[0], 3, 0)};
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg_t({4, 3})}, "noncontiguous"}, {{arg({2, 3, 2})}, "3d"}}});
  ops.push_back({.name = "nn.cosine_similarity",
                 .torch = "(F.cosine_similarity(x[0], x[1]), F.cosine_similarity(x[0], x[1], -1))",
                 .fn =
                     [](I x) {
                       return Outputs{F::cosine_similarity(x[0], x[1]), F::cosine_similarity(x[0], x[1], -1)};
                     },
                 .samples = {{{arg({3, 4}), arg({3, 4})}, "2d"},
                             {{arg({2, 3, 4}), arg({3, 4})}, "broadcast"},
                             {{arg_t({3, 4}), arg({1, 4})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.pairwise_distance",
                 .torch = "(F.pairwise_distance(x[0], x[1]), F.pairwise_distance(x[0], x[1], 1, 1e-6, True), "
                          "F.pairwise_distance(x[0], x[1], 3))",
                 .fn =
                     [](I x) {
                       return Outputs{F::pairwise_distance(x[0], x[1]), F::pairwise_distance(x[0], x[1], 1, 1e-6, true),
                                      F::pairwise_distance(x[0], x[1], 3)};
                     },
                 .samples = {{{arg({3, 4}), arg({3, 4})}, "2d"}, {{arg({2, 3, 4}), arg({4})}, "broadcast"}}});
  ops.push_back(
      {.name = "nn.cross_entropy",
       .torch = "T.reductions(lambda r: F.cross_entropy(x[0], x[1], reduction=r))",
       .fn =
           [](I x) { return reductions([&](Reduction r) { return F::cross_entropy(x[0], x[1], {.reduction = r}); }); },
       .samples = {{{arg({4, 5}), cls({1, 0, 4, 1})}, "2d"},
                   {{arg({2, 3, 4}), fixed_index({2, 4}, {0, 2, 1, 1, 2, 2, 0, 1})}, "k_dim"},
                   {{arg({5}), fixed_index({}, {3})}, "unbatched"},
                   {{arg_t({4, 3}), cls({2, 0, 1, 2})}, "noncontiguous"}}});
  ops.push_back(
      {.name = "nn.cross_entropy_weight_ignore",
       .ops = {OpId::cross_entropy},
       .torch = "T.reductions(lambda r: F.cross_entropy(x[0], x[1], weight=x[2], ignore_index=2, reduction=r))",
       .fn =
           [](I x) {
             return reductions([&](Reduction r) {
               return F::cross_entropy(x[0], x[1], {.weight = x[2], .ignore_index = 2, .reduction = r});
             });
           },
       .samples = {{{arg({5, 4}), cls({1, 2, 3, 0, 1}), fixed_arg({4}, {0.5, 2.0, 1.0, 0.25}, false)}, "2d"}}});
  ops.push_back({.name = "nn.cross_entropy_label_smoothing",
                 .ops = {OpId::cross_entropy},
                 .torch = "T.reductions(lambda r: F.cross_entropy(x[0], x[1], weight=x[2], ignore_index=0, "
                          "reduction=r, label_smoothing=0.2))",
                 .fn =
                     [](I x) {
                       return reductions([&](Reduction r) {
                         return F::cross_entropy(
                             x[0], x[1], {.weight = x[2], .ignore_index = 0, .reduction = r, .label_smoothing = 0.2});
                       });
                     },
                 .samples = {{{arg({4, 3}), cls({1, 0, 2, 2}), fixed_arg({3}, {0.5, 2.0, 1.0}, false)}, "2d"}}});
  ops.push_back(
      {.name = "nn.cross_entropy_probabilities",
       .ops = {OpId::cross_entropy},
       .torch = "T.reductions(lambda r: F.cross_entropy(x[0], x[1], weight=x[2], reduction=r, label_smoothing=0.1))",
       .fn =
           [](I x) {
             return reductions([&](Reduction r) {
               return F::cross_entropy(x[0], x[1], {.weight = x[2], .reduction = r, .label_smoothing = 0.1});
             });
           },
       .samples = {{{arg({3, 4}), arg({3, 4}, 0, 1), arg({4}, 0.5, 1.5)}, "2d"},
                   {{arg({2, 3, 2}), arg({2, 3, 2}, 0, 1), arg({3}, 0.5, 1.5)}, "k_dim"}}});
  ops.push_back(
      {.name = "nn.nll_loss",
       .torch = "T.reductions(lambda r: F.nll_loss(x[0], x[1], weight=x[2], ignore_index=1, reduction=r))",
       .fn =
           [](I x) {
             return reductions([&](Reduction r) {
               return F::nll_loss(x[0], x[1], {.weight = x[2], .ignore_index = 1, .reduction = r});
             });
           },
       .samples = {{{arg({4, 3}), cls({1, 0, 2, 2}), const_arg({3}, 0.5, 1.5)}, "2d"},
                   {{arg({2, 3, 2}), fixed_index({2, 2}, {0, 2, 1, 2}), const_arg({3}, 0.5, 1.5)}, "k_dim"}}});
  auto pair = std::vector<Sample>{{{arg({3, 4}, -2, 2), arg({3, 4}, -2, 2)}, "2d"},
                                  {{arg_t({4, 3}, -2, 2), arg({4, 3}, -2, 2)}, "noncontiguous"},
                                  {{arg({}, -2, 2), arg({}, -2, 2)}, "scalar"}};
  ops.push_back({.name = "nn.mse_loss",
                 .torch = "T.reductions(lambda r: F.mse_loss(x[0], x[1], reduction=r))",
                 .fn = [](I x) { return reductions([&](Reduction r) { return F::mse_loss(x[0], x[1], r); }); },
                 .samples = pair});
  ops.push_back({.name = "nn.l1_loss",
                 .torch = "T.reductions(lambda r: F.l1_loss(x[0], x[1], reduction=r))",
                 .fn = [](I x) { return reductions([&](Reduction r) { return F::l1_loss(x[0], x[1], r); }); },
                 .samples = pair});
  ops.push_back({.name = "nn.smooth_l1_loss",
                 .torch = "T.reductions(lambda r: F.smooth_l1_loss(x[0], x[1], reduction=r, beta=0.5))",
                 .fn =
                     [](I x) {
                       return reductions(
                           [&](Reduction r) { return F::smooth_l1_loss(x[0], x[1], {.reduction = r, .beta = 0.5}); });
                     },
                 .samples = pair,
                 .twice_differentiable = false});  // the second derivative jumps at |d| = beta
  ops.push_back({.name = "nn.huber_loss",
                 .torch = "T.reductions(lambda r: F.huber_loss(x[0], x[1], reduction=r, delta=0.7))",
                 .fn =
                     [](I x) {
                       return reductions(
                           [&](Reduction r) { return F::huber_loss(x[0], x[1], {.reduction = r, .delta = 0.7}); });
                     },
                 .samples = pair,
                 .twice_differentiable = false});
  ops.push_back(
      {.name = "nn.binary_cross_entropy",
       .torch = "T.reductions(lambda r: F.binary_cross_entropy(x[0], x[1], weight=x[2], reduction=r))",
       .fn =
           [](I x) {
             return reductions(
                 [&](Reduction r) { return F::binary_cross_entropy(x[0], x[1], {.weight = x[2], .reduction = r}); });
           },
       .samples = {{{arg({3, 4}, 0.1, 0.9), arg({3, 4}, 0, 1), const_arg({4}, 0.5, 2)}, "broadcast_weight"},
                   {{arg_t({4, 3}, 0.1, 0.9), arg({4, 3}, 0, 1), const_arg({4, 3}, 0.5, 2)}, "noncontiguous"}}});
  ops.push_back(
      {.name = "nn.binary_cross_entropy_with_logits",
       .torch = "T.reductions(lambda r: F.binary_cross_entropy_with_logits(x[0], x[1], weight=x[2], pos_weight=x[3], "
                "reduction=r))",
       .fn =
           [](I x) {
             return reductions([&](Reduction r) {
               return F::binary_cross_entropy_with_logits(x[0], x[1],
                                                          {.weight = x[2], .pos_weight = x[3], .reduction = r});
             });
           },
       .samples = {
           {{arg({3, 4}, -3, 3), arg({3, 4}, 0, 1), const_arg({3, 1}, 0.5, 2), const_arg({4}, 0.5, 3)}, "2d"}}});
  // PyTorch refuses gradients with respect to loss weights; nabla's losses, composed of Tensor ops,
  // give them (a deliberate extension, gradchecked here).
  ops.push_back(
      {.name = "nn.loss_weight_gradients",
       .no_torch = "PyTorch raises for loss weights that require grad; nabla differentiates them (deliberate)",
       .fn =
           [](I x) {
             return Outputs{F::nll_loss(x[0], x[1], {.weight = x[2]}),
                            F::binary_cross_entropy(x[3], x[4], {.weight = x[5]}),
                            F::binary_cross_entropy_with_logits(x[0], x[6], {.weight = x[5], .pos_weight = x[2]})};
           },
       .samples = {{{arg({2, 3}), cls({1, 2}), arg({3}, 0.5, 1.5), arg({2, 3}, 0.1, 0.9), arg({2, 3}, 0, 1),
                     arg({3}, 0.5, 2), arg({2, 3}, 0, 1)},
                    "2d"}}});
  ops.push_back({.name = "nn.kl_div",
                 .torch = "[F.kl_div(x[0], x[1], reduction=r) for r in ('mean', 'sum', 'none', 'batchmean')]",
                 .fn =
                     [](I x) {
                       return Outputs{F::kl_div(x[0], x[1], {.reduction = Reduction::mean}),
                                      F::kl_div(x[0], x[1], {.reduction = Reduction::sum}),
                                      F::kl_div(x[0], x[1], {.reduction = Reduction::none}),
                                      F::kl_div(x[0], x[1], {.reduction = Reduction::batchmean})};
                     },
                 .samples = {{{arg({3, 4}, -3, 0), arg({3, 4}, 0.1, 1)}, "probabilities"}}});
  ops.push_back(
      {.name = "nn.kl_div_log_target",
       .ops = {OpId::kl_div},
       .torch = "F.kl_div(x[0], x[1], reduction='batchmean', log_target=True)",
       .fn = [](I x) { return one(F::kl_div(x[0], x[1], {.reduction = Reduction::batchmean, .log_target = true})); },
       .samples = {{{arg({3, 4}, -3, 0), arg({3, 4}, -3, 0)}, "log_probabilities"}}});
  // Ranking, embedding and margin losses; targets of +-1 (or 0/1, or classes) are constants.
  ops.push_back(
      {.name = "nn.margin_ranking_loss",
       .torch = "T.reductions(lambda r: F.margin_ranking_loss(x[0], x[1], x[2], margin=0.3, reduction=r))",
       .fn =
           [](I x) {
             return reductions([&](Reduction r) { return F::margin_ranking_loss(x[0], x[1], x[2], 0.3, r); });
           },
       .samples = {{{arg({5}), arg({5}), fixed_arg({5}, {1, -1, 1, -1, -1}, false)}, "1d"},
                   {{arg_t({3, 2}), arg({3, 2}), fixed_arg({3, 2}, {1, -1, -1, 1, 1, -1}, false)}, "noncontiguous"}}});
  ops.push_back(
      {.name = "nn.hinge_embedding_loss",
       .torch = "T.reductions(lambda r: F.hinge_embedding_loss(x[0], x[1], margin=0.5, reduction=r))",
       .fn = [](I x) { return reductions([&](Reduction r) { return F::hinge_embedding_loss(x[0], x[1], 0.5, r); }); },
       .samples = {{{arg({2, 3}), fixed_arg({2, 3}, {1, -1, 1, -1, -1, 1}, false)}, "2d"}}});
  ops.push_back({.name = "nn.cosine_embedding_loss",
                 .torch = "T.reductions(lambda r: F.cosine_embedding_loss(x[0], x[1], x[2], margin=0.1, reduction=r))",
                 .fn =
                     [](I x) {
                       return reductions(
                           [&](Reduction r) { return F::cosine_embedding_loss(x[0], x[1], x[2], 0.1, r); });
                     },
                 .samples = {{{arg({3, 4}), arg({3, 4}), fixed_arg({3}, {1, -1, -1}, false)}, "2d"},
                             {{arg({4}), arg({4}), fixed_arg({}, {-1}, false)}, "1d"}}});
  ops.push_back({.name = "nn.triplet_margin_loss",
                 .torch = "[*T.reductions(lambda r: F.triplet_margin_loss(x[0], x[1], x[2], margin=0.5, reduction=r)), "
                          "F.triplet_margin_loss(x[0], x[1], x[2], margin=0.5, p=1, swap=True, reduction='none')]",
                 .fn =
                     [](I x) {
                       Outputs out = reductions([&](Reduction r) {
                         return F::triplet_margin_loss(x[0], x[1], x[2], {.margin = 0.5, .reduction = r});
                       });
                       out.push_back(F::triplet_margin_loss(
                           x[0], x[1], x[2], {.margin = 0.5, .p = 1, .swap = true, .reduction = Reduction::none}));
                       return out;
                     },
                 .samples = {{{arg({3, 4}), arg({3, 4}), arg({3, 4})}, "2d"}, {{arg({4}), arg({4}), arg({4})}, "1d"}}});
  ops.push_back(
      {.name = "nn.triplet_margin_with_distance_loss",
       .torch = "[F.triplet_margin_with_distance_loss(x[0], x[1], x[2], distance_function=lambda a, b: 1 - "
                "F.cosine_similarity(a, b), margin=0.5, swap=True, reduction='none'), "
                "F.triplet_margin_with_distance_loss(x[0], x[1], x[2], reduction='sum')]",
       .fn =
           [](I x) {
             auto cos_dist = [](const Tensor& a, const Tensor& b) { return 1.0 - F::cosine_similarity(a, b); };
             return Outputs{
                 F::triplet_margin_with_distance_loss(
                     x[0], x[1], x[2],
                     {.distance_function = cos_dist, .margin = 0.5, .swap = true, .reduction = Reduction::none}),
                 F::triplet_margin_with_distance_loss(x[0], x[1], x[2], {.reduction = Reduction::sum})};
           },
       .samples = {{{arg({3, 4}), arg({3, 4}), arg({3, 4})}, "2d"}}});
  ops.push_back({.name = "nn.soft_margin_loss",
                 .torch = "T.reductions(lambda r: F.soft_margin_loss(x[0], x[1], reduction=r))",
                 .fn = [](I x) { return reductions([&](Reduction r) { return F::soft_margin_loss(x[0], x[1], r); }); },
                 .samples = {{{arg({2, 3}, -2, 2), fixed_arg({2, 3}, {1, -1, 1, 1, -1, -1}, false)}, "2d"}}});
  ops.push_back(
      {.name = "nn.multilabel_soft_margin_loss",
       .torch = "[*T.reductions(lambda r: F.multilabel_soft_margin_loss(x[0], x[1], weight=x[2], reduction=r)), "
                "F.multilabel_soft_margin_loss(x[0], x[1], reduction='none')]",
       .fn =
           [](I x) {
             Outputs out = reductions([&](Reduction r) { return F::multilabel_soft_margin_loss(x[0], x[1], x[2], r); });
             out.push_back(F::multilabel_soft_margin_loss(x[0], x[1], {}, Reduction::none));
             return out;
           },
       .samples = {{{arg({3, 4}, -2, 2), fixed_arg({3, 4}, {1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}, false),
                     const_arg({4}, 0.5, 1.5)},
                    "2d"}}});
  ops.push_back(
      {.name = "nn.multi_margin_loss",
       .torch = "[*T.reductions(lambda r: F.multi_margin_loss(x[0], x[1], p=1, margin=1.0, weight=x[2], reduction=r)), "
                "F.multi_margin_loss(x[0], x[1], p=2, margin=0.7, reduction='none')]",
       .fn =
           [](I x) {
             Outputs out = reductions(
                 [&](Reduction r) { return F::multi_margin_loss(x[0], x[1], {.weight = x[2], .reduction = r}); });
             out.push_back(F::multi_margin_loss(x[0], x[1], {.p = 2, .margin = 0.7, .reduction = Reduction::none}));
             return out;
           },
       .samples = {{{arg({4, 3}), fixed_index({4}, {0, 2, 1, 2}), const_arg({3}, 0.5, 1.5)}, "2d"}}});
  // Likelihood losses.
  ops.push_back(
      {.name = "nn.poisson_nll_loss",
       .torch = "[*T.reductions(lambda r: F.poisson_nll_loss(x[0], x[1], log_input=True, full=True, reduction=r)), "
                "F.poisson_nll_loss(x[0], x[1], log_input=False, reduction='none')]",
       .fn =
           [](I x) {
             Outputs out = reductions(
                 [&](Reduction r) { return F::poisson_nll_loss(x[0], x[1], {.full = true, .reduction = r}); });
             out.push_back(F::poisson_nll_loss(x[0], x[1], {.log_input = false, .reduction = Reduction::none}));
             return out;
           },
       .samples = {{{arg({2, 3}, 0.2, 2), const_arg({2, 3}, 0, 4)}, "2d"}}});
  ops.push_back(
      {.name = "nn.gaussian_nll_loss",
       .torch = "[*T.reductions(lambda r: F.gaussian_nll_loss(x[0], x[1], x[2], full=True, reduction=r)), "
                "F.gaussian_nll_loss(x[0], x[1], x[3], reduction='none'), "
                "F.gaussian_nll_loss(x[0], x[1], x[3].unsqueeze(-1), reduction='sum')]",
       .fn =
           [](I x) {
             Outputs out = reductions(
                 [&](Reduction r) { return F::gaussian_nll_loss(x[0], x[1], x[2], {.full = true, .reduction = r}); });
             out.push_back(F::gaussian_nll_loss(x[0], x[1], x[3], {.reduction = Reduction::none}));
             out.push_back(F::gaussian_nll_loss(x[0], x[1], x[3].unsqueeze(-1), {.reduction = Reduction::sum}));
             return out;
           },
       .samples = {{{arg({3, 2}), arg({3, 2}), arg({3, 2}, 0.5, 2), arg({3}, 0.5, 2)}, "2d"}}});
  return ops;
}

std::vector<OpInfo> all_nn_ops() {
  std::vector<OpInfo> all;
  for (auto f : {layer_ops, stateless_ops, loss_ops})
    for (auto& op : f()) all.push_back(std::move(op));
  return all;
}

Registrar nn_ops(all_nn_ops());

}  // namespace
}  // namespace nabla::testing
