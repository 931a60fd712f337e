// Elementwise ops against std:: math in float64, broadcasting, type promotion, integer division
// and modulo semantics, comparisons and predicates, in-place ops and their dtype rules.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

using Ref = std::function<double(double)>;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_ref(double x) { return std::log1p(std::exp(x)); }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  Ref ref;
  std::vector<double> inputs;
};

const std::vector<double> kGeneral = {-2.5, -1.3, -0.5, -0.1, 0.0, 0.2, 0.5, 1.7, 3.2};
const std::vector<double> kPositive = {0.01, 0.3, 0.5, 1.0, 2.0, 7.5, 100.0};
const std::vector<double> kUnit = {-0.95, -0.5, -0.1, 0.0, 0.3, 0.7, 0.99};

std::vector<UnaryCase> unary_cases() {
  const double s = 1.0507009873554805, a = 1.6732632423543772;
  return {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, kGeneral},
      {"exp2", [](const Tensor& x) { return exp2(x); }, [](double x) { return std::exp2(x); }, kGeneral},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, kPositive},
      {"log2", [](const Tensor& x) { return log2(x); }, [](double x) { return std::log2(x); }, kPositive},
      {"log10", [](const Tensor& x) { return log10(x); }, [](double x) { return std::log10(x); }, kPositive},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, kUnit},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::expm1(x); }, kGeneral},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, kPositive},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, kPositive},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, kGeneral},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, kGeneral},
      {"tan", [](const Tensor& x) { return tan(x); }, [](double x) { return std::tan(x); }, kUnit},
      {"asin", [](const Tensor& x) { return asin(x); }, [](double x) { return std::asin(x); }, kUnit},
      {"acos", [](const Tensor& x) { return acos(x); }, [](double x) { return std::acos(x); }, kUnit},
      {"atan", [](const Tensor& x) { return atan(x); }, [](double x) { return std::atan(x); }, kGeneral},
      {"sinh", [](const Tensor& x) { return sinh(x); }, [](double x) { return std::sinh(x); }, kGeneral},
      {"cosh", [](const Tensor& x) { return cosh(x); }, [](double x) { return std::cosh(x); }, kGeneral},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, kGeneral},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, kGeneral},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, kGeneral},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }, [](double x) { return -softplus_ref(-x); },
       kGeneral},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, kGeneral},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }, kGeneral},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, kGeneral},
      {"mish", [](const Tensor& x) { return mish(x); }, [](double x) { return x * std::tanh(softplus_ref(x)); },
       kGeneral},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, kPositive},
      {"selu", [](const Tensor& x) { return selu(x); }, [=](double x) { return x > 0 ? s * x : s * a * std::expm1(x); },
       kGeneral},
      {"hardsigmoid",
       [](const Tensor& x) { return hardsigmoid(x); },
       [](double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); },
       {-4, -3, -1, 0, 1, 3, 4}},
      {"hardswish",
       [](const Tensor& x) { return hardswish(x); },
       [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; },
       {-4, -3, -1, 0, 1, 3, 4}},
      {"frac", [](const Tensor& x) { return frac(x); }, [](double x) { return x - std::trunc(x); }, kGeneral},
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, kGeneral},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, kGeneral},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double x) { return double((0 < x) - (x < 0)); }, kGeneral},
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, kGeneral},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }, kGeneral},
      {"relu6",
       [](const Tensor& x) { return relu6(x); },
       [](double x) { return std::clamp(x, 0.0, 6.0); },
       {-1, 0, 3, 6, 7.5}},
      {"floor", [](const Tensor& x) { return floor(x); }, [](double x) { return std::floor(x); }, kGeneral},
      {"ceil", [](const Tensor& x) { return ceil(x); }, [](double x) { return std::ceil(x); }, kGeneral},
      {"round",
       [](const Tensor& x) { return round(x); },
       [](double x) { return std::nearbyint(x); },
       {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6}},
      {"trunc", [](const Tensor& x) { return trunc(x); }, [](double x) { return std::trunc(x); }, kGeneral},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, [](double x) { return x > 0 ? x : 0.2 * x; },
       kGeneral},
      {"elu", [](const Tensor& x) { return elu(x, 1.5); }, [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); },
       kGeneral},
      {"softplus",
       [](const Tensor& x) { return softplus(x, 2, 3); },
       [](double x) { return 2 * x > 3 ? x : softplus_ref(2 * x) / 2; },
       {-3, -1, 0, 1, 1.4, 1.6, 4}},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x, -0.5, 2); },
       [](double x) { return std::clamp(x, -0.5, 2.0); }, kGeneral},
      {"clamp", [](const Tensor& x) { return clamp(x, -1, 1); }, [](double x) { return std::clamp(x, -1.0, 1.0); },
       kGeneral},
  };
}

void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.name; }

class UnaryOps : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryOps, Float64MatchesStdMath) {
  const UnaryCase& c = GetParam();
  Tensor x = tensor(c.inputs);
  std::vector<double> want;
  for (double v : c.inputs) want.push_back(c.ref(v));
  Tensor y = c.op(x);
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_TRUE(tensor_is(y, {static_cast<int64_t>(c.inputs.size())}, want, 1e-14, 1e-13));
}

TEST_P(UnaryOps, Float32MatchesFloat64Reference) {
  const UnaryCase& c = GetParam();
  Tensor x = tensor(c.inputs).to(kFloat32);
  std::vector<double> want;
  for (double v : values(x)) want.push_back(c.ref(v));  // the reference sees the rounded inputs
  Tensor y = c.op(x);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(values_near(values(y), want, 1e-6, 2e-6));
}

TEST_P(UnaryOps, NonContiguousAndEmptyInputs) {
  const UnaryCase& c = GetParam();
  // A (3, n) tensor whose rows are the inputs, read transposed; values fill a 2-D grid.
  std::vector<double> grid;
  for (int r = 0; r < 3; ++r) grid.insert(grid.end(), c.inputs.begin(), c.inputs.end());
  int64_t n = static_cast<int64_t>(c.inputs.size());
  Tensor xt = f64(grid, {3, n}).t();  // (n, 3), non-contiguous
  ASSERT_FALSE(xt.is_contiguous());
  std::vector<double> want;
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < 3; ++r) want.push_back(c.ref(c.inputs[i]));
  EXPECT_TRUE(tensor_is(c.op(xt), {n, 3}, want, 1e-14, 1e-13));
  // A slice with a step.
  Tensor every_other = tensor(c.inputs).slice(0, 0, std::nullopt, 2);
  std::vector<double> want2;
  for (size_t i = 0; i < c.inputs.size(); i += 2) want2.push_back(c.ref(c.inputs[i]));
  EXPECT_TRUE(values_near(values(c.op(every_other)), want2, 1e-14, 1e-13));
  // Empty.
  Tensor e = c.op(zeros({0, 4}, kFloat64));
  EXPECT_EQ(shape_of(e), (std::vector<int64_t>{0, 4}));
  // An expanded (stride-0) input.
  Tensor ex = tensor(std::vector<double>{c.inputs[1]}).expand({2, 3});
  EXPECT_TRUE(tensor_is(c.op(ex), {2, 3}, std::vector<double>(6, c.ref(c.inputs[1])), 1e-14, 1e-13));
}

INSTANTIATE_TEST_SUITE_P(Elementwise, UnaryOps, ::testing::ValuesIn(unary_cases()),
                         [](const ::testing::TestParamInfo<UnaryCase>& i) { return std::string(i.param.name); });

// ---- unary special values --------------------------------------------------------------------------
TEST(Unary, SpecialValues) {
  Tensor x = tensor(std::vector<double>{kNaN, kInf, -kInf, -0.0});
  EXPECT_TRUE(values_near(values(exp(x)), {kNaN, kInf, 0, 1}, 0, 0));
  EXPECT_TRUE(values_near(values(relu(x)), {kNaN, kInf, 0, 0}, 0, 0));
  EXPECT_TRUE(values_near(values(sign(x)), {0, 1, -1, 0}, 0, 0));  // sign(NaN) is 0, as in PyTorch
  EXPECT_TRUE(values_near(values(sigmoid(x)), {kNaN, 1, 0, 0.5}, 0, 0));
  EXPECT_TRUE(values_near(values(tanh(x)), {kNaN, 1, -1, 0}, 0, 0));
  EXPECT_TRUE(values_near(values(clamp(x, -1, 1)), {kNaN, 1, -1, 0}, 0, 0));
  EXPECT_TRUE(values_near(values(log(tensor(std::vector<double>{0, -1}))), {-kInf, kNaN}, 0, 0));
  EXPECT_TRUE(values_near(values(sqrt(tensor(std::vector<double>{-1}))), {kNaN}, 0, 0));
}

TEST(Unary, StableAtExtremes) {
  Tensor x = tensor(std::vector<double>{-800, 800});
  EXPECT_TRUE(values_near(values(sigmoid(x)), {0, 1}, 1e-300, 0));
  EXPECT_TRUE(values_near(values(logsigmoid(x)), {-800, 0}, 1e-12, 0));
  EXPECT_TRUE(values_near(values(softplus(x)), {0, 800}, 1e-12, 0));
  Tensor f = tensor({-100.f, 100.f});
  EXPECT_TRUE(values_near(values(sigmoid(f)), {0, 1}, 1e-30, 0));
  EXPECT_TRUE(values_near(values(silu(f)), {0, 100}, 1e-30, 0));
}

TEST(Unary, IntegerInputs) {
  Tensor i = tensor({-2, 0, 4});
  // Float-valued ops compute integer inputs in float32, as PyTorch.
  Tensor s = sqrt(tensor({4, 9}));
  EXPECT_EQ(s.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(s, {2}, {2, 3}));
  EXPECT_EQ(exp(i).dtype(), kFloat32);
  EXPECT_EQ(sigmoid(tensor({true})).dtype(), kFloat32);
  // Same-dtype ops keep integers.
  Tensor a = abs(i);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(int_values(a), (std::vector<int64_t>{2, 0, 4}));
  EXPECT_EQ(int_values(neg(i)), (std::vector<int64_t>{2, 0, -4}));
  EXPECT_EQ(int_values(sign(i)), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(int_values(square(tensor({-3}, kInt32))), (std::vector<int64_t>{9}));
  EXPECT_EQ(square(tensor({-3}, kInt32)).dtype(), kInt32);
  EXPECT_EQ(int_values(relu(i)), (std::vector<int64_t>{0, 0, 4}));
  EXPECT_EQ(int_values(floor(i)), (std::vector<int64_t>{-2, 0, 4}));
  EXPECT_EQ(int_values(abs(tensor({200}, kUInt8))), (std::vector<int64_t>{200}));
  EXPECT_THROW(neg(tensor({true})), DTypeError);
}

TEST(Unary, ClampWithMinAboveMaxGivesMax) {
  // PyTorch: "If min is greater than max, clamp sets all elements to max" (min(max(x, lo), hi)).
  Tensor x = tensor(std::vector<double>{0, 1.5, 3, kNaN});
  EXPECT_TRUE(tensor_is(clamp(x, 2, 1), {4}, {1, 1, 1, kNaN}));
  EXPECT_EQ(int_values(clamp(tensor({-5, 0, 5}), 3, -3)), (std::vector<int64_t>{-3, -3, -3}));
  Tensor y = tensor({0.f, 5.f});
  y.clamp_(4, 2);
  EXPECT_TRUE(tensor_is(y, {2}, {2, 2}));
}

TEST(Unary, SoftplusThresholdReturnsInputExactly) {
  Tensor x = tensor(std::vector<double>{20.5, 25});
  EXPECT_TRUE(values_near(values(softplus(x)), {20.5, 25}, 0, 0));
  EXPECT_THROW(softplus(x, 0), ValueError);
  EXPECT_THROW(hardtanh(x, 1, -1), ValueError);
  EXPECT_THROW(gelu(x, "fast"), ValueError);
}

// ---- binary ops ----------------------------------------------------------------------------------
using BinRef = std::function<double(double, double)>;
struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  BinRef ref;
  double lo_b;  // smallest allowed magnitude of b (divisors)
};

double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }, 0},
      {"add_alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); },
       [](double a, double b) { return a + 2.5 * b; }, 0},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; }, 0},
      {"sub_alpha", [](const Tensor& a, const Tensor& b) { return sub(a, b, -3); },
       [](double a, double b) { return a + 3 * b; }, 0},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; }, 0},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; }, 0.2},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a) + 0.1, b); },
       [](double a, double b) { return std::pow(std::fabs(a) + 0.1, b); }, 0},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, 0},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, 0},
      {"atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); },
       [](double a, double b) { return std::atan2(a, b); }, 0},
      {"remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, py_mod, 0.2},
      {"floor_divide", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); },
       [](double a, double b) { return std::floor(a / b); }, 0.2},
  };
}

void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

class BinaryOps : public ::testing::TestWithParam<BinaryCase> {
 protected:
  // a: (3, 4) in [-3, 3], b of `shape` away from zero by lo_b.
  Tensor b_of(std::vector<int64_t> shape, uint64_t seed) const {
    Tensor b = lcg_tensor(shape, seed, kFloat64, -3, 3);
    double lo = GetParam().lo_b;
    if (lo > 0) b = where(b.abs() < lo, full_like(b, lo), b);
    return b;
  }
  // Reference: elementwise over the broadcast shape, from explicitly expanded float64 values.
  Tensor reference(const Tensor& a, const Tensor& b) const {
    Shape s = broadcast_shapes(a.sizes(), b.sizes(), "test");
    std::vector<double> av = values(a.expand(s)), bv = values(b.expand(s)), out;
    for (size_t i = 0; i < av.size(); ++i) out.push_back(GetParam().ref(av[i], bv[i]));
    return f64(out, std::vector<int64_t>(s.begin(), s.end()));
  }
  void check(const Tensor& a, const Tensor& b) const {
    Tensor y = GetParam().op(a, b);
    EXPECT_EQ(y.dtype(), kFloat64);
    EXPECT_TRUE(tensor_near(y, reference(a, b), 1e-13, 1e-13)) << a.sizes() << " op " << b.sizes();
  }
};

TEST_P(BinaryOps, SameShape) { check(lcg_tensor({3, 4}, 1, kFloat64, -3, 3), b_of({3, 4}, 2)); }
TEST_P(BinaryOps, BroadcastRhsRow) { check(lcg_tensor({3, 4}, 3, kFloat64, -3, 3), b_of({4}, 4)); }
TEST_P(BinaryOps, BroadcastBothSides) { check(lcg_tensor({3, 1}, 5, kFloat64, -3, 3), b_of({1, 4}, 6)); }
TEST_P(BinaryOps, BroadcastLhsMissingDims) { check(lcg_tensor({4}, 7, kFloat64, -3, 3), b_of({2, 3, 1}, 8)); }
TEST_P(BinaryOps, ZeroDimOperand) {
  check(lcg_tensor({}, 9, kFloat64, -3, 3), b_of({2, 3}, 10));
  check(lcg_tensor({2, 3}, 11, kFloat64, -3, 3), b_of({}, 12));
}
TEST_P(BinaryOps, NonContiguousOperands) {
  Tensor a = lcg_tensor({4, 3}, 13, kFloat64, -3, 3).t();    // transposed
  Tensor b = b_of({3, 8}, 14).slice(1, 0, std::nullopt, 2);  // strided
  check(a, b);
  Tensor c = lcg_tensor({3}, 15, kFloat64, -3, 3).expand({3, 3, 3}).permute({2, 0, 1});  // stride 0 and permuted
  check(c, b_of({3, 1, 3}, 16));
}
TEST_P(BinaryOps, EmptyOperands) {
  Tensor y = GetParam().op(zeros({0, 3}, kFloat64), ones({3}, kFloat64));
  EXPECT_EQ(shape_of(y), (std::vector<int64_t>{0, 3}));
  Tensor z = GetParam().op(zeros({2, 0}, kFloat64), ones({2, 1}, kFloat64));
  EXPECT_EQ(shape_of(z), (std::vector<int64_t>{2, 0}));
}
TEST_P(BinaryOps, LargeInputsUseAllThreads) {
  // Big enough to be split across threads (and over the vectorized paths).
  check(lcg_tensor({300, 257}, 17, kFloat64, -3, 3), b_of({300, 257}, 18));
  check(lcg_tensor({300, 257}, 19, kFloat64, -3, 3), b_of({257}, 20));
  // Large and strided: threads split the range in the middle of rows.
  check(lcg_tensor({257, 300}, 21, kFloat64, -3, 3).t(), b_of({300, 1}, 22));
  check(lcg_tensor({40, 50, 60}, 23, kFloat64, -3, 3).permute({2, 0, 1}),
        b_of({60, 40, 100}, 24).slice(2, 0, std::nullopt, 2));
}

INSTANTIATE_TEST_SUITE_P(Elementwise, BinaryOps, ::testing::ValuesIn(binary_cases()),
                         [](const ::testing::TestParamInfo<BinaryCase>& i) { return std::string(i.param.name); });

TEST(Binary, IncompatibleShapesThrowShapeError) {
  EXPECT_TRUE(throws_with<ShapeError>([] { ones({2, 3}) + ones({4}); }, {"add", "[2, 3]", "[4]"}));
  EXPECT_THROW(ones({2, 3}) * ones({3, 2}), ShapeError);
}

TEST(Binary, ScalarOperands) {
  Tensor x = tensor({1., 2., 4.});
  EXPECT_TRUE(tensor_is(x + 1, {3}, {2, 3, 5}));
  EXPECT_TRUE(tensor_is(1 - x, {3}, {0, -1, -3}));
  EXPECT_TRUE(tensor_is(x - 1, {3}, {0, 1, 3}));
  EXPECT_TRUE(tensor_is(x * 0.5, {3}, {0.5, 1, 2}));
  EXPECT_TRUE(tensor_is(2 / x, {3}, {2, 1, 0.5}));
  EXPECT_TRUE(tensor_is(x / 4, {3}, {0.25, 0.5, 1}));
  EXPECT_TRUE(tensor_is(pow(x, 2), {3}, {1, 4, 16}));
  EXPECT_TRUE(tensor_is(pow(x, 0.5), {3}, {1, std::sqrt(2.0), 2}));
  EXPECT_TRUE(tensor_is(pow(x, -1), {3}, {1, 0.5, 0.25}));
  EXPECT_TRUE(tensor_is(pow(x, 0), {3}, {1, 1, 1}));
  EXPECT_TRUE(tensor_is(pow(2, x), {3}, {2, 4, 16}));
  EXPECT_TRUE(tensor_is(x.add(10, 2), {3}, {21, 22, 24}));
  EXPECT_TRUE(tensor_is(remainder(tensor({-3., 5.}), 2), {2}, {1, 1}));
}

TEST(Binary, PowSpecialCases) {
  Tensor b = tensor(std::vector<double>{0, 0, -8});
  Tensor e = tensor(std::vector<double>{0, 2, 1.0 / 3});
  EXPECT_TRUE(values_near(values(pow(b, e)), {1, 0, kNaN}, 0, 0));  // 0^0 = 1, negative^fraction = nan
  EXPECT_EQ(int_values(pow(tensor({2, -3, 5}), 3)), (std::vector<int64_t>{8, -27, 125}));
  EXPECT_EQ(pow(tensor({2, 3}), 2).dtype(), kInt64);
  EXPECT_EQ(pow(tensor({2, 3}), 0.5).dtype(), kFloat32);
  // A float exponent makes an int tensor float, whatever its value.
  for (double e : {1.0, 2.0, 3.0}) {
    Tensor r = pow(tensor({2, 3}), e);
    EXPECT_EQ(r.dtype(), kFloat32) << e;
    EXPECT_TRUE(tensor_is(r, {2}, {std::pow(2.0, e), std::pow(3.0, e)})) << e;
  }
  EXPECT_EQ(int_values(pow(tensor({true, false}), 2)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(pow(tensor({true, false}), 2).dtype(), kInt64);
}

TEST(Binary, IntegerArithmeticIsExact) {
  int64_t big = (int64_t(1) << 62) + 1;
  Tensor a = tensor(std::vector<int64_t>{big, -big});
  EXPECT_EQ(int_values(a + 2), (std::vector<int64_t>{big + 2, -big + 2}));
  EXPECT_EQ(int_values(a - tensor(std::vector<int64_t>{1, -1})), (std::vector<int64_t>{big - 1, -big + 1}));
  EXPECT_EQ(int_values(tensor(std::vector<int64_t>{3037000499}) * 3037000499),
            (std::vector<int64_t>{int64_t(3037000499) * 3037000499}));
  EXPECT_EQ(int_values(maximum(tensor({1, 5}), tensor({3, 2}))), (std::vector<int64_t>{3, 5}));
}

TEST(Binary, MaximumMinimumPropagateNaN) {
  Tensor a = tensor(std::vector<double>{kNaN, 1, 2});
  Tensor b = tensor(std::vector<double>{0, kNaN, 1});
  EXPECT_TRUE(values_near(values(maximum(a, b)), {kNaN, kNaN, 2}, 0, 0));
  EXPECT_TRUE(values_near(values(minimum(a, b)), {kNaN, kNaN, 1}, 0, 0));
}

// ---- integer division and modulo: Python semantics ----------------------------------------------
TEST(IntegerDivision, TrueDivisionGivesFloat) {
  Tensor a = tensor({1, 2, 7, -7});
  Tensor q = a / 2;
  EXPECT_EQ(q.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(q, {4}, {0.5, 1, 3.5, -3.5}));
  Tensor q2 = a / tensor({2, 4, 2, 2});
  EXPECT_EQ(q2.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(q2, {4}, {0.5, 0.5, 3.5, -3.5}));
  EXPECT_EQ((tensor({1}, kInt32) / tensor({2}, kInt32)).dtype(), kFloat32);
  EXPECT_EQ((tensor({1}) / tensor({2.}, kFloat64)).dtype(), kFloat64);
  EXPECT_TRUE(tensor_is(div(3, tensor({2, 4})), {2}, {1.5, 0.75}));
}

TEST(IntegerDivision, RemainderHasTheDivisorsSign) {
  // Python: -7 % 3 == 2, 7 % -3 == -2, -7 % -3 == -1, 7 % 3 == 1
  Tensor a = tensor({-7, 7, -7, 7, 0, 6});
  Tensor b = tensor({3, -3, -3, 3, 5, -3});
  EXPECT_EQ(int_values(remainder(a, b)), (std::vector<int64_t>{2, -2, -1, 1, 0, 0}));
  EXPECT_EQ(remainder(a, b).dtype(), kInt64);
  // Floats: -7.5 % 2 == 0.5, 7.5 % -2 == -0.5, -7.5 % -2 == -1.5
  Tensor fa = tensor(std::vector<double>{-7.5, 7.5, -7.5, 7.5});
  Tensor fb = tensor(std::vector<double>{2, -2, -2, 2});
  EXPECT_TRUE(tensor_is(remainder(fa, fb), {4}, {0.5, -0.5, -1.5, 1.5}, 0, 0));
  EXPECT_TRUE(tensor_is(remainder(tensor({-1.f}), 0.75), {1}, {0.5}));
}

TEST(IntegerDivision, IntegerDivisionByZeroIsAnError) {
  // Python and PyTorch raise ZeroDivisionError; floats give inf/nan instead.
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        floor_divide(tensor({7, 1}), tensor({2, 0}));
      },
      {"floor_divide", "division by zero"}));
  EXPECT_TRUE(throws_with<ValueError>([] { remainder(tensor({7}), 0); }, {"remainder", "division by zero"}));
  EXPECT_TRUE(values_near(values(remainder(tensor({7.}), 0)), {kNaN}, 0, 0));
  EXPECT_TRUE(values_near(values(floor_divide(tensor({7., -7.}), tensor({0., 0.}))), {kInf, -kInf}, 0, 0));
  EXPECT_TRUE(tensor_is(tensor({7}) / 0, {1}, {kInf}));  // true division gives a float
}

TEST(IntegerDivision, FloorDivideRoundsDown) {
  // Python: -7 // 3 == -3, 7 // -3 == -3, -7 // -3 == 2, 7 // 3 == 2, -6 // 3 == -2
  Tensor a = tensor({-7, 7, -7, 7, -6});
  Tensor b = tensor({3, -3, -3, 3, 3});
  Tensor q = floor_divide(a, b);
  EXPECT_EQ(q.dtype(), kInt64);
  EXPECT_EQ(int_values(q), (std::vector<int64_t>{-3, -3, 2, 2, -2}));
  Tensor fq = floor_divide(tensor(std::vector<double>{-7.5, 7.5}), tensor(std::vector<double>{2, -2}));
  EXPECT_TRUE(tensor_is(fq, {2}, {-4, -4}, 0, 0));
  // a == b * (a // b) + a % b
  std::vector<int64_t> av = int_values(a), bv = int_values(b), qv = int_values(q), rv = int_values(remainder(a, b));
  for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(av[i], bv[i] * qv[i] + rv[i]);
}

// ---- type promotion ------------------------------------------------------------------------------
TEST(Promotion, TensorTensor) {
  EXPECT_EQ((ones({2}, kInt64) + ones({2}, kFloat32)).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kInt32) + ones({2}, kInt64)).dtype(), kInt64);
  EXPECT_EQ((ones({2}, kUInt8) + ones({2}, kInt32)).dtype(), kInt32);
  EXPECT_EQ((ones({2}, kFloat32) * ones({2}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((ones({2}, kBool) + ones({2}, kUInt8)).dtype(), kUInt8);
  Tensor r = tensor({1, 2}) + tensor({0.5f, 0.25f});
  EXPECT_TRUE(tensor_is(r, {2}, {1.5, 2.25}));
}

TEST(Promotion, TensorAndCppNumbers) {
  Tensor i = tensor({1, 2, 3});
  Tensor f = i + 2.5;  // int tensor + float number -> float32
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(f, {3}, {3.5, 4.5, 5.5}));
  Tensor k = i + 2;  // int tensor + int number stays int64
  EXPECT_EQ(k.dtype(), kInt64);
  EXPECT_EQ(int_values(k), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ((ones({2}, kInt32) + 2).dtype(), kInt32);  // the tensor's int width wins
  EXPECT_EQ((ones({2}, kUInt8) * 3).dtype(), kUInt8);
  EXPECT_EQ((ones({2}, kInt32) * 2.0).dtype(), kFloat32);    // default float dtype
  EXPECT_EQ((ones({2}, kFloat64) + 2.5).dtype(), kFloat64);  // float tensor keeps its width
  EXPECT_EQ((ones({2}, kBool) + 1).dtype(), kInt64);
  EXPECT_EQ((ones({2}, kBool) * 1.5).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kInt64) + true).dtype(), kInt64);
  // uint8 arithmetic wraps in its own dtype.
  EXPECT_EQ(int_values(tensor({250}, kUInt8) + 10), (std::vector<int64_t>{4}));
}

TEST(Promotion, ZeroDimTensorsOnlyPromoteAcrossCategories) {
  Tensor f32 = ones({2}, kFloat32);
  EXPECT_EQ((f32 + scalar_tensor(1, kFloat64)).dtype(), kFloat32);  // same category: dimensioned wins
  EXPECT_EQ((ones({2}, kUInt8) + scalar_tensor(1000, kInt64)).dtype(), kUInt8);
  EXPECT_EQ((ones({2}, kInt64) + scalar_tensor(1, kFloat64)).dtype(), kFloat64);  // higher category: its dtype
  EXPECT_EQ((ones({2}, kInt32) + scalar_tensor(1.5, kFloat32)).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kBool) + scalar_tensor(3, kInt32)).dtype(), kInt32);
  EXPECT_EQ((scalar_tensor(1, kFloat32) + scalar_tensor(1, kFloat64)).dtype(), kFloat64);  // both 0-dim
  EXPECT_EQ((scalar_tensor(1, kInt32) + 2.5).dtype(), kFloat32);
  EXPECT_EQ((scalar_tensor(1, kFloat64) + 2).dtype(), kFloat64);
}

TEST(Promotion, WhereAndComparisons) {
  Tensor c = tensor({true, false});
  EXPECT_EQ(where(c, ones({2}, kInt64), ones({2}, kFloat32)).dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(where(c, tensor({1, 2}), 0.5), {2}, {1, 0.5}));
  EXPECT_EQ(where(c, tensor({1, 2}), 7).dtype(), kInt64);
  EXPECT_EQ(where(c, 1.5, 2).dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(where(c, 1.5, 2), {2}, {1.5, 2}));
  // Comparisons compute in the promoted dtype: 1 < 1.5 is true.
  EXPECT_TRUE(tensor_is(tensor({1, 2}) < 1.5, {2}, {1, 0}));
  EXPECT_TRUE(tensor_is(tensor({1, 2}) == tensor({1.0f, 2.5f}), {2}, {1, 0}));
}

// ---- comparisons, logical ops, predicates -------------------------------------------------------
TEST(Compare, AllComparisonsGiveBool) {
  Tensor a = tensor({1., 2., 3.});
  Tensor b = tensor({3., 2., 1.});
  struct C {
    Tensor r;
    std::vector<double> want;
  };
  for (const C& c : std::vector<C>{{a == b, {0, 1, 0}},
                                   {a != b, {1, 0, 1}},
                                   {a < b, {1, 0, 0}},
                                   {a <= b, {1, 1, 0}},
                                   {a > b, {0, 0, 1}},
                                   {a >= b, {0, 1, 1}},
                                   {a > 1.5, {0, 1, 1}},
                                   {a <= 2, {1, 1, 0}},
                                   {a.ne(3), {1, 1, 0}}}) {
    EXPECT_EQ(c.r.dtype(), kBool);
    EXPECT_TRUE(tensor_is(c.r, {3}, c.want));
  }
}

TEST(Compare, BroadcastAndNaN) {
  Tensor col = tensor({{1.}, {2.}, {3.}});
  Tensor row = tensor({2., 3.});
  EXPECT_TRUE(tensor_is(col < row, {3, 2}, {1, 1, 0, 1, 0, 0}));
  Tensor n = tensor(std::vector<double>{kNaN});
  EXPECT_TRUE(tensor_is(n == n, {1}, {0}));
  EXPECT_TRUE(tensor_is(n != n, {1}, {1}));
  EXPECT_TRUE(tensor_is(n < 0, {1}, {0}));
}

TEST(Compare, LogicalAndBitwiseOnMasks) {
  Tensor p = tensor({true, true, false, false});
  Tensor q = tensor({true, false, true, false});
  EXPECT_TRUE(tensor_is(p & q, {4}, {1, 0, 0, 0}));
  EXPECT_TRUE(tensor_is(p | q, {4}, {1, 1, 1, 0}));
  EXPECT_TRUE(tensor_is(p ^ q, {4}, {0, 1, 1, 0}));
  EXPECT_TRUE(tensor_is(~p, {4}, {0, 0, 1, 1}));
  // logical_* accept any dtype (nonzero is true).
  EXPECT_TRUE(tensor_is(logical_and(tensor({0, 2, 3}), tensor({1.5, 0., 1.})), {3}, {0, 0, 1}));
  EXPECT_TRUE(tensor_is(logical_not(tensor({0., -1.})), {2}, {1, 0}));
  EXPECT_TRUE(tensor_is(logical_xor(tensor({0, 5}), tensor({0, 0})), {2}, {0, 1}));
  EXPECT_THROW(tensor({1, 2}) & tensor({1, 0}), DTypeError);
  EXPECT_THROW(~tensor({1, 2}), DTypeError);
}

TEST(Compare, BoolArithmetic) {
  Tensor p = tensor({true, true, false});
  Tensor q = tensor({true, false, false});
  EXPECT_EQ((p + q).dtype(), kBool);
  EXPECT_TRUE(tensor_is(p + q, {3}, {1, 1, 0}));  // or
  EXPECT_TRUE(tensor_is(p * q, {3}, {1, 0, 0}));  // and
  EXPECT_THROW(p - q, DTypeError);
}

TEST(Compare, NanInfFinitePredicates) {
  Tensor x = tensor(std::vector<double>{1, kNaN, kInf, -kInf, 0});
  EXPECT_TRUE(tensor_is(isnan(x), {5}, {0, 1, 0, 0, 0}));
  EXPECT_TRUE(tensor_is(isinf(x), {5}, {0, 0, 1, 1, 0}));
  EXPECT_TRUE(tensor_is(isfinite(x), {5}, {1, 0, 0, 0, 1}));
  Tensor xf = x.to(kFloat32);
  EXPECT_TRUE(tensor_is(isfinite(xf), {5}, {1, 0, 0, 0, 1}));
  EXPECT_EQ(isnan(x).dtype(), kBool);
  Tensor i = tensor({1, 2});
  EXPECT_TRUE(tensor_is(isnan(i), {2}, {0, 0}));
  EXPECT_TRUE(tensor_is(isfinite(i), {2}, {1, 1}));
}

TEST(Compare, IsCloseAllCloseEqual) {
  Tensor a = tensor(std::vector<double>{1, 2, kNaN, kInf});
  Tensor b = tensor(std::vector<double>{1 + 1e-9, 2.1, kNaN, kInf});
  EXPECT_TRUE(tensor_is(isclose(a, b), {4}, {1, 0, 0, 1}));
  EXPECT_TRUE(tensor_is(isclose(a, b, 1e-5, 1e-8, true), {4}, {1, 0, 1, 1}));
  EXPECT_TRUE(tensor_is(isclose(a, b, 0.1, 0), {4}, {1, 1, 0, 1}));
  EXPECT_FALSE(allclose(a, b));
  EXPECT_TRUE(allclose(tensor({1., 2.}), tensor({1.000001, 2.})));
  EXPECT_TRUE(equal(tensor({1, 2}), tensor({1., 2.})));
  EXPECT_FALSE(equal(tensor({1, 2}), tensor({1, 3})));
  EXPECT_FALSE(equal(tensor({1, 2}), tensor({{1, 2}})));
  EXPECT_TRUE(equal(zeros({0, 2}), zeros({0, 2})));
  // 16-bit floats compare on the CPU too (as torch.equal), by their exact float32 values.
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor h = tensor({-7.5, 0.0, 300.0, 1e4}).to(dt);
    EXPECT_TRUE(equal(h, h.clone())) << dtype_name(dt);
    EXPECT_TRUE(equal(h, h.to(kFloat32))) << dtype_name(dt);
    EXPECT_FALSE(equal(h, (h.to(kFloat32) + tensor({0.0, 0.0, 0.0, 64.0})).to(dt))) << dtype_name(dt);
  }
}

// ---- composites ------------------------------------------------------------------------------------
TEST(Composite, LerpAddcmulAddcdiv) {
  Tensor x = tensor({1., 2.}), y = tensor({3., 6.}), a = tensor({2., 3.}), b = tensor({4., 0.5});
  EXPECT_TRUE(tensor_is(lerp(x, y, 0.25), {2}, {1.5, 3}));
  EXPECT_TRUE(tensor_is(addcmul(x, a, b, 0.5), {2}, {5, 2.75}));
  EXPECT_TRUE(tensor_is(addcdiv(x, a, b, 2), {2}, {2, 14}));
}

TEST(Composite, WhereBroadcastsAllThree) {
  Tensor cond = tensor({{true}, {false}});
  Tensor a = tensor({1., 2., 3.});
  Tensor b = tensor({{10.}, {20.}});
  EXPECT_TRUE(tensor_is(where(cond, a, b), {2, 3}, {1, 2, 3, 20, 20, 20}));
  EXPECT_TRUE(tensor_is(where(cond.t().contiguous().t(), a, 0.0), {2, 3}, {1, 2, 3, 0, 0, 0}));
  EXPECT_THROW(where(tensor({1, 0}), a, a), DTypeError);
}

// ---- in-place ops ----------------------------------------------------------------------------------
TEST(InPlace, ArithmeticAndOperators) {
  Tensor t = tensor({1., 2., 3.});
  t += 1;
  t *= tensor({2., 2., 0.5});
  t -= tensor(1.);
  t /= 2;
  EXPECT_TRUE(tensor_is(t, {3}, {1.5, 2.5, 0.5}));
  t.pow_(2);
  EXPECT_TRUE(tensor_is(t, {3}, {2.25, 6.25, 0.25}));
  t.add_(tensor({1., 1., 1.}), -2);
  EXPECT_TRUE(tensor_is(t, {3}, {0.25, 4.25, -1.75}));
  t.clamp_(0, 1);
  EXPECT_TRUE(tensor_is(t, {3}, {0.25, 1, 0}));
  Tensor r = tensor({-1., 4.});
  r.relu_();
  r.sqrt_();
  r.neg_();
  r.exp_();
  EXPECT_TRUE(tensor_is(r, {2}, {1, std::exp(-2.0)}));
}

TEST(InPlace, BroadcastOtherIntoSelf) {
  Tensor t = zeros({2, 3});
  t.add_(tensor({1., 2., 3.}));
  t.mul_(tensor({{1.}, {-1.}}));
  EXPECT_TRUE(tensor_is(t, {2, 3}, {1, 2, 3, -1, -2, -3}));
  EXPECT_TRUE(throws_with<ShapeError>([] { zeros({3}).add_(zeros({2, 3})); }, {"add_", "[2, 3]", "[3]"}));
}

TEST(InPlace, IntoNonContiguousViews) {
  Tensor base = arange(12, kFloat64).view({3, 4});
  base.t().mul_(2);
  base.slice(1, 0, std::nullopt, 2).add_(100);
  EXPECT_TRUE(tensor_is(base, {3, 4}, {100, 2, 104, 6, 108, 10, 112, 14, 116, 18, 120, 22}));
  base.select(0, 1).zero_();
  EXPECT_TRUE(tensor_is(base[1], {4}, {0, 0, 0, 0}));
}

TEST(InPlace, DtypeRules) {
  Tensor i = tensor({1, 2, 3});
  EXPECT_TRUE(throws_with<DTypeError>([&] { i.add_(1.5); }, {"add_", "float32", "int64"}));
  EXPECT_THROW(i.div_(2), DTypeError);  // true division gives float
  EXPECT_THROW(i.mul_(ones({3})), DTypeError);
  EXPECT_THROW(tensor({true}).add_(1), DTypeError);
  // Allowed: the result type fits the destination.
  i.add_(2);
  i.mul_(tensor({2, 2, 2}, kInt32));
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{6, 8, 10}));
  Tensor i32 = tensor({1, 2}, kInt32);
  i32.add_(tensor({1, 1}));  // int64 other, stored back as int32
  EXPECT_EQ(i32.dtype(), kInt32);
  EXPECT_EQ(int_values(i32), (std::vector<int64_t>{2, 3}));
  Tensor f = tensor({1.f, 2.f});
  f.add_(tensor({1, 2}));                         // int into float is fine
  f.mul_(tensor(std::vector<double>{0.5, 0.5}));  // float64 other, float32 destination
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(f, {2}, {1, 2}));
}

TEST(InPlace, UnaryDtypeRules) {
  Tensor i = tensor({4, 9});
  EXPECT_THROW(i.sqrt_(), DTypeError);  // sqrt of int is float32
  EXPECT_THROW(i.exp_(), DTypeError);
  i.neg_();
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{-4, -9}));
  i.relu_();
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{0, 0}));
}

TEST(InPlace, ClampWithIntegers) {
  Tensor i = tensor({-5, 0, 5, 10});
  Tensor c = clamp(i, -2, 6);
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_EQ(int_values(c), (std::vector<int64_t>{-2, 0, 5, 6}));
  EXPECT_EQ(int_values(clamp_min(i, 1)), (std::vector<int64_t>{1, 1, 5, 10}));
  EXPECT_EQ(int_values(clamp_max(i, 1)), (std::vector<int64_t>{-5, 0, 1, 1}));
  // Float bounds promote an integer tensor to float32, as PyTorch 2.
  Tensor f = clamp(i, 0.5, 7.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(f, {4}, {0.5, 0.5, 5, 7.5}));
  // Bounds beyond the dtype's range saturate.
  EXPECT_EQ(int_values(clamp(tensor({0, 200}, kUInt8), -5, 1000)), (std::vector<int64_t>{0, 200}));
  i.clamp_(0, 3);
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{0, 0, 3, 3}));
  EXPECT_THROW(i.clamp_(0.5), DTypeError);
  EXPECT_THROW(clamp(i, std::optional<Scalar>{}, std::nullopt), ValueError);
}

TEST(InPlace, FillAndZero) {
  Tensor t = empty({2, 2}, kInt32);
  t.fill_(7);
  EXPECT_EQ(int_values(t), (std::vector<int64_t>{7, 7, 7, 7}));
  t.fill_(2.9);  // converted to the tensor's dtype
  EXPECT_EQ(int_values(t), (std::vector<int64_t>{2, 2, 2, 2}));
  t.zero_();
  EXPECT_EQ(int_values(t), (std::vector<int64_t>{0, 0, 0, 0}));
  Tensor f = zeros({3});
  f.fill_(tensor(4.5));
  EXPECT_TRUE(tensor_is(f, {3}, {4.5, 4.5, 4.5}));
  EXPECT_THROW(f.fill_(tensor({1., 2., 3.})), ShapeError);
}

}  // namespace
}  // namespace nabla::testing
