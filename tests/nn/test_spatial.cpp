// nn::functional's spatial ops and their layers: known values, identities between them, and the
// error messages (PyTorch's values and gradients are compared in the registry's differential suite,
// tests/ops/opinfo_nn_spatial.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace F = nn::functional;

TEST(NnSpatial, PadModesKnownValues) {
  Tensor x = f64({1, 2, 3, 4}, {1, 1, 4});
  EXPECT_TRUE(tensor_is(F::pad(x, {2, 1}, "reflect"), {1, 1, 7}, {3, 2, 1, 2, 3, 4, 3}));
  EXPECT_TRUE(tensor_is(F::pad(x, {1, 2}, "replicate"), {1, 1, 7}, {1, 1, 2, 3, 4, 4, 4}));
  EXPECT_TRUE(tensor_is(F::pad(x, {2, 1}, "circular"), {1, 1, 7}, {3, 4, 1, 2, 3, 4, 1}));
  EXPECT_TRUE(tensor_is(F::pad(x, {-1, 2}, "reflect"), {1, 1, 5}, {2, 3, 4, 3, 2}));  // negative crops
  EXPECT_TRUE(tensor_is(F::pad(x, {1, 0}, "constant", 9), {1, 1, 5}, {9, 1, 2, 3, 4}));
  // Two dims: the last dim's pair comes first.
  Tensor m = f64({1, 2, 3, 4}, {1, 2, 2});
  EXPECT_TRUE(tensor_is(F::pad(m, {1, 0, 0, 1}, "replicate"), {1, 3, 3}, {1, 1, 2, 3, 3, 4, 3, 3, 4}));
  EXPECT_TRUE(tensor_is(nn::ReflectionPad1d(1)(x), {1, 1, 6}, {2, 1, 2, 3, 4, 3}));
  EXPECT_EQ(nn::ReflectionPad2d({1, 1, 2, 0}).extra_repr(), "(1, 1, 2, 0)");
}

TEST(NnSpatial, PadErrorsNameTheLimit) {
  Tensor x = zeros({1, 1, 3});
  EXPECT_TRUE(throws_with<ValueError>([&] { F::pad(x, {3, 0}, "reflect"); }, {"reflect padding (3, 0)", "size 3"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::pad(x, {4, 0}, "circular"); }, {"circular padding", "at most"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::pad(x, {1, 1}, "mirror"); }, {"'mirror'"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { F::pad(zeros({3}), {1, 1}, "reflect"); }, {"2-D or 3-D", "[3]"}));
}

TEST(NnSpatial, ConvSameKeepsTheSizeAndEqualsExplicitPadding) {
  Tensor x = lcg_tensor({1, 2, 5, 6}, 1), w = lcg_tensor({3, 2, 3, 4}, 2);
  Tensor y = F::conv2d(x, w, {}, 1, "same");
  EXPECT_EQ(shape_of(y), (std::vector<int64_t>{1, 3, 5, 6}));
  // Kernel width 4: reach 3, one zero before and two after (PyTorch's split).
  Tensor ref = nabla::conv2d(F::pad(x, {1, 2, 1, 1}), w);
  EXPECT_TRUE(tensor_near(y, ref, 1e-12));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::conv2d(x, w, {}, 2, "same"); }, {"conv2d", "stride 1"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::conv2d(x, w, {}, 1, "full"); }, {"'full'"}));
}

TEST(NnSpatial, ConvTranspose1dIsTheAdjointOfConv1d) {
  // <conv1d(x, w), y> = <x, conv_transpose1d(y, w)> for the same stride, padding and dilation.
  Tensor x = lcg_tensor({2, 3, 9}, 3), w = lcg_tensor({4, 3, 3}, 4);
  Tensor y = lcg_tensor({2, 4, 5}, 5);
  Tensor lhs = (nabla::conv1d(x, w, {}, 2, 1, 1) * y).sum();
  Tensor rhs = (x * F::conv_transpose1d(y, w, {}, 2, 1, 0)).sum();
  EXPECT_NEAR(lhs.item<double>(), rhs.item<double>(), 1e-12);
  nn::ConvTranspose3d m(2, 4, 3, {.stride = 2, .groups = 2});
  EXPECT_EQ(shape_of(m.weight), (std::vector<int64_t>{2, 2, 3, 3, 3}));
  EXPECT_EQ(shape_of(m(zeros({1, 2, 2, 3, 1}))), (std::vector<int64_t>{1, 4, 5, 7, 3}));
}

TEST(NnSpatial, FoldOfUnfoldCountsEachPixelOncePerBlock) {
  Tensor x = lcg_tensor({2, 3, 5, 4}, 6);
  // Non-overlapping blocks: fold undoes unfold.
  EXPECT_TRUE(tensor_near(F::fold(F::unfold(x, {1, 2}, 1, 0, {1, 2}), {5, 4}, {1, 2}, 1, 0, {1, 2}), x, 0));
  // Overlapping 3x3 blocks with padding 1: each pixel is summed into 9 blocks, fewer at the border.
  Tensor ones_in = ones({1, 1, 3, 3}, dtype(kFloat64));
  Tensor counts = F::fold(F::unfold(ones_in, 3, 1, 1), {3, 3}, 3, 1, 1);
  EXPECT_TRUE(tensor_is(counts, {1, 1, 3, 3}, {4, 6, 4, 6, 9, 6, 4, 6, 4}));
  Tensor cols = F::unfold(f64({1, 2, 3, 4}, {1, 1, 2, 2}), 2);
  EXPECT_TRUE(tensor_is(cols, {1, 4, 1}, {1, 2, 3, 4}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { F::fold(zeros({1, 4, 5}), {3, 3}, 2); }, {"fold", "5 blocks"}));
}

TEST(NnSpatial, InterpolateAreaIsAdaptiveAveragePooling) {
  Tensor x = lcg_tensor({2, 3, 7, 5}, 7);
  EXPECT_TRUE(tensor_near(F::interpolate(x, {.size = {3, 2}, .mode = "area"}), adaptive_avg_pool2d(x, {3, 2}), 1e-12));
  // nearest-exact samples pixel centres: 4 -> 3 picks 0, 2, 3 (plain nearest picks 0, 1, 2).
  Tensor r = f64({0, 1, 2, 3}, {1, 1, 4});
  EXPECT_TRUE(tensor_is(F::interpolate(r, {.size = {3}, .mode = "nearest-exact"}), {1, 1, 3}, {0, 2, 3}));
  EXPECT_TRUE(tensor_is(F::interpolate(r, {.size = {3}, .mode = "nearest"}), {1, 1, 3}, {0, 1, 2}));
  // Bicubic reproduces linear data in the interior (the cubic kernel interpolates degree-1 exactly).
  Tensor ramp = arange(0, 8, 1, dtype(kFloat64)).view({1, 1, 1, 8}).expand({1, 1, 4, 8});
  Tensor up = F::interpolate(ramp, {.size = {4, 15}, .mode = "bicubic", .align_corners = true});
  EXPECT_TRUE(tensor_near(up.select(3, 7), full({1, 1, 4}, 3.5, dtype(kFloat64)), 1e-12));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::interpolate(zeros({1, 1, 4}), {.size = {2}, .mode = "bicubic"});
      },
      {"bicubic", "4-D"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::interpolate(zeros({1, 1, 4}), {.size = {2}, .mode = "area", .align_corners = true});
      },
      {"align_corners", "'area'"}));
}

TEST(NnSpatial, GridSampleOfTheIdentityGridIsTheInput) {
  Tensor x = lcg_tensor({2, 3, 4, 5}, 8);
  Tensor theta = f64({1, 0, 0, 0, 1, 0}, {1, 2, 3}).expand({2, 2, 3});
  for (bool ac : {false, true}) {
    Tensor grid = F::affine_grid(theta, {2, 3, 4, 5}, ac);
    EXPECT_TRUE(tensor_near(F::grid_sample(x, grid, {.align_corners = ac}), x, 1e-12)) << ac;
    EXPECT_TRUE(tensor_near(F::grid_sample(x, grid, {.mode = "nearest", .align_corners = ac}), x, 0)) << ac;
    for (const char* m : {"zeros", "border", "reflection"})  // bicubic weights are (0, 1, 0, 0) on a pixel
      EXPECT_TRUE(
          tensor_near(F::grid_sample(x, grid, {.mode = "bicubic", .padding_mode = m, .align_corners = ac}), x, 1e-12))
          << ac << " " << m;
  }
  // Outside the input: zeros pads with 0, border with the edge value.
  Tensor one = f64({5}, {1, 1, 1, 1});
  Tensor far = f64({3, 3}, {1, 1, 1, 2});
  EXPECT_TRUE(tensor_is(F::grid_sample(one, far), {1, 1, 1, 1}, {0}));
  EXPECT_TRUE(tensor_is(F::grid_sample(one, far, {.padding_mode = "border"}), {1, 1, 1, 1}, {5}));
  // 5-D: the identity grid of a 3-D affine map.
  Tensor v = lcg_tensor({1, 2, 3, 4, 2}, 11);
  Tensor theta3 = f64({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, {1, 3, 4});
  EXPECT_TRUE(tensor_near(F::grid_sample(v, F::affine_grid(theta3, {1, 2, 3, 4, 2})), v, 1e-12));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::grid_sample(zeros({1, 1, 2, 2, 2}), zeros({1, 1, 1, 1, 2}));
      },
      {"grid_sample", "(N, D_out, H_out, W_out, 3)"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::grid_sample(zeros({1, 1, 2, 2, 2}), zeros({1, 1, 1, 1, 3}), {.mode = "bicubic"});
      },
      {"grid_sample", "'bicubic'", "4-D", "[1, 1, 2, 2, 2]"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::grid_sample(x, zeros({2, 1, 1, 2}, kFloat64), {.mode = "cubic"});
      },
      {"grid_sample", "'bilinear', 'nearest' or 'bicubic'", "'cubic'"}));
}

TEST(NnSpatial, MaxUnpoolPutsTheMaximaBack) {
  Tensor x = f64({1, 5, 2, 0, 3, 4, 8, 1, 0, 9, 2, 2, 7, 1, 3, 6}, {1, 1, 4, 4});
  Tensor pooled, idx;  // not a structured binding: clang 14's lambdas cannot capture those
  std::tie(pooled, idx) = max_pool2d_with_indices(x, 2);
  Tensor back = F::max_unpool2d(pooled, idx, 2);
  EXPECT_TRUE(tensor_is(back, {1, 1, 4, 4}, {0, 5, 0, 0, 0, 0, 8, 0, 0, 9, 0, 0, 0, 0, 0, 6}));
  EXPECT_TRUE(tensor_is(nn::MaxUnpool2d(2)(pooled, idx), {1, 1, 4, 4}, values(back)));
  Tensor bad = full({1, 1, 2, 2}, int64_t{16}, dtype(kInt64));
  EXPECT_TRUE(throws_with<IndexError>([&] { F::max_unpool2d(pooled, bad, 2); }, {"max_unpool2d", "16"}));
  // output_size within one stride of the default (4, 4), as PyTorch 1.13 (its flat indices then read
  // in that plane: F.max_unpool2d(p, i, 2, output_size=(5, 4)) puts 5, 8, 9, 6 at 1, 6, 9, 15 of 20).
  const std::vector<double> wide = {0, 5, 0, 0, 0, 0, 8, 0, 0, 9, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0};
  EXPECT_TRUE(tensor_is(F::max_unpool2d(pooled, idx, 2, {}, 0, {5, 4}), {1, 1, 5, 4}, wide));
  EXPECT_TRUE(tensor_is(F::max_unpool2d(pooled, idx, 2, {}, 0, {1, 1, 4, 5}), {1, 1, 4, 5}, wide));
  // Outside it PyTorch raises 'invalid output_size "(2, 8)" (dim 0 must be between 2 and 6)'; nabla
  // used to place the values in a 2 x 8 plane.
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::max_unpool2d(pooled, idx, 2, {}, 0, {2, 8});
      },
      {"max_unpool2d", "invalid output_size [2, 8]", "dim 0", "between 2 and 6"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::max_unpool2d(pooled, idx, 2, {}, 0, {4, 6});
      },
      {"dim 1", "between 2 and 6"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::max_unpool2d(pooled, idx, 2, {}, 0, {4}); }, {"2 or 4 elements"}));
  // 1-d: F.max_unpool1d(p, i, 2, output_size=(9,)) of [1, 3, 2, 0, 5, 4, 1, 1] (indices 1, 2, 4, 6).
  Tensor x1 = f64({1, 3, 2, 0, 5, 4, 1, 1}, {1, 1, 1, 8});
  Tensor p1, i1;
  std::tie(p1, i1) = max_pool2d_with_indices(x1, {1, 2});
  p1 = p1.squeeze(2);
  i1 = i1.squeeze(2);
  EXPECT_EQ(int_values(i1), (std::vector<int64_t>{1, 2, 4, 6}));
  EXPECT_TRUE(tensor_is(F::max_unpool1d(p1, i1, 2, std::nullopt, 0, 9), {1, 1, 9}, {0, 3, 2, 0, 5, 0, 1, 0, 0}));
  for (int64_t len : {6, 10})
    EXPECT_TRUE(throws_with<ValueError>([&] { F::max_unpool1d(p1, i1, 2, std::nullopt, 0, len); },
                                        {"max_unpool1d", "between 6 and 10"}));
}

TEST(NnSpatial, EmbeddingBagReducesEachBag) {
  Tensor w = f64({1, 10, 2, 20, 3, 30, 4, 40}, {4, 2});
  Tensor idx = tensor(std::vector<int64_t>{0, 2, 1, 3, 3}, dtype(kInt64));
  Tensor off = tensor(std::vector<int64_t>{0, 2, 2}, dtype(kInt64));  // bags {0, 2}, {}, {1, 3, 3}
  EXPECT_TRUE(tensor_is(F::embedding_bag(idx, w, off, {}, {.mode = "sum"}), {3, 2}, {4, 40, 0, 0, 10, 100}));
  EXPECT_TRUE(tensor_is(F::embedding_bag(idx, w, off), {3, 2}, {2, 20, 0, 0, 10.0 / 3, 100.0 / 3}));
  EXPECT_TRUE(tensor_is(F::embedding_bag(idx, w, off, {}, {.mode = "max"}), {3, 2}, {3, 30, 0, 0, 4, 40}));
  EXPECT_TRUE(
      tensor_is(F::embedding_bag(idx, w, off, {}, {.mode = "mean", .padding_idx = 3}), {3, 2}, {2, 20, 0, 0, 2, 20}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::embedding_bag(idx, w, off, ones({5}, dtype(kFloat64))); },
                                      {"per_sample_weights", "'sum'"}));
  Tensor bad_off = tensor(std::vector<int64_t>{1, 2}, dtype(kInt64));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::embedding_bag(idx, w, bad_off); }, {"offsets[0] must be 0"}));
  nn::EmbeddingBag bag(4, 2, {.mode = "sum"});
  EXPECT_EQ(shape_of(bag(idx, off)), (std::vector<int64_t>{3, 2}));
}

TEST(NnSpatial, AvgPool2dDivisorOverrideDividesTheWindowSum) {
  Tensor x = lcg_tensor({1, 1, 5, 5}, 9);
  Tensor sums = nabla::avg_pool2d(x, 2, 2, 1, false, true) * 4;  // count_include_pad: windows of 4
  EXPECT_TRUE(tensor_near(F::avg_pool2d(x, 2, 2, 1, false, false, 3), sums / 3, 1e-12));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::avg_pool2d(x, 2, 2, 0, false, true, 0); }, {"divisor_override"}));
}

TEST(NnSpatial, ClampWithTensorBounds) {
  Tensor x = f64({-2, 0.5, 3, std::nan("")}, {4});
  Tensor lo = f64({-1, 1, -1, 0}, {4}), hi = f64({1, 2, -2, 1}, {4});
  Tensor y = clamp(x, lo, hi);  // min > max in the third: max wins
  std::vector<double> v = values(y);
  EXPECT_EQ(v[0], -1);
  EXPECT_EQ(v[1], 1);
  EXPECT_EQ(v[2], -2);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_TRUE(std::isnan(values(clamp_min(f64({1}, {1}), f64({std::nan("")}, {1})))[0]));
  Tensor xs = f64({-2, 0.5, 3}, {3}).requires_grad_(), ls = f64({-1, 0, -1}, {3}).requires_grad_(),
         hs = f64({1, 2, -2}, {3}).requires_grad_();
  clamp(xs, ls, hs).sum().backward();
  EXPECT_TRUE(tensor_is(xs.grad(), {3}, {0, 1, 0}));
  EXPECT_TRUE(tensor_is(ls.grad(), {3}, {1, 0, 0}));
  EXPECT_TRUE(tensor_is(hs.grad(), {3}, {0, 0, 1}));
  EXPECT_TRUE(throws_with<ValueError>([&] { clamp(xs, std::optional<Tensor>{}, std::optional<Tensor>{}); }, {"clamp"}));
}

TEST(NnSpatial, ConvPaddingModePadsTheInputFirst) {
  nn::Conv2d conv(2, 3, 3, {.padding = {1, 2}, .padding_mode = "circular"});
  conv.to(kFloat64);
  Tensor x = lcg_tensor({1, 2, 4, 5}, 10);
  Tensor want = F::conv2d(F::pad(x, {2, 2, 1, 1}, "circular"), conv.weight, conv.bias, 1, 0);
  EXPECT_TRUE(tensor_near(conv(x), want, 1e-12));
  EXPECT_EQ(conv.extra_repr(), "2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 2), padding_mode=circular");
  nn::Conv1d c1(1, 1, 3, {.padding = 1, .padding_mode = "reflect"});
  c1.to(kFloat64);
  Tensor s = f64({1, 2, 3}, {1, 1, 3});
  EXPECT_TRUE(tensor_near(c1(s), F::conv1d(F::pad(s, {1, 1}, "reflect"), c1.weight, c1.bias), 1e-12));
  EXPECT_TRUE(
      throws_with<ValueError>([] { nn::Conv2d(1, 1, 3, {.padding_mode = "mirror"}); }, {"padding_mode", "'mirror'"}));
}
