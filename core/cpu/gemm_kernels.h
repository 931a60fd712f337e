// GEMM building blocks shared by the GEMM driver (gemm.cpp) and the convolution kernels (conv.cpp):
// the micro-kernels for this ISA build, the runtime choice among them, and the packing routines.
// Internal to core/cpu; compiled into each ISA build (see kernels.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../impl.h"
#include "isa.h"
#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define NABLA_GEMM_AVX2 1
#endif

namespace nabla::cpu::NABLA_CPU_ISA::gemm_internal {

// A micro-kernel computes one MR x NR tile of C = alpha * A_packed @ B_packed + beta * C over k,
// where only the top-left m x n of the tile is written (partial tiles at the edges).
template <class T>
using MicroKernel = void (*)(int64_t k, const T* a, const T* b, T* c, int64_t ldc, T alpha, T beta, int64_t m,
                             int64_t n);

template <class T>
struct KernelSpec {
  int mr, nr;
  int64_t kc, mc, nc;  // cache blocking: A block mc x kc in L2, B sliver kc x nr in L1, B panel kc x nc in L3
  MicroKernel<T> fn;
  double speed = 1.0;  // per row, relative to the tallest kernel of its ISA (see kernel_spec_for_rows)
};

// Writes an MR x NR accumulator tile (row-major, leading dim NR) into C.
template <class T, int NR>
inline void store_tile(const T* acc, int64_t m, int64_t n, T* c, int64_t ldc, T alpha, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    const T* ai = acc + i * NR;
    if (beta == T(0)) {
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * ai[j];
    } else {
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * ai[j] + beta * ci[j];
    }
  }
}

// Portable micro-kernel (the compiler vectorizes the j loop).
template <class T, int MR, int NR>
void ukernel_generic(int64_t k, const T* a, const T* b, T* c, int64_t ldc, T alpha, T beta, int64_t m, int64_t n) {
  T r[MR][NR] = {};
  for (int64_t p = 0; p < k; ++p) {
    const T* bp = b + p * NR;
    const T* ap = a + p * MR;
    for (int i = 0; i < MR; ++i) {
      T av = ap[i];
      for (int j = 0; j < NR; ++j) r[i][j] += av * bp[j];
    }
  }
  store_tile<T, NR>(&r[0][0], m, n, c, ldc, alpha, beta);
}

#ifdef NABLA_GEMM_AVX2
// Asks for the m rows of a C tile (`bytes` wide) ahead of the k loop, which hides their latency
// behind the loop: for large matrices C comes from memory, and waiting for it at the end of every
// tile cost ~8% of the GEMM's time.
template <class T>
inline void prefetch_tile(const T* c, int64_t ldc, int64_t m, size_t bytes) {
  for (int64_t i = 0; i < m; ++i) {
    const char* ci = reinterpret_cast<const char*>(c + i * ldc);
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(ci + off, _MM_HINT_T0);
    _mm_prefetch(ci + bytes - 1, _MM_HINT_T0);  // the last line when the row is not 64-byte aligned
  }
}

// SIMD traits: the vector type V of L lanes of T and the operations the kernels written once for
// both ISAs use (these GEMM micro-kernels' loads and FMAs; for float also the masks, loads, stores and
// lane sums of conv_direct.cpp's kernels). The Avx512 functions carry the AVX-512 target attribute:
// a kernel instantiated on them must be compiled for AVX-512 (NABLA_AVX512, or conv_direct.cpp's
// avx512_call).
template <class T>
struct Avx2;
template <>
struct Avx2<float> {
  using V = __m256;
  using M = __m256i;  // a lane mask (all ones or zero per lane) for masked loads and stores
  static constexpr int L = 8, registers = 16;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  // Lanes [0, n) (n <= L); masked loads give 0 in the other lanes and do not read their memory.
  static M first(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V maskz_loadu(const float* p, M m) { return _mm256_maskload_ps(p, m); }
  static void mask_storeu(float* p, M m, V v) { _mm256_maskstore_ps(p, m, v); }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
};
template <>
struct Avx2<double> {
  using V = __m256d;
  static constexpr int L = 4, registers = 16;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_load_pd(p); }
  static V loadu(const double* p) { return _mm256_loadu_pd(p); }
  static V bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V set1(double v) { return _mm256_set1_pd(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static void storeu(double* p, V v) { _mm256_storeu_pd(p, v); }
};

// AVX2/FMA: MR rows (6, or 5 and 4 for row counts they tile better) x 2 vectors of accumulators
// (up to 12 ymm), B rows as two loads, A broadcast per row.
template <class T, int MR>
void ukernel_avx2(int64_t k, const T* a, const T* b, T* c, int64_t ldc, T alpha, T beta, int64_t m, int64_t n) {
  using S = Avx2<T>;
  using V = typename S::V;
  constexpr int L = S::L, NR = 2 * L;
  V r[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) r[i][0] = r[i][1] = S::zero();
  prefetch_tile(c, ldc, m, NR * sizeof(T));
  for (int64_t p = 0; p < k; ++p) {
    V b0 = S::load(b), b1 = S::load(b + L);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      V av = S::bcast(a + i);
      r[i][0] = S::fma(av, b0, r[i][0]);
      r[i][1] = S::fma(av, b1, r[i][1]);
    }
    a += MR;
    b += NR;
  }
  if (m == MR && n == NR) {
    V va = S::set1(alpha), vb = S::set1(beta);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      V x0 = S::mul(va, r[i][0]), x1 = S::mul(va, r[i][1]);
      if (beta != T(0)) {
        x0 = S::fma(vb, S::loadu(ci), x0);
        x1 = S::fma(vb, S::loadu(ci + L), x1);
      }
      S::storeu(ci, x0);
      S::storeu(ci + L, x1);
    }
    return;
  }
  // Unrolled like the loops above: a loop indexing r with a variable made GCC keep the
  // accumulators in memory and store all of them on every k step (half the AVX2 kernel's speed).
  alignas(64) T acc[MR * NR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    S::storeu(acc + i * NR, r[i][0]);
    S::storeu(acc + i * NR + L, r[i][1]);
  }
  store_tile<T, NR>(acc, m, n, c, ldc, alpha, beta);
}

// AVX-512 (when the CPU has it): MR rows (12, or 10 and 8) x 2 vectors of accumulators (up to 24
// zmm); on CPUs with full-width 512-bit FMA units this doubles the AVX2 kernel's throughput.
#define NABLA_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))
template <class T>
struct Avx512;
template <>
struct Avx512<float> {
  using V = __m512;
  using M = __mmask16;
  static constexpr int L = 16, registers = 32;
  NABLA_AVX512 static V zero() { return _mm512_setzero_ps(); }
  NABLA_AVX512 static V load(const float* p) { return _mm512_load_ps(p); }
  NABLA_AVX512 static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  NABLA_AVX512 static V set1(float v) { return _mm512_set1_ps(v); }
  NABLA_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  NABLA_AVX512 static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  NABLA_AVX512 static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  NABLA_AVX512 static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  NABLA_AVX512 static M first(int64_t n) { return n >= L ? M(0xFFFF) : M((1u << n) - 1); }
  NABLA_AVX512 static V maskz_loadu(const float* p, M m) { return _mm512_maskz_loadu_ps(m, p); }
  NABLA_AVX512 static void mask_storeu(float* p, M m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  NABLA_AVX512 static float sum(V v) { return _mm512_reduce_add_ps(v); }
};
template <>
struct Avx512<double> {
  using V = __m512d;
  static constexpr int L = 8, registers = 32;
  NABLA_AVX512 static V zero() { return _mm512_setzero_pd(); }
  NABLA_AVX512 static V load(const double* p) { return _mm512_load_pd(p); }
  NABLA_AVX512 static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  NABLA_AVX512 static V set1(double v) { return _mm512_set1_pd(v); }
  NABLA_AVX512 static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  NABLA_AVX512 static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  NABLA_AVX512 static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
};

template <class T, int MR>
NABLA_AVX512 void ukernel_avx512(int64_t k, const T* a, const T* b, T* c, int64_t ldc, T alpha, T beta, int64_t m,
                                 int64_t n) {
  using S = Avx512<T>;
  using V = typename S::V;
  constexpr int L = S::L, NR = 2 * L;
  V r[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) r[i][0] = r[i][1] = S::zero();
  prefetch_tile(c, ldc, m, NR * sizeof(T));
  for (int64_t p = 0; p < k; ++p) {
    V b0 = S::load(b), b1 = S::load(b + L);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      V av = S::set1(a[i]);
      r[i][0] = S::fma(av, b0, r[i][0]);
      r[i][1] = S::fma(av, b1, r[i][1]);
    }
    a += MR;
    b += NR;
  }
  if (m == MR && n == NR) {
    V va = S::set1(alpha), vb = S::set1(beta);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      V x0 = S::mul(va, r[i][0]), x1 = S::mul(va, r[i][1]);
      if (beta != T(0)) {
        x0 = S::fma(vb, S::loadu(ci), x0);
        x1 = S::fma(vb, S::loadu(ci + L), x1);
      }
      S::storeu(ci, x0);
      S::storeu(ci + L, x1);
    }
    return;
  }
  alignas(64) T acc[MR * NR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    S::storeu(acc + i * NR, r[i][0]);
    S::storeu(acc + i * NR + L, r[i][1]);
  }
  store_tile<T, NR>(acc, m, n, c, ldc, alpha, beta);
}
#endif

// The kernels for this CPU, tallest first, for the instruction set cpu::gemm_isa() chose: AVX-512,
// AVX2 or portable. Each ISA has kernels of several heights, so that a product of m rows can take
// the one that pads m least.
template <class T>
struct KernelFamily {
  KernelSpec<T> spec[3];
  int count;
};

template <class T>
const KernelFamily<T>& kernel_family() {
  static const KernelFamily<T> family = [] {
    constexpr bool F = std::is_same_v<T, float>;
#ifdef NABLA_GEMM_AVX2
    constexpr int nr512 = F ? 32 : 16, nr2 = F ? 16 : 8;
    // Cache blocks: kc rows of B per panel; mc rows of A (a multiple of the kernel's height) in L2.
    constexpr int64_t mc512 = F ? 240 : 120, nc512 = F ? 4096 : 2048, nc2 = F ? 3072 : 2048;
    const Isa chosen = gemm_isa();
    if (chosen == Isa::avx512)
      return KernelFamily<T>{{{12, nr512, 256, mc512, nc512, ukernel_avx512<T, 12>},
                              {10, nr512, 256, mc512, nc512, ukernel_avx512<T, 10>},
                              {8, nr512, 256, mc512, nc512, ukernel_avx512<T, 8>}},
                             3};
    if (chosen == Isa::avx2)
      // With 10 or 8 accumulators the AVX2 kernels hide less FMA latency: 0.96 and 0.93 of the
      // 6-row kernel's speed on long products (Zen 4, one thread, 1000-1024 x 512 x 512).
      return KernelFamily<T>{{{6, nr2, 256, F ? 144 : 96, nc2, ukernel_avx2<T, 6>},
                              {5, nr2, 256, F ? 140 : 90, nc2, ukernel_avx2<T, 5>, 0.96},
                              {4, nr2, 256, F ? 144 : 96, nc2, ukernel_avx2<T, 4>, 0.93}},
                             3};
#endif
    return KernelFamily<T>{{{4, F ? 16 : 8, 256, 128, 2048, ukernel_generic < T, 4, F ? 16 : 8 > }}, 1};
  }();
  return family;
}

// The default (tallest) kernel.
template <class T>
const KernelSpec<T>& kernel_spec() {
  return kernel_family<T>().spec[0];
}

// The kernel that computes m rows fastest: the fewest padded rows for its speed, the taller on a
// tie. LeNet's 20 output channels take two 10-row tiles instead of two 12-row ones with 4 rows of
// zeros (17% of the work wasted); 2048 rows keep the tallest kernel.
template <class T>
const KernelSpec<T>& kernel_spec_for_rows(int64_t m) {
  const KernelFamily<T>& f = kernel_family<T>();
  auto cost = [m](const KernelSpec<T>& s) { return static_cast<double>((m + s.mr - 1) / s.mr * s.mr) / s.speed; };
  const KernelSpec<T>* best = &f.spec[0];
  for (int i = 1; i < f.count; ++i)
    if (cost(f.spec[i]) < cost(*best)) best = &f.spec[i];
  return *best;
}

// dst[p * ldd + i] = src[i * lds + p] for i < rows, p < cols: a transposing copy, in 8x8 (float) or
// 4x4 (double) register tiles on AVX2 machines. Packing row-major A and column-major B needs it.
#ifdef NABLA_GEMM_AVX2
// d[p * ld + i] = row(i)[p] for an 8x8 tile; row(i) gives the start of source row i.
template <class Row>
inline void transpose_tile_rows(const Row& row, float* d, int64_t ld) {
  __m256 r0 = _mm256_loadu_ps(row(0)), r1 = _mm256_loadu_ps(row(1)), r2 = _mm256_loadu_ps(row(2)),
         r3 = _mm256_loadu_ps(row(3)), r4 = _mm256_loadu_ps(row(4)), r5 = _mm256_loadu_ps(row(5)),
         r6 = _mm256_loadu_ps(row(6)), r7 = _mm256_loadu_ps(row(7));
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}
inline void transpose_tile(const float* s, int64_t ls, float* d, int64_t ld) {
  transpose_tile_rows([&](int i) { return s + i * ls; }, d, ld);
}
inline void transpose_tile(const double* s, int64_t ls, double* d, int64_t ld) {
  __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + ls), r2 = _mm256_loadu_pd(s + 2 * ls),
          r3 = _mm256_loadu_pd(s + 3 * ls);
  __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1), t2 = _mm256_unpacklo_pd(r2, r3),
          t3 = _mm256_unpackhi_pd(r2, r3);
  _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
  _mm256_storeu_pd(d + ld, _mm256_permute2f128_pd(t1, t3, 0x20));
  _mm256_storeu_pd(d + 2 * ld, _mm256_permute2f128_pd(t0, t2, 0x31));
  _mm256_storeu_pd(d + 3 * ld, _mm256_permute2f128_pd(t1, t3, 0x31));
}
#endif

template <class T>
void transpose_copy(const T* src, int64_t lds, int64_t rows, int64_t cols, T* dst, int64_t ldd) {
  int64_t i0 = 0;
#ifdef NABLA_GEMM_AVX2
  constexpr int64_t B = std::is_same_v<T, float> ? 8 : 4;
  for (; i0 + B <= rows; i0 += B) {
    int64_t p = 0;
    for (; p + B <= cols; p += B) transpose_tile(src + i0 * lds + p, lds, dst + p * ldd + i0, ldd);
    for (; p < cols; ++p)
      for (int64_t i = i0; i < i0 + B; ++i) dst[p * ldd + i] = src[i * lds + p];
  }
#endif
  for (int64_t i = i0; i < rows; ++i) {
    const T* s = src + i * lds;
    for (int64_t p = 0; p < cols; ++p) dst[p * ldd + i] = s[p];
  }
}

// Packs A(i0:i0+mc, p0:p0+kc) into mr-row slivers, zero-padded: out[s][p][i].
template <class T>
void pack_a(const T* a, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int mr, T* out) {
  for (int64_t s = 0; s < mc; s += mr) {
    int64_t rows = std::min<int64_t>(mr, mc - s);
    const T* as = a + s * rsa;
    if (csa == 1) {
      transpose_copy(as, rsa, rows, kc, out, mr);
    } else if (rsa == 1 && rows == mr) {
      for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * mr, as + p * csa, mr * sizeof(T));
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < rows; ++i) out[p * mr + i] = as[i * rsa + p * csa];
    }
    if (rows < mr)
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = rows; i < mr; ++i) out[p * mr + i] = T(0);
    out += kc * mr;
  }
}

// Packs B(p0:p0+kc, j0:j0+nc) into nr-column slivers, zero-padded: out[s][p][j].
template <class T>
void pack_b(const T* b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int nr, T* out) {
  for (int64_t s = 0; s < nc; s += nr) {
    int64_t cols = std::min<int64_t>(nr, nc - s);
    const T* bs = b + s * csb;
    if (cols == nr && csb == 1) {
      for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * nr, bs + p * rsb, nr * sizeof(T));
    } else if (rsb == 1) {
      transpose_copy(bs, csb, cols, kc, out, nr);
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = cols; j < nr; ++j) out[p * nr + j] = T(0);
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < cols; ++j) out[p * nr + j] = bs[p * rsb + j * csb];
        for (int64_t j = cols; j < nr; ++j) out[p * nr + j] = T(0);
      }
    }
    out += kc * nr;
  }
}

// Runs the blocked algorithm on C rows [m0, m1) and columns [n0, n1), single-threaded.
template <class T>
void gemm_block(const KernelSpec<T>& ks, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k, T alpha, const T* a,
                int64_t rsa, int64_t csa, const T* b, int64_t rsb, int64_t csb, T beta, T* c, int64_t ldc) {
  // Packing buffers (per thread, 64-byte aligned): A panels of mc x kc, B panels of nc x kc at most.
  const int64_t kc_max = std::min<int64_t>(ks.kc, std::max<int64_t>(k, 1));
  const int64_t mc_max = std::min<int64_t>(ks.mc, (m1 - m0 + ks.mr - 1) / ks.mr * ks.mr);
  const int64_t nc_max = std::min<int64_t>(ks.nc, (n1 - n0 + ks.nr - 1) / ks.nr * ks.nr);
  T* pa = thread_scratch<T>(Scratch::gemm_a, (mc_max + ks.mr) * kc_max);
  T* pb = thread_scratch<T>(Scratch::gemm_b, (nc_max + ks.nr) * kc_max);
  for (int64_t jc = n0; jc < n1; jc += ks.nc) {
    int64_t nc = std::min<int64_t>(ks.nc, n1 - jc);
    for (int64_t pc = 0; pc < k; pc += ks.kc) {
      int64_t kc = std::min<int64_t>(ks.kc, k - pc);
      T beta_eff = pc == 0 ? beta : T(1);
      pack_b(b + pc * rsb + jc * csb, rsb, csb, kc, nc, ks.nr, pb);
      for (int64_t ic = m0; ic < m1; ic += ks.mc) {
        int64_t mc = std::min<int64_t>(ks.mc, m1 - ic);
        pack_a(a + ic * rsa + pc * csa, rsa, csa, mc, kc, ks.mr, pa);
        for (int64_t jr = 0; jr < nc; jr += ks.nr) {
          int64_t n = std::min<int64_t>(ks.nr, nc - jr);
          const T* bp = pb + (jr / ks.nr) * kc * ks.nr;
          for (int64_t ir = 0; ir < mc; ir += ks.mr) {
            int64_t m = std::min<int64_t>(ks.mr, mc - ir);
            ks.fn(kc, pa + (ir / ks.mr) * kc * ks.mr, bp, c + (ic + ir) * ldc + jc + jr, ldc, alpha, beta_eff, m, n);
          }
        }
      }
    }
  }
}

// ---- GEMM with a pre-packed A and B panels produced on demand ------------------------------------
// For convolutions: the weights (A) are packed once per call, and the input patches (B) are packed
// straight from the image, panel by panel, so im2col never materializes the whole patch matrix.

// All of A (m x k), packed as: for each K panel of ks.kc, for each mr-row sliver, kc x mr values.
template <class T>
struct PackedA {
  Tensor storage;  // from the caching allocator: packing in steady state does not call malloc
  T* data = nullptr;
  int64_t m = 0, k = 0;
  // The packed sliver `s` (rows s*mr ...) of the K panel starting at pc.
  const T* sliver(const KernelSpec<T>& ks, int64_t pc, int64_t s) const {
    int64_t slivers = (m + ks.mr - 1) / ks.mr;
    int64_t kc = std::min<int64_t>(ks.kc, k - pc);
    return data + pc * slivers * ks.mr + s * kc * ks.mr;
  }
};

template <class T>
PackedA<T> pack_a_all(const KernelSpec<T>& ks, const T* a, int64_t rsa, int64_t csa, int64_t m, int64_t k) {
  PackedA<T> p;
  p.m = m;
  p.k = k;
  int64_t slivers = (m + ks.mr - 1) / ks.mr;
  p.storage = internal::make_empty({slivers * ks.mr * std::max<int64_t>(k, 1)}, dtype_of<T>(), kCPU);
  p.data = static_cast<T*>(p.storage.data_ptr());  // 64-byte aligned
  for (int64_t pc = 0; pc < k; pc += ks.kc) {
    int64_t kc = std::min<int64_t>(ks.kc, k - pc);
    pack_a(a + pc * csa, rsa, csa, m, kc, ks.mr, p.data + pc * slivers * ks.mr);
  }
  return p;
}

// C (m x n, row stride ldc) = alpha * A @ B + beta * C, single-threaded. pack_b(p0, kc, j0, nc, out)
// must write B(p0:p0+kc, j0:j0+nc) as nr-column slivers (out[s][p][j], zero-padded to nr). With a
// sliver range [s_begin, s_end) only those rows of C (rows s_begin * mr ...) are computed, so that
// threads can share one product by rows.
template <class T, class PackB>
void gemm_prepacked(const KernelSpec<T>& ks, const PackedA<T>& A, int64_t n, const PackB& pack_b_panel, T alpha, T beta,
                    T* c, int64_t ldc, int64_t s_begin = 0, int64_t s_end = -1) {
  // B panels (per thread, 64-byte aligned).
  const int64_t nc_max = std::min<int64_t>(ks.nc, (n + ks.nr - 1) / ks.nr * ks.nr);
  T* pb = thread_scratch<T>(Scratch::gemm_panel_b, nc_max * std::min<int64_t>(ks.kc, std::max<int64_t>(A.k, 1)));
  const int64_t slivers = s_end < 0 ? (A.m + ks.mr - 1) / ks.mr : s_end;
  for (int64_t jc = 0; jc < n; jc += ks.nc) {
    int64_t nc = std::min<int64_t>(ks.nc, n - jc);
    for (int64_t pc = 0; pc < A.k; pc += ks.kc) {
      int64_t kc = std::min<int64_t>(ks.kc, A.k - pc);
      T beta_eff = pc == 0 ? beta : T(1);
      pack_b_panel(pc, kc, jc, nc, pb);
      for (int64_t jr = 0; jr < nc; jr += ks.nr) {
        int64_t nn = std::min<int64_t>(ks.nr, nc - jr);
        const T* bp = pb + (jr / ks.nr) * kc * ks.nr;
        for (int64_t s = s_begin; s < slivers; ++s) {
          int64_t mm = std::min<int64_t>(ks.mr, A.m - s * ks.mr);
          ks.fn(kc, A.sliver(ks, pc, s), bp, c + s * ks.mr * ldc + jc + jr, ldc, alpha, beta_eff, mm, nn);
        }
      }
    }
  }
}

}  // namespace nabla::cpu::NABLA_CPU_ISA::gemm_internal
