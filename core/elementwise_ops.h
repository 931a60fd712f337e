// Every elementwise op, one line each: its name, its per-element forward formula and its backward
// formula. Adding an op means adding a line here (and a test); the front-end (core/elementwise.cpp),
// the CPU kernels and the CUDA kernels are all generated from these lists.
//
// Forward formulas see `x` (or `a`, `b`) of the element type `T` and the op's parameters `p0`, `p1`
// (doubles). Backward formulas are Tensor expressions of `x` (the input), `y` (the output), `g`
// (the incoming gradient) and `p0`, `p1`; being Tensor ops, they are themselves differentiable.
#pragma once

#include <cstdint>

// Float-valued unary ops: integer and bool inputs are computed in float32, as PyTorch does.
// X(name, forward, backward)
#define NABLA_UNARY_FLOAT_OPS(X)                                                                   \
  X(exp, (exp(x)), (g * y))                                                                        \
  X(exp2, (exp2(x)), (g * y * 0.6931471805599453))                                                 \
  X(log, (log(x)), (g / x))                                                                        \
  X(log2, (log2(x)), (g / (x * 0.6931471805599453)))                                               \
  X(log10, (log10(x)), (g / (x * 2.302585092994046)))                                              \
  X(log1p, (log1p(x)), (g / (x + 1)))                                                              \
  X(expm1, (expm1(x)), (g * (y + 1)))                                                              \
  X(sqrt, (sqrt(x)), (g / (y * 2)))                                                                \
  X(rsqrt, (T(1) / sqrt(x)), (g * y * y * y * -0.5))                                               \
  X(sin, (sin(x)), (g * cos(x)))                                                                   \
  X(cos, (cos(x)), (g * -sin(x)))                                                                  \
  X(tan, (tan(x)), (g * (y * y + 1)))                                                              \
  X(asin, (asin(x)), (g * rsqrt(1 - x * x)))                                                       \
  X(acos, (acos(x)), (g * -rsqrt(1 - x * x)))                                                      \
  X(atan, (atan(x)), (g / (x * x + 1)))                                                            \
  X(sinh, (sinh(x)), (g * cosh(x)))                                                                \
  X(cosh, (cosh(x)), (g * sinh(x)))                                                                \
  X(tanh, (tanh(x)), (g * (1 - y * y)))                                                            \
  X(erf, (erf(x)), (g * exp(-x * x) * 1.1283791670955126))                                         \
  X(sigmoid, (sigmoid_(x)), (g * y * (1 - y)))                                                     \
  X(logsigmoid, (-softplus_(-x)), (g * sigmoid(-x)))                                               \
  X(gelu, (T(0.5) * x * (T(1) + erf(x * T(0.7071067811865476)))),                                  \
    (g * ((erf(x * 0.7071067811865476) + 1) * 0.5 + x * exp(x * x * -0.5) * 0.3989422804014327)))   \
  X(gelu_tanh, (T(0.5) * x * (T(1) + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)))), \
    (gelu_tanh_grad(x, g)))                                                                        \
  X(silu, (x * sigmoid_(x)), (g * sigmoid(x) * (x * (1 - sigmoid(x)) + 1)))                        \
  X(mish, (x * tanh(softplus_(x))), (mish_grad(x, g)))                                             \
  X(reciprocal, (T(1) / x), (g * -(y * y)))                                                        \
  X(selu, (x > T(0) ? T(1.0507009873554805) * x : T(1.7580993408473766) * expm1(x)),               \
    (g * where(x > 0, full_like(x, 1.0507009873554805), y + 1.7580993408473766)))                  \
  X(hardsigmoid, (x <= T(-3) ? T(0) : (x >= T(3) ? T(1) : x / T(6) + T(0.5))),                      \
    (where(logical_and(x > -3, x < 3), g / 6, zeros_like(g))))                                     \
  X(hardswish, (x <= T(-3) ? T(0) : (x >= T(3) ? x : x * (x + T(3)) / T(6))),                       \
    (g * where(x < -3, zeros_like(x), where(x <= 3, x / 3 + 0.5, ones_like(x)))))                  \
  X(frac, (x - trunc_(x)), (g))

// Ops that keep the input's dtype (any numeric dtype; not bool).
#define NABLA_UNARY_SAME_OPS(X)                                                                    \
  X(neg, (-x), (-g))                                                                               \
  X(abs, (abs_(x)), (g * sign(x)))                                                                 \
  X(sign, (sign_(x)), (zeros_like(g)))                                                             \
  X(square, (x * x), (g * x * 2))                                                                  \
  X(relu, (relu_(x)), (threshold_backward(g, y)))                                                  \
  X(floor, (floor_(x)), (zeros_like(g)))                                                           \
  X(ceil, (ceil_(x)), (zeros_like(g)))                                                             \
  X(round, (round_(x)), (zeros_like(g)))                                                           \
  X(trunc, (trunc_(x)), (zeros_like(g)))

// Float ops with parameters p0, p1.
#define NABLA_UNARY_PARAM_OPS(X)                                                                   \
  X(leaky_relu, (x > T(0) ? x : x * T(p0)), (where(x > 0, g, g * p0)))                             \
  X(elu, (x > T(0) ? x : T(p0) * expm1(x)), (where(x > 0, g, g * (y + p0))))                       \
  X(softplus, (x * T(p0) > T(p1) ? x : softplus_(x * T(p0)) / T(p0)),                              \
    (where(x * p0 > p1, g, g * sigmoid(x * p0))))                                                  \
  X(hardtanh, (clamp_(x, T(p0), T(p1))), (where(logical_and(x > p0, x < p1), g, zeros_like(g))))

// Bool-valued predicates (not differentiable).
#define NABLA_UNARY_BOOL_OPS(X)     \
  X(isnan, (isnan_(x)))             \
  X(isinf, (isinf_(x)))             \
  X(isfinite, (isfinite_(x)))       \
  X(logical_not, (!static_cast<bool>(x)))

// Binary ops computed in the promoted dtype T with a result of the same dtype.
// X(name, forward of a and b). `alpha` (add/sub) is a T. Backward formulas live in elementwise.cpp.
#define NABLA_BINARY_ARITH_OPS(X)                    \
  X(add, (a + alpha * b))                            \
  X(sub, (a - alpha * b))                            \
  X(mul, (a * b))                                    \
  X(div, (a / b))                                    \
  X(pow, (pow_(a, b)))                               \
  X(maximum, (max_(a, b)))                           \
  X(minimum, (min_(a, b)))                           \
  X(atan2, (atan2(a, b)))                            \
  X(remainder, (remainder_(a, b)))                   \
  X(floor_divide, (floor_divide_(a, b)))                                            \
  X(threshold_backward, (b > T(0) ? a : T(0)))

// Binary ops with a bool result.
#define NABLA_BINARY_BOOL_OPS(X)                                    \
  X(eq, (a == b))                                                   \
  X(ne, (a != b))                                                   \
  X(lt, (a < b))                                                    \
  X(le, (a <= b))                                                   \
  X(gt, (a > b))                                                    \
  X(ge, (a >= b))                                                   \
  X(logical_and, (static_cast<bool>(a) && static_cast<bool>(b)))    \
  X(logical_or, (static_cast<bool>(a) || static_cast<bool>(b)))     \
  X(logical_xor, (static_cast<bool>(a) != static_cast<bool>(b)))

namespace nabla {

#define NABLA_ENUM_ENTRY3(name, f, b) name,
#define NABLA_ENUM_ENTRY2(name, f) name,
enum class UnaryOp : uint8_t {
  NABLA_UNARY_FLOAT_OPS(NABLA_ENUM_ENTRY3) NABLA_UNARY_SAME_OPS(NABLA_ENUM_ENTRY3)
      NABLA_UNARY_PARAM_OPS(NABLA_ENUM_ENTRY3) NABLA_UNARY_BOOL_OPS(NABLA_ENUM_ENTRY2) clamp
};
enum class BinaryOp : uint8_t { NABLA_BINARY_ARITH_OPS(NABLA_ENUM_ENTRY2) NABLA_BINARY_BOOL_OPS(NABLA_ENUM_ENTRY2) };
#undef NABLA_ENUM_ENTRY3
#undef NABLA_ENUM_ENTRY2

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);

constexpr bool is_bool_result(BinaryOp op) { return op >= BinaryOp::eq; }

}  // namespace nabla
