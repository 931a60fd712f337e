// Layers: forward values against direct computations, PyTorch's initialization, BatchNorm's running
// statistics, dropout, embedding, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace F = nn::functional;

namespace {

double max_abs(const Tensor& t) { return t.abs().max().item<double>(); }

// The std of U(-b, b) is b / sqrt(3).
void expect_uniform(const Tensor& t, double bound, const std::string& what) {
  Tensor d = t.detach().to(kFloat64);
  EXPECT_LE(max_abs(d), bound) << what;
  EXPECT_GT(max_abs(d), 0.9 * bound) << what;  // the range is used
  if (t.numel() >= 1000) {
    EXPECT_NEAR(d.mean().item<double>(), 0.0, 0.05 * bound) << what;
    EXPECT_NEAR(d.std().item<double>(), bound / std::sqrt(3.0), 0.05 * bound) << what;
  }
}

}  // namespace

TEST(NnLayers, LinearForwardAndErrors) {
  manual_seed(0);
  nn::Linear fc(784, 128);
  Tensor x = randn({64, 784});
  Tensor y = fc(x);
  EXPECT_EQ(y.sizes(), (Shape{64, 128}));
  EXPECT_TRUE(allclose(y, x.matmul(fc.weight.t()) + fc.bias, 1e-4, 1e-5));
  EXPECT_EQ(fc(randn({2, 3, 784})).sizes(), (Shape{2, 3, 128}));
  try {
    fc(randn({64, 320}));
    FAIL();
  } catch (const ShapeError& e) { EXPECT_STREQ(e.what(), "Linear: expected input with last dim 784, got [64, 320]"); }
  nn::Linear nobias(3, 2, {.bias = false});
  EXPECT_FALSE(nobias.bias.defined());
  EXPECT_EQ(nobias.parameters().size(), 1u);
  Tensor z = randn({4, 3});
  EXPECT_TRUE(allclose(nobias(z), z.matmul(nobias.weight.t())));
}

TEST(NnLayers, InitializationMatchesPyTorchBounds) {
  manual_seed(42);
  // Linear and the convolutions: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
  nn::Linear fc(784, 128);
  expect_uniform(fc.weight, 1 / std::sqrt(784.0), "Linear.weight");
  expect_uniform(fc.bias, 1 / std::sqrt(784.0), "Linear.bias");
  nn::Conv2d conv(3, 64, 3);
  expect_uniform(conv.weight, 1 / std::sqrt(27.0), "Conv2d.weight");  // fan_in = 3 * 3 * 3
  expect_uniform(conv.bias, 1 / std::sqrt(27.0), "Conv2d.bias");
  nn::Conv2d grouped(8, 16, 3, {.groups = 4});
  expect_uniform(grouped.weight, 1 / std::sqrt(18.0), "grouped Conv2d.weight");  // fan_in = 8/4 * 9
  nn::Conv1d c1(4, 32, 5);
  expect_uniform(c1.weight, 1 / std::sqrt(20.0), "Conv1d.weight");
  nn::ConvTranspose2d ct(4, 60, 3);  // weight (4, 60, 3, 3): fan_in = 60 * 9
  expect_uniform(ct.weight, 1 / std::sqrt(540.0), "ConvTranspose2d.weight");
  expect_uniform(ct.bias, 1 / std::sqrt(540.0), "ConvTranspose2d.bias");
  nn::Bilinear bl(25, 30, 20);
  expect_uniform(bl.weight, 1 / 5.0, "Bilinear.weight");  // 1/sqrt(in1_features)
  expect_uniform(bl.bias, 1 / 5.0, "Bilinear.bias");
  // Embedding: N(0, 1), padding row zero.
  nn::Embedding emb(1000, 16, {.padding_idx = -1});
  EXPECT_EQ(*emb.padding_idx, 999);
  EXPECT_NEAR(emb.weight.mean().item<double>(), 0.0, 0.02);
  EXPECT_NEAR(emb.weight.std().item<double>(), 1.0, 0.02);
  EXPECT_EQ(max_abs(emb.weight[999]), 0.0);
  // Normalization layers: ones and zeros.
  nn::BatchNorm2d bn(5);
  EXPECT_TRUE(bn.weight.equal(ones({5})));
  EXPECT_TRUE(bn.bias.equal(zeros({5})));
  EXPECT_TRUE(bn.running_var.equal(ones({5})));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
  nn::LayerNorm ln({3, 4});
  EXPECT_TRUE(ln.weight.equal(ones({3, 4})));
  nn::GroupNorm gn(2, 4);
  EXPECT_TRUE(gn.bias.equal(zeros({4})));
  // reset_parameters draws again.
  Tensor before = fc.weight.clone();
  fc.reset_parameters();
  EXPECT_FALSE(fc.weight.equal(before));
  expect_uniform(fc.weight, 1 / std::sqrt(784.0), "Linear.weight after reset");
}

TEST(NnLayers, BilinearMatchesTheDefinition) {
  manual_seed(3);
  nn::Bilinear bl(3, 2, 4);
  Tensor a = randn({5, 3}, kFloat64), b = randn({5, 2}, kFloat64);
  bl.to(kFloat64);
  Tensor y = bl(a, b);
  ASSERT_EQ(y.sizes(), (Shape{5, 4}));
  Tensor W = bl.weight, bias = bl.bias;
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t o = 0; o < 4; ++o) {
      double s = bias[o].item<double>();
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j)
          s += a[n][i].item<double>() * W[o][i][j].item<double>() * b[n][j].item<double>();
      EXPECT_NEAR(y[n][o].item<double>(), s, 1e-12);
    }
  EXPECT_THROW(bl(randn({5, 3}, kFloat64), randn({4, 2}, kFloat64)), ShapeError);
}

TEST(NnFunctional, NormalizeCosineSimilarityPairwiseDistance) {
  Tensor x = tensor({{3., 4.}, {0., 0.}, {1., -1.}}, kFloat64);
  // Rows divided by their norms; the zero row stays zero (divided by eps).
  EXPECT_TRUE(tensor_is(F::normalize(x), {3, 2}, {0.6, 0.8, 0, 0, std::sqrt(0.5), -std::sqrt(0.5)}, 1e-15));
  EXPECT_TRUE(tensor_is(F::normalize(x, 1), {3, 2}, {3. / 7, 4. / 7, 0, 0, 0.5, -0.5}, 1e-15));
  // Along dim 0: column norms are sqrt(10) and sqrt(17).
  EXPECT_TRUE(tensor_near(F::normalize(x, 2, 0), x / tensor({std::sqrt(10.), std::sqrt(17.)}, kFloat64), 1e-15));
  Tensor y = tensor({{4., -3.}, {1., 1.}, {2., -2.}}, kFloat64);
  // Orthogonal, zero (0 / eps^2 = 0) and parallel rows.
  EXPECT_TRUE(tensor_is(F::cosine_similarity(x, y), {3}, {0, 0, 1}, 1e-15));
  EXPECT_TRUE(tensor_is(F::cosine_similarity(x, tensor({1., 0.}, kFloat64).unsqueeze(0)), {3}, {0.6, 0, std::sqrt(0.5)},
                        1e-15));
  EXPECT_TRUE(tensor_is(F::cosine_similarity(x, y, 0), {2},
                        {(12. + 2) / (std::sqrt(10.) * std::sqrt(21.)), (-12. + 2) / (std::sqrt(17.) * std::sqrt(14.))},
                        1e-15));
  // ||x - y + eps||: eps shifts every difference.
  const double e = 1e-6;
  EXPECT_TRUE(tensor_is(F::pairwise_distance(x, y), {3},
                        {std::hypot(-1 + e, 7 + e), std::hypot(-1 + e, -1 + e), std::hypot(-1 + e, 1 + e)}, 1e-14));
  EXPECT_TRUE(tensor_is(F::pairwise_distance(x, y, 1, 0, true), {3, 1}, {8, 2, 2}, 1e-15));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::cosine_similarity(x, tensor({1., 2., 3.}, kFloat64));
      },
      {"cosine_similarity", "[3, 2]", "[3]"}));
  EXPECT_THROW(F::normalize(tensor(1.0)), ShapeError);
  // The modules hold the options and print them as PyTorch does.
  nn::CosineSimilarity cos(0, 1e-6);
  EXPECT_TRUE(tensor_near(cos(x, y), F::cosine_similarity(x, y, 0), 0));
  std::ostringstream os;
  os << cos << "\n";
  nn::PairwiseDistance dist(1, 0, true);
  EXPECT_TRUE(tensor_is(dist(x, y), {3, 1}, {8, 2, 2}, 1e-15));
  os << dist;
  EXPECT_EQ(os.str(), "CosineSimilarity(dim=0, eps=1e-06)\nPairwiseDistance(p=1.0, eps=0.0, keepdim=True)");
}

TEST(NnFunctional, InterpolateNearestAndLinearAsPyTorch) {
  Tensor x = tensor({1., 2., 3., 4.}, kFloat64).view({1, 1, 2, 2});
  EXPECT_TRUE(tensor_is(F::interpolate(x, {.scale_factor = {2}}), {1, 1, 4, 4},
                        {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // PyTorch's documented bilinear results for this input, without and with align_corners.
  EXPECT_TRUE(tensor_is(F::interpolate(x, {.scale_factor = {2}, .mode = "bilinear"}), {1, 1, 4, 4},
                        {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}, 1e-15));
  const double t = 1. / 3;
  EXPECT_TRUE(tensor_is(
      F::interpolate(x, {.size = {4}, .mode = "bilinear", .align_corners = true}), {1, 1, 4, 4},
      {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t, 3 + 2 * t, 4},
      1e-14));
  // Downsampling: nearest takes floor(j * in / out); linear with size 3 from [0, 10, 20, 30, 40].
  Tensor r = tensor({0., 10., 20., 30., 40.}, kFloat64).view({1, 1, 5});
  EXPECT_TRUE(tensor_is(F::interpolate(r, {.size = {3}}), {1, 1, 3}, {0, 10, 30}));
  // src = (j + 0.5) * 5/3 - 0.5 = 1/3, 2, 11/3.
  EXPECT_TRUE(tensor_is(F::interpolate(r, {.size = {3}, .mode = "linear"}), {1, 1, 3}, {10. / 3, 20, 110. / 3}, 1e-13));
  // Different sizes per dim, and a 5-D input.
  EXPECT_EQ(F::interpolate(x, {.size = {3, 5}, .mode = "bilinear"}).sizes(), Shape({1, 1, 3, 5}));
  EXPECT_EQ(F::interpolate(zeros({1, 2, 2, 3, 4}), {.scale_factor = {1.5, 2, 0.5}, .mode = "trilinear"}).sizes(),
            Shape({1, 2, 3, 6, 2}));
  // Errors.
  EXPECT_TRUE(throws_with<ValueError>([&] { F::interpolate(x, {.size = {4}, .mode = "linear"}); },
                                      {"'linear'", "4-D", "'bilinear'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::interpolate(x, {.size = {4}, .align_corners = false}); },
                                      {"align_corners", "nearest"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { F::interpolate(x, {}); }, {"one of size and scale_factor"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::interpolate(x, {.size = {1, 2, 3}});
      },
      {"size has 3 values", "2 spatial"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { F::interpolate(x.view({4}), {.size = {2}}); }, {"3-D", "[4]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { F::interpolate(x, {.scale_factor = {0.4}}); }, {"non-empty"}));
  // The module.
  nn::Upsample up({.scale_factor = {2}, .mode = "bilinear", .align_corners = false});
  EXPECT_TRUE(tensor_near(up(x), F::interpolate(x, {.scale_factor = {2}, .mode = "bilinear"}), 0));
  std::ostringstream os;
  os << up << "\n" << nn::Upsample({.size = {3, 5}});
  EXPECT_EQ(os.str(),
            "Upsample(scale_factor=2.0, mode='bilinear', align_corners=False)\nUpsample(size=(3, 5), mode='nearest')");
}

TEST(NnLayers, ConvolutionsAndPooling) {
  manual_seed(5);
  nn::Conv2d conv(3, 4, 3, {.stride = 2, .padding = 1});
  Tensor x = randn({2, 3, 9, 9});
  Tensor y = conv(x);
  EXPECT_EQ(y.sizes(), (Shape{2, 4, 5, 5}));
  EXPECT_TRUE(allclose(y, conv2d(x, conv.weight, conv.bias, 2, 1)));
  EXPECT_THROW(conv(randn({2, 2, 9, 9})), ShapeError);
  nn::Conv1d c1(2, 3, 3, {.padding = 1});
  EXPECT_EQ(c1(randn({4, 2, 10})).sizes(), (Shape{4, 3, 10}));
  nn::ConvTranspose2d up(4, 2, 2, {.stride = 2});
  EXPECT_EQ(up(y).sizes(), (Shape{2, 2, 10, 10}));
  EXPECT_EQ(nn::MaxPool2d(2)(x).sizes(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(nn::AvgPool2d(3, {.stride = 2, .padding = 1})(x).sizes(), (Shape{2, 3, 5, 5}));
  Tensor g = nn::AdaptiveAvgPool2d(1)(x);
  EXPECT_TRUE(allclose(g.flatten(1), x.mean({2, 3}), 1e-5, 1e-6));
  Tensor m = tensor({{{{1., 2.}, {3., 4.}}}});
  EXPECT_EQ(nn::MaxPool2d(2)(m).item<double>(), 4.0);
  EXPECT_EQ(nn::AvgPool2d(2)(m).item<double>(), 2.5);
}

TEST(NnLayers, BatchNorm1dRunningStatisticsByHand) {
  // Channel 0: 1, 3, -1, 2 -> mean 1.25, biased var 2.1875, unbiased 2.9166...
  // Channel 1: -2, 0.5, 4, 1.5 -> mean 1.0, biased var 4.625, unbiased 6.1666...
  Tensor x = tensor({{1.0, -2.0}, {3.0, 0.5}, {-1.0, 4.0}, {2.0, 1.5}}, kFloat64);
  nn::BatchNorm1d bn(2);
  bn.to(kFloat64);
  Tensor y = bn(x);
  Tensor mean = tensor({1.25, 1.0}, kFloat64), var = tensor({2.1875, 4.625}, kFloat64);
  EXPECT_TRUE(allclose(y, (x - mean) / (var + 1e-5).sqrt(), 1e-12, 1e-12));
  // running = 0.9 * running + 0.1 * batch (variance unbiased): mean 0.1 * [1.25, 1.0];
  // var 0.9 + 0.1 * [8.75 / 3, 18.5 / 3].
  EXPECT_TRUE(allclose(bn.running_mean, tensor({0.125, 0.1}, kFloat64), 1e-12, 1e-15));
  EXPECT_TRUE(allclose(bn.running_var, tensor({0.9 + 0.875 / 3, 0.9 + 1.85 / 3}, kFloat64), 1e-12, 1e-15));
  // A second batch 2x: mean [2.5, 2.0], unbiased var 4x.
  bn(x * 2);
  EXPECT_TRUE(allclose(bn.running_mean, tensor({0.9 * 0.125 + 0.25, 0.9 * 0.1 + 0.2}, kFloat64), 1e-12, 1e-15));
  EXPECT_TRUE(
      allclose(bn.running_var,
               tensor({0.9 * (0.9 + 0.875 / 3) + 0.4 * 8.75 / 3, 0.9 * (0.9 + 1.85 / 3) + 0.4 * 18.5 / 3}, kFloat64),
               1e-12, 1e-15));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
  // Evaluation uses the running statistics (and does not change them).
  bn.eval();
  Tensor rm = bn.running_mean.clone(), rv = bn.running_var.clone();
  EXPECT_TRUE(allclose(bn(x), (x - rm) / (rv + 1e-5).sqrt(), 1e-12, 1e-12));
  EXPECT_TRUE(bn.running_mean.equal(rm));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);

  // momentum = None: the cumulative average of the batch statistics.
  nn::BatchNorm1d cma(2, {.momentum = std::nullopt});
  cma.to(kFloat64);
  cma(x);
  cma(x * 2);
  EXPECT_TRUE(allclose(cma.running_mean, tensor({(1.25 + 2.5) / 2, (1.0 + 2.0) / 2}, kFloat64), 1e-12, 1e-15));
  EXPECT_TRUE(allclose(cma.running_var, tensor({(8.75 / 3 * 5) / 2, (18.5 / 3 * 5) / 2}, kFloat64), 1e-12, 1e-15));
  EXPECT_EQ(cma.num_batches_tracked.item<int64_t>(), 2);
  // The count is mirrored on the host (no read-back per step); a count written from outside is
  // read again: after fill_(9) the next step averages with factor 1 / 10, after a load_state_dict
  // of count 3 with 1 / 4, after reset_running_stats with 1.
  Tensor rm2 = cma.running_mean.clone();
  {
    autograd::NoGradGuard ng;
    cma.num_batches_tracked.fill_(9);
  }
  cma(x);
  EXPECT_TRUE(allclose(cma.running_mean, rm2 * 0.9 + mean * 0.1, 1e-12, 1e-15));
  EXPECT_EQ(cma.num_batches_tracked.item<int64_t>(), 10);
  auto state = cma.state_dict();
  state["num_batches_tracked"] = scalar_tensor(3, dtype(kInt64));
  cma.load_state_dict(state);
  Tensor rm3 = cma.running_mean.clone();
  cma(x * 2);
  EXPECT_TRUE(allclose(cma.running_mean, rm3 * 0.75 + mean * 2 * 0.25, 1e-12, 1e-15));
  cma(x);
  EXPECT_TRUE(allclose(cma.running_mean, (rm3 * 0.75 + mean * 2 * 0.25) * 0.8 + mean * 0.2, 1e-12, 1e-15));
  cma.reset_running_stats();
  cma(x * 2);
  EXPECT_TRUE(allclose(cma.running_mean, mean * 2, 1e-12, 1e-15));

  // Without running statistics, evaluation uses the batch statistics.
  nn::BatchNorm1d nostats(2, {.track_running_stats = false});
  nostats.to(kFloat64);
  nostats.eval();
  EXPECT_TRUE(allclose(nostats(x), (x - mean) / (var + 1e-5).sqrt(), 1e-12, 1e-12));
  EXPECT_EQ(nostats.buffers().size(), 0u);
  // One value per channel cannot be normalized in training.
  try {
    bn.train();
    bn(tensor({{1.0, 2.0}}, kFloat64));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("expected more than 1 value per channel"), std::string::npos) << e.what();
  }
}

TEST(NnLayers, BatchNorm2dAffineAndGradients) {
  manual_seed(7);
  nn::BatchNorm2d bn(3);
  bn.to(kFloat64);
  {
    autograd::NoGradGuard ng;
    bn.weight.copy_(tensor({0.5, 2.0, -1.0}, kFloat64));
    bn.bias.copy_(tensor({0.1, 0.2, 0.3}, kFloat64));
  }
  Tensor x = randn({4, 3, 5, 5}, kFloat64).requires_grad_();
  Tensor y = bn(x);
  Tensor mean = x.mean({0, 2, 3}, true);
  Tensor v = std::get<0>(var_mean(x, {0, 2, 3}, 0, true));
  Tensor expect = (x - mean) / (v + 1e-5).sqrt() * bn.weight.view({1, 3, 1, 1}) + bn.bias.view({1, 3, 1, 1});
  EXPECT_TRUE(allclose(y, expect, 1e-10, 1e-12));
  // Per channel, the output has mean bias and std |weight|.
  EXPECT_TRUE(allclose(y.mean({0, 2, 3}), bn.bias, 1e-10, 1e-12));
  // The fused backward agrees with autograd through the composite formula.
  Tensor gy = randn({4, 3, 5, 5}, kFloat64);
  auto g1 = autograd::grad({y}, {x, bn.weight, bn.bias}, {gy});
  auto g2 = autograd::grad({expect}, {x, bn.weight, bn.bias}, {gy});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(allclose(g1[i], g2[i], 1e-9, 1e-11)) << i;
  EXPECT_THROW(bn(randn({4, 3, 5}, kFloat64)), ShapeError);
  EXPECT_THROW(bn(randn({4, 2, 5, 5}, kFloat64)), ShapeError);
}

// float32 batch norm sums in float lanes within blocks and in double across them, its statistics in
// one pass over x shifted by one of its values: as exact as float64's two passes allow, also for
// values far from zero with a small spread (the statistics; the output itself then carries
// float32's rounding of x - mean, as PyTorch's), planes longer than a block, and odd lengths.
TEST(NnLayers, BatchNormFloat32StatisticsAgreeWithFloat64) {
  manual_seed(9);
  for (auto shape :
       {std::vector<int64_t>{8, 3, 37, 41}, std::vector<int64_t>{64, 5, 7, 7}, std::vector<int64_t>{33, 4}}) {
    for (bool far : {true, false}) {
      const std::string what = std::to_string(shape.size()) + "-d, " + (far ? "far from zero" : "near zero");
      Tensor x64 = far ? randn(shape, kFloat64) * 0.01 + 1000.0 : randn(shape, kFloat64) * 2 + 3;
      x64.select(1, 1).mul_(3.0);  // one channel with another spread
      Tensor x = x64.to(kFloat32).requires_grad_();
      Tensor xd = x.detach().to(kFloat64).requires_grad_();  // the same values, in float64
      int64_t C = shape[1];
      Tensor rm = zeros({C}), rv = ones({C}), rmd = zeros({C}, kFloat64), rvd = ones({C}, kFloat64);
      Tensor y = batch_norm(x, Tensor(), Tensor(), rm, rv, true, 0.5, 1e-5);
      Tensor yd = batch_norm(xd, Tensor(), Tensor(), rmd, rvd, true, 0.5, 1e-5);
      EXPECT_TRUE(allclose(rm.to(kFloat64), rmd, 1e-7, 0)) << "running mean, " << what;
      EXPECT_TRUE(allclose(rv.to(kFloat64), rvd, 1e-5, 0)) << "running variance, " << what;
      if (far) continue;
      EXPECT_TRUE(allclose(y.to(kFloat64), yd, 1e-5, 1e-5)) << what;
      Tensor gy = randn(shape, kFloat64);
      Tensor gx = autograd::grad({y}, {x}, {gy.to(kFloat32)})[0];
      Tensor gxd = autograd::grad({yd}, {xd}, {gy})[0];
      EXPECT_TRUE(allclose(gx.to(kFloat64), gxd, 1e-4, 1e-5)) << "input gradient, " << what;
    }
  }
}

TEST(NnLayers, LayerNormAndGroupNorm) {
  manual_seed(8);
  Tensor x = randn({2, 3, 4}, kFloat64);
  nn::LayerNorm ln({3, 4});
  ln.to(kFloat64);
  {
    autograd::NoGradGuard ng;
    ln.weight.normal_();
    ln.bias.normal_();
  }
  auto [v, m] = var_mean(x, {1, 2}, 0, true);
  EXPECT_TRUE(allclose(ln(x), (x - m) / (v + 1e-5).sqrt() * ln.weight + ln.bias, 1e-10, 1e-12));
  EXPECT_THROW(nn::LayerNorm({5})(x), ShapeError);
  // GroupNorm(2 groups of 2 channels) on (N, C=4, L=3): statistics over (2 channels x 3).
  Tensor g = randn({2, 4, 3}, kFloat64);
  nn::GroupNorm gn(2, 4);
  gn.to(kFloat64);
  Tensor grouped = g.view({2, 2, 6});
  auto [gv, gm] = var_mean(grouped, {2}, 0, true);
  Tensor expect = ((grouped - gm) / (gv + 1e-5).sqrt()).view({2, 4, 3});
  EXPECT_TRUE(allclose(gn(g), expect, 1e-10, 1e-12));
  EXPECT_THROW(nn::GroupNorm(3, 4), ValueError);
  EXPECT_THROW(gn(randn({2, 6, 3})), ShapeError);
}

// RMSNorm as torch.nn.RMSNorm: the definition in float64, the default eps (the dtype's machine
// epsilon: it matters for small inputs), PyTorch's repr and state-dict key, 16-bit inputs
// normalized in float32, and the errors.
TEST(NnLayers, RmsNormAsTorchs) {
  manual_seed(9);
  Tensor x = randn({2, 3, 4}, kFloat64);
  nn::RMSNorm rn({3, 4});
  rn.to(kFloat64);
  {
    autograd::NoGradGuard ng;
    rn.weight.normal_();
  }
  const double eps64 = 2.220446049250313e-16;
  Tensor want = x / ((x * x).mean({1, 2}, true) + eps64).sqrt() * rn.weight;
  EXPECT_TRUE(allclose(rn(x), want, 1e-12, 1e-14));
  // eps: at 1e-4 the default float32 one (1.19e-7) and an explicit 1e-2 give different results.
  Tensor tiny = full({1, 4}, 1e-4);
  EXPECT_NEAR(F::rms_norm(tiny, {4}).max().item<double>(), 1e-4 / std::sqrt(1e-8 + 1.1920928955078125e-07), 1e-5);
  EXPECT_NEAR(F::rms_norm(tiny, {4}, {}, 1e-2).max().item<double>(), 1e-4 / std::sqrt(1e-8 + 1e-2), 1e-7);
  EXPECT_EQ(nn::RMSNorm({4}).extra_repr(), "(4,), eps=None, elementwise_affine=True");
  EXPECT_EQ(nn::RMSNorm({3, 4}, {.eps = 1e-6, .elementwise_affine = false}).extra_repr(),
            "(3, 4), eps=1e-06, elementwise_affine=False");
  EXPECT_EQ(nn::RMSNorm({4}).state_dict().keys(), std::vector<std::string>{"weight"});
  EXPECT_TRUE(nn::RMSNorm({4}, {.elementwise_affine = false}).state_dict().empty());
  // bfloat16 in: float32 inside, the result rounded once to bfloat16; a float32 weight promotes.
  Tensor xb = randn({5, 8}).to(kBFloat16);
  Tensor xf = xb.to(kFloat32);
  Tensor ref = (xf / ((xf * xf).mean({1}, true) + 0.0078125).sqrt()).to(kBFloat16);
  EXPECT_TRUE(equal(F::rms_norm(xb, {8}), ref));
  EXPECT_EQ(nn::RMSNorm({8})(xb).dtype(), kFloat32);
  EXPECT_THROW(nn::RMSNorm({5})(x), ShapeError);
  EXPECT_THROW(F::rms_norm(x, {4}, ones({3}, kFloat64)), ShapeError);
  EXPECT_THROW(F::rms_norm(ones({2, 4}, kInt64), {4}), DTypeError);
  EXPECT_THROW(nn::RMSNorm({}), ValueError);
}

TEST(NnLayers, DropoutIsSeededScaledAndOffInEval) {
  nn::Dropout drop(0.3);
  Tensor x = ones({100000});
  manual_seed(11);
  Tensor a = drop(x);
  manual_seed(11);
  Tensor b = drop(x);
  EXPECT_TRUE(a.equal(b));  // reproducible with manual_seed
  // Each element is 0 or 1 / (1 - p); about p of them are dropped.
  Tensor kept = a.ne(0);
  EXPECT_TRUE(allclose(a.masked_select(kept), full({kept.sum().item<int64_t>()}, 1 / 0.7)));
  double dropped = 1 - kept.to(kFloat64).mean().item<double>();
  EXPECT_NEAR(dropped, 0.3, 0.01);
  // The same seed gives the same mask in float32 and float64.
  manual_seed(11);
  Tensor c = drop(x.to(kFloat64));
  EXPECT_TRUE(c.ne(0).equal(kept));
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
  EXPECT_TRUE(F::dropout(x, 1.0).equal(zeros({100000})));
  EXPECT_THROW(nn::Dropout(1.5), ValueError);
  // Gradients flow through the kept elements only, scaled.
  Tensor w = ones({6}, requires_grad());
  manual_seed(2);
  Tensor y = F::dropout(w, 0.5);
  y.sum().backward();
  EXPECT_TRUE(w.grad().equal(y.detach()));
}

TEST(NnLayers, Dropout2dZeroesWholeChannels) {
  manual_seed(12);
  Tensor x = ones({8, 16, 3, 3});
  Tensor y = nn::Dropout2d(0.5)(x);
  Tensor per_channel = y.amax({2, 3});             // 0 or 2 for a channel
  EXPECT_TRUE(y.amin({2, 3}).equal(per_channel));  // constant within each channel
  Tensor vals = per_channel.flatten();
  EXPECT_TRUE((vals.eq(0) | vals.eq(2)).all().item<bool>());
  double frac = vals.eq(0).to(kFloat64).mean().item<double>();
  EXPECT_GT(frac, 0.3);
  EXPECT_LT(frac, 0.7);
  EXPECT_EQ(nn::Dropout2d(0.5)(ones({4, 2, 2})).sizes(), (Shape{4, 2, 2}));
  EXPECT_THROW(F::dropout2d(ones({4, 2})), ShapeError);
}

TEST(NnLayers, EmbeddingLookupAndPaddingGradient) {
  nn::Embedding emb(5, 3, {.padding_idx = 0});
  Tensor idx = tensor({{0, 2}, {4, 2}});
  Tensor out = emb(idx);
  EXPECT_EQ(out.sizes(), (Shape{2, 2, 3}));
  EXPECT_TRUE(out[1][0].equal(emb.weight[4]));
  EXPECT_TRUE(out[0][0].equal(zeros({3})));
  out.sum().backward();
  // Row 2 is used twice; row 0 is the padding row and learns nothing.
  Tensor g = emb.weight.grad();
  EXPECT_TRUE(g[2].equal(full({3}, 2.0)));
  EXPECT_TRUE(g[4].equal(ones({3})));
  EXPECT_TRUE(g[0].equal(zeros({3})));
  EXPECT_TRUE(g[1].equal(zeros({3})));
  try {
    emb(tensor({1, 5}));
    FAIL();
  } catch (const IndexError& e) { EXPECT_STREQ(e.what(), "Embedding: index 5 is out of range for a table of 5 rows"); }
  EXPECT_THROW(emb(tensor({1.0, 2.0})), DTypeError);
}

TEST(NnLayers, ActivationModulesMatchTheOps) {
  Tensor x = linspace(-3, 3, 13, kFloat64);
  EXPECT_TRUE(nn::ReLU()(x).equal(relu(x)));
  EXPECT_TRUE(nn::LeakyReLU(0.2)(x).equal(leaky_relu(x, 0.2)));
  EXPECT_TRUE(nn::GELU()(x).equal(gelu(x)));
  EXPECT_TRUE(nn::GELU("tanh")(x).equal(gelu_tanh(x)));
  EXPECT_TRUE(nn::SiLU()(x).equal(silu(x)));
  EXPECT_TRUE(nn::Sigmoid()(x).equal(sigmoid(x)));
  EXPECT_TRUE(nn::Tanh()(x).equal(tanh(x)));
  EXPECT_TRUE(nn::ELU(0.5)(x).equal(elu(x, 0.5)));
  Tensor m = x.view({13, 1}).expand({13, 3}).contiguous();
  EXPECT_TRUE(nn::Softmax(1)(m).equal(softmax(m, 1)));
  EXPECT_TRUE(nn::LogSoftmax(0)(m).equal(log_softmax(m, 0)));
  EXPECT_THROW(nn::GELU("fast"), ValueError);
  EXPECT_EQ(nn::Flatten()(zeros({2, 3, 4})).sizes(), (Shape{2, 12}));
  EXPECT_EQ(nn::Unflatten(1, {3, 4})(zeros({2, 12})).sizes(), (Shape{2, 3, 4}));
  Tensor i = randn({2, 2});
  EXPECT_TRUE(nn::Identity()(i).is_same(i));
}

// The activations beyond the core's, element by element against their definitions in float64.
TEST(NnLayers, MoreActivationsMatchTheirDefinitions) {
  const std::vector<double> xs = {-4, -3, -1.5, -0.5, -0.1, 0, 0.1, 0.5, 1.5, 3, 4};
  Tensor x = tensor(xs, dtype(kFloat64));
  auto expect_map = [&](nn::Module& m, const std::function<double(double)>& f, const char* what) {
    std::vector<double> got = values(m(x));
    ASSERT_EQ(got.size(), xs.size()) << what;
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(got[i], f(xs[i]), 1e-14) << what << " at x = " << xs[i];
  };
  auto sp = [](double v) { return std::log1p(std::exp(v)); };
  const double selu_alpha = 1.6732632423543772848170429916717, selu_scale = 1.0507009873554804934193349852946;
  nn::ReLU6 relu6_m;
  expect_map(
      relu6_m, [](double v) { return std::min(std::max(v, 0.0), 6.0); }, "ReLU6");
  nn::Mish mish_m;
  expect_map(
      mish_m, [&](double v) { return v * std::tanh(sp(v)); }, "Mish");
  nn::SELU selu_m;
  expect_map(
      selu_m, [&](double v) { return selu_scale * (v > 0 ? v : selu_alpha * std::expm1(v)); }, "SELU");
  nn::LogSigmoid ls_m;
  expect_map(
      ls_m, [&](double v) { return -sp(-v); }, "LogSigmoid");
  nn::Hardsigmoid hs_m;
  expect_map(
      hs_m, [](double v) { return std::min(std::max(v / 6 + 0.5, 0.0), 1.0); }, "Hardsigmoid");
  nn::Hardswish hw_m;
  expect_map(
      hw_m, [](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }, "Hardswish");
  nn::Softsign ss_m;
  expect_map(
      ss_m, [](double v) { return v / (1 + std::abs(v)); }, "Softsign");
  nn::Tanhshrink ts_m;
  expect_map(
      ts_m, [](double v) { return v - std::tanh(v); }, "Tanhshrink");
  nn::Softplus softplus_m(2.0, 5.0);  // linear where 2x > 5
  expect_map(
      softplus_m, [&](double v) { return 2 * v > 5 ? v : sp(2 * v) / 2; }, "Softplus");
  nn::Hardtanh ht_m(-2.0, 1.0);
  expect_map(
      ht_m, [](double v) { return std::min(std::max(v, -2.0), 1.0); }, "Hardtanh");
  nn::CELU celu_m(2.0);
  expect_map(
      celu_m, [](double v) { return v > 0 ? v : 2 * std::expm1(v / 2); }, "CELU");
  nn::Threshold th_m(0.1, 20.0);
  expect_map(
      th_m, [](double v) { return v > 0.1 ? v : 20.0; }, "Threshold");
  nn::PReLU prelu_one;  // slope 0.25
  expect_map(
      prelu_one, [](double v) { return v > 0 ? v : 0.25 * v; }, "PReLU");

  // GLU halves the last dim; Softmin is softmax(-x).
  Tensor g = tensor({{1.0, 2.0, 0.5, -1.0}}, dtype(kFloat64));
  EXPECT_TRUE(values_near(values(nn::GLU()(g)), {1 / (1 + std::exp(-0.5)), 2 / (1 + std::exp(1.0))}, 1e-15, 0));
  EXPECT_TRUE(nn::Softmin(1)(g).equal(softmax(-g, 1)));
  EXPECT_THROW(nn::GLU(1)(zeros({2, 3})), ShapeError);

  // PReLU per channel: slopes on dim 1, learned (the gradient of the slope is the sum of the
  // negative inputs times the incoming gradient).
  nn::PReLU per_channel(2, 0.5);
  Tensor img = tensor({{{-1.0, 2.0}, {-3.0, 4.0}}}, dtype(kFloat32));  // (N=1, C=2, L=2)
  Tensor out = per_channel(img);
  EXPECT_TRUE(tensor_is(out, {1, 2, 2}, {-0.5, 2.0, -1.5, 4.0}));
  out.sum().backward();
  EXPECT_TRUE(tensor_is(per_channel.weight.grad(), {2}, {-1.0, -3.0}));
  EXPECT_THROW(per_channel(zeros({1, 3, 2})), ShapeError);
  EXPECT_THROW(nn::PReLU(0), ValueError);
  EXPECT_THROW(nn::Hardtanh(1.0, -1.0), ValueError);
  EXPECT_THROW(nn::CELU(0.0)(x), ValueError);

  // They print as PyTorch's modules do.
  std::ostringstream os;
  os << nn::Sequential(nn::Softplus(), nn::Hardtanh(), nn::PReLU(3), nn::GLU(), nn::Threshold(0.1, 20), nn::ReLU6());
  EXPECT_EQ(os.str(),
            "Sequential(\n  (0): Softplus(beta=1.0, threshold=20.0)\n  (1): Hardtanh(min_val=-1.0, max_val=1.0)\n"
            "  (2): PReLU(num_parameters=3)\n  (3): GLU(dim=-1)\n  (4): Threshold(threshold=0.1, value=20.0)\n"
            "  (5): ReLU6()\n)");
}

// 1-d pooling on a known line, worked out by hand (windows listed), and AdaptiveMaxPool2d.
TEST(NnLayers, Pooling1dAndAdaptiveMax) {
  Tensor x = tensor({1.0, 3.0, 2.0, 5.0, 4.0, 0.0, 7.0}, dtype(kFloat64)).view({1, 1, 7});
  auto line = [](const Tensor& t) { return values(t); };
  EXPECT_EQ(line(nn::MaxPool1d(2)(x)), (std::vector<double>{3, 5, 4}));                          // [1 3] [2 5] [4 0]
  EXPECT_EQ(line(nn::MaxPool1d(2, {.ceil_mode = true})(x)), (std::vector<double>{3, 5, 4, 7}));  // + [7]
  // Padding 1 (with -inf), stride 2: [. 1 3] [3 2 5] [5 4 0] [0 7 .]
  EXPECT_EQ(line(nn::MaxPool1d(3, {.stride = 2, .padding = 1})(x)), (std::vector<double>{3, 5, 5, 7}));
  EXPECT_EQ(line(nn::MaxPool1d(2, {.stride = 1, .dilation = 3})(x)),
            (std::vector<double>{5, 4, 2, 7}));  // x[i], x[i+3]
  EXPECT_TRUE(values_near(line(nn::AvgPool1d(2)(x)), {2, 3.5, 2}, 1e-15, 0));
  // Zero padding counted (/3) or not (/2 at the ends).
  EXPECT_TRUE(
      values_near(line(nn::AvgPool1d(3, {.stride = 2, .padding = 1})(x)), {4.0 / 3, 10.0 / 3, 3, 7.0 / 3}, 1e-15, 0));
  EXPECT_TRUE(values_near(line(nn::AvgPool1d(3, {.stride = 2, .padding = 1, .count_include_pad = false})(x)),
                          {2, 10.0 / 3, 3, 3.5}, 1e-15, 0));
  // Adaptive windows of a 7-line into 3: [0, 3), [2, 5), [4, 7).
  EXPECT_TRUE(values_near(line(nn::AdaptiveAvgPool1d(3)(x)), {2, 11.0 / 3, 11.0 / 3}, 1e-15, 0));
  EXPECT_EQ(line(nn::AdaptiveMaxPool1d(3)(x)), (std::vector<double>{3, 5, 7}));
  // Unbatched (C, L) works too; 4-d input does not.
  EXPECT_EQ(nn::MaxPool1d(2)(x[0]).sizes(), (Shape{1, 3}));
  EXPECT_THROW(nn::MaxPool1d(2)(zeros({1, 1, 1, 7})), ShapeError);
  // AdaptiveMaxPool2d(2) of a 4x4 ramp: the quadrants' maxima.
  Tensor img = arange(16, dtype(kFloat64)).view({1, 1, 4, 4});
  EXPECT_EQ(values(nn::AdaptiveMaxPool2d(2)(img)), (std::vector<double>{5, 7, 13, 15}));
  std::ostringstream os;
  os << nn::Sequential(nn::MaxPool1d(2), nn::AvgPool1d(3, {.stride = 2}), nn::AdaptiveAvgPool1d(5),
                       nn::AdaptiveMaxPool2d({5, 7}));
  EXPECT_EQ(os.str(),
            "Sequential(\n  (0): MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
            "  (1): AvgPool1d(kernel_size=(3,), stride=(2,), padding=(0,))\n  (2): AdaptiveAvgPool1d(output_size=5)\n"
            "  (3): AdaptiveMaxPool2d(output_size=(5, 7))\n)");
}

TEST(NnLayers, ClipGradNormAndValue) {
  Tensor a = zeros({2}, requires_grad()), b = zeros({2}, requires_grad()), c = zeros({1}, requires_grad());
  a.set_grad(tensor({3.0f, 0.0f}));
  b.set_grad(tensor({0.0f, 4.0f}));  // total 2-norm 5; c has no gradient and is skipped
  double norm = nn::utils::clip_grad_norm_({a, b, c}, 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-6);
  // Scaled by max_norm / (norm + 1e-6).
  EXPECT_NEAR(a.grad()[0].item<double>(), 3.0 / (5.0 + 1e-6), 1e-6);
  EXPECT_NEAR(b.grad()[1].item<double>(), 4.0 / (5.0 + 1e-6), 1e-6);
  // Under the limit nothing changes.
  double n2 = nn::utils::clip_grad_norm_({a, b}, 10.0);
  EXPECT_NEAR(n2, 1.0, 1e-5);
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.6, 1e-5);
  // Infinity norm: the largest magnitude.
  a.set_grad(tensor({-7.0f, 1.0f}));
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 100.0, INFINITY), 7.0, 1e-6);
  // 1-norm.
  // 1-norm: |-7| + |1| + |b| (b is [0, 4 / (5 + 1e-6)] from the first clip).
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 100.0, 1.0), 8.0 + 4.0 / (5.0 + 1e-6), 1e-5);
  // Non-finite norms: an error if asked (gradients untouched), else they propagate.
  a.set_grad(tensor({NAN, 1.0f}));
  Tensor before = b.grad().clone();
  EXPECT_THROW(nn::utils::clip_grad_norm_({a, b}, 1.0, 2.0, /*error_if_nonfinite=*/true), ValueError);
  EXPECT_TRUE(b.grad().equal(before));
  EXPECT_TRUE(std::isnan(nn::utils::clip_grad_norm_({a, b}, 1.0)));
  a.set_grad(tensor({NAN, 1.0f}));
  EXPECT_TRUE(std::isnan(nn::utils::clip_grad_norm_({a, b}, 1.0, INFINITY)));  // the max propagates NaN
  // Gradients of two dtypes: the norms are combined in float64.
  Tensor d = zeros({1}, TensorOptions().dtype(kFloat64).requires_grad(true));
  a.set_grad(tensor({3.0f, 0.0f}));
  d.set_grad(tensor({4.0}, kFloat64));
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, d}, 100.0), 5.0, 1e-12);
  // clip_grad_value_ clamps elementwise.
  a.set_grad(tensor({-3.0f, 0.5f}));
  nn::utils::clip_grad_value_({a}, 1.0);
  EXPECT_TRUE(a.grad().equal(tensor({-1.0f, 0.5f})));
}

TEST(NnLayers, PixelShuffleInstanceNormAffineGrid) {
  // out[c, h r + i, w r + j] = x[c r^2 + i r + j, h, w].
  Tensor x = arange(8, kFloat64).reshape({1, 4, 1, 2});
  Tensor y = F::pixel_shuffle(x, 2);
  EXPECT_EQ(y.sizes(), (Shape{1, 1, 2, 4}));
  EXPECT_TRUE(y.equal(tensor({0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0}, kFloat64).reshape({1, 1, 2, 4})));
  EXPECT_TRUE(F::pixel_unshuffle(y, 2).equal(x));
  EXPECT_EQ(nn::PixelUnshuffle(2)(ones({3, 4, 6})).sizes(), (Shape{12, 2, 3}));  // unbatched
  EXPECT_THROW(F::pixel_shuffle(ones({1, 3, 2, 2}), 2), ShapeError);             // 3 channels, r^2 = 4
  EXPECT_THROW(F::pixel_unshuffle(ones({1, 1, 3, 4}), 2), ShapeError);
  // Instance norm: (x - mean) / sqrt(var + eps) per (sample, channel), biased variance.
  Tensor v = tensor({1.0, 2.0, 3.0, 10.0, 10.0, 16.0}, kFloat64).reshape({2, 1, 3});
  nn::InstanceNorm1d norm(1, {.track_running_stats = true});
  norm.to(kFloat64);  // float64 running statistics, for exact comparisons
  Tensor n = norm(v);
  const double s0 = std::sqrt(2.0 / 3 + 1e-5), s1 = std::sqrt(8.0 + 1e-5);
  EXPECT_TRUE(
      allclose(n, tensor({-1 / s0, 0.0, 1 / s0, -2 / s1, -2 / s1, 4 / s1}, kFloat64).reshape({2, 1, 3}), 1e-12, 1e-12));
  // Running statistics: 0.9 * 0 + 0.1 * mean over N of the means (2, 12); unbiased variances (1, 12).
  EXPECT_NEAR(norm.running_mean.item<double>(), 0.1 * 7.0, 1e-12);
  EXPECT_NEAR(norm.running_var.item<double>(), 0.9 + 0.1 * 6.5, 1e-12);
  EXPECT_EQ(norm.num_batches_tracked.item<int64_t>(), 0);  // PyTorch's InstanceNorm does not count batches
  norm.eval();                                             // now normalizes with the running statistics
  EXPECT_TRUE(allclose(norm(v), (v - 0.7) / std::sqrt(1.55 + 1e-5), 1e-12, 1e-12));
  EXPECT_EQ(nn::InstanceNorm2d(3)(ones({3, 2, 2})).sizes(), (Shape{3, 2, 2}));  // unbatched
  EXPECT_THROW(nn::InstanceNorm2d(3)(ones({1, 4, 2, 2})), ShapeError);
  EXPECT_EQ(nn::InstanceNorm2d(3, {.affine = true}).parameters().size(), 2u);
  EXPECT_EQ(nn::InstanceNorm3d(3).parameters().size(), 0u);  // PyTorch's default: no affine
  // One spatial element per instance (PyTorch 1.13: ValueError "Expected more than 1 spatial element
  // when training, got input size torch.Size([2, 3, 1, 1])"), also for a module in eval mode that
  // tracks no running statistics (it still uses the input's); with running statistics it is fine.
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::instance_norm(ones({2, 3, 1, 1}));
      },
      {"instance_norm", "more than 1 spatial element", "[2, 3, 1, 1]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { nn::InstanceNorm1d(3)(ones({2, 3, 1})); }, {"[2, 3, 1]"}));
  nn::InstanceNorm2d frozen(3);
  frozen.eval();
  EXPECT_THROW(frozen(ones({3, 1, 1})), ValueError);
  EXPECT_EQ(F::instance_norm(ones({2, 3, 1}), zeros({3}), ones({3}), {}, {}, /*use_input_stats=*/false).sizes(),
            (Shape{2, 3, 1}));
  EXPECT_EQ(F::instance_norm(ones({2, 3, 0, 2})).sizes(), (Shape{2, 3, 0, 2}));  // 0 elements: PyTorch's check passes
  // affine_grid with the identity: x along the width, y along the height.
  Tensor id = tensor({1.0, 0.0, 0.0, 0.0, 1.0, 0.0}, kFloat64).reshape({1, 2, 3});
  Tensor g = F::affine_grid(id, {1, 1, 2, 3}, /*align_corners=*/true);
  EXPECT_EQ(g.sizes(), (Shape{1, 2, 3, 2}));
  EXPECT_TRUE(g.equal(
      tensor({-1.0, -1.0, 0.0, -1.0, 1.0, -1.0, -1.0, 1.0, 0.0, 1.0, 1.0, 1.0}, kFloat64).reshape({1, 2, 3, 2})));
  // Without align_corners the points are the pixel centres: (2 i + 1) / n - 1.
  Tensor g2 = F::affine_grid(id, {1, 1, 2, 3});
  EXPECT_TRUE(allclose(g2.select(3, 0)[0][0], tensor({-2.0 / 3, 0.0, 2.0 / 3}, kFloat64), 1e-15, 1e-15));
  EXPECT_TRUE(allclose(g2.select(3, 1).select(2, 0)[0], tensor({-0.5, 0.5}, kFloat64), 1e-15, 1e-15));
  EXPECT_THROW(F::affine_grid(id, {1, 1, 2, 3, 4}), ShapeError);  // a 3-d size needs theta (N, 3, 4)
}
