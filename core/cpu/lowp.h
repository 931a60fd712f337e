// The CPU kernels' float16/bfloat16 paths: a 16-bit operand is converted to float32 a block at a
// time (kBlock elements on the stack), the float32 formula runs on the block, and the result is
// rounded once on store, to nearest even as core/dtype.h's Half and BFloat16 do. Every path gives
// the same bits: the AVX2 build converts with F16C (vcvtps2ph) and, on CPUs with AVX512_BF16, with
// vcvtneps2bf16; the lanes these instructions round differently from core/dtype.h (NaN payloads,
// and float32 subnormals, which vcvtneps2bf16 flushes to zero) are redone with the scalar
// conversion. The portable build converts with the scalar code (bfloat16 in a form the compiler
// vectorizes).
//
//   lowp::unary_loop<R, A>(L, f)    out[i] = f(float(a[i])), A Half or BFloat16, R A or bool
//   lowp::binary_loop<R, A>(L, f)   out[i] = f(float(a[i]), float(b[i]))
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../dtype.h"
#include "../elementwise_ops.h"
#include "../scalar.h"
#include "isa.h"
#include "loops.h"

#if defined(__x86_64__) && defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#define NABLA_LOWP_X86 1
#endif

namespace nabla::cpu::NABLA_CPU_ISA::lowp {

// Elements converted per block: three float32 blocks of this size live on a kernel's stack.
constexpr int64_t kBlock = 256;

template <class T>
constexpr bool is_lowp_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

inline bool is_lowp(DType d) { return is_reduced_float(d); }

// ---- scalar conversions of n contiguous elements -------------------------------------------------
inline void bf16_to_f32(const uint16_t* s, int64_t n, float* d) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x = static_cast<uint32_t>(s[i]) << 16;
    std::memcpy(d + i, &x, 4);
  }
}
// BFloat16(float), written without branches so that it vectorizes.
inline void f32_to_bf16_scalar(const float* s, int64_t n, uint16_t* d) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, s + i, 4);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, quiet = (x >> 16) | 0x40u;
    d[i] = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}
inline void f16_to_f32_scalar(const uint16_t* s, int64_t n, float* d) {
  for (int64_t i = 0; i < n; ++i) d[i] = Half::to_float(s[i]);
}
inline void f32_to_f16_scalar(const float* s, int64_t n, uint16_t* d) {
  for (int64_t i = 0; i < n; ++i) d[i] = Half::from_float(s[i]);
}

#if defined(NABLA_LOWP_X86)
// vcvtneps2bf16, 16 lanes at a time; lanes holding a NaN or a float32 subnormal take the scalar
// conversion (the instruction flushes subnormals and may quiet NaNs differently).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512bf16"))) inline void f32_to_bf16_avx512(const float* s,
                                                                                               int64_t n, uint16_t* d) {
  int64_t i = 0;
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                min_normal = _mm512_set1_epi32(0x00800000);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(s + i);
    const __m512i mag = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
    const __mmask16 odd = _mm512_cmpgt_epu32_mask(mag, inf) |
                          (_mm512_cmplt_epu32_mask(mag, min_normal) & _mm512_test_epi32_mask(mag, mag));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), (__m256i)_mm512_cvtneps_pbh(v));
    if (odd) [[unlikely]]
      f32_to_bf16_scalar(s + i, 16, d + i);
  }
  f32_to_bf16_scalar(s + i, n - i, d + i);
}

inline bool cpu_has_avx512bf16() {
  static const bool has = [] {
    if (vector_isa() != Isa::avx512) return false;  // NABLA_GEMM_KERNEL=avx2 keeps to AVX2 here too
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return has;
}

// vcvtph2ps and vcvtps2ph (round to nearest even), 8 lanes at a time; a block holding a NaN is
// stored by the scalar conversion (NaN becomes sign | 0x7e00, as core/dtype.h's Half).
inline void f16_to_f32(const uint16_t* s, int64_t n, float* d) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  f16_to_f32_scalar(s + i, n - i, d + i);
}
inline void f32_to_f16(const float* s, int64_t n, uint16_t* d) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) [[unlikely]] {
      f32_to_f16_scalar(s + i, 8, d + i);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
  f32_to_f16_scalar(s + i, n - i, d + i);
}
inline void f32_to_bf16(const float* s, int64_t n, uint16_t* d) {
  if (cpu_has_avx512bf16()) return f32_to_bf16_avx512(s, n, d);
  f32_to_bf16_scalar(s, n, d);
}
#else
inline void f16_to_f32(const uint16_t* s, int64_t n, float* d) { f16_to_f32_scalar(s, n, d); }
inline void f32_to_f16(const float* s, int64_t n, uint16_t* d) { f32_to_f16_scalar(s, n, d); }
inline void f32_to_bf16(const float* s, int64_t n, uint16_t* d) { f32_to_bf16_scalar(s, n, d); }
#endif

// n contiguous 16-bit floats of type T to float32 and back.
template <class T>
inline void to_float(const T* s, int64_t n, float* d) {
  if constexpr (std::is_same_v<T, BFloat16>) bf16_to_f32(reinterpret_cast<const uint16_t*>(s), n, d);
  else f16_to_f32(reinterpret_cast<const uint16_t*>(s), n, d);
}
template <class T>
inline void from_float(const float* s, int64_t n, T* d) {
  if constexpr (std::is_same_v<T, BFloat16>) f32_to_bf16(s, n, reinterpret_cast<uint16_t*>(d));
  else f32_to_f16(s, n, reinterpret_cast<uint16_t*>(d));
}

// ---- blocks of a 1-D run (byte stride) -------------------------------------------------------------
// n elements of type T at `src` (byte stride `stride`) as float32 into d.
template <class T>
inline void load(const char* src, int64_t stride, int64_t n, float* d) {
  if (stride == sizeof(T)) {
    to_float(reinterpret_cast<const T*>(src), n, d);
  } else if (stride == 0) {
    const float v = static_cast<float>(*reinterpret_cast<const T*>(src));
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(*reinterpret_cast<const T*>(src + i * stride));
  }
}
// The values computed for a block: float32 for a 16-bit result, else the result type itself.
template <class R>
using computed_t = std::conditional_t<is_lowp_v<R>, float, R>;
template <class R>
inline void store(const computed_t<R>* s, int64_t n, char* dst, int64_t stride) {
  if constexpr (is_lowp_v<R>) {
    if (stride == sizeof(R)) return from_float(s, n, reinterpret_cast<R*>(dst));
    alignas(64) R tmp[kBlock];
    from_float(s, n, tmp);
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<R*>(dst + i * stride) = tmp[i];
  } else {
    if (stride == sizeof(R)) return (void)std::memcpy(dst, s, n * sizeof(R));
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<R*>(dst + i * stride) = s[i];
  }
}

template <class R, class A, class F>
void unary_loop(const Loop& L, const F& f, int64_t grain = kElementwiseGrain) {
  static_assert(is_lowp_v<A>);
  for_each(
      L,
      [&](char** p, const int64_t* s, int64_t n) {
        alignas(64) float a[kBlock];
        alignas(64) computed_t<R> r[kBlock];
        for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
          const int64_t m = std::min(kBlock, n - i0);
          load<A>(p[1] + i0 * s[1], s[1], m, a);
          for (int64_t i = 0; i < m; ++i) r[i] = static_cast<computed_t<R>>(f(a[i]));
          store<R>(r, m, p[0] + i0 * s[0], s[0]);
        }
      },
      grain);
}

template <class R, class A, class F>
void binary_loop(const Loop& L, const F& f, int64_t grain = kElementwiseGrain) {
  static_assert(is_lowp_v<A>);
  for_each(
      L,
      [&](char** p, const int64_t* s, int64_t n) {
        alignas(64) float a[kBlock], b[kBlock];
        alignas(64) computed_t<R> r[kBlock];
        for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
          const int64_t m = std::min(kBlock, n - i0);
          load<A>(p[1] + i0 * s[1], s[1], m, a);
          load<A>(p[2] + i0 * s[2], s[2], m, b);
          for (int64_t i = 0; i < m; ++i) r[i] = static_cast<computed_t<R>>(f(a[i], b[i]));
          store<R>(r, m, p[0] + i0 * s[0], s[0]);
        }
      },
      grain);
}

// The elementwise kernels' 16-bit paths (elementwise_lowp.cpp): unary and binary ops of the table on
// f16/bf16 operands (dt), and contiguous copies between float32 and f16/bf16 (false when the copy
// is not one of those).
void unary(UnaryOp op, const Loop& L, DType dt, double p0, double p1);
void binary(BinaryOp op, const Loop& L, DType dt, Scalar alpha);
bool copy_f32(const Tensor& src, const Tensor& dst);

// Calls f(type_tag<T>{}) with T Half or BFloat16 for d (which must be one of them).
template <class F>
decltype(auto) visit(DType d, F&& f) {
  if (d == DType::f16) return f(type_tag<Half>{});
  return f(type_tag<BFloat16>{});
}

}  // namespace nabla::cpu::NABLA_CPU_ISA::lowp
