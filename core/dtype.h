// Element types: f32 (default), f64, i64, i32, u8, bool, the 16-bit floats f16/bf16, and the complex
// types c64/c128 (pairs of f32/f64, as std::complex). `visit_dtype` turns a runtime DType into a
// compile-time C++ type for kernels; it covers the real dtypes only: complex tensors are computed
// on their float pairs (core/complex.cpp, view_as_real) or by kernels that ask for them
// (`visit_dtype_with_complex`).
#pragma once

#include <bit>
#include <complex>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <type_traits>

#include "error.h"

#if defined(__CUDACC__)
#define NABLA_HOST_DEVICE __host__ __device__
#else
#define NABLA_HOST_DEVICE
#endif

namespace nabla {

enum class DType : uint8_t { f32, f64, i64, i32, u8, boolean, f16, bf16, c64, c128 };

inline constexpr DType kFloat32 = DType::f32, kFloat = DType::f32, kFloat64 = DType::f64, kDouble = DType::f64,
                       kInt64 = DType::i64, kLong = DType::i64, kInt32 = DType::i32, kInt = DType::i32,
                       kUInt8 = DType::u8, kByte = DType::u8, kBool = DType::boolean, kFloat16 = DType::f16,
                       kHalf = DType::f16, kBFloat16 = DType::bf16, kComplex64 = DType::c64, kComplexFloat = DType::c64,
                       kComplex128 = DType::c128, kComplexDouble = DType::c128;

// IEEE half precision, stored as bits; arithmetic happens in float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  NABLA_HOST_DEVICE Half(float f) : bits(from_float(f)) {}
  NABLA_HOST_DEVICE operator float() const { return to_float(bits); }
  // Round to nearest even; NaN keeps its sign as 0x7e00 (as PyTorch's CPU conversion). On the
  // device, the conversion instruction (NaN becomes the canonical 0x7fff, as in PyTorch's CUDA code).
  static NABLA_HOST_DEVICE uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__)
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return static_cast<uint16_t>(sign | (mag > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (mag >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (mag < 0x38800000u) {                                               // subnormal or zero
      if (mag < 0x33000000u) return static_cast<uint16_t>(sign);
      uint32_t e = mag >> 23, m = (mag & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126 - e;  // value / 2^-24 == m * 2^(e - 126)
      uint32_t res = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (res & 1u))) ++res;
      return static_cast<uint16_t>(sign | res);
    }
    uint32_t res = ((mag - 0x38000000u) >> 13);
    uint32_t rem = mag & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
#endif
  }
  static NABLA_HOST_DEVICE float to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
      if (m == 0) {
        x = sign;
      } else {  // subnormal: normalise
        e = 127 - 15 + 1;
        while (!(m & 0x400u)) {
          m <<= 1;
          --e;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
      }
    } else if (e == 31) {
      x = sign | 0x7f800000u | (m << 13);
    } else {
      x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
#endif
  }
};

// bfloat16: the top half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  // On the device (sm_80 on), the conversion instruction: NaN becomes the canonical 0x7fff.
  NABLA_HOST_DEVICE BFloat16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(f));
#else
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    } else {
      bits = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    }
#endif
  }
  NABLA_HOST_DEVICE operator float() const {
    uint32_t x = static_cast<uint32_t>(bits) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
  }
};

template <class T>
struct is_std_complex : std::false_type {};
template <class T>
struct is_std_complex<std::complex<T>> : std::true_type {};
template <class T>
inline constexpr bool is_std_complex_v = is_std_complex<T>::value;

template <class T>
struct type_tag {
  using type = T;
};

// The C++ type stored for each DType.
template <DType D>
struct dtype_traits;
template <>
struct dtype_traits<DType::f32> {
  using type = float;
};
template <>
struct dtype_traits<DType::f64> {
  using type = double;
};
template <>
struct dtype_traits<DType::i64> {
  using type = int64_t;
};
template <>
struct dtype_traits<DType::i32> {
  using type = int32_t;
};
template <>
struct dtype_traits<DType::u8> {
  using type = uint8_t;
};
template <>
struct dtype_traits<DType::boolean> {
  using type = bool;
};
template <>
struct dtype_traits<DType::f16> {
  using type = Half;
};
template <>
struct dtype_traits<DType::bf16> {
  using type = BFloat16;
};
template <>
struct dtype_traits<DType::c64> {
  using type = std::complex<float>;
};
template <>
struct dtype_traits<DType::c128> {
  using type = std::complex<double>;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<std::complex<float>>() {
  return DType::c64;
}
template <>
constexpr DType dtype_of<std::complex<double>>() {
  return DType::c128;
}

constexpr size_t element_size(DType d) {
  switch (d) {
    case DType::c128: return 16;
    case DType::c64:
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::u8:
    case DType::boolean: return 1;
  }
  return 0;
}
constexpr bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16;
}
// float16 or bfloat16 (PyTorch's isReducedFloatingType): the dtypes kernels compute in float32.
constexpr bool is_reduced_float(DType d) { return d == DType::f16 || d == DType::bf16; }
constexpr bool is_integral(DType d, bool include_bool = false) {
  return d == DType::i64 || d == DType::i32 || d == DType::u8 || (include_bool && d == DType::boolean);
}
// complex64 or complex128 (is_floating is false for them, as PyTorch's is_floating_point).
constexpr bool is_complex(DType d) { return d == DType::c64 || d == DType::c128; }
// The dtype of a complex dtype's parts (complex64 -> float32); other dtypes are their own.
constexpr DType to_real_dtype(DType d) { return d == DType::c64 ? DType::f32 : d == DType::c128 ? DType::f64 : d; }
// The complex dtype whose parts are `d`: float64 -> complex128; float32, float16, bfloat16 and the
// integers -> complex64 (nabla has no complex32). Complex dtypes are their own.
constexpr DType to_complex_dtype(DType d) { return d == DType::f64 || d == DType::c128 ? DType::c128 : DType::c64; }
const char* dtype_name(DType d);  // "float32", "int64", ...
inline std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }

// The dtype both operands are computed in (PyTorch's promote_types for tensors of the same kind).
DType promote_types(DType a, DType b);

// Calls f(type_tag<T>{}) with T the C++ type of `d`. Kernels use it to instantiate once per dtype.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(type_tag<float>{});
    case DType::f64: return f(type_tag<double>{});
    case DType::i64: return f(type_tag<int64_t>{});
    case DType::i32: return f(type_tag<int32_t>{});
    case DType::u8: return f(type_tag<uint8_t>{});
    case DType::boolean: return f(type_tag<bool>{});
    case DType::f16: return f(type_tag<Half>{});
    case DType::bf16: return f(type_tag<BFloat16>{});
    case DType::c64:
    case DType::c128: break;
  }
  throw NotImplemented(internal::str("this operation is not implemented for ", dtype_name(d),
                                     " tensors (view_as_real(x) gives their float pairs)"));
}

// visit_dtype with the complex dtypes too (std::complex<float>, std::complex<double>): for kernels
// that only move, fill or convert elements.
template <class F>
decltype(auto) visit_dtype_with_complex(DType d, F&& f) {
  if (d == DType::c64) return f(type_tag<std::complex<float>>{});
  if (d == DType::c128) return f(type_tag<std::complex<double>>{});
  return visit_dtype(d, std::forward<F>(f));
}

// Like visit_dtype but only for the dtypes CPU arithmetic kernels are compiled for
// (f32, f64, i64, i32, u8, bool); `op` names the caller in the error for f16/bf16.
template <class F>
decltype(auto) visit_compute_dtype(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::f32: return f(type_tag<float>{});
    case DType::f64: return f(type_tag<double>{});
    case DType::i64: return f(type_tag<int64_t>{});
    case DType::i32: return f(type_tag<int32_t>{});
    case DType::u8: return f(type_tag<uint8_t>{});
    case DType::boolean: return f(type_tag<bool>{});
    default: break;
  }
  throw NotImplemented(internal::str(
      op, ": not implemented for dtype ", dtype_name(d), " on the CPU",
      is_complex(d) ? " (view_as_real(x) gives the float pairs)" : " (convert with .to(kFloat32) first)"));
}

}  // namespace nabla
