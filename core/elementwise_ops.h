// Every elementwise op, one line each: its name, its per-element forward formula, what its backward
// needs and its backward formula. Adding an op means adding a line here (and a test); the front-end
// (core/elementwise.cpp), the CPU kernels and the CUDA kernels are all generated from these lists.
//
// Forward formulas see `x` (or `a`, `b`) of the element type `T` and the op's parameters `p0`, `p1`
// (doubles). Backward formulas are Tensor expressions of `g` (the incoming gradient), `p0`, `p1` and
// the one tensor the `saves` column names: `x` (the input), `y` (the output) or `none`. Being Tensor
// ops, they are themselves differentiable. An op saves what PyTorch's derivatives.yaml saves for it,
// so the same in-place changes are allowed or refused: `y = sin(x); y.mul_(2)` then backward works
// (sin saves x), `y = exp(x); y.mul_(2)` throws (exp saves its output). A formula must not use the
// tensor it does not save (it is undefined there; gradcheck fails).
#pragma once

#include <cstdint>

// Float-valued unary ops. The last column says what integer and bool inputs do, as in PyTorch:
// `promote` (computed in float32: exp, sin, sigmoid, ...) or `reject` (an error: the activation
// functions, which PyTorch defines for floating dtypes only).
// X(name, forward, saves, backward, integer input)
#define NABLA_UNARY_FLOAT_OPS(X)                                                                          \
  X(exp, (exp(x)), y, (g * y), promote)                                                                   \
  X(exp2, (exp2(x)), y, (g * y * 0.6931471805599453), promote)                                            \
  X(log, (log(x)), x, (g / x), promote)                                                                   \
  X(log2, (log2(x)), x, (g / (x * 0.6931471805599453)), promote)                                          \
  X(log10, (log10(x)), x, (g / (x * 2.302585092994046)), promote)                                         \
  X(log1p, (log1p(x)), x, (g / (x + 1)), promote)                                                         \
  X(expm1, (expm1(x)), y, (g * (y + 1)), promote)                                                         \
  X(sqrt, (sqrt(x)), y, (g / (y * 2)), promote)                                                           \
  X(rsqrt, (T(1) / sqrt(x)), y, (g * y * y * y * -0.5), promote)                                          \
  X(sin, (sin(x)), x, (g * cos(x)), promote)                                                              \
  X(cos, (cos(x)), x, (g * -sin(x)), promote)                                                             \
  X(tan, (tan(x)), y, (g * (y * y + 1)), promote)                                                         \
  X(asin, (asin(x)), x, (g * rsqrt(1 - x * x)), promote)                                                  \
  X(acos, (acos(x)), x, (g * -rsqrt(1 - x * x)), promote)                                                 \
  X(atan, (atan(x)), x, (g / (x * x + 1)), promote)                                                       \
  X(sinh, (sinh(x)), x, (g * cosh(x)), promote)                                                           \
  X(cosh, (cosh(x)), x, (g * sinh(x)), promote)                                                           \
  X(tanh, (tanh(x)), y, (g * (1 - y * y)), promote)                                                       \
  X(erf, (erf(x)), x, (g * exp(-x * x) * 1.1283791670955126), promote)                                    \
  X(erfc, (erfc(x)), x, (g * exp(-x * x) * -1.1283791670955126), promote)                                 \
  X(erfinv, (scalar::erfinv(x)), y, (g * exp(y * y) * 0.886226925452758), promote)                        \
  X(asinh, (asinh(x)), x, (g * rsqrt(x * x + 1)), promote)                                                \
  X(acosh, (acosh(x)), x, (g * rsqrt(x * x - 1)), promote)                                                \
  X(atanh, (atanh(x)), x, (g / (1 - x * x)), promote)                                                     \
  X(lgamma, (scalar::lgamma(x)), x, (g * digamma(x)), promote)                                            \
  X(digamma, (scalar::digamma(x)), x, (g * polygamma(1, x)), promote)                                     \
  X(sigmoid, (scalar::sigmoid(x)), y, (g * y * (1 - y)), promote)                                         \
  X(logsigmoid, (-scalar::softplus(-x)), x, (g * sigmoid(-x)), reject)                                    \
  X(gelu, (T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)))), x,                                      \
    (g * ((erf(x * 0.7071067811865476) + 1) * 0.5 + x * exp(x * x * -0.5) * 0.3989422804014327)), reject) \
  X(gelu_tanh, (T(0.5) * x * (T(1) + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)))), x,    \
    (gelu_tanh_grad(x, g)), reject)                                                                       \
  X(silu, (x * scalar::sigmoid(x)), x, (g * sigmoid(x) * (x * (1 - sigmoid(x)) + 1)), reject)             \
  X(mish, (x * tanh(scalar::softplus(x))), x, (mish_grad(x, g)), reject)                                  \
  X(reciprocal, (T(1) / x), y, (g * -(y * y)), promote)                                                   \
  X(selu, (x > T(0) ? T(1.0507009873554805) * x : T(1.7580993408473766) * expm1(x)), x,                   \
    (g * where(x <= 0, exp(x) * 1.7580993408473766, full_like(x, 1.0507009873554805))), reject)           \
  X(hardsigmoid, (scalar::min(scalar::max(x + T(3), T(0)), T(6)) / T(6)), x,                              \
    (where(logical_and(x > -3, x < 3), g / 6, zeros_like(g))), reject)                                    \
  X(hardswish, (x * scalar::min(scalar::max(x + T(3), T(0)), T(6)) / T(6)), x,                            \
    (g * where(x < -3, zeros_like(x), where(x > 3, ones_like(x), x / 3 + 0.5))), reject)                  \
  X(frac, (x - scalar::trunc(x)), none, (g), reject)

// Ops that keep the input's dtype. The last column says what a bool input does, as in PyTorch:
// `reject` (an error), `keep` (sign: the result is the bool input) or `int64` (square: computed in
// int64).
// X(name, forward, saves, backward, bool input)
#define NABLA_UNARY_SAME_OPS(X)                                                                            \
  X(neg, (-x), none, (-g), reject)                                                                         \
  X(abs, (scalar::abs(x)), x, (g * sign(x)), reject)                                                       \
  X(sign, (scalar::sign(x)), none, (zeros_like(g)), keep)                                                  \
  X(square, (x * x), x, (g * x * 2), int64)                                                                \
  X(relu, (scalar::relu(x)), y, (threshold_backward(g, y)), reject)                                        \
  X(floor, (scalar::floor(x)), none, (zeros_like(g)), reject)                                              \
  X(ceil, (scalar::ceil(x)), none, (zeros_like(g)), reject)                                                \
  X(round, (scalar::round(x)), none, (zeros_like(g)), reject)                                              \
  X(trunc, (scalar::trunc(x)), none, (zeros_like(g)), reject)

// Float ops with parameters p0, p1; integer inputs as in NABLA_UNARY_FLOAT_OPS (hardtanh's
// front-end sends integer tensors to clamp, as PyTorch does).
// X(name, forward, saves, backward, integer input)
#define NABLA_UNARY_PARAM_OPS(X)                                                                    \
  X(leaky_relu, (x > T(0) ? x : x * T(p0)), x, (where(x > 0, g, g * p0)), reject)                   \
  X(elu, (x > T(0) ? x : T(p0) * expm1(x)), x, (where(x <= 0, g * p0 * exp(x), g)), reject)         \
  X(softplus, (x * T(p0) > T(p1) ? x : scalar::softplus(x * T(p0)) / T(p0)), x,                     \
    (where(x * p0 > p1, g, g * sigmoid(x * p0))), reject)                                           \
  X(hardtanh, (scalar::clamp(x, T(p0), T(p1))), x, (where(logical_and(x > p0, x < p1), g, zeros_like(g))), reject) \
  X(polygamma, (scalar::polygamma(static_cast<int>(p0), x)), x, (g * nabla::polygamma(static_cast<int64_t>(p0) + 1, x)), promote)

// Bool-valued predicates (not differentiable).
#define NABLA_UNARY_BOOL_OPS(X)                                                                            \
  X(isnan, (scalar::isnan(x)))                                                                             \
  X(isinf, (scalar::isinf(x)))                                                                             \
  X(isfinite, (scalar::isfinite(x)))                                                                       \
  X(logical_not, (!static_cast<bool>(x)))

// Binary ops computed in the promoted dtype T with a result of the same dtype. The columns:
//   kind      `arith` (the promoted dtype), `to_float` (integer and bool operands computed in
//             float32, as div), `float_only` (an error unless the promoted dtype is floating),
//             `intdiv` (as arith; an integer division by zero is an error)
//   forward   of `a` and `b` (of type T; `alpha`, a T, is add/sub's scale)
//   bool      what bool operands do: `either` (a || b: add, maximum), `both` (a && b: mul,
//             minimum), `reject` (an error when the computation is in bool), `reject_operand` (an
//             error when either operand is bool, as sub in PyTorch)
//   reads_a, reads_b   what grad_a and grad_b read of a, b and y (the output): `none`, `a`, `b`,
//             `y`, `ab`, `ay`, `by` or `aby`. The op saves only what the gradients it will compute
//             read (mul saves b only when a requires grad), as PyTorch does.
//   grad_a, grad_b   Tensor expressions of g, a, b, y and alpha (a double); they are summed over
//             broadcast dims and cast to each operand's dtype by the front-end.
// X(name, kind, forward, bool, reads_a, reads_b, grad_a, grad_b)
#define NABLA_BINARY_ARITH_OPS(X)                                                                                    \
  X(add, arith, (a + alpha * b), either, none, none, (g), (alpha == 1 ? g : g * alpha))                              \
  X(sub, arith, (a - alpha * b), reject_operand, none, none, (g), (g * -alpha))                                      \
  X(mul, arith, (a * b), both, b, a, (g * b), (g * a))                                                               \
  X(div, to_float, (a / b), reject, b, ab, (g / b), (-g * a / (b * b)))                                              \
  X(pow, arith, (scalar::pow(a, b)), reject, ab, aby, (where(b == 0, zeros_like(g), g * b * pow(a, b - 1))),         \
    (g * where(logical_and(a == 0, b >= 0), zeros_like(y), y * log(a))))                                             \
  X(maximum, arith, (scalar::max(a, b)), either, ab, ab, (where(a == b, g * 0.5, where(a < b, zeros_like(g), g))),   \
    (where(a == b, g * 0.5, where(a > b, zeros_like(g), g))))                                                        \
  X(minimum, arith, (scalar::min(a, b)), both, ab, ab, (where(a == b, g * 0.5, where(a > b, zeros_like(g), g))),     \
    (where(a == b, g * 0.5, where(a < b, zeros_like(g), g))))                                                        \
  X(atan2, to_float, (atan2(a, b)), reject, ab, ab, (g * b / (a * a + b * b)), (-g * a / (a * a + b * b)))           \
  X(hypot, float_only, (hypot(a, b)), reject, ay, by, (g * a / y), (g * b / y))                                      \
  X(remainder, intdiv, (scalar::remainder(a, b)), reject, none, ab, (g), (-g * floor_divide(a, b)))                  \
  X(floor_divide, intdiv, (scalar::floor_divide(a, b)), reject, none, none, (zeros_like(g)), (zeros_like(g)))        \
  X(fmod, intdiv, (scalar::fmod(a, b)), reject, none, ab, (g), (-g * trunc(a / b)))                               \
  X(xlogy, to_float, (scalar::xlogy(a, b)), reject, ab, ab, (where(logical_and(a == 0, b <= 0), zeros_like(g), xlogy(g, b))), \
    (g * a / b))                                                                                                     \
  X(logaddexp, float_only, (scalar::logaddexp(a, b)), reject, ab, ab, (g / (exp(b - a) + 1)), (g / (exp(a - b) + 1)))  \
  X(threshold_backward, arith, (b <= T(0) ? T(0) : a), reject, b, none, (threshold_backward(g, b)), (zeros_like(g)))

// Binary ops with a bool result.
#define NABLA_BINARY_BOOL_OPS(X)                                                                    \
  X(eq, (a == b))                                                                                   \
  X(ne, (a != b))                                                                                   \
  X(lt, (a < b))                                                                                    \
  X(le, (a <= b))                                                                                   \
  X(gt, (a > b))                                                                                    \
  X(ge, (a >= b))                                                                                   \
  X(logical_and, (static_cast<bool>(a) && static_cast<bool>(b)))                                    \
  X(logical_or, (static_cast<bool>(a) || static_cast<bool>(b)))                                     \
  X(logical_xor, (static_cast<bool>(a) != static_cast<bool>(b)))

namespace nabla {

#define NABLA_ENUM_ENTRY(name, ...) name,
enum class UnaryOp : uint8_t {
  NABLA_UNARY_FLOAT_OPS(NABLA_ENUM_ENTRY) NABLA_UNARY_SAME_OPS(NABLA_ENUM_ENTRY)
      NABLA_UNARY_PARAM_OPS(NABLA_ENUM_ENTRY) NABLA_UNARY_BOOL_OPS(NABLA_ENUM_ENTRY) clamp
};
enum class BinaryOp : uint8_t { NABLA_BINARY_ARITH_OPS(NABLA_ENUM_ENTRY) NABLA_BINARY_BOOL_OPS(NABLA_ENUM_ENTRY) };
#undef NABLA_ENUM_ENTRY

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);

// The `bool` column of NABLA_BINARY_ARITH_OPS, for the kernels.
enum class BoolRule : uint8_t { either, both, reject, reject_operand };
constexpr BoolRule bool_rule(BinaryOp op) {
  switch (op) {
#define NABLA_BOOL_RULE(name, kind, fwd, rule, ...) \
  case BinaryOp::name: return BoolRule::rule;
    NABLA_BINARY_ARITH_OPS(NABLA_BOOL_RULE)
#undef NABLA_BOOL_RULE
    default: return BoolRule::reject;
  }
}

constexpr bool is_bool_result(BinaryOp op) { return op >= BinaryOp::eq; }

}  // namespace nabla
