// The differences from PyTorch that differential testing found, one test each, with the values
// PyTorch 1.13 and 2.x give. The differential suite (tests/ops/test_differential.cpp) checks the
// same ops against PyTorch itself on many more inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- 1. in-place on the output of a unary op --------------------------------------------------------
// y = op(x); y.mul_(2); backward: an op whose backward needs only x (or nothing) gives the gradient
// of 2 op(x); one that saved its output raises, as in PyTorch.
struct InplaceCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  bool saves_output;
};

TEST(Conformance, InPlaceChangeOfAUnaryOutputRaisesOnlyWhereTheOutputWasSaved) {
  std::vector<InplaceCase> cases = {
      {"sin", [](const Tensor& x) { return sin(x); }, false},
      {"cos", [](const Tensor& x) { return cos(x); }, false},
      {"log", [](const Tensor& x) { return log(x); }, false},
      {"log1p", [](const Tensor& x) { return log1p(x); }, false},
      {"neg", [](const Tensor& x) { return neg(x); }, false},
      {"abs", [](const Tensor& x) { return abs(x); }, false},
      {"sign", [](const Tensor& x) { return sign(x); }, false},
      {"square", [](const Tensor& x) { return square(x); }, false},
      {"erf", [](const Tensor& x) { return erf(x); }, false},
      {"asin", [](const Tensor& x) { return asin(x); }, false},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }, false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, false},
      {"silu", [](const Tensor& x) { return silu(x); }, false},
      {"mish", [](const Tensor& x) { return mish(x); }, false},
      {"selu", [](const Tensor& x) { return selu(x); }, false},
      {"elu", [](const Tensor& x) { return elu(x, 1.0); }, false},
      {"relu6", [](const Tensor& x) { return relu6(x); }, false},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }, false},
      {"hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); }, false},
      {"floor", [](const Tensor& x) { return floor(x); }, false},
      {"frac", [](const Tensor& x) { return frac(x); }, false},
      {"exp", [](const Tensor& x) { return exp(x); }, true},
      {"tanh", [](const Tensor& x) { return tanh(x); }, true},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, true},
      {"relu", [](const Tensor& x) { return relu(x); }, true},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, true},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, true},
  };
  for (const InplaceCase& c : cases) {
    Tensor x = tensor(std::vector<double>{0.2, 0.5, 0.7}).requires_grad_();
    Tensor y = c.op(x);
    y.mul_(2);
    if (c.saves_output) {
      EXPECT_THROW(y.sum().backward(), AutogradError) << c.name;
      continue;
    }
    EXPECT_NO_THROW(y.sum().backward()) << c.name;
    Tensor x2 = x.detach().requires_grad_();
    (c.op(x2) * 2).sum().backward();
    EXPECT_TRUE(values_near(values(x.grad()), values(x2.grad()), 1e-14, 1e-14)) << c.name;
  }
}

// ---- 2. isclose with infinities --------------------------------------------------------------------
TEST(Conformance, IscloseTreatsOppositeInfinitiesAsFar) {
  Tensor a = tensor(std::vector<double>{-kInf, kInf, kInf, 1.0});
  Tensor b = tensor(std::vector<double>{kInf, kInf, -kInf, 1.0 + 1e-9});
  EXPECT_EQ(int_values(isclose(a, b).to(kInt64)), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_FALSE(allclose(tensor(std::vector<double>{-kInf}), tensor(std::vector<double>{kInf})));
  EXPECT_TRUE(allclose(tensor(std::vector<double>{kInf}), tensor(std::vector<double>{kInf})));
}

// ---- 3. floor_divide from fmod ----------------------------------------------------------------------
TEST(Conformance, FloatFloorDivideIsExactNearIntegerQuotients) {
  Tensor a = tensor(std::vector<double>{1.0, kInf, -1.0, 5.0, -5.0, 0.0, 7.5, -7.5});
  Tensor b = tensor(std::vector<double>{0.1, 1.0, kInf, 0.0, 0.0, 0.0, -2.0, 2.0});
  // PyTorch (and Python): 9, nan, -1, inf, -inf, nan, -4, -4
  EXPECT_TRUE(values_near(values(floor_divide(a, b)), {9, kNaN, -1, kInf, -kInf, kNaN, -4, -4}, 0, 0));
  // a == b * (a // b) + a % b on a grid of finite values, in float64 and float32.
  for (DType dt : {kFloat64, kFloat32}) {
    Tensor x = (arange(-40, 41, 1, dtype(kFloat64)) * 0.1).to(dt).view({-1, 1});
    Tensor y = tensor(std::vector<double>{0.1, -0.1, 0.3, 0.7, -1.5, 3.0}).to(dt).view({1, -1});
    Tensor q = floor_divide(x, y), r = remainder(x, y);
    EXPECT_TRUE(equal(q, floor(q))) << dt;
    EXPECT_TRUE(allclose(y * q + r, x.expand(q.sizes()), 1e-5, 1e-5)) << dt;
  }
}

// ---- 4. std's gradient at zero spread ---------------------------------------------------------------
TEST(Conformance, StdGradientIsZeroWhereAllValuesAreEqual) {
  Tensor x = ones({2, 3}, dtype(kFloat64)).requires_grad_();
  std(x, {1}).sum().backward();
  EXPECT_TRUE(values_near(values(x.grad()), std::vector<double>(6, 0.0), 0, 0));
  Tensor y = tensor(std::vector<double>{1, 2, 4}).requires_grad_();
  std(y).backward();  // away from zero spread: (x - mean) / ((n - 1) std)
  double m = 7.0 / 3, s = std::sqrt(((1 - m) * (1 - m) + (2 - m) * (2 - m) + (4 - m) * (4 - m)) / 2);
  EXPECT_TRUE(values_near(values(y.grad()), {(1 - m) / (2 * s), (2 - m) / (2 * s), (4 - m) / (2 * s)}, 1e-14, 1e-14));
}

// ---- 5. prod of an empty tensor ---------------------------------------------------------------------
TEST(Conformance, ProdOfAnEmptyTensorHasAnEmptyGradient) {
  Tensor x = zeros({0}, dtype(kFloat64)).requires_grad_();
  Tensor p = x.prod();
  EXPECT_EQ(p.item<double>(), 1.0);
  p.backward();
  EXPECT_EQ(shape_of(x.grad()), (std::vector<int64_t>{0}));
  Tensor y = zeros({2, 0}, dtype(kFloat64)).requires_grad_();
  y.prod(1).sum().backward();
  EXPECT_EQ(shape_of(y.grad()), (std::vector<int64_t>{2, 0}));
}

// ---- 6. pow's gradient at 0^0 -----------------------------------------------------------------------
TEST(Conformance, PowWithATensorExponentHasAZeroBaseGradientAtZeroToTheZero) {
  Tensor x = tensor(std::vector<double>{0, 0, 2}).requires_grad_();
  Tensor e = tensor(std::vector<double>{0, 2, 0}).requires_grad_();
  pow(x, e).sum().backward();
  EXPECT_TRUE(values_near(values(x.grad()), {0, 0, 0}, 0, 0));
  EXPECT_TRUE(values_near(values(e.grad()), {0, 0, std::log(2.0)}, 1e-15, 0));
}

// ---- 7. cross_entropy with every target ignored -----------------------------------------------------
TEST(Conformance, CrossEntropyWithEveryTargetIgnoredIsNanWithAZeroGradient) {
  namespace F = nn::functional;
  Tensor t = tensor(std::vector<double>{-100, -100, -100}).to(kInt64);
  for (double ls : {0.0, 0.2}) {
    Tensor x = lcg_tensor({3, 4}, 7).requires_grad_();
    Tensor loss = F::cross_entropy(x, t, {.label_smoothing = ls});
    EXPECT_TRUE(std::isnan(loss.item<double>())) << ls;
    loss.backward();
    EXPECT_TRUE(values_near(values(x.grad()), std::vector<double>(12, 0.0), 0, 0)) << ls;
  }
  Tensor x = lcg_tensor({3, 4}, 8).requires_grad_();
  F::nll_loss(x, t).backward();
  EXPECT_TRUE(values_near(values(x.grad()), std::vector<double>(12, 0.0), 0, 0));
}

// ---- 8. dtypes, NaN bounds and the errors PyTorch raises --------------------------------------------
TEST(Conformance, ClampWithANanBoundIsNan) {
  Tensor x = tensor(std::vector<double>{1, 2}).requires_grad_();
  Tensor y = clamp(x, kNaN, 3.0);
  EXPECT_TRUE(values_near(values(y), {kNaN, kNaN}, 0, 0));
  EXPECT_TRUE(values_near(values(clamp(x, 0.0, kNaN)), {kNaN, kNaN}, 0, 0));
  y.sum().backward();
  EXPECT_TRUE(values_near(values(x.grad()), {0, 0}, 0, 0));
}

TEST(Conformance, IntegerToANegativeIntegerPowerRaises) {
  Tensor i = tensor(std::vector<double>{2, 3}).to(kInt64);
  EXPECT_THROW(pow(i, -1), ValueError);
  EXPECT_THROW(i.clone().pow_(-2), ValueError);
  EXPECT_THROW(pow(i.to(kUInt8), -1), ValueError);
  // With a tensor exponent PyTorch computes (0 for |base| > 1), and a float exponent promotes.
  EXPECT_EQ(int_values(pow(i, tensor(std::vector<double>{-1, -1}).to(kInt64))), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(values_near(values(pow(i, -1.0)), {0.5, 1.0 / 3}, 1e-7, 0));
}

TEST(Conformance, SubtractionWithABoolOperandRaises) {
  Tensor m = tensor(std::vector<double>{1, 0}) != 0.0;
  EXPECT_THROW(m - 1, DTypeError);
  EXPECT_THROW(1 - m, DTypeError);
  EXPECT_THROW(m - 1.5, DTypeError);
  EXPECT_THROW(m - tensor(std::vector<double>{1, 1}).to(kInt64), DTypeError);
  EXPECT_THROW(-m, DTypeError);
  try {
    (void)(1 - m);
  } catch (const DTypeError& e) { EXPECT_NE(std::string(e.what()).find("logical_not"), std::string::npos) << e.what(); }
  Tensor u = tensor(std::vector<double>{1, 3}).to(kUInt8);
  EXPECT_EQ(int_values(1 - u), (std::vector<int64_t>{0, 254}));  // uint8 wraps around, as in PyTorch
}

TEST(Conformance, SignAndSquareOfBoolFollowPyTorch) {
  Tensor m = tensor(std::vector<double>{1, 0}) != 0.0;
  Tensor s = sign(m), q = square(m);
  EXPECT_EQ(s.dtype(), kBool);
  EXPECT_EQ(int_values(s.to(kInt64)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(q.dtype(), kInt64);
  EXPECT_EQ(int_values(q), (std::vector<int64_t>{1, 0}));
  EXPECT_THROW(abs(m), DTypeError);
  EXPECT_THROW(relu(m), DTypeError);
}

TEST(Conformance, SignOfNanIsZeroAndHardswishOfMinusInfIsNan) {
  Tensor x = tensor(std::vector<double>{kNaN, -0.0, kInf, -kInf});
  EXPECT_TRUE(values_near(values(sign(x)), {0, 0, 1, -1}, 0, 0));
  EXPECT_TRUE(values_near(values(hardswish(x)), {kNaN, 0, kInf, kNaN}, 0, 0));  // x * min(max(x + 3, 0), 6) / 6
  EXPECT_TRUE(values_near(values(hardsigmoid(x)), {kNaN, 0.5, 1, 0}, 0, 0));
}

TEST(Conformance, ActivationsTakeFloatingTensorsOnly) {
  Tensor i = tensor(std::vector<double>{-2, 0, 3}).to(kInt64);
  for (auto f : {gelu, silu, mish, selu, logsigmoid, hardswish, hardsigmoid, frac}) EXPECT_THROW(f(i), DTypeError);
  EXPECT_THROW(leaky_relu(i, 0.1), DTypeError);
  EXPECT_THROW(elu(i, 1.0), DTypeError);
  EXPECT_THROW(softplus(i, 1, 20), DTypeError);
  // Elementwise math promotes integers to float32; hardtanh on integers is clamp.
  EXPECT_EQ(exp(i).dtype(), kFloat32);
  EXPECT_EQ(sigmoid(i).dtype(), kFloat32);
  Tensor h = hardtanh(i, -1, 1);
  EXPECT_EQ(h.dtype(), kInt64);
  EXPECT_EQ(int_values(h), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(int_values(relu6(i)), (std::vector<int64_t>{0, 0, 3}));
}

TEST(Conformance, AFloatingAlphaForAnIntegerResultRaises) {
  Tensor i = tensor(std::vector<double>{1, 2}).to(kInt64);
  EXPECT_THROW(add(i, i, 0.5), ValueError);
  EXPECT_THROW(sub(i, i, 0.5), ValueError);
  EXPECT_THROW(i.clone().add_(i, 1.5), ValueError);
  EXPECT_THROW(add(i, i, true), ValueError);
  EXPECT_EQ(int_values(add(i, i, 3)), (std::vector<int64_t>{4, 8}));
  EXPECT_TRUE(values_near(values(add(i.to(kFloat64), i, 0.5)), {1.5, 3}, 0, 0));
}

TEST(Conformance, MaximumAndMinimumPassTheGradientToBothSidesOfANan) {
  Tensor a = tensor(std::vector<double>{kNaN, 1, 2}).requires_grad_();
  Tensor b = tensor(std::vector<double>{0, 1, 3}).requires_grad_();
  maximum(a, b).sum().backward();
  EXPECT_TRUE(values_near(values(a.grad()), {1, 0.5, 0}, 0, 0));
  EXPECT_TRUE(values_near(values(b.grad()), {1, 0.5, 1}, 0, 0));
}

TEST(Conformance, ReluGradientAtNanIsTheIncomingGradient) {
  Tensor x = tensor(std::vector<double>{kNaN, -1, 2}).requires_grad_();
  relu(x).sum().backward();
  EXPECT_TRUE(values_near(values(x.grad()), {1, 0, 1}, 0, 0));
}

}  // namespace
}  // namespace nabla::testing
