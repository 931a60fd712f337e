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
//
// The last column of every list is the op's ONNX lowering (core/op_schema.h): `to_onnx("Exp")` (one
// node of that type, after the casts its family's dtype rules need), `to_onnx()` (a lowering written
// in onnx/lower_elementwise.cpp) or `no_onnx("why")`. These rows are the ops' schema rows: each
// gives an OpId of its name, a Tensor method of its name (tests/ops/test_op_schema.cpp) and a
// registry entry (tests/ops/opinfo_core.cpp).
#pragma once

#include <cstdint>

// Float-valued unary ops. The last column says what integer and bool inputs do, as in PyTorch:
// `promote` (computed in float32: exp, sin, sigmoid, ...), `ints` (integers in float32, bools an
// error: softsign, whose PyTorch form takes abs, which has no bool form) or `reject` (an error: the
// activation functions, which PyTorch defines for floating dtypes only).
// X(name, forward, saves, backward, integer input, onnx)
#define NABLA_UNARY_FLOAT_OPS(X)                                                                                       \
  X(exp, (exp(x)), y, (g * y), promote, to_onnx("Exp"))                                                                \
  X(exp2, (exp2(x)), y, (g * y * 0.6931471805599453), promote, to_onnx())                                              \
  X(log, (log(x)), x, (g / x), promote, to_onnx("Log"))                                                                \
  X(log2, (log2(x)), x, (g / (x * 0.6931471805599453)), promote, to_onnx())                                            \
  X(log10, (log10(x)), x, (g / (x * 2.302585092994046)), promote, to_onnx())                                           \
  X(log1p, (log1p(x)), x, (g / (x + 1)), promote, to_onnx())                                                           \
  X(expm1, (expm1(x)), y, (g * (y + 1)), promote, to_onnx())                                                           \
  X(sqrt, (sqrt(x)), y, (g / (y * 2)), promote, to_onnx("Sqrt"))                                                       \
  X(rsqrt, (T(1) / sqrt(x)), y, (g * y * y * y * -0.5), promote, to_onnx())                                            \
  X(sin, (sin(x)), x, (g * cos(x)), promote, to_onnx("Sin"))                                                           \
  X(cos, (cos(x)), x, (g * -sin(x)), promote, to_onnx("Cos"))                                                          \
  X(tan, (tan(x)), y, (g * (y * y + 1)), promote, to_onnx("Tan"))                                                      \
  X(asin, (asin(x)), x, (g * rsqrt(1 - x * x)), promote, to_onnx("Asin"))                                              \
  X(acos, (acos(x)), x, (g * -rsqrt(1 - x * x)), promote, to_onnx("Acos"))                                             \
  X(atan, (atan(x)), x, (g / (x * x + 1)), promote, to_onnx("Atan"))                                                   \
  X(sinh, (sinh(x)), x, (g * cosh(x)), promote, to_onnx("Sinh"))                                                       \
  X(cosh, (cosh(x)), x, (g * sinh(x)), promote, to_onnx("Cosh"))                                                       \
  X(tanh, (tanh(x)), y, (g * (1 - y * y)), promote, to_onnx("Tanh"))                                                   \
  X(erf, (erf(x)), x, (g * exp(-x * x) * 1.1283791670955126), promote, to_onnx("Erf"))                                 \
  X(erfc, (erfc(x)), x, (g * exp(-x * x) * -1.1283791670955126), promote, to_onnx())                                   \
  X(erfinv, (scalar::erfinv(x)), y, (g * exp(y * y) * 0.886226925452758), promote,                                     \
    no_onnx("ONNX has no inverse error function"))                                                                     \
  X(asinh, (asinh(x)), x, (g * rsqrt(x * x + 1)), promote, to_onnx("Asinh"))                                           \
  X(acosh, (acosh(x)), x, (g * rsqrt(x * x - 1)), promote, to_onnx("Acosh"))                                           \
  X(atanh, (atanh(x)), x, (g / (1 - x * x)), promote, to_onnx("Atanh"))                                                \
  X(lgamma, (scalar::lgamma(x)), x, (g * digamma(x)), promote, no_onnx("ONNX has no log-gamma function"))              \
  X(digamma, (scalar::digamma(x)), x, (g * polygamma(1, x)), promote, no_onnx("ONNX has no digamma function"))         \
  X(sigmoid, (scalar::sigmoid(x)), y, (g * y * (1 - y)), promote, to_onnx("Sigmoid"))                                  \
  X(logsigmoid, (-scalar::softplus(-x)), x, (g * sigmoid(-x)), reject, to_onnx())                                      \
  X(gelu, (T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)))), x,                                                   \
    (g * ((erf(x * 0.7071067811865476) + 1) * 0.5 + x * exp(x * x * -0.5) * 0.3989422804014327)), reject, to_onnx())   \
  X(gelu_tanh, (T(0.5) * x * (T(1) + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)))), x,                 \
    (gelu_tanh_grad(x, g)), reject, to_onnx())                                                                         \
  X(silu, (x * scalar::sigmoid(x)), x, (g * sigmoid(x) * (x * (1 - sigmoid(x)) + 1)), reject, to_onnx())               \
  X(mish, (x * tanh(scalar::softplus(x))), x, (mish_grad(x, g)), reject, to_onnx())                                    \
  X(reciprocal, (T(1) / x), y, (g * -(y * y)), promote, to_onnx("Reciprocal"))                                         \
  X(selu, (x > T(0) ? T(1.0507009873554805) * x : T(1.7580993408473766) * expm1(x)), x,                                \
    (g * where(x <= 0, exp(x) * 1.7580993408473766, full_like(x, 1.0507009873554805))), reject, to_onnx("Selu"))       \
  X(hardsigmoid, (scalar::min(scalar::max(x + T(3), T(0)), T(6)) / T(6)), x,                                           \
    (where(logical_and(x > -3, x < 3), g / 6, zeros_like(g))), reject, to_onnx())                                      \
  X(hardswish, (x * scalar::min(scalar::max(x + T(3), T(0)), T(6)) / T(6)), x,                                         \
    (g * where(x < -3, zeros_like(x), where(x > 3, ones_like(x), x / 3 + 0.5))), reject, to_onnx())                    \
  X(softsign, (x / (T(1) + scalar::abs(x))), x, (g / (abs(x) + 1) - g * abs(x) / ((abs(x) + 1) * (abs(x) + 1))), ints, \
    to_onnx("Softsign"))                                                                                               \
  X(frac, (x - scalar::trunc(x)), none, (g), reject, to_onnx())

// Ops that keep the input's dtype. The last column says what a bool input does, as in PyTorch:
// `reject` (an error), `keep` (sign: the result is the bool input) or `int64` (square: computed in
// int64).
// X(name, forward, saves, backward, bool input, onnx)
#define NABLA_UNARY_SAME_OPS(X)                                                      \
  X(neg, (-x), none, (-g), reject, to_onnx("Neg"))                                   \
  X(abs, (scalar::abs(x)), x, (g * sign(x)), reject, to_onnx("Abs"))                 \
  X(sign, (scalar::sign(x)), none, (zeros_like(g)), keep, to_onnx("Sign"))           \
  X(square, (x * x), x, (g * x * 2), int64, to_onnx())                               \
  X(relu, (scalar::relu(x)), y, (threshold_backward(g, y)), reject, to_onnx("Relu")) \
  X(floor, (scalar::floor(x)), none, (zeros_like(g)), reject, to_onnx("Floor"))      \
  X(ceil, (scalar::ceil(x)), none, (zeros_like(g)), reject, to_onnx("Ceil"))         \
  X(round, (scalar::round(x)), none, (zeros_like(g)), reject, to_onnx("Round"))      \
  X(trunc, (scalar::trunc(x)), none, (zeros_like(g)), reject, to_onnx())

// Float ops with parameters p0, p1; integer inputs as in NABLA_UNARY_FLOAT_OPS (hardtanh's
// front-end sends integer tensors to clamp, as PyTorch does).
// X(name, forward, saves, backward, integer input, onnx)
#define NABLA_UNARY_PARAM_OPS(X)                                                                                   \
  X(leaky_relu, (x > T(0) ? x : x * T(p0)), x, (where(x > 0, g, g * p0)), reject, to_onnx())                       \
  X(elu, (x > T(0) ? x : T(p0) * expm1(x)), x, (where(x <= 0, g * p0 * exp(x), g)), reject, to_onnx())             \
  X(softplus, (x * T(p0) > T(p1) ? x : scalar::softplus(x * T(p0)) / T(p0)), x,                                    \
    (where(x * p0 > p1, g, g * sigmoid(x * p0))), reject, to_onnx())                                               \
  X(hardtanh, (scalar::clamp(x, T(p0), T(p1))), x, (where(logical_and(x > p0, x < p1), g, zeros_like(g))), reject, \
    to_onnx())                                                                                                     \
  X(polygamma, (scalar::polygamma(static_cast<int>(p0), x)), x,                                                    \
    (g * nabla::polygamma(static_cast<int64_t>(p0) + 1, x)), promote, no_onnx("ONNX has no polygamma function"))

// Bool-valued predicates (not differentiable). X(name, forward, onnx)
#define NABLA_UNARY_BOOL_OPS(X)                 \
  X(isnan, (scalar::isnan(x)), to_onnx())       \
  X(isinf, (scalar::isinf(x)), to_onnx())       \
  X(isfinite, (scalar::isfinite(x)), to_onnx()) \
  X(logical_not, (!static_cast<bool>(x)), to_onnx())

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
// X(name, kind, forward, bool, reads_a, reads_b, grad_a, grad_b, onnx)
#define NABLA_BINARY_ARITH_OPS(X)                                                                                     \
  X(add, arith, (a + alpha * b), either, none, none, (g), (alpha == 1 ? g : g * alpha), to_onnx("Add"))               \
  X(sub, arith, (a - alpha * b), reject_operand, none, none, (g), (g * -alpha), to_onnx("Sub"))                       \
  X(mul, arith, (a * b), both, b, a, (g * b), (g * a), to_onnx("Mul"))                                                \
  X(div, to_float, (a / b), reject, b, ab, (g / b), (-g * a / (b * b)), to_onnx("Div"))                               \
  X(pow, arith, (scalar::pow(a, b)), reject, ab, aby, (where(b == 0, zeros_like(g), g * b * pow(a, b - 1))),          \
    (g * where(logical_and(a == 0, b >= 0), zeros_like(y), y * log(a))), to_onnx("Pow"))                              \
  X(maximum, arith, (scalar::max(a, b)), either, ab, ab, (where(a == b, g * 0.5, where(a < b, zeros_like(g), g))),    \
    (where(a == b, g * 0.5, where(a > b, zeros_like(g), g))), to_onnx("Max"))                                         \
  X(minimum, arith, (scalar::min(a, b)), both, ab, ab, (where(a == b, g * 0.5, where(a > b, zeros_like(g), g))),      \
    (where(a == b, g * 0.5, where(a < b, zeros_like(g), g))), to_onnx("Min"))                                         \
  X(atan2, to_float, (atan2(a, b)), reject, ab, ab, (g * b / (a * a + b * b)), (-g * a / (a * a + b * b)), to_onnx()) \
  X(hypot, float_only, (hypot(a, b)), reject, ay, by, (g * a / y), (g * b / y), to_onnx())                            \
  X(remainder, intdiv, (scalar::remainder(a, b)), reject, none, ab, (g), (-g * floor_divide(a, b)), to_onnx())        \
  X(floor_divide, intdiv, (scalar::floor_divide(a, b)), reject, none, none, (zeros_like(g)), (zeros_like(g)),         \
    to_onnx())                                                                                                        \
  X(fmod, intdiv, (scalar::fmod(a, b)), reject, none, ab, (g), (-g * trunc(a / b)), to_onnx())                        \
  X(xlogy, to_float, (scalar::xlogy(a, b)), reject, ab, ab,                                                           \
    (where(logical_and(a == 0, b <= 0), zeros_like(g), xlogy(g, b))), (g * a / b), to_onnx())                         \
  X(logaddexp, float_only, (scalar::logaddexp(a, b)), reject, ab, ab, (g / (exp(b - a) + 1)), (g / (exp(a - b) + 1)), \
    to_onnx())                                                                                                        \
  X(threshold_backward, arith, (b <= T(0) ? T(0) : a), reject, b, none, (threshold_backward(g, b)), (zeros_like(g)),  \
    to_onnx())

// Binary ops with a bool result. X(name, forward, onnx)
#define NABLA_BINARY_BOOL_OPS(X)                                                 \
  X(eq, (a == b), to_onnx("Equal"))                                              \
  X(ne, (a != b), to_onnx())                                                     \
  X(lt, (a < b), to_onnx("Less"))                                                \
  X(le, (a <= b), to_onnx("LessOrEqual"))                                        \
  X(gt, (a > b), to_onnx("Greater"))                                             \
  X(ge, (a >= b), to_onnx("GreaterOrEqual"))                                     \
  X(logical_and, (static_cast<bool>(a) && static_cast<bool>(b)), to_onnx("And")) \
  X(logical_or, (static_cast<bool>(a) || static_cast<bool>(b)), to_onnx("Or"))   \
  X(logical_xor, (static_cast<bool>(a) != static_cast<bool>(b)), to_onnx("Xor"))

namespace nabla {

#define NABLA_ENUM_ENTRY(name, ...) name,
enum class UnaryOp : uint8_t {
  NABLA_UNARY_FLOAT_OPS(NABLA_ENUM_ENTRY) NABLA_UNARY_SAME_OPS(NABLA_ENUM_ENTRY) NABLA_UNARY_PARAM_OPS(NABLA_ENUM_ENTRY)
      NABLA_UNARY_BOOL_OPS(NABLA_ENUM_ENTRY) clamp
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
