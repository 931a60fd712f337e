// The elementwise kernels on float16/bfloat16 operands: every op of core/elementwise_ops.h runs its
// float32 formula (vmath.h's exp/tanh/sigmoid/silu where float32 uses them) over blocks converted
// to float32, and rounds once on store (lowp.h). elementwise.cpp sends the 16-bit calls here.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/lowp.h"
#include "core/cpu/vmath.h"
#include "core/scalar_math.h"

namespace nabla::cpu::NABLA_CPU_ISA::lowp {
namespace {
using namespace nabla::scalar;

// out = f(float(x)) with out of x's 16-bit type, or bool for R = bool.
template <class R, class F>
void map(const Loop& L, DType dt, const F& f) {
  visit(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_loop<std::conditional_t<std::is_same_v<R, bool>, bool, T>, T>(L, [&](float x) { return f(x); });
  });
}

template <class L16>
void binary_t(BinaryOp op, const Loop& L, Scalar alpha_s) {
  [[maybe_unused]] const float alpha = alpha_s.to<float>();
  switch (op) {
#define NABLA_ARITH_CASE(name, kind, fwd, ...)              \
  case BinaryOp::name:                                      \
    return binary_loop<L16, L16>(L, [=](float a, float b) { \
      using T = float;                                      \
      return static_cast<T>(fwd);                           \
    });
    NABLA_BINARY_ARITH_OPS(NABLA_ARITH_CASE)
#undef NABLA_ARITH_CASE
#define NABLA_BOOL_CASE(name, fwd, ...) \
  case BinaryOp::name: return binary_loop<bool, L16>(L, [](float a, float b) { return static_cast<bool>(fwd); });
    NABLA_BINARY_BOOL_OPS(NABLA_BOOL_CASE)
#undef NABLA_BOOL_CASE
  }
}
}  // namespace

void unary(UnaryOp op, const Loop& L, DType dt, double p0, double p1) {
  switch (op) {
    case UnaryOp::exp: return map<float>(L, dt, [](float v) { return vmath::exp_f32(v); });
    case UnaryOp::tanh: return map<float>(L, dt, [](float v) { return vmath::tanh_f32(v); });
    case UnaryOp::sigmoid: return map<float>(L, dt, [](float v) { return vmath::sigmoid_f32(v); });
    case UnaryOp::silu: return map<float>(L, dt, [](float v) { return v * vmath::sigmoid_f32(v); });
    default: break;
  }
  switch (op) {
#define NABLA_FLOAT_CASE(name, fwd, ...)    \
  case UnaryOp::name:                       \
    return map<float>(L, dt, [=](float x) { \
      using T = float;                      \
      (void)p0;                             \
      (void)p1;                             \
      return static_cast<T>(fwd);           \
    });
    NABLA_UNARY_FLOAT_OPS(NABLA_FLOAT_CASE)
    NABLA_UNARY_PARAM_OPS(NABLA_FLOAT_CASE)
    NABLA_UNARY_SAME_OPS(NABLA_FLOAT_CASE)
#undef NABLA_FLOAT_CASE
#define NABLA_BOOL_CASE(name, fwd, ...) \
  case UnaryOp::name: return map<bool>(L, dt, [](float x) { return static_cast<bool>(fwd); });
    NABLA_UNARY_BOOL_OPS(NABLA_BOOL_CASE)
#undef NABLA_BOOL_CASE
    case UnaryOp::clamp: {
      const float lo = scalar::saturate<float>(p0), hi = scalar::saturate<float>(p1);
      return map<float>(L, dt, [=](float v) { return scalar::clamp(v, lo, hi); });
    }
  }
}

void binary(BinaryOp op, const Loop& L, DType dt, Scalar alpha) {
  if (dt == DType::f16) return binary_t<Half>(op, L, alpha);
  binary_t<BFloat16>(op, L, alpha);
}

bool copy_f32(const Tensor& src, const Tensor& dst) {
  const bool down = src.dtype() == DType::f32 && is_lowp(dst.dtype());
  const bool up = dst.dtype() == DType::f32 && is_lowp(src.dtype());
  if (!(down || up) || !src.is_contiguous() || !dst.is_contiguous()) return false;
  visit(down ? dst.dtype() : src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallel_for(0, src.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      if (down) from_float(static_cast<const float*>(src.data_ptr()) + b, e - b, static_cast<T*>(dst.data_ptr()) + b);
      else to_float(static_cast<const T*>(src.data_ptr()) + b, e - b, static_cast<float*>(dst.data_ptr()) + b);
    });
  });
  return true;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA::lowp
