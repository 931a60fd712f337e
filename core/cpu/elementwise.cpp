// CPU elementwise kernels: copy (with dtype conversion), fill, unary, binary and where.
// The per-element formulas come from core/elementwise_ops.h. float16/bfloat16 operands go to
// elementwise_lowp.cpp (a file of its own, so that its instances of the formulas leave the
// float32 loops here as the compiler optimizes them alone).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/lowp.h"
#include "core/cpu/vmath.h"
#include "core/scalar_math.h"

namespace nabla::cpu::NABLA_CPU_ISA {
namespace {

using scalar::convert;

}  // namespace

void copy(const Tensor& src, const Tensor& dst, bool /*non_blocking*/) {
  NABLA_CHECK(DeviceError, src.is_cpu() && dst.is_cpu(), "copy: the CPU backend cannot copy from ", src.device(),
              " to ", dst.device());
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    if (src.data_ptr() == dst.data_ptr()) return;
    const char* s = static_cast<const char*>(src.data_ptr());
    char* d = static_cast<char*>(dst.data_ptr());
    size_t es = src.element_size();
    parallel_for(0, src.numel(), 1 << 18,
                 [&](int64_t b, int64_t e) { std::memcpy(d + b * es, s + b * es, (e - b) * es); });
    return;
  }
  if (lowp::copy_f32(src, dst)) return;
  Loop L = make_loop({&dst, &src});
  visit_dtype_with_complex(dst.dtype(), [&](auto dt) {
    using D = typename decltype(dt)::type;
    visit_dtype_with_complex(src.dtype(), [&](auto st) {
      using S = typename decltype(st)::type;
      unary_loop<D, S>(L, [](S v) { return convert<D>(v); });
    });
  });
}

void fill(const Tensor& dst, Scalar value) {
  if (dst.numel() == 0) return;
  Loop L = make_loop({&dst});
  visit_dtype_with_complex(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (is_std_complex_v<T>) {
      v = T(static_cast<typename T::value_type>(value.to_double()), 0);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      v = T(static_cast<float>(value.to_double()));
    } else if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(value.to_double());
    } else {
      v = value.to<T>();
    }
    for_each(L, [&](char** p, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* out = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) out[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
}

namespace {
using namespace nabla::scalar;

template <class F>
void float_unary(const Loop& L, DType dt, const char* op, const F& f) {
  if (dt == DType::f32) return unary_loop<float, float>(L, [&](float x) { return f(x); });
  if (dt == DType::f64) return unary_loop<double, double>(L, [&](double x) { return f(x); });
  throw NotImplemented(internal::str(op, ": not implemented for dtype ", dt, " on the CPU"));
}

template <class F>
void same_unary(const Loop& L, DType dt, const char* op, const F& f) {
  visit_compute_dtype(dt, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError(internal::str(op, ": not supported for bool tensors"));
    } else {
      unary_loop<T, T>(L, [&](T x) { return f(x); });
    }
  });
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  if (out.numel() == 0) return;
  Loop L = make_loop({&out, &x});
  const DType dt = x.dtype();
  if (lowp::is_lowp(dt)) return lowp::unary(op, L, dt, p0, p1);
  if (dt == DType::f32) {  // the transcendental ops with vectorizable float32 forms (vmath.h)
    switch (op) {
      case UnaryOp::exp: return unary_loop<float, float>(L, [](float v) { return vmath::exp_f32(v); });
      case UnaryOp::tanh: return unary_loop<float, float>(L, [](float v) { return vmath::tanh_f32(v); });
      case UnaryOp::sigmoid: return unary_loop<float, float>(L, [](float v) { return vmath::sigmoid_f32(v); });
      case UnaryOp::silu: return unary_loop<float, float>(L, [](float v) { return v * vmath::sigmoid_f32(v); });
      default: break;
    }
  }
  switch (op) {
#define NABLA_FLOAT_CASE(name, fwd, ...)           \
  case UnaryOp::name:                              \
    return float_unary(L, dt, #name, [=](auto x) { \
      using T = decltype(x);                       \
      (void)p0;                                    \
      (void)p1;                                    \
      return static_cast<T>(fwd);                  \
    });
    NABLA_UNARY_FLOAT_OPS(NABLA_FLOAT_CASE)
    NABLA_UNARY_PARAM_OPS(NABLA_FLOAT_CASE)
#undef NABLA_FLOAT_CASE
#define NABLA_SAME_CASE(name, fwd, ...)          \
  case UnaryOp::name:                            \
    return same_unary(L, dt, #name, [](auto x) { \
      using T = decltype(x);                     \
      return static_cast<T>(fwd);                \
    });
    NABLA_UNARY_SAME_OPS(NABLA_SAME_CASE)
#undef NABLA_SAME_CASE
#define NABLA_BOOL_CASE(name, fwd, ...)                                   \
  case UnaryOp::name:                                                     \
    return visit_compute_dtype(dt, #name, [&](auto tag) {                 \
      using T = typename decltype(tag)::type;                             \
      unary_loop<bool, T>(L, [](T x) { return static_cast<bool>(fwd); }); \
    });
    NABLA_UNARY_BOOL_OPS(NABLA_BOOL_CASE)
#undef NABLA_BOOL_CASE
    case UnaryOp::clamp:
      return visit_compute_dtype(dt, "clamp", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
          throw DTypeError("clamp: not supported for bool tensors");
        } else {
          const T lo = scalar::saturate<T>(p0), hi = scalar::saturate<T>(p1);
          unary_loop<T, T>(L, [=](T v) { return scalar::clamp(v, lo, hi); });
        }
      });
  }
  throw NotImplemented(internal::str("unary op ", static_cast<int>(op), ": not implemented on the CPU"));
}

namespace {
// An arithmetic op on bool operands, by its `bool` column (core/elementwise_ops.h).
void bool_binary(const Loop& L, BinaryOp op) {
  switch (bool_rule(op)) {
    case BoolRule::either: return binary_loop<bool, bool, bool>(L, [](bool a, bool b) { return a || b; });
    case BoolRule::both: return binary_loop<bool, bool, bool>(L, [](bool a, bool b) { return a && b; });
    default: throw DTypeError(internal::str(op_name(op), ": not supported for bool tensors"));
  }
}
}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha_s) {
  if (out.numel() == 0) return;
  Loop L = make_loop({&out, &a, &b});
  const DType dt = a.dtype();
  if (lowp::is_lowp(dt)) return lowp::binary(op, L, dt, alpha_s);
  visit_compute_dtype(dt, op_name(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    [[maybe_unused]] const T alpha = alpha_s.to<T>();
    switch (op) {
#define NABLA_ARITH_CASE(name, kind, fwd, ...)                                       \
  case BinaryOp::name:                                                               \
    if constexpr (std::is_same_v<T, bool>) {                                         \
      return bool_binary(L, op);                                                     \
    } else {                                                                         \
      return binary_loop<T, T, T>(L, [=](T a, T b) { return static_cast<T>(fwd); }); \
    }
      NABLA_BINARY_ARITH_OPS(NABLA_ARITH_CASE)
#undef NABLA_ARITH_CASE
#define NABLA_BOOL_CASE(name, fwd, ...) \
  case BinaryOp::name:                  \
    return binary_loop<bool, T, T>(L, [](T a, T b) { return static_cast<bool>(fwd); });
      NABLA_BINARY_BOOL_OPS(NABLA_BOOL_CASE)
#undef NABLA_BOOL_CASE
    }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (out.numel() == 0) return;
  Loop L = make_loop({&out, &cond, &a, &b});
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ternary_loop<T, bool, T, T>(L, [](bool c, T x, T y) { return c ? x : y; });
  });
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
