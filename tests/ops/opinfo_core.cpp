// Registry entries for the Tensor core's ops (elementwise, reductions, views, indexing, linear
// algebra, convolution and pooling). See opinfo.h.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "autograd/function.h"
#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;
using indexing::None;
using indexing::Slice;

Outputs one(Tensor t) { return {std::move(t)}; }

std::vector<Sample> small_unary(double lo, double hi) {
  return {{{arg({2, 3}, lo, hi)}, "2d"}, {{arg({}, lo, hi)}, "scalar"}, {{arg_t({3, 2}, lo, hi)}, "noncontiguous"}};
}

// ---- elementwise ----------------------------------------------------------------------------------
// The scalar references of the unary ops (PyTorch's definitions, with <cmath>).
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_ref(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
double hardsigmoid_ref(double x) { return std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }
// erf's inverse by bisection (erf is increasing): independent of the kernel's rational guess and
// Newton steps.
double erfinv_ref(double x) {
  if (x <= -1 || x >= 1) return x == 1 ? INFINITY : x == -1 ? -INFINITY : NAN;
  double lo = -7, hi = 7;
  for (int i = 0; i < 200 && lo < hi; ++i) {
    double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    (std::erf(mid) < x ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}
const std::map<std::string, double (*)(double)>& unary_references() {
  static const std::map<std::string, double (*)(double)> refs = {
      {"exp", [](double x) { return std::exp(x); }},
      {"exp2", [](double x) { return std::exp2(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"log2", [](double x) { return std::log2(x); }},
      {"log10", [](double x) { return std::log10(x); }},
      {"log1p", [](double x) { return std::log1p(x); }},
      {"expm1", [](double x) { return std::expm1(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"tan", [](double x) { return std::tan(x); }},
      {"asin", [](double x) { return std::asin(x); }},
      {"acos", [](double x) { return std::acos(x); }},
      {"atan", [](double x) { return std::atan(x); }},
      {"sinh", [](double x) { return std::sinh(x); }},
      {"cosh", [](double x) { return std::cosh(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"erfc", [](double x) { return std::erfc(x); }},
      {"erfinv", erfinv_ref},
      {"asinh", [](double x) { return std::asinh(x); }},
      {"acosh", [](double x) { return std::acosh(x); }},
      {"atanh", [](double x) { return std::atanh(x); }},
      {"sigmoid", sigmoid_ref},
      {"logsigmoid", [](double x) { return -softplus_ref(-x); }},
      {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu_tanh",
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {"silu", [](double x) { return x * sigmoid_ref(x); }},
      {"mish", [](double x) { return x * std::tanh(softplus_ref(x)); }},
      {"reciprocal", [](double x) { return 1 / x; }},
      {"selu", [](double x) { return 1.0507009873554804934 * (x > 0 ? x : 1.6732632423543772848 * std::expm1(x)); }},
      {"hardsigmoid", hardsigmoid_ref},
      {"hardswish", [](double x) { return x * hardsigmoid_ref(x); }},
      {"softsign", [](double x) { return x / (1 + std::abs(x)); }},
      {"frac", [](double x) { return x - std::trunc(x); }},
      {"neg", [](double x) { return -x; }},
      {"abs", [](double x) { return std::abs(x); }},
      {"sign", [](double x) { return double((x > 0) - (x < 0)); }},
      {"square", [](double x) { return x * x; }},
      {"relu", [](double x) { return std::max(x, 0.0); }},
      {"floor", [](double x) { return std::floor(x); }},
      {"ceil", [](double x) { return std::ceil(x); }},
      {"round", [](double x) { return std::nearbyint(x); }},  // halves to even, as PyTorch
      {"trunc", [](double x) { return std::trunc(x); }},
  };
  return refs;
}
// Python's remainder: the sign of the divisor.
double remainder_ref(double a, double b) {
  double r = std::fmod(a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

std::vector<OpInfo> elementwise_ops() {
  struct U {
    const char* name;
    Tensor (*f)(const Tensor&);
    double lo, hi;
    const char* torch = nullptr;  // default: torch.<name>(x[0])
  };
  std::vector<U> unary = {
      {"exp", exp, -2, 2},
      {"exp2", exp2, -2, 2},
      {"log", log, 0.5, 3},
      {"log2", log2, 0.5, 3},
      {"log10", log10, 0.5, 3},
      {"log1p", log1p, -0.5, 2},
      {"expm1", expm1, -2, 2},
      {"sqrt", sqrt, 0.5, 3},
      {"rsqrt", rsqrt, 0.5, 3},
      {"sin", sin, -3, 3},
      {"cos", cos, -3, 3},
      {"tan", tan, -1, 1},
      {"asin", asin, -0.9, 0.9},
      {"acos", acos, -0.9, 0.9},
      {"atan", atan, -2, 2},
      {"sinh", sinh, -2, 2},
      {"cosh", cosh, -2, 2},
      {"tanh", tanh, -2, 2},
      {"erf", erf, -2, 2},
      {"erfc", erfc, -2, 2},
      {"erfinv", erfinv, -0.9, 0.9},
      {"asinh", asinh, -2, 2},
      {"acosh", acosh, 1.2, 3},
      {"atanh", atanh, -0.9, 0.9},
      {"sigmoid", sigmoid, -3, 3},
      {"logsigmoid", logsigmoid, -3, 3, "F.logsigmoid(x[0])"},
      {"gelu", gelu, -3, 3, "F.gelu(x[0])"},
      {"gelu_tanh", gelu_tanh, -3, 3, "F.gelu(x[0], approximate='tanh')"},
      {"silu", silu, -3, 3, "F.silu(x[0])"},
      {"mish", mish, -3, 3, "F.mish(x[0])"},
      {"reciprocal", reciprocal, 0.5, 2},
      {"selu", selu, -2, 2},
      {"hardsigmoid", hardsigmoid, -2.9, 2.9, "F.hardsigmoid(x[0])"},
      {"hardswish", hardswish, -2.5, 2.5, "F.hardswish(x[0])"},
      {"softsign", softsign, -3, 3, "F.softsign(x[0])"},
      {"frac", frac, 0.1, 0.9},
      {"neg", neg, -2, 2},
      {"abs", abs, -2, 2},
      {"sign", sign, -2, 2},
      {"square", square, -2, 2},
      {"relu", relu, -2, 2},
      {"floor", floor, -3, 3},
      {"ceil", ceil, -3, 3},
      {"round", round, -3, 3},
      {"trunc", trunc, -3, 3},
  };
  std::vector<OpInfo> ops;
  for (const U& u : unary) {
    auto f = u.f;
    ops.push_back({.name = u.name,
                   .torch = u.torch ? u.torch : std::string("torch.") + u.name + "(x[0])",
                   .fn = [f](I x) { return one(f(x[0])); },
                   .samples = unary_samples(u.lo, u.hi),
                   .ref = scalar_ref(unary_references().at(u.name)),
                   .sweep_dtypes = true});
  }
  ops.push_back({.name = "leaky_relu",
                 .torch = "F.leaky_relu(x[0], 0.1)",
                 .fn = [](I x) { return one(leaky_relu(x[0], 0.1)); },
                 .samples = unary_samples(-2, 2),
                 .ref = scalar_ref([](double x) { return x > 0 ? x : 0.1 * x; })});
  ops.push_back({.name = "elu",
                 .torch = "F.elu(x[0], 1.5)",
                 .fn = [](I x) { return one(elu(x[0], 1.5)); },
                 .samples = unary_samples(-2, 2),
                 .ref = scalar_ref([](double x) { return x > 0 ? x : 1.5 * std::expm1(x); })});
  ops.push_back({.name = "softplus",
                 .torch = "F.softplus(x[0], 2, 3)",
                 .fn = [](I x) { return one(softplus(x[0], 2, 3)); },
                 .samples = unary_samples(-2, 1),
                 .ref = scalar_ref([](double x) { return 2 * x > 3 ? x : std::log1p(std::exp(2 * x)) / 2; })});
  ops.push_back({.name = "hardtanh",
                 .torch = "F.hardtanh(x[0], -0.5, 0.7)",
                 .fn = [](I x) { return one(hardtanh(x[0], -0.5, 0.7)); },
                 .samples = unary_samples(-2, 2),
                 .ref = scalar_ref([](double x) { return std::min(std::max(x, -0.5), 0.7); })});
  ops.push_back({.name = "clamp",
                 .torch = "torch.clamp(x[0], -0.5, 0.5)",
                 .fn = [](I x) { return one(clamp(x[0], -0.5, 0.5)); },
                 .samples = unary_samples(-2, 2),
                 .ref = scalar_ref([](double x) { return std::min(std::max(x, -0.5), 0.5); })});
  ops.push_back({.name = "clamp_min",
                 .torch = "(torch.clamp_min(x[0], -0.5), x[0].clamp_min(0.3))",
                 .fn =
                     [](I x) {
                       return Outputs{clamp_min(x[0], -0.5), x[0].clamp_min(0.3)};
                     },
                 .samples = unary_samples(-2, 2),
                 .ref =
                     [](I x) {
                       return Outputs{maximum(x[0], full_like(x[0], -0.5)), maximum(x[0], full_like(x[0], 0.3))};
                     }});
  ops.push_back({.name = "clamp_max",
                 .torch = "(torch.clamp_max(x[0], 0.5), x[0].clamp_max(-0.3))",
                 .fn =
                     [](I x) {
                       return Outputs{clamp_max(x[0], 0.5), x[0].clamp_max(-0.3)};
                     },
                 .samples = unary_samples(-2, 2),
                 .ref =
                     [](I x) {
                       return Outputs{minimum(x[0], full_like(x[0], 0.5)), minimum(x[0], full_like(x[0], -0.3))};
                     }});

  ops.push_back({.name = "clamp_tensor",
                 .ops = {OpId::clamp},
                 .torch = "(torch.clamp(x[0], x[1], x[2]), torch.clamp_min(x[0], x[1]), torch.clamp_max(x[0], x[2]))",
                 .fn =
                     [](I x) {
                       return Outputs{clamp(x[0], x[1], x[2]), clamp_min(x[0], x[1]), clamp_max(x[0], x[2])};
                     },
                 .samples = {{{arg({3, 4}, -2, 2), arg({3, 4}, -1, 0), arg({4}, 0, 1)}, "broadcast bounds"},
                             {{arg({2, 3}, -2, 2), arg({2, 3}, 0.2, 1), arg({2, 3}, -1, -0.2)}, "min > max: max wins"},
                             {{arg_t({3, 2}, -2, 2), arg({1}, -0.5, 0), arg_t({3, 2}, 0, 0.5)}, "non-contiguous"},
                             {{arg({0, 3}, -2, 2), arg({3}, -1, 0), arg({3}, 0, 1)}, "empty"}},
                 .ref =
                     [](I x) {
                       Tensor lo = minimum(maximum(x[0], x[1]), x[2]);
                       return Outputs{lo, maximum(x[0], x[1]), minimum(x[0], x[2])};
                     }});
  ops.push_back({.name = "add",
                 .torch = "torch.add(x[0], x[1], alpha=2)",
                 .fn = [](I x) { return one(add(x[0], x[1], 2)); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return a + 2 * b; }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "sub",
                 .torch = "torch.sub(x[0], x[1], alpha=0.5)",
                 .fn = [](I x) { return one(sub(x[0], x[1], 0.5)); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return a - 0.5 * b; }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "mul",
                 .torch = "x[0] * x[1]",
                 .fn = [](I x) { return one(x[0] * x[1]); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return a * b; }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "div",
                 .torch = "x[0] / x[1]",
                 .fn = [](I x) { return one(x[0] / x[1]); },
                 .samples = binary_samples(-2, 2, 0.5, 2),
                 .ref = scalar_ref([](double a, double b) { return a / b; }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "pow",
                 .torch = "torch.pow(x[0], x[1])",
                 .fn = [](I x) { return one(pow(x[0], x[1])); },
                 .samples = binary_samples(0.5, 2, -1, 2),
                 .ref = scalar_ref([](double a, double b) { return std::pow(a, b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "pow_scalar",
                 .torch = "torch.pow(x[0], 2.5)",
                 .fn = [](I x) { return one(pow(x[0], 2.5)); },
                 .samples = unary_samples(0.5, 2)});
  ops.push_back({.name = "maximum",
                 .torch = "torch.maximum(x[0], x[1])",
                 .fn = [](I x) { return one(maximum(x[0], x[1])); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return std::max(a, b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "minimum",
                 .torch = "torch.minimum(x[0], x[1])",
                 .fn = [](I x) { return one(minimum(x[0], x[1])); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return std::min(a, b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "atan2",
                 .torch = "torch.atan2(x[0], x[1])",
                 .fn = [](I x) { return one(atan2(x[0], x[1])); },
                 .samples = binary_samples(-2, 2, 0.5, 2),
                 .ref = scalar_ref([](double a, double b) { return std::atan2(a, b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "hypot",
                 .torch = "torch.hypot(x[0], x[1])",
                 .fn = [](I x) { return one(hypot(x[0], x[1])); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return std::hypot(a, b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "remainder",
                 .torch = "torch.remainder(x[0], x[1])",
                 .fn = [](I x) { return one(remainder(x[0], x[1])); },
                 .samples = binary_samples(0.1, 3, 0.7, 0.9),
                 .ref = scalar_ref(remainder_ref),
                 .sweep_dtypes = true});
  ops.push_back({.name = "fmod",
                 .torch = "torch.fmod(x[0], x[1])",
                 .fn = [](I x) { return one(fmod(x[0], x[1])); },
                 .samples = binary_samples(-3, 3, 0.7, 0.9),
                 .ref = scalar_ref([](double a, double b) { return std::fmod(a, b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "fmod_scalar",
                 .ops = {OpId::fmod},
                 .torch = "(torch.fmod(x[0], 2), torch.fmod(x[0], -1.5))",
                 .fn =
                     [](I x) {
                       return Outputs{fmod(x[0], 2), fmod(x[0], -1.5)};
                     },
                 .samples = unary_samples(-4, 4),
                 .sweep_dtypes = true});
  // Also at x == 0 (the gradient in x is log y there, as PyTorch's) and with one operand a constant
  // (each gradient formula reads only what the op saved for it).
  std::vector<Sample> xlogy_samples = binary_samples(-2, 2, 0.5, 2);
  xlogy_samples.push_back({{fixed_arg({4}, {0, 0, 1.5, -1}), arg({4}, 0.5, 2)}, "zero_x"});
  xlogy_samples.push_back({{fixed_arg({4}, {0, 0, 1.5, -1}), const_arg({4}, 0.5, 2)}, "constant_y"});
  xlogy_samples.push_back({{const_arg({2, 3}, -2, 2), arg({3}, 0.5, 2)}, "constant_x"});
  ops.push_back({.name = "xlogy",
                 .torch = "torch.xlogy(x[0], x[1])",
                 .fn = [](I x) { return one(xlogy(x[0], x[1])); },
                 .samples = xlogy_samples,
                 .ref = scalar_ref([](double a, double b) { return a == 0 ? 0.0 : a * std::log(b); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "logaddexp",
                 .torch = "torch.logaddexp(x[0], x[1])",
                 .fn = [](I x) { return one(logaddexp(x[0], x[1])); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double a, double b) { return std::log(std::exp(a) + std::exp(b)); }),
                 .sweep_dtypes = true});
  ops.push_back({.name = "threshold_backward",
                 .torch = "torch.ops.aten.threshold_backward(x[0], x[1], 0)",
                 .fn = [](I x) { return one(threshold_backward(x[0], x[1])); },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .ref = scalar_ref([](double g, double y) { return y > 0 ? g : 0.0; })});
  // PyTorch 1.13 has no derivative for floor_divide; its twin div(rounding_mode="floor") computes the
  // same values with the zero gradient nabla gives.
  ops.push_back({.name = "floor_divide",
                 .torch = "torch.div(x[0], x[1], rounding_mode='floor')",
                 .fn = [](I x) { return one(floor_divide(x[0], x[1])); },
                 .samples = binary_samples(0.1, 3, 0.7, 0.9),
                 .ref = scalar_ref([](double a, double b) { return std::floor(a / b); }),
                 .sweep_dtypes = true});
  // Scalar operands (Python numbers in PyTorch), integral and floating: type promotion with a number
  // follows the tensor's category (int tensor + 1.5 is float32, uint8 tensor + 2 stays uint8).
  ops.push_back({.name = "add_scalar",
                 .ops = {OpId::add},
                 .torch = "(x[0] + 2, x[0] + 1.5, 2 + x[0], x[0] + True)",
                 .fn =
                     [](I x) {
                       return Outputs{x[0] + 2, x[0] + 1.5, 2 + x[0], add(x[0], Scalar(true))};
                     },
                 .samples = unary_samples(-2, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "sub_scalar",
                 .ops = {OpId::sub},
                 .torch = "(x[0] - 2, x[0] - 1.5, 3 - x[0])",
                 .fn =
                     [](I x) {
                       return Outputs{x[0] - 2, x[0] - 1.5, 3 - x[0]};
                     },
                 .samples = unary_samples(-2, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "mul_scalar",
                 .ops = {OpId::mul},
                 .torch = "(x[0] * 2, x[0] * 1.5, 3 * x[0])",
                 .fn =
                     [](I x) {
                       return Outputs{x[0] * 2, x[0] * 1.5, 3 * x[0]};
                     },
                 .samples = unary_samples(-2, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "div_scalar",
                 .ops = {OpId::div},
                 .torch = "(x[0] / 2, x[0] / 1.5, 3 / x[0])",
                 .fn =
                     [](I x) {
                       return Outputs{x[0] / 2, x[0] / 1.5, 3 / x[0]};
                     },
                 .samples = unary_samples(0.5, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "pow_scalar_int",
                 .ops = {OpId::pow_scalar},
                 .torch = "(torch.pow(x[0], 2), torch.pow(x[0], 3), torch.pow(x[0], 0))",
                 .fn =
                     [](I x) {
                       return Outputs{pow(x[0], 2), pow(x[0], 3), pow(x[0], 0)};
                     },
                 .samples = unary_samples(-2, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "pow_negative_int",
                 .ops = {OpId::pow_scalar},
                 .torch = "torch.pow(x[0], -1)",
                 .fn = [](I x) { return one(pow(x[0], -1)); },
                 .samples = unary_samples(0.5, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "rpow_scalar",
                 .ops = {OpId::pow},
                 .torch = "(torch.pow(2, x[0]), torch.pow(1.5, x[0]))",
                 .fn =
                     [](I x) {
                       return Outputs{pow(2, x[0]), pow(1.5, x[0])};
                     },
                 .samples = unary_samples(-2, 2),
                 .sweep_dtypes = true});
  ops.push_back({.name = "remainder_scalar",
                 .ops = {OpId::remainder},
                 .torch = "(torch.remainder(x[0], 2), torch.remainder(x[0], 1.5))",
                 .fn =
                     [](I x) {
                       return Outputs{remainder(x[0], 2), remainder(x[0], 1.5)};
                     },
                 .samples = unary_samples(-2, 2),
                 .sweep_dtypes = true});
  // Comparisons and logical ops (bool results, not differentiable).
  ops.push_back({.name = "compare",
                 .torch = "(x[0] == x[1], x[0] != x[1], x[0] < x[1], x[0] <= x[1], x[0] > x[1], "
                          "x[0] >= x[1])",
                 .fn =
                     [](I x) {
                       return Outputs{x[0] == x[1], x[0] != x[1], x[0]<x[1], x[0] <= x[1], x[0]> x[1], x[0] >= x[1]};
                     },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .differentiable = false,
                 .sweep_dtypes = true});
  ops.push_back({.name = "compare_scalar",
                 .torch = "(x[0] == 1, x[0] < 0.5, x[0] >= 2, x[0] != True)",
                 .fn =
                     [](I x) {
                       return Outputs{eq(x[0], 1), lt(x[0], 0.5), ge(x[0], 2), ne(x[0], Scalar(true))};
                     },
                 .samples = unary_samples(-2, 2),
                 .differentiable = false,
                 .sweep_dtypes = true});
  ops.push_back({.name = "logical",
                 .torch = "(torch.logical_and(x[0], x[1]), torch.logical_or(x[0], x[1]), "
                          "torch.logical_xor(x[0], x[1]))",
                 .fn =
                     [](I x) {
                       return Outputs{logical_and(x[0], x[1]), logical_or(x[0], x[1]), logical_xor(x[0], x[1])};
                     },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .differentiable = false,
                 .sweep_dtypes = true});
  ops.push_back({.name = "predicates",
                 .torch = "(torch.isnan(x[0]), torch.isinf(x[0]), torch.isfinite(x[0]), "
                          "torch.logical_not(x[0]))",
                 .fn =
                     [](I x) {
                       return Outputs{isnan(x[0]), isinf(x[0]), isfinite(x[0]), logical_not(x[0])};
                     },
                 .samples = unary_samples(-2, 2),
                 .differentiable = false,
                 .sweep_dtypes = true});
  // PyTorch's isclose(equal_nan=True) raises when `a` alone would broadcast (an in-place op on a's
  // shape); the twin broadcasts first.
  ops.push_back({.name = "isclose",
                 .torch = "(torch.isclose(*torch.broadcast_tensors(x[0], x[1])), "
                          "torch.isclose(*torch.broadcast_tensors(x[0], x[1]), 0.1, 0.2, True))",
                 .fn =
                     [](I x) {
                       return Outputs{isclose(x[0], x[1]), isclose(x[0], x[1], 0.1, 0.2, true)};
                     },
                 .samples = binary_samples(-2, 2, -2, 2),
                 .differentiable = false,
                 .sweep_dtypes = true});
  ops.push_back({.name = "where",
                 .torch = "torch.where(x[0], x[1], x[2])",
                 .fn = [](I x) { return one(where(x[0], x[1], x[2])); },
                 .samples = {{{mask_arg({3, 4}), arg({3, 4}), arg({3, 4})}, "same_shape"},
                             {{mask_arg({3, 1}), arg({4}), arg({3, 4})}, "broadcast"},
                             {{mask_arg({}), arg({2, 2}), arg_t({2, 2})}, "scalar_mask"}}});
  ops.push_back({.name = "lerp",
                 .torch = "torch.lerp(x[0], x[1], 0.3)",
                 .fn = [](I x) { return one(lerp(x[0], x[1], 0.3)); },
                 .samples = binary_samples(-2, 2, -2, 2)});
  ops.push_back({.name = "addcmul",
                 .torch = "torch.addcmul(x[0], x[1], x[2], value=0.5)",
                 .fn = [](I x) { return one(addcmul(x[0], x[1], x[2], 0.5)); },
                 .samples = {{{arg({3, 4}), arg({3, 4}), arg({4})}, "broadcast"}}});
  ops.push_back({.name = "addcdiv",
                 .torch = "torch.addcdiv(x[0], x[1], x[2], value=0.5)",
                 .fn = [](I x) { return one(addcdiv(x[0], x[1], x[2], 0.5)); },
                 .samples = {{{arg({3, 4}), arg({3, 4}), arg({4}, 0.5, 2)}, "broadcast"}}});
  return ops;
}

// ---- reductions ------------------------------------------------------------------------------------
std::vector<OpInfo> reduction_ops() {
  std::vector<Sample> red = {
      {{arg({3, 4})}, "2d"}, {{arg({2, 3, 4})}, "3d"}, {{arg_t({4, 3})}, "noncontiguous"}, {{arg({})}, "scalar"}};
  std::vector<OpInfo> ops;
  ops.push_back({.name = "sum",
                 .torch = "(x[0].sum(), x[0].sum(0), x[0].sum(-1, keepdim=True))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].sum(), x[0].sum({0}), x[0].sum({-1}, true)};
                     },
                 .samples = red});
  ops.push_back({.name = "sum_empty",
                 .ops = {OpId::sum},
                 .torch = "(x[0].sum(), x[0].sum(1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].sum(), x[0].sum({1})};
                     },
                 .samples = {{{arg({0, 3})}, "empty"}}});
  ops.push_back({.name = "mean",
                 .torch = "(x[0].mean(), x[0].mean(0, keepdim=True))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].mean(), x[0].mean({0}, true)};
                     },
                 .samples = red});
  ops.push_back({.name = "prod",
                 .torch = "(x[0].prod(), x[0].prod(0))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].prod(), x[0].prod(0)};
                     },
                 .samples = {{{arg({3, 4}, 0.5, 1.5)}, "2d"}, {{fixed_arg({2, 3}, {1, 0, 2, 3, 0, 0})}, "zeros"}}});
  ops.push_back({.name = "max", .torch = "x[0].max()", .fn = [](I x) { return one(x[0].max()); }, .samples = red});
  ops.push_back({.name = "max_dim",
                 .torch = "x[0].max(-1)",
                 .fn =
                     [](I x) {
                       auto [v, i] = x[0].max(-1);
                       return Outputs{v, i};
                     },
                 .samples = red});
  ops.push_back({.name = "min", .torch = "x[0].min()", .fn = [](I x) { return one(x[0].min()); }, .samples = red});
  ops.push_back({.name = "min_dim",
                 .torch = "x[0].min(0, keepdim=True)",
                 .fn =
                     [](I x) {
                       auto [v, i] = x[0].min(0, true);
                       return Outputs{v, i};
                     },
                 .samples = red});
  // At ties max is not differentiable twice: its gradient jumps.
  ops.push_back({.name = "max_ties",
                 .ops = {OpId::max},
                 .torch = "(x[0].max(), x[0].amax(1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].max(), x[0].amax({1})};
                     },
                 .samples = {{{fixed_arg({2, 3}, {1, 3, 3, -1, 2, 2})}, "ties"}},
                 .twice_differentiable = false});
  ops.push_back(
      {.name = "amax", .torch = "x[0].amax(0)", .fn = [](I x) { return one(x[0].amax({0})); }, .samples = red});
  ops.push_back({.name = "amin",
                 .torch = "x[0].amin(-1, keepdim=True)",
                 .fn = [](I x) { return one(x[0].amin({-1}, true)); },
                 .samples = red});
  std::vector<Sample> red_nonscalar(red.begin(), red.end() - 1);  // var of one element is NaN
  ops.push_back({.name = "var",
                 .torch = "(torch.var(x[0]), torch.var(x[0], 0, unbiased=False, keepdim=True))",
                 .fn =
                     [](I x) {
                       return Outputs{var(x[0]), var(x[0], {0}, 0, true)};
                     },
                 .samples = red_nonscalar});
  ops.push_back(
      {.name = "var_mean",
       .torch =
           "(torch.var_mean(x[0]), torch.var_mean(x[0], 0, unbiased=False, keepdim=True), torch.var_mean(x[0], -1))",
       .fn =
           [](I x) {
             auto [v0, m0] = var_mean(x[0]);
             auto [v1, m1] = var_mean(x[0], {0}, 0, true);
             auto [v2, m2] = var_mean(x[0], {-1});
             return Outputs{v0, m0, v1, m1, v2, m2};
           },
       .samples = red_nonscalar});
  ops.push_back({.name = "std",
                 .torch = "(torch.std(x[0]), torch.std(x[0], -1))",
                 .fn =
                     [](I x) {
                       return Outputs{std(x[0]), std(x[0], {-1})};
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg_t({4, 3})}, "noncontiguous"}}});
  ops.push_back({.name = "norm",
                 .torch = "(torch.norm(x[0]), torch.norm(x[0], 3, 0), torch.norm(x[0], 1, -1))",
                 .fn =
                     [](I x) {
                       return Outputs{norm(x[0]), norm(x[0], 3, {0}), norm(x[0], 1, {-1})};
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg({2, 3, 4})}, "3d"}}});
  ops.push_back({.name = "logsumexp",
                 .torch = "(torch.logsumexp(x[0], 0), torch.logsumexp(x[0], -1, keepdim=True))",
                 .fn =
                     [](I x) {
                       return Outputs{logsumexp(x[0], {0}), logsumexp(x[0], {-1}, true)};
                     },
                 .samples = red});
  ops.push_back({.name = "cumsum",
                 .torch = "(torch.cumsum(x[0], 0), torch.cumsum(x[0], -1))",
                 .fn =
                     [](I x) {
                       return Outputs{cumsum(x[0], 0), cumsum(x[0], -1)};
                     },
                 .samples = red});
  ops.push_back({.name = "cumprod",
                 .torch = "(torch.cumprod(x[0], 0), torch.cumprod(x[0], -1))",
                 .fn =
                     [](I x) {
                       return Outputs{cumprod(x[0], 0), cumprod(x[0], -1)};
                     },
                 .samples = {{{arg({3, 4}, 0.5, 1.5)}, "2d"}, {{arg_t({4, 3}, 0.5, 1.5)}, "noncontiguous"}}});
  ops.push_back({.name = "sort",
                 .torch = "torch.sort(x[0], -1, descending=True)",
                 .fn =
                     [](I x) {
                       auto [v, i] = sort(x[0], -1, true);
                       return Outputs{v, i};
                     },
                 .samples = red});
  ops.push_back({.name = "topk",
                 .torch = "torch.topk(x[0], 2, 0)",
                 .fn =
                     [](I x) {
                       auto [v, i] = topk(x[0], 2, 0);
                       return Outputs{v, i};
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg_t({4, 3})}, "noncontiguous"}}});
  ops.push_back({.name = "softmax",
                 .torch = "(torch.softmax(x[0], -1), torch.softmax(x[0], 0))",
                 .fn =
                     [](I x) {
                       return Outputs{softmax(x[0], -1), softmax(x[0], 0)};
                     },
                 .samples = red});
  ops.push_back({.name = "log_softmax",
                 .torch = "torch.log_softmax(x[0], -1)",
                 .fn = [](I x) { return Outputs{log_softmax(x[0], -1)}; },
                 .samples = red});
  return ops;
}

// ---- views and shape ops ---------------------------------------------------------------------------
std::vector<OpInfo> view_ops() {
  std::vector<Sample> m = {{{arg({3, 4})}, "2d"}, {{arg_t({4, 3})}, "noncontiguous"}};
  std::vector<OpInfo> ops;
  ops.push_back({.name = "view",
                 .torch = "x[0].contiguous().view(2, -1) * 2",
                 .fn =
                     [](I x) {
                       return one(x[0].contiguous().view({2, -1}) * 2);
                     },
                 .samples = m});
  ops.push_back({.name = "reshape",
                 .torch = "x[0].reshape(4, 3) * 2",
                 .fn =
                     [](I x) {
                       return one(x[0].reshape({4, 3}) * 2);
                     },
                 .samples = m});
  ops.push_back({.name = "permute",
                 .torch = "x[0].permute(2, 0, 1)",
                 .fn =
                     [](I x) {
                       return one(x[0].permute({2, 0, 1}));
                     },
                 .samples = {{{arg({2, 3, 4})}, "3d"}}});
  ops.push_back({.name = "transpose",
                 .ops = {OpId::transpose, OpId::t},
                 .torch = "(x[0].transpose(0, 1), x[0].t(), x[0].mT)",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].transpose(0, 1), x[0].t(), x[0].mT()};
                     },
                 .samples = m});
  ops.push_back({.name = "squeeze",
                 .torch = "(x[0].squeeze(), x[0].squeeze(1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].squeeze(), x[0].squeeze(1)};
                     },
                 .samples = {{{arg({3, 1, 4})}, "3d"}}});
  ops.push_back({.name = "unsqueeze",
                 .torch = "(x[0].unsqueeze(0), x[0].unsqueeze(-1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].unsqueeze(0), x[0].unsqueeze(-1)};
                     },
                 .samples = m});
  ops.push_back({.name = "flatten",
                 .torch = "(x[0].flatten(), x[0].flatten(1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].flatten(), x[0].flatten(1)};
                     },
                 .samples = {{{arg({2, 3, 2})}, "3d"}}});
  ops.push_back({.name = "unflatten",
                 .torch = "x[0].unflatten(1, (2, -1))",
                 .fn =
                     [](I x) {
                       return one(x[0].unflatten(1, {2, -1}));
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg_t({3, 4})}, "noncontiguous"}}});
  ops.push_back({.name = "expand",
                 .torch = "x[0].expand(2, 3, 4)",
                 .fn =
                     [](I x) {
                       return one(x[0].expand({2, 3, 4}));
                     },
                 .samples = {{{arg({3, 1})}, "size1"}, {{arg({4})}, "new_dims"}}});
  ops.push_back({.name = "view_as",
                 .ops = {OpId::view_as, OpId::reshape_as, OpId::expand_as},
                 .torch = "(x[0].contiguous().view_as(x[1]) * 2, x[0].reshape_as(x[1]), x[2].expand_as(x[0]))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].contiguous().view_as(x[1]) * 2, x[0].reshape_as(x[1]), x[2].expand_as(x[0])};
                     },
                 .samples = {{{arg({3, 4}), arg({12}), arg({4})}, "12_as_3x4"},
                             {{arg_t({4, 3}), arg({12}), arg({1, 3})}, "noncontiguous"}}});
  ops.push_back({.name = "narrow",
                 .torch = "x[0].narrow(1, 1, 2)",
                 .fn = [](I x) { return one(x[0].narrow(1, 1, 2)); },
                 .samples = m});
  ops.push_back({.name = "slice",
                 .torch = "x[0][:, 0::2]",
                 .fn = [](I x) { return one(x[0].slice(1, 0, std::nullopt, 2)); },
                 .samples = m});
  ops.push_back({.name = "select",
                 .torch = "(x[0].select(0, 1), x[0][-1])",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].select(0, 1), x[0][-1]};
                     },
                 .samples = m});
  ops.push_back(
      {.name = "index",
       .torch = "(x[0][1:, 0], x[0][None, ..., 0:2])",
       .fn =
           [](I x) {
             return Outputs{x[0].index({Slice(1, None), 0}), x[0].index({None, indexing::Ellipsis, Slice(0, 2)})};
           },
       .samples = m});
  ops.push_back(
      {.name = "split", .torch = "x[0].split(2, 1)", .fn = [](I x) { return x[0].split(2, 1); }, .samples = m});
  ops.push_back({.name = "split_with_sizes",
                 .torch = "list(x[0].split([1, 2], -1)) + list(torch.split(x[0], [0, 2, 1], 0))",
                 .fn =
                     [](I x) {
                       Outputs r = x[0].split_with_sizes({1, 2}, -1);
                       for (Tensor& t : split_with_sizes(x[0], {0, 2, 1}, 0)) r.push_back(t);  // one piece empty
                       return r;
                     },
                 .samples = {{{arg({3, 3})}, "2d"}, {{arg_t({3, 3})}, "noncontiguous"}}});
  ops.push_back(
      {.name = "chunk", .torch = "x[0].chunk(2, 0)", .fn = [](I x) { return x[0].chunk(2, 0); }, .samples = m});
  ops.push_back({.name = "unbind", .torch = "x[0].unbind(1)", .fn = [](I x) { return x[0].unbind(1); }, .samples = m});
  ops.push_back({.name = "diagonal",
                 .torch = "(x[0].diagonal(), x[0].diagonal(1), x[0].diagonal(-1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].diagonal(), x[0].diagonal(1), x[0].diagonal(-1)};
                     },
                 .samples = m});
  // The second view reaches elements twice: their gradients add up, as PyTorch's.
  ops.push_back(
      {.name = "as_strided",
       .torch =
           "(x[0].contiguous().as_strided((2, 2), (1, 2), 1) * 1, x[0].contiguous().as_strided((2, 3), (1, 1), 0) * 1)",
       .fn =
           [](I x) {
             return Outputs{x[0].contiguous().as_strided({2, 2}, {1, 2}, 1) * 1,
                            x[0].contiguous().as_strided({2, 3}, {1, 1}, 0) * 1};
           },
       .samples = {{{arg({3, 4})}, "2d"}}});
  // Tensor.unfold: overlapping windows (step < size), windows with gaps (step > size), one window of
  // the whole dim, adjacent windows, and windows of windows (2-D patches).
  ops.push_back({.name = "unfold",
                 .torch = "(x[0].unfold(0, 2, 1), x[0].unfold(-1, 1, 3), x[0].unfold(-1, x[0].size(-1), 1), "
                          "x[0].unfold(1, 2, 2), x[0].unfold(0, 2, 1).unfold(1, 2, 1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].unfold(0, 2, 1), x[0].unfold(-1, 1, 3), x[0].unfold(-1, x[0].size(-1), 1),
                                      x[0].unfold(1, 2, 2), x[0].unfold(0, 2, 1).unfold(1, 2, 1)};
                     },
                 .samples = {{{arg({3, 4})}, "2d"}, {{arg({2, 3, 4})}, "3d"}, {{arg_t({4, 3})}, "noncontiguous"}}});
  // Its edges: a 0-dim tensor (unfolded as if it were (1)), windows of size 0, an empty dim.
  ops.push_back({.name = "unfold_edges",
                 .ops = {OpId::unfold},
                 .torch = "(x[0].unfold(0, 1, 2), x[0].unfold(-1, 0, 1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].unfold(0, 1, 2), x[0].unfold(-1, 0, 1)};
                     },
                 .samples = {{{arg({})}, "scalar"}, {{arg({1})}, "one"}, {{arg({2, 0})}, "empty"}}});
  ops.push_back({.name = "movedim",
                 .torch = "x[0].movedim(0, 2)",
                 .fn = [](I x) { return one(x[0].movedim(0, 2)); },
                 .samples = {{{arg({2, 3, 4})}, "3d"}}});
  ops.push_back({.name = "cat",
                 .torch = "(torch.cat([x[0], x[1]], 0), torch.cat([x[0], x[0]], 1))",
                 .fn =
                     [](I x) {
                       return Outputs{cat({x[0], x[1]}, 0), cat({x[0], x[0]}, 1)};
                     },
                 .samples = {{{arg({2, 3}), arg({1, 3})}, "2d"}, {{arg_t({3, 3}), arg({2, 3})}, "noncontiguous"}}});
  ops.push_back({.name = "broadcast_tensors",
                 .torch = "torch.broadcast_tensors(*x)",
                 .fn = [](I x) { return broadcast_tensors(x); },
                 .samples = {{{arg({2, 3}), arg({2, 3})}, "same_shape"},
                             {{arg({3, 1}), arg({1, 4}), arg({4})}, "three_way"},
                             {{arg({}), arg({2, 3})}, "scalar"},
                             {{arg_t({4, 3}), arg({3})}, "noncontiguous"},
                             {{arg({0, 3}), arg({3}), arg({})}, "empty"}}});
  ops.push_back({.name = "stack",
                 .torch = "torch.stack([x[0], x[1]], 1)",
                 .fn =
                     [](I x) {
                       return Outputs{stack({x[0], x[1]}, 1)};
                     },
                 .samples = {{{arg({2, 3}), arg({2, 3})}, "2d"}}});
  ops.push_back({.name = "repeat",
                 .torch = "x[0].repeat(2, 1, 2)",
                 .fn =
                     [](I x) {
                       return one(x[0].repeat({2, 1, 2}));
                     },
                 .samples = m});
  ops.push_back({.name = "flip",
                 .torch = "(x[0].flip(0), x[0].flip(0, 1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].flip({0}), x[0].flip({0, 1})};
                     },
                 .samples = m});
  ops.push_back({.name = "roll",
                 .torch = "(x[0].roll(1, 1), x[0].roll(-2))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].roll({1}, {1}), x[0].roll({-2})};
                     },
                 .samples = m});
  ops.push_back({.name = "tril",
                 .torch = "(x[0].tril(), x[0].tril(-1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].tril(), x[0].tril(-1)};
                     },
                 .samples = m});
  ops.push_back({.name = "triu",
                 .torch = "(x[0].triu(), x[0].triu(1))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].triu(), x[0].triu(1)};
                     },
                 .samples = m});
  ops.push_back({.name = "pad",
                 .torch = "(F.pad(x[0], (1, 2)), F.pad(x[0], (1, 0, -1, 1), value=0.5))",
                 .fn =
                     [](I x) {
                       return Outputs{pad(x[0], {1, 2}), pad(x[0], {1, 0, -1, 1}, 0.5)};
                     },
                 .samples = m});
  ops.push_back({.name = "to_dtype",
                 .ops = {OpId::to},
                 .torch = "x[0].to(x[0].dtype, copy=True) * 3",
                 .fn = [](I x) { return one(x[0].to(x[0].dtype(), true) * 3); },
                 .samples = m});
  ops.push_back({.name = "clone", .torch = "x[0].clone()", .fn = [](I x) { return one(x[0].clone()); }, .samples = m});
  ops.push_back({.name = "contiguous",
                 .torch = "x[0].contiguous()",
                 .fn = [](I x) { return one(x[0].contiguous()); },
                 .samples = m});
  return ops;
}

// ---- indexing ---------------------------------------------------------------------------------------
std::vector<OpInfo> index_ops() {
  std::vector<OpInfo> ops;
  ops.push_back(
      {.name = "index_select",
       .torch = "(x[0].index_select(0, x[1]), x[0].index_select(1, x[1]))",
       .fn =
           [](I x) {
             return Outputs{x[0].index_select(0, x[1]), x[0].index_select(1, x[1])};
           },
       .samples = {{{arg({3, 4}), index_arg({5}, 3)}, "2d"}, {{arg_t({4, 3}), index_arg({2}, 3)}, "noncontiguous"}}});
  ops.push_back({.name = "index_add",
                 .torch = "torch.index_add(x[0], 0, x[2], x[1])",
                 .fn = [](I x) { return one(index_add(x[0], 0, x[2], x[1])); },
                 .samples = {{{arg({3, 4}), arg({5, 4}), index_arg({5}, 3)}, "2d"}}});
  ops.push_back({.name = "gather",
                 .torch = "x[0].gather(1, x[1])",
                 .fn = [](I x) { return one(x[0].gather(1, x[1])); },
                 .samples = {{{arg({3, 4}), index_arg({3, 5}, 4)}, "2d"},
                             {{arg_t({3, 4}), index_arg({2, 2}, 3)}, "noncontiguous"}}});
  // Unique targets per column, so scatter's result does not depend on write order.
  ops.push_back({.name = "scatter",
                 .torch = "x[0].scatter(0, x[2], x[1])",
                 .fn = [](I x) { return one(x[0].scatter(0, x[2], x[1])); },
                 .samples = {{{arg({3, 4}), arg({2, 4}), fixed_index({2, 4}, {0, 1, 2, 0, 2, 0, 1, 1})}, "2d"}}});
  ops.push_back({.name = "scatter_add",
                 .torch = "x[0].scatter_add(1, x[2], x[1])",
                 .fn = [](I x) { return one(x[0].scatter_add(1, x[2], x[1])); },
                 .samples = {{{arg({3, 4}), arg({3, 5}), index_arg({3, 5}, 4)}, "2d"},
                             {{arg({2, 4}), arg({2, 5}), index_arg({2, 5}, 4)}, "small"},
                             // scatter_add reads only the (2, 2) corner of a (2, 4) source
                             {{arg_t({2, 3}), arg({2, 4}), index_arg({2, 2}, 3)}, "small_src_larger_than_index"}}});
  ops.push_back({.name = "masked_fill",
                 .torch = "x[0].masked_fill(x[1], 0.5)",
                 .fn = [](I x) { return one(x[0].masked_fill(x[1], 0.5)); },
                 .samples = {{{arg({3, 4}), mask_arg({3, 4})}, "2d"}, {{arg({3, 4}), mask_arg({4})}, "broadcast"}}});
  ops.push_back({.name = "masked_fill_tensor_value",
                 .ops = {OpId::masked_fill},
                 .torch = "x[0].masked_fill(x[1], x[2])",
                 .fn = [](I x) { return one(x[0].masked_fill(x[1], x[2])); },
                 .samples = {{{arg({3, 4}), mask_arg({3, 4}), arg({})}, "2d"},
                             {{arg({3, 4}), mask_arg({4}), arg({})}, "broadcast_mask"},
                             {{arg_t({4, 3}), mask_arg({4, 1}), arg({})}, "noncontiguous"},
                             {{arg({}), mask_arg({}), arg({})}, "scalar"},
                             {{arg({0, 3}), mask_arg({3}), arg({})}, "empty"}}});
  // A scalar value: repeated targets all receive the same value, so random indices are fine.
  ops.push_back({.name = "scatter_scalar",
                 .ops = {OpId::scatter},
                 .torch = "(x[0].scatter(0, x[1], 0.5), torch.scatter(x[0], 1, x[1], -1.5))",
                 .fn =
                     [](I x) {
                       return Outputs{x[0].scatter(0, x[1], 0.5), scatter(x[0], 1, x[1], -1.5)};
                     },
                 .samples = {{{arg({3, 4}), index_arg({2, 3}, 3)}, "2d"},
                             {{arg_t({3, 3}), index_arg({3, 3}, 3)}, "noncontiguous"},
                             {{arg({3, 4}), fixed_index({2, 2}, {-1, 0, -3, 2})}, "negative_indices"},
                             {{arg({3, 4}), fixed_index({0, 3}, {})}, "empty_index"}}});
  // Advanced indexing with an int64 tensor: rows (x[idx]), columns (x[:, idx]) and the last dim
  // (x[..., idx]). Indices repeat and count from the end, so gradients accumulate.
  ops.push_back(
      {.name = "index_tensor",
       .ops = {OpId::index},
       .torch = "(x[0][x[1]], x[0][:, x[1]], x[0][..., x[1]])",
       .fn =
           [](I x) {
             return Outputs{x[0].index({x[1]}), x[0].index({Slice(), x[1]}), x[0].index({indexing::Ellipsis, x[1]})};
           },
       .samples = {{{arg({3, 4}), fixed_index({2, 2}, {0, -1, 2, 0})}, "2d_index"},
                   {{arg_t({3, 3}), index_arg({4}, 3)}, "noncontiguous"},
                   {{arg({3, 4}), fixed_index({}, {-2})}, "0d_index"},
                   {{arg({2, 3, 3}), fixed_index({3}, {1, 0, -1})}, "3d"},
                   {{arg({3, 4}), fixed_index({0}, {})}, "empty_index"}}});
  // Advanced indexing with a bool mask: over all dims (x[mask]), over leading dims, and over one
  // dim after a slice (x[:, mask]).
  ops.push_back(
      {.name = "index_bool_mask",
       .ops = {OpId::index},
       .torch = "(x[0][x[1]], x[0][:, x[2]])",
       .fn =
           [](I x) {
             return Outputs{x[0].index({x[1]}), x[0].index({Slice(), x[2]})};
           },
       .samples = {{{arg({3, 4}), mask_arg({3, 4}), mask_arg({4})}, "full_mask"},
                   {{arg({3, 4}), mask_arg({3}), mask_arg({4})}, "leading_dim"},
                   {{arg({2, 3, 2}), mask_arg({2, 3}), mask_arg({3})}, "leading_2d"},
                   {{arg_t({4, 3}), mask_arg({4, 3}), mask_arg({3})}, "noncontiguous"},
                   {{arg({2, 3}), fixed_mask({2, 3}, {0, 0, 0, 0, 0, 0}), fixed_mask({3}, {0, 0, 0})}, "all_false"}}});
  ops.push_back({.name = "masked_select",
                 .torch = "x[0].masked_select(x[1])",
                 .fn = [](I x) { return one(x[0].masked_select(x[1])); },
                 .samples = {{{arg({3, 4}), mask_arg({3, 4})}, "2d"}, {{arg({3, 4}), mask_arg({4})}, "broadcast"}}});
  ops.push_back({.name = "embedding",
                 .torch = "F.embedding(x[1], x[0])",
                 .fn = [](I x) { return Outputs{embedding(x[0], x[1])}; },
                 .samples = {{{arg({5, 3}), fixed_index({2, 2}, {0, 2, 4, 2})}, "2d"}}});
  ops.push_back({.name = "copy_",
                 .ops = {OpId::copy},
                 .torch = "torch.zeros(3, 4, dtype=x[0].dtype).copy_(x[0]) * 2",
                 .fn =
                     [](I x) {
                       Tensor d = zeros({3, 4}, dtype(x[0].dtype()));
                       d.copy_(x[0]);
                       return one(d * 2);
                     },
                 .samples = {{{arg({3, 4})}, "same"}, {{arg({4})}, "broadcast"}}});
  ops.push_back({.name = "add_",
                 .torch = "(x[0] * 1).add_(x[1], alpha=2)",
                 .fn =
                     [](I x) {
                       Tensor d = x[0] * 1;
                       d.add_(x[1], 2);
                       return one(d);
                     },
                 .samples = {{{arg({3, 4}), arg({4})}, "broadcast"}}});
  ops.push_back(
      {.name = "copy_into_view",
       .ops = {OpId::copy},
       .torch = "T.copy_into_view(x)",
       .fn =
           [](I x) {
             Tensor b = x[0] * 2;
             b[1] = x[1] * 3;                                       // CopySlices: write a row
             b.index({Slice(), 2}).mul_(x[0].index({Slice(), 0}));  // in-place op on a column view
             return one(b.sin());
           },
       .samples = {{{arg({3, 4}), arg({4})}, "rows_and_columns"}, {{arg({3, 4}), arg({})}, "broadcast_src"}}});
  ops.push_back({.name = "mul_",
                 .torch = "(x[0] * 1).mul_(x[1]).mul_(x[1])",
                 .fn =
                     [](I x) {
                       Tensor d = x[0] * 1;
                       d.mul_(x[1]);
                       d.mul_(x[1]);
                       return one(d);
                     },
                 .samples = {{{arg({3, 4}), arg({3, 4})}, "same"}}});
  return ops;
}

// ---- in-place ops -----------------------------------------------------------------------------------
// An in-place op runs twice: on a clone of the leaf input (a leaf that requires grad cannot be
// written in place), and on a strided view of a non-leaf: `big` = 2 * [x, x] stacked on a new last
// dim, written through big[..., 0] (x's shape, stride 2), which autograd records as CopySlices.
template <class F>
Outputs inplace_outputs(const Tensor& x, F op) {
  Tensor d = x.clone();
  op(d);
  Tensor big = stack({x, x}, -1) * 2;
  Tensor v = big.select(-1, 0);
  op(v);
  return {d, big};
}

// The reference for inplace_outputs: the same outputs from the out-of-place form `g` of the op.
template <class G>
Outputs reference_outputs(const Tensor& x, G g) {
  Tensor x2 = x * 2;
  return {g(x), stack({g(x2), x2}, -1)};
}

Outputs concat(Outputs a, const Outputs& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A bool mask over the leading dims of t, with size-1 dims appended so that it broadcasts over the rest.
Tensor align_left(const Tensor& mask, const Tensor& t) {
  Shape s = mask.sizes();
  while (static_cast<int64_t>(s.size()) < t.dim()) s.push_back(1);
  return mask.reshape(s);
}

// t with rows idx[j] replaced by v (broadcast to rows), one row at a time.
Tensor put_rows(const Tensor& t, const Tensor& idx, const Tensor& v) {
  Shape vs = t.sizes();
  vs[0] = idx.numel();
  Tensor ve = v.expand(vs);
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < t.size(0); ++i) {
    Tensor r = t[i];
    for (int64_t j = 0; j < idx.numel(); ++j) {
      int64_t k = idx[j].item<int64_t>();
      if ((k < 0 ? k + t.size(0) : k) == i) r = ve[j];
    }
    rows.push_back(r);
  }
  return stack(rows, 0);
}

// A mask of t's shape that is true where dim `d`'s index is in [lo, hi).
Tensor range_mask(const Tensor& t, int64_t d, int64_t lo, int64_t hi) {
  Shape s(static_cast<size_t>(t.dim()), 1);
  s[d] = t.size(d);
  Tensor i = arange(t.size(d), dtype(kInt64).device(t.device())).view(s);
  return logical_and(i >= lo, i < hi);
}

// In-place binary ops: the result must keep self's shape, so only the right operand broadcasts.
std::vector<Sample> inplace_binary_samples(double lo2, double hi2) {
  return {{{arg({3, 4}), arg({3, 4}, lo2, hi2)}, "same_shape"},
          {{arg({3, 4}), arg({4}, lo2, hi2)}, "broadcast_rhs"},
          {{arg({2, 3}), arg({}, lo2, hi2)}, "scalar_rhs"},
          {{arg({}), arg({}, lo2, hi2)}, "scalar"},
          {{arg_t({4, 3}), arg_t({4, 3}, lo2, hi2)}, "noncontiguous"},
          {{arg({0, 3}), arg({3}, lo2, hi2)}, "empty"}};
}

// An in-place op whose out-of-place form is a unary function of self.
// `torch_op` is the in-place call in PyTorch on a tensor `t`, e.g. "t.relu_()".
OpInfo unary_inplace(const char* name, const char* torch_op, void (*op)(Tensor&), Tensor (*g)(const Tensor&), double lo,
                     double hi) {
  return {.name = name,
          .torch = std::string("T.inplace(x[0], lambda t: ") + torch_op + ")",
          .fn = [op](I x) { return inplace_outputs(x[0], op); },
          .samples = unary_samples(lo, hi),
          .ref = [g](I x) { return reference_outputs(x[0], g); }};
}

std::vector<OpInfo> inplace_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "sub_",
                 .torch = "T.inplace(x[0], lambda t: t.sub_(x[1], alpha=0.5).sub_(x[1]).sub_(1.5, alpha=2))",
                 .fn =
                     [](I x) {
                       return inplace_outputs(x[0], [&](Tensor& t) {
                         t.sub_(x[1], 0.5);
                         t -= x[1];
                         t.sub_(1.5, 2);  // scalar operand, alpha 2
                       });
                     },
                 .samples = inplace_binary_samples(-2, 2),
                 .ref =
                     [](I x) {
                       return reference_outputs(x[0], [&](const Tensor& t) { return sub(t, x[1], 0.5) - x[1] - 3.0; });
                     }});
  ops.push_back(
      {.name = "div_",
       .torch = "T.inplace(x[0], lambda t: t.div_(x[1]).div_(x[1]).div_(-2.5))",
       .fn =
           [](I x) {
             return inplace_outputs(x[0], [&](Tensor& t) {
               t.div_(x[1]);
               t /= x[1];
               t.div_(-2.5);
             });
           },
       .samples = inplace_binary_samples(0.5, 2),
       .ref = [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return t / x[1] / x[1] / -2.5; }); }});
  ops.push_back(unary_inplace(
      "pow_", "t.pow_(2.5)", [](Tensor& t) { t.pow_(2.5); }, [](const Tensor& t) { return pow(t, 2.5); }, 0.5, 2));
  ops.push_back(unary_inplace(
      "clamp_", "t.clamp_(min=-0.7).clamp_(max=0.5).clamp_(-0.6, 0.4)",
      [](Tensor& t) {
        t.clamp_(-0.7, std::nullopt);
        t.clamp_(std::nullopt, 0.5);
        t.clamp_(-0.6, 0.4);
      },
      [](const Tensor& t) { return minimum(maximum(t, full_like(t, -0.6)), full_like(t, 0.4)); }, -2, 2));
  ops.push_back(unary_inplace(
      "relu_", "t.relu_()", [](Tensor& t) { t.relu_(); }, [](const Tensor& t) { return relu(t); }, -2, 2));
  ops.push_back(unary_inplace(
      "neg_", "t.neg_()", [](Tensor& t) { t.neg_(); }, [](const Tensor& t) { return -t; }, -2, 2));
  ops.push_back(unary_inplace(
      "exp_", "t.exp_()", [](Tensor& t) { t.exp_(); }, [](const Tensor& t) { return exp(t); }, -2, 2));
  ops.push_back(unary_inplace(
      "sqrt_", "t.sqrt_()", [](Tensor& t) { t.sqrt_(); }, [](const Tensor& t) { return sqrt(t); }, 0.5, 3));
  ops.push_back(unary_inplace(
      "zero_", "t.zero_()", [](Tensor& t) { t.zero_(); }, [](const Tensor& t) { return t * 0; }, -2, 2));
  ops.back().ops = {OpId::zero};
  // fill_ with a 0-d tensor value (differentiable) and with a scalar.
  ops.push_back({.name = "fill_",
                 .ops = {OpId::fill},
                 .torch = "T.inplace(x[0], lambda t: t.fill_(x[1])) + T.inplace(x[0], lambda t: t.fill_(0.25))",
                 .fn =
                     [](I x) {
                       return concat(inplace_outputs(x[0], [&](Tensor& t) { t.fill_(x[1]); }),
                                     inplace_outputs(x[0], [](Tensor& t) { t.fill_(0.25); }));
                     },
                 .samples = {{{arg({3, 4}), arg({})}, "2d"},
                             {{arg({}), arg({})}, "scalar"},
                             {{arg_t({4, 3}), arg({})}, "noncontiguous"},
                             {{arg({0, 3}), arg({})}, "empty"}},
                 .ref =
                     [](I x) {
                       return concat(reference_outputs(x[0], [&](const Tensor& t) { return x[1].expand(t.sizes()); }),
                                     reference_outputs(x[0], [](const Tensor& t) { return full_like(t, 0.25); }));
                     }});
  ops.push_back(
      {.name = "masked_fill_",
       .torch = "T.inplace(x[0], lambda t: t.masked_fill_(x[1], 0.5))",
       .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.masked_fill_(x[1], 0.5); }); },
       .samples = {{{arg({3, 4}), mask_arg({3, 4})}, "2d"},
                   {{arg({3, 4}), mask_arg({4})}, "broadcast_mask"},
                   {{arg_t({4, 3}), mask_arg({4, 1})}, "noncontiguous"},
                   {{arg({}), mask_arg({})}, "scalar"},
                   {{arg({0, 3}), mask_arg({3})}, "empty"}},
       .ref = [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return where(x[1], 0.5, t); }); }});
  // A 0-dim tensor value receives the gradient of every element it fills.
  ops.push_back(
      {.name = "masked_fill_tensor_value_",
       .torch = "T.inplace(x[0], lambda t: t.masked_fill_(x[1], x[2]))",
       .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.masked_fill_(x[1], x[2]); }); },
       .samples = {{{arg({3, 4}), mask_arg({3, 4}), arg({})}, "2d"},
                   {{arg({3, 4}), mask_arg({4}), arg({})}, "broadcast_mask"},
                   {{arg_t({4, 3}), mask_arg({4, 1}), arg({})}, "noncontiguous"},
                   {{arg({0, 3}), mask_arg({3}), arg({})}, "empty"}},
       .ref = [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return where(x[1], x[2], t); }); }});
  // Unique targets per column (counting from the end too), so the result does not depend on the
  // order of writes.
  ops.push_back(
      {.name = "scatter_",
       .torch = "T.inplace(x[0], lambda t: t.scatter_(0, x[2], x[1]))",
       .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.scatter_(0, x[2], x[1]); }); },
       .samples = {{{arg({3, 4}), arg({2, 4}), fixed_index({2, 4}, {0, 1, 2, 0, -1, 0, 1, 1})}, "2d"},
                   {{arg_t({3, 4}), arg({3, 5}), fixed_index({2, 3}, {2, 0, 1, 0, 1, 2})},
                    "noncontiguous_src_larger_than_index"},
                   {{arg({3, 4}), arg({2, 4}), fixed_index({0, 4}, {})}, "empty_index"}},
       .ref = [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return t.scatter(0, x[2], x[1]); }); }});
  ops.push_back(
      {.name = "scatter_add_",
       .torch = "T.inplace(x[0], lambda t: t.scatter_add_(1, x[2], x[1]))",
       .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.scatter_add_(1, x[2], x[1]); }); },
       .samples = {{{arg({2, 4}), arg({2, 3}), index_arg({2, 3}, 4)}, "2d"},
                   {{arg_t({2, 3}), arg({2, 4}), index_arg({2, 2}, 3)}, "noncontiguous_src_larger_than_index"},
                   {{arg({3, 4}), arg({3, 5}), index_arg({3, 5}, 4)}, "3x5"}},
       .ref =
           [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return t.scatter_add(1, x[2], x[1]); }); }});
  ops.push_back(
      {.name = "index_add_",
       .torch = "T.inplace(x[0], lambda t: t.index_add_(0, x[2], x[1]))",
       .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.index_add_(0, x[2], x[1]); }); },
       .samples = {{{arg({3, 4}), arg({5, 4}), index_arg({5}, 3)}, "2d"},
                   {{arg_t({3, 2}), arg({3, 2}), fixed_index({3}, {-1, 0, -1})}, "noncontiguous_negative"},
                   {{arg({3}), arg({4}), index_arg({4}, 3)}, "1d"}},
       .ref =
           [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return index_add(t, 0, x[2], x[1]); }); }});
  // index_put_ with integers, slices and an ellipsis (a view written in place), with an int64
  // index tensor (unique rows), and with a bool mask and a 0-d value that requires grad.
  // (Each call writes once into `t`: after a write through one view of `big`, autograd refuses
  // further use of another view of it made before, here `t` itself; see gradient_edge.)
  ops.push_back({.name = "index_put_",
                 .torch = "T.inplace(x[0], lambda t: t.__setitem__((Ellipsis, 0), x[1])) + T.inplace(x[0], lambda t: "
                          "t.__setitem__((0, slice(1, None)), -0.5))",
                 .fn =
                     [](I x) {
                       return concat(inplace_outputs(x[0],
                                                     [&](Tensor& t) {
                                                       t.index_put_({indexing::Ellipsis, 0}, x[1]);
                                                     }),
                                     inplace_outputs(x[0], [](Tensor& t) {
                                       t.index_put_({0, Slice(1, None)}, -0.5);
                                     }));
                     },
                 .samples = {{{arg({3, 4}), arg({3})}, "2d"},
                             {{arg({3, 4}), arg({})}, "broadcast_value"},
                             {{arg_t({4, 3}), arg({4})}, "noncontiguous"},
                             {{arg({2, 3, 2}), arg({2, 3})}, "3d"}},
                 .ref =
                     [](I x) {
                       return concat(
                           reference_outputs(x[0],
                                             [&](const Tensor& t) {
                                               return where(range_mask(t, t.dim() - 1, 0, 1), x[1].unsqueeze(-1), t);
                                             }),
                           reference_outputs(x[0], [](const Tensor& t) {
                             return where(logical_and(range_mask(t, 0, 0, 1), range_mask(t, 1, 1, t.size(1))), -0.5, t);
                           }));
                     }});
  ops.push_back(
      {.name = "index_put_tensor_index",
       .torch = "T.inplace(x[0], lambda t: t.__setitem__(x[2], x[1]))",
       .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.index_put_({x[2]}, x[1]); }); },
       .samples = {{{arg({3, 4}), arg({2, 4}), fixed_index({2}, {2, 0})}, "rows"},
                   {{arg({3, 4}), arg({4}), fixed_index({2}, {-1, 1})}, "broadcast_value_negative"},
                   {{arg_t({4, 3}), arg({}), fixed_index({3}, {1, 3, 0})}, "noncontiguous_0d_value"},
                   {{arg({5}), arg({3}), fixed_index({3}, {4, 0, 2})}, "1d"}},
       .ref = [](I x) { return reference_outputs(x[0], [&](const Tensor& t) { return put_rows(t, x[2], x[1]); }); }});
  ops.push_back({.name = "index_put_bool_mask",
                 .torch = "T.inplace(x[0], lambda t: t.__setitem__(x[1], x[2]))",
                 .fn = [](I x) { return inplace_outputs(x[0], [&](Tensor& t) { t.index_put_({x[1]}, x[2]); }); },
                 .samples = {{{arg({3, 4}), mask_arg({3, 4}), arg({})}, "full_mask"},
                             {{arg({3, 3}), mask_arg({3}), arg({})}, "leading_dim"},
                             {{arg({2, 3, 2}), mask_arg({2, 3}), arg({})}, "leading_2d"},
                             {{arg_t({4, 3}), mask_arg({4, 3}), arg({})}, "noncontiguous"},
                             {{arg({}), mask_arg({}), arg({})}, "scalar"}},
                 .ref =
                     [](I x) {
                       return reference_outputs(x[0],
                                                [&](const Tensor& t) { return where(align_left(x[1], t), x[2], t); });
                     }});
  return ops;
}

// ---- linear algebra ---------------------------------------------------------------------------------
std::vector<OpInfo> linalg_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "mm",
                 .torch = "torch.mm(x[0], x[1])",
                 .fn = [](I x) { return one(mm(x[0], x[1])); },
                 .samples = {{{arg({3, 4}), arg({4, 2})}, "2d"}, {{arg_t({3, 4}), arg_t({4, 5})}, "transposed"}}});
  ops.push_back(
      {.name = "bmm",
       .torch = "torch.bmm(x[0], x[1])",
       .fn = [](I x) { return one(bmm(x[0], x[1])); },
       .samples = {{{arg({2, 3, 4}), arg({2, 4, 2})}, "3d"}, {{arg_t({2, 3, 2}), arg({2, 2, 3})}, "transposed"}}});
  ops.push_back({.name = "matmul",
                 .torch = "torch.matmul(x[0], x[1])",
                 .fn = [](I x) { return one(matmul(x[0], x[1])); },
                 .samples = {{{arg({3}), arg({3})}, "1d_1d"},
                             {{arg({2, 3}), arg({3})}, "2d_1d"},
                             {{arg({3}), arg({3, 2})}, "1d_2d"},
                             {{arg({2, 2, 3}), arg({3, 2})}, "batched_2d"},
                             {{arg({2, 1, 2, 3}), arg({3, 3, 2})}, "broadcast_batch"},
                             {{arg({3}), arg({2, 3, 2})}, "1d_batched"},
                             {{arg({0, 3}), arg({3, 2})}, "empty"}}});
  ops.push_back({.name = "mv",
                 .torch = "torch.mv(x[0], x[1])",
                 .fn = [](I x) { return one(mv(x[0], x[1])); },
                 .samples = {{{arg({3, 4}), arg({4})}, "2d"}}});
  ops.push_back({.name = "dot",
                 .torch = "torch.dot(x[0], x[1])",
                 .fn = [](I x) { return one(dot(x[0], x[1])); },
                 .samples = {{{arg({5}), arg({5})}, "1d"}}});
  ops.push_back({.name = "outer",
                 .torch = "torch.outer(x[0], x[1])",
                 .fn = [](I x) { return one(outer(x[0], x[1])); },
                 .samples = {{{arg({3}), arg({4})}, "1d"}}});
  // einsum: one entry per kind of equation (each fn fixes its equation).
  ops.push_back({.name = "einsum_matmul",
                 .ops = {OpId::einsum},
                 .torch = "torch.einsum('ij,jk->ik', x[0], x[1])",
                 .fn =
                     [](I x) {
                       return one(einsum("ij,jk->ik", {x[0], x[1]}));
                     },
                 .samples = {{{arg({2, 3}), arg({3, 4})}, "2d"},
                             {{arg_t({2, 3}), arg({3, 2})}, "noncontiguous"},
                             {{arg({2, 1}), arg({3, 2})}, "broadcast_label"},
                             {{arg({0, 3}), arg({3, 2})}, "empty"}}});
  ops.push_back({.name = "einsum_batched_ellipsis",
                 .ops = {OpId::einsum},
                 .torch = "torch.einsum('...ij,...jk->...ik', x[0], x[1])",
                 .fn =
                     [](I x) {
                       return one(einsum("...ij,...jk->...ik", {x[0], x[1]}));
                     },
                 .samples = {{{arg({2, 1, 2, 3}), arg({3, 3, 2})}, "broadcast_batch"},
                             {{arg({2, 3}), arg({3, 2})}, "no_batch"}}});
  ops.push_back({.name = "einsum_diagonal_sum",
                 .ops = {OpId::einsum},
                 .torch = "(torch.einsum('iij->j', x[0]), torch.einsum('iij', x[0]))",
                 .fn =
                     [](I x) {
                       return Outputs{einsum("iij->j", {x[0]}), einsum("iij", {x[0]})};
                     },
                 .samples = {{{arg({3, 3, 2})}, "3d"}}});
  ops.push_back({.name = "einsum_bilinear",
                 .ops = {OpId::einsum},
                 .torch = "torch.einsum('bn,anm,bm->ba', x[0], x[1], x[2])",
                 .fn =
                     [](I x) {
                       return one(einsum("bn,anm,bm->ba", {x[0], x[1], x[2]}));
                     },
                 .samples = {{{arg({2, 3}), arg({2, 3, 2}), arg({2, 2})}, "3_operands"}}});
  ops.push_back({.name = "einsum_outer_trace",
                 .ops = {OpId::einsum},
                 .torch = "(torch.einsum('i,j', x[0], x[1]), torch.einsum('i,i', x[0], x[0]))",
                 .fn =
                     [](I x) {
                       return Outputs{einsum("i,j", {x[0], x[1]}), einsum("i,i", {x[0], x[0]})};
                     },
                 .samples = {{{arg({3}), arg({2})}, "1d"}}});
  ops.push_back({.name = "addmm",
                 .torch = "torch.addmm(x[0], x[1], x[2], beta=0.5, alpha=2)",
                 .fn = [](I x) { return one(addmm(x[0], x[1], x[2], 0.5, 2)); },
                 .samples = {{{arg({2}), arg({3, 4}), arg({4, 2})}, "broadcast_bias"}}});
  ops.push_back({.name = "linear",
                 .torch = "(F.linear(x[0], x[1], x[2]), F.linear(x[0], x[1]))",
                 .fn =
                     [](I x) {
                       return Outputs{linear(x[0], x[1], x[2]), linear(x[0], x[1])};
                     },
                 .samples = {{{arg({3, 4}), arg({2, 4}), arg({2})}, "2d"},
                             {{arg({2, 2, 4}), arg({3, 4}), arg({3})}, "3d"},
                             {{arg_t({3, 4}), arg_t({2, 4}), arg({2})}, "noncontiguous"}}});
  return ops;
}

// ---- convolution and pooling ------------------------------------------------------------------------
std::vector<OpInfo> conv_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "conv2d",
                 .torch = "F.conv2d(x[0], x[1], x[2])",
                 .fn = [](I x) { return one(conv2d(x[0], x[1], x[2])); },
                 .samples = {{{arg({2, 2, 5, 5}), arg({3, 2, 3, 3}), arg({3})}, "basic"},
                             {{arg({1, 1, 3, 3}), arg({1, 1, 2, 2}), arg({1})}, "tiny"}}});
  ops.push_back({.name = "conv2d_options",
                 .ops = {OpId::conv2d},
                 .torch = "F.conv2d(x[0], x[1], None, (2, 1), (1, 2), (1, 2), 2)",
                 .fn =
                     [](I x) {
                       return one(conv2d(x[0], x[1], Tensor(), {2, 1}, {1, 2}, {1, 2}, 2));
                     },
                 .samples = {{{arg({1, 4, 5, 6}), arg({2, 2, 2, 3})}, "stride_pad_dilation_groups"},
                             // x (1, 2, 3, 4) -> (1, 2, 2, 4): one input channel per group
                             {{arg({1, 2, 3, 4}), arg({2, 1, 2, 3})}, "small"}}});
  ops.push_back(
      {.name = "conv2d_input_grad",
       .torch = "torch.nn.grad.conv2d_input((x[0].shape[0], x[1].shape[1], 5, 5), x[1], x[0], stride=2, padding=1)",
       .fn =
           [](I x) {
             Conv2dParams p;
             p.stride = {2, 2};
             p.padding = {1, 1};
             return one(conv2d_input_grad(x[0], x[1], {5, 5}, p));
           },
       .samples = {{{arg({1, 2, 3, 3}), arg({2, 1, 3, 3})}, "stride2"}}});
  ops.push_back(
      {.name = "conv2d_weight_grad",
       .torch = "torch.nn.grad.conv2d_weight(x[0], (x[1].shape[1], x[0].shape[1], 3, 2), x[1], padding=(1, 0))",
       .fn =
           [](I x) {
             Conv2dParams p;
             p.padding = {1, 0};
             return one(conv2d_weight_grad(x[0], x[1], {3, 2}, p));
           },
       .samples = {{{arg({2, 1, 4, 4}), arg({2, 2, 4, 3})}, "padding"},
                   {{arg({1, 1, 3, 3}), arg({1, 2, 3, 2})}, "small_two_out_channels"},
                   {{arg({2, 1, 3, 3}), arg({2, 1, 3, 2})}, "small_batch2"}}});
  // The N-d gradients (what conv1d's and conv3d's backward call), here over one spatial dim.
  ops.push_back(
      {.name = "conv_input_grad",
       .torch = "torch.nn.grad.conv1d_input((x[0].shape[0], x[1].shape[1], 7), x[1], x[0], stride=2, padding=1)",
       .fn =
           [](I x) {
             ConvParams p;
             p.ndim = 1;
             p.stride = {2, 1, 1};
             p.padding = {1, 0, 0};
             return one(conv_input_grad(x[0], x[1], {7}, p));
           },
       .samples = {{{arg({2, 3, 4}), arg({3, 2, 3})}, "stride2_padding1"},
                   {{arg({1, 2, 4}), arg({2, 1, 2})}, "small"}}});
  ops.push_back(
      {.name = "conv_weight_grad",
       .torch = "torch.nn.grad.conv1d_weight(x[0], (x[1].shape[1], x[0].shape[1], 3), x[1], padding=1, dilation=2)",
       .fn =
           [](I x) {
             ConvParams p;
             p.ndim = 1;
             p.padding = {1, 0, 0};
             p.dilation = {2, 1, 1};
             return one(conv_weight_grad(x[0], x[1], {3}, p));
           },
       .samples = {{{arg({2, 2, 6}), arg({2, 3, 4})}, "padding_dilation"},
                   {{arg({1, 1, 5}), arg({1, 2, 3})}, "small"}}});
  ops.push_back({.name = "conv_transpose2d",
                 .torch = "F.conv_transpose2d(x[0], x[1], x[2], stride=2, padding=1, output_padding=1)",
                 .fn = [](I x) { return one(conv_transpose2d(x[0], x[1], x[2], 2, 1, 1)); },
                 .samples = {{{arg({1, 2, 3, 3}), arg({2, 3, 3, 3}), arg({3})}, "stride2_outpad"},
                             // (2, 2) -> (4, 4) with stride 2, padding 1, output_padding 1
                             {{arg({1, 2, 2, 2}), arg({2, 1, 3, 3}), arg({1})}, "small"},
                             {{arg_t({1, 1, 3, 2}), arg({1, 2, 3, 3}), arg({2})}, "small_noncontiguous"}}});
  ops.push_back({.name = "conv1d",
                 .torch = "(F.conv1d(x[0], x[1], x[2], 1, 1), F.conv1d(x[0], x[1], x[2], 2, 2, 2))",
                 .fn =
                     [](I x) {
                       // padding 1; then stride 2, padding 2, dilation 2
                       return Outputs{conv1d(x[0], x[1], x[2], 1, 1), conv1d(x[0], x[1], x[2], 2, 2, 2)};
                     },
                 .samples = {{{arg({2, 2, 6}), arg({3, 2, 3}), arg({3})}, "basic"},
                             {{arg({1, 2, 5}), arg({2, 2, 3}), arg({2})}, "small"},
                             {{arg({2, 1, 4}), arg({2, 1, 3}), arg({2})}, "small_batch2"}}});
  ops.push_back({.name = "conv3d",
                 .torch = "(F.conv3d(x[0], x[1], x[2]), F.conv3d(x[0], x[1], None, 2, 1, (1, 2, 1)))",
                 .fn =
                     [](I x) {
                       return Outputs{conv3d(x[0], x[1], x[2]), conv3d(x[0], x[1], Tensor(), 2, 1, {1, 2, 1})};
                     },
                 .samples = {{{arg({1, 1, 2, 3, 3}), arg({2, 1, 2, 2, 2}), arg({2})}, "small"},
                             {{arg({2, 2, 4, 5, 4}), arg({3, 2, 2, 2, 3}), arg({3})}, "batch2"},
                             {{arg({2, 3, 5, 4}), arg({2, 2, 3, 2, 2}), arg({2})}, "unbatched"}}});
  ops.push_back({.name = "conv3d_groups",
                 .ops = {OpId::conv3d},
                 .torch = "F.conv3d(x[0], x[1], x[2], (1, 2, 1), (0, 1, 1), 1, 2)",
                 .fn =
                     [](I x) {
                       return one(conv3d(x[0], x[1], x[2], {1, 2, 1}, {0, 1, 1}, 1, 2));
                     },
                 .samples = {{{arg({1, 2, 2, 3, 2}), arg({2, 1, 1, 2, 2}), arg({2})}, "small"},
                             {{arg({2, 4, 3, 4, 3}), arg({4, 2, 2, 3, 2}), arg({4})}, "batch2"}}});
  ops.push_back({.name = "max_pool2d",
                 .torch = "(F.max_pool2d(x[0], 2), F.max_pool2d(x[0], 3, 2, 1, 1, True))",
                 .fn =
                     [](I x) {
                       return Outputs{max_pool2d(x[0], {2}), max_pool2d(x[0], {3}, {2}, {1}, 1, true)};
                     },
                 .samples = {{{arg({1, 2, 5, 5})}, "4d"}, {{arg({2, 4, 4})}, "unbatched"}}});
  ops.push_back({.name = "max_pool2d_with_indices",
                 .torch = "F.max_pool2d(x[0], 3, 2, 1, 1, True, return_indices=True)",
                 .fn =
                     [](I x) {
                       auto [v, i] = max_pool2d_with_indices(x[0], {3}, {2}, {1}, 1, true);
                       return Outputs{v, i};
                     },
                 .samples = {{{arg({1, 2, 5, 5})}, "4d"}, {{arg({2, 4, 4})}, "unbatched"}}});
  ops.push_back({.name = "avg_pool2d",
                 .torch = "(F.avg_pool2d(x[0], 2), F.avg_pool2d(x[0], 3, 2, 1, True, False), F.avg_pool2d(x[0], 3, 2, "
                          "1, False, True))",
                 .fn =
                     [](I x) {
                       return Outputs{avg_pool2d(x[0], {2}), avg_pool2d(x[0], {3}, {2}, {1}, true, false),
                                      avg_pool2d(x[0], {3}, {2}, {1}, false, true)};
                     },
                 // 4 x 4 with kernel 3, stride 2, padding 1: ceil_mode adds a third window per dim
                 .samples = {{{arg({1, 2, 5, 5})}, "4d"},
                             {{arg({1, 2, 4, 4})}, "small_ceil_mode_window"},
                             {{arg_t({2, 3, 3})}, "small_unbatched_noncontiguous"}}});
  ops.push_back({.name = "adaptive_avg_pool2d",
                 .torch = "(F.adaptive_avg_pool2d(x[0], 2), F.adaptive_avg_pool2d(x[0], (2, 3)))",
                 .fn =
                     [](I x) {
                       return Outputs{adaptive_avg_pool2d(x[0], {2}), adaptive_avg_pool2d(x[0], {2, 3})};
                     },
                 .samples = {{{arg({1, 2, 4, 5})}, "4d"}}});
  ops.push_back({.name = "adaptive_max_pool2d",
                 .torch = "(F.adaptive_max_pool2d(x[0], 2), F.adaptive_max_pool2d(x[0], (3, 2)))",
                 .fn =
                     [](I x) {
                       return Outputs{adaptive_max_pool2d(x[0], {2}), adaptive_max_pool2d(x[0], {3, 2})};
                     },
                 .samples = {{{arg({1, 2, 4, 5})}, "4d"}}});
  return ops;
}

// A user-defined differentiable function, to check that custom Functions pass gradcheck too.
struct SinCube : autograd::Function<SinCube> {
  static Tensor forward(autograd::Context& ctx, const Tensor& x, double k) {
    ctx.save_for_backward({x});
    ctx.data["k"] = k;
    return sin(x) * x * x * k;
  }
  static autograd::GradList backward(autograd::Context& ctx, autograd::GradList g) {
    Tensor x = ctx.saved()[0];
    double k = std::any_cast<double>(ctx.data["k"]);
    return {g[0] * k * (cos(x) * x * x + sin(x) * x * 2)};
  }
};

std::vector<OpInfo> misc_ops() {
  return {{.name = "custom_function",
           .torch = "torch.sin(x[0]) * x[0] * x[0] * 1.5",
           .fn = [](I x) { return one(SinCube::apply(x[0], 1.5)); },
           .samples = small_unary(-2, 2)}};
}

std::vector<OpInfo> all_core_ops() {
  std::vector<OpInfo> all;
  for (auto f : {elementwise_ops, reduction_ops, view_ops, index_ops, inplace_ops, linalg_ops, conv_ops, misc_ops})
    for (auto& op : f()) all.push_back(std::move(op));
  return all;
}

Registrar core_ops(all_core_ops());

}  // namespace
}  // namespace nabla::testing
