// nn::init: the distributions and constants of each initializer (PyTorch's formulas).
#include <gtest/gtest.h>

#include <cmath>

#include "nabla.h"

using namespace nabla;
namespace init = nn::init;

namespace {
double mean_of(const Tensor& t) { return t.to(kFloat64).mean().item<double>(); }
double std_of(const Tensor& t) { return t.to(kFloat64).std().item<double>(); }
}  // namespace

TEST(NnInit, GainsAndFans) {
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::linear), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::sigmoid), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::tanh), 5.0 / 3);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::leaky_relu), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::leaky_relu, std::sqrt(5.0)), std::sqrt(1.0 / 3));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::selu), 0.75);
  auto [in, out] = init::calculate_fan_in_and_fan_out(empty({16, 8, 3, 5}));
  EXPECT_EQ(in, 8 * 15);
  EXPECT_EQ(out, 16 * 15);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({4})), ShapeError);
}

TEST(NnInit, UniformNormalConstant) {
  manual_seed(0);
  Tensor t = empty({200, 500});
  init::uniform_(t, -2, 3);
  EXPECT_GE(t.min().item<double>(), -2);
  EXPECT_LT(t.max().item<double>(), 3);
  EXPECT_NEAR(mean_of(t), 0.5, 0.02);
  EXPECT_NEAR(std_of(t), 5 / std::sqrt(12.0), 0.02);
  init::normal_(t, 1.5, 0.5);
  EXPECT_NEAR(mean_of(t), 1.5, 0.01);
  EXPECT_NEAR(std_of(t), 0.5, 0.01);
  init::constant_(t, 0.25);
  EXPECT_TRUE(t.equal(full({200, 500}, 0.25)));
  init::zeros_(t);
  EXPECT_EQ(t.abs().sum().item<double>(), 0.0);
  init::ones_(t);
  EXPECT_EQ(t.sum().item<double>(), 100000.0);
  EXPECT_THROW(init::uniform_(empty({2}, dtype(kInt64))), DTypeError);
  // Works on parameters that require grad, without recording anything.
  Tensor p = zeros({3}, requires_grad());
  init::normal_(p);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_TRUE(p.requires_grad());
}

TEST(NnInit, XavierAndKaiming) {
  manual_seed(1);
  Tensor w = empty({300, 200});  // fan_in 200, fan_out 300
  init::xavier_uniform_(w, 2.0);
  double a = 2.0 * std::sqrt(6.0 / 500);
  EXPECT_LE(w.abs().max().item<double>(), a);
  EXPECT_NEAR(std_of(w), a / std::sqrt(3.0), 0.01 * a);
  init::xavier_normal_(w);
  EXPECT_NEAR(std_of(w), std::sqrt(2.0 / 500), 0.01 * std::sqrt(2.0 / 500));
  // kaiming_uniform_ with relu: bound sqrt(3) * sqrt(2) / sqrt(fan_in).
  init::kaiming_uniform_(w, 0, init::FanMode::fan_in, init::Nonlinearity::relu);
  double b = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(200.0);
  EXPECT_LE(w.abs().max().item<double>(), b);
  EXPECT_GT(w.abs().max().item<double>(), 0.99 * b);
  init::kaiming_normal_(w, 0, init::FanMode::fan_out, init::Nonlinearity::relu);
  EXPECT_NEAR(std_of(w), std::sqrt(2.0 / 300), 0.01 * std::sqrt(2.0 / 300));
  // The default (leaky_relu, a = sqrt(5)) is the U(-1/sqrt(fan_in), 1/sqrt(fan_in)) that Linear uses.
  init::kaiming_uniform_(w, std::sqrt(5.0));
  EXPECT_LE(w.abs().max().item<double>(), 1 / std::sqrt(200.0));
  EXPECT_GT(w.abs().max().item<double>(), 0.99 / std::sqrt(200.0));
}

TEST(NnInit, OrthogonalTallAndWide) {
  manual_seed(2);
  for (Shape s : {Shape{6, 4}, Shape{4, 6}, Shape{3, 2, 2, 2}}) {
    Tensor w = empty(s, kFloat64);
    init::orthogonal_(w, 1.5);
    Tensor m = w.reshape({s[0], -1});
    // Rows orthogonal (wide) or columns orthogonal (tall), with norm gain.
    Tensor gram = m.size(0) <= m.size(1) ? m.matmul(m.t()) : m.t().matmul(m);
    EXPECT_TRUE(allclose(gram, eye(gram.size(0), std::nullopt, kFloat64) * 2.25, 1e-10, 1e-10)) << s << gram;
  }
  EXPECT_THROW(init::orthogonal_(empty({3})), ShapeError);
}

TEST(NnInit, TruncNormal) {
  manual_seed(3);
  Tensor t = empty({100000}, kFloat64);
  init::trunc_normal_(t, 0.5, 1.0, -1.0, 1.5);
  EXPECT_GE(t.min().item<double>(), -1.0);
  EXPECT_LE(t.max().item<double>(), 1.5);
  // Mean of N(0.5, 1) truncated to [-1, 1.5]: mu + sigma (phi(alpha) - phi(beta)) / (Phi(beta) - Phi(alpha))
  // with alpha = -1.5, beta = 1.
  auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  auto Phi = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  double expect = 0.5 + (phi(-1.5) - phi(1.0)) / (Phi(1.0) - Phi(-1.5));
  EXPECT_NEAR(mean_of(t), expect, 0.01);
  // A narrow window stays inside it and is spread across it.
  Tensor n = empty({1000}, kFloat64);
  init::trunc_normal_(n, 0, 0.02, -0.04, 0.04);
  EXPECT_LE(n.abs().max().item<double>(), 0.04);
  EXPECT_NEAR(std_of(n), 0.02 * 0.88, 0.002);  // the std of a normal truncated at 2 sigma
}
