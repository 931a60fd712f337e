// The low-precision GEMM's kernels (gemm_lowp.h): the blocked driver, the packing routines that
// convert or pair the 16-bit operands, and the AVX512_BF16 and AMX-BF16 micro-kernels (AVX2 build
// only, behind target attributes: register.cpp runs them only where the CPU has the instructions).
//
//   for jc in N by nc:                 (16-bit C: float32 sums of rc rows of C in scratch)
//     for rc in M by rc_rows:
//       for pc in K by kc:             B block (kc x nc) packed into nr-wide slivers
//         for ic in rc by mc:          A block (mc x kc) packed into mr-tall slivers
//           for each (mr x nr) tile:   micro-kernel, float32 accumulators over kc
//       16-bit C: round the rc x nc sums (alpha, beta applied) into C, once
#include <algorithm>
#include <cstring>

#include "core/cpu/gemm_kernels.h"
#include "core/cpu/gemm_lowp.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

const LowpGemms& lowp_gemms();

namespace {

using namespace gemm_internal;

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

template <class T>
const uint16_t* bits(const T* p) {
  return reinterpret_cast<const uint16_t*>(p);  // BFloat16 and Half hold one uint16_t
}

// ---- conversions ---------------------------------------------------------------------------------

// dst[i] = float(src[i * stride]) for i < n.
template <class In>
void to_float(const In* src, int64_t stride, int64_t n, float* dst) {
  int64_t i = 0;
#ifdef NABLA_GEMM_AVX2
  if (stride == 1) {
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      if constexpr (std::is_same_v<In, BFloat16>) {
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
      } else {
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
      }
    }
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i * stride]);
}

#ifdef NABLA_GEMM_AVX2
// Eight floats rounded to nearest even, as BFloat16(float) / Half(float) do (NaN included).
inline __m128i round_to_bf16(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i hi = _mm256_srli_epi32(x, 16);
  __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(hi, _mm256_set1_epi32(1)))), 16);
  r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}
inline __m128i round_to_f16(__m256 v) {
  // F16C rounds as Half(float) does; only NaN differs (it keeps payload bits): make it sign | 0x7e00.
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m256 canonical =
      _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
  return _mm256_cvtps_ph(_mm256_blendv_ps(v, canonical, nan), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

// c[j] = Out(alpha * acc[j] + beta * c[j]) for j < n, rounded once; with beta == 0 C is not read.
template <class Out>
void store_rounded(const float* acc, int64_t n, float alpha, float beta, Out* c) {
  if constexpr (std::is_same_v<Out, float>) {
    if (beta == 0.0f) {
      for (int64_t j = 0; j < n; ++j) c[j] = alpha * acc[j];
    } else {
      for (int64_t j = 0; j < n; ++j) c[j] = alpha * acc[j] + beta * c[j];
    }
  } else {
#ifdef NABLA_GEMM_AVX2
    // Every element takes the vector path (the tail through a copy), so the bits of an element do
    // not depend on where a row segment starts or ends.
    auto eight = [&](const float* s, Out* d) {
      __m256 v = _mm256_mul_ps(_mm256_set1_ps(alpha), _mm256_loadu_ps(s));
      if (beta != 0.0f) {
        __m256 cv;
        to_float(d, 1, 8, reinterpret_cast<float*>(&cv));
        v = _mm256_fmadd_ps(_mm256_set1_ps(beta), cv, v);
      }
      __m128i r = std::is_same_v<Out, BFloat16> ? round_to_bf16(v) : round_to_f16(v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), r);
    };
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) eight(acc + j, c + j);
    if (j < n) {
      alignas(32) float s[8] = {};
      Out d[8] = {};
      std::memcpy(s, acc + j, (n - j) * sizeof(float));
      if (beta != 0.0f) std::memcpy(d, c + j, (n - j) * sizeof(Out));
      eight(s, d);
      std::memcpy(c + j, d, (n - j) * sizeof(Out));
    }
#else
    for (int64_t j = 0; j < n; ++j) {
      float v = alpha * acc[j];
      if (beta != 0.0f) v = v + beta * static_cast<float>(c[j]);
      c[j] = Out(v);
    }
#endif
  }
}

// ---- packing -------------------------------------------------------------------------------------
// The convert path packs float32 exactly as the float32 GEMM does (gemm_kernels.h: A as out[s][p][i],
// B as out[s][p][j]); the bfloat16 kernels pack 16-bit pairs along k. `tmp` holds mr (or nr) rows
// of kc floats for the transposing cases.

template <class In>
void pack_a_convert(const In* a, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int mr, float* out, float* tmp) {
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - s);
    const In* as = a + s * rsa;
    if (rsa == 1) {  // columns of A contiguous (a transposed operand)
      for (int64_t p = 0; p < kc; ++p) to_float(as + p * csa, 1, rows, out + p * mr);
    } else if (csa == 1) {  // rows contiguous: convert them, then transpose
      for (int64_t i = 0; i < rows; ++i) to_float(as + i * rsa, 1, kc, tmp + i * kc);
      transpose_copy(tmp, kc, rows, kc, out, mr);
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < rows; ++i) out[p * mr + i] = static_cast<float>(as[i * rsa + p * csa]);
    }
    if (rows < mr)
      for (int64_t p = 0; p < kc; ++p) std::fill(out + p * mr + rows, out + (p + 1) * mr, 0.0f);
    out += kc * mr;
  }
}

// B's panels of nr columns are A's panels of B transposed: the same packing with the strides swapped.
template <class In>
void pack_b_convert(const In* b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int nr, float* out, float* tmp) {
  pack_a_convert(b, csb, rsb, nc, kc, nr, out, tmp);
}

#ifdef NABLA_GEMM_AVX2
// out[2j] = r0[j], out[2j + 1] = r1[j] (0 without r1), for j < n: two rows of k become one row of pairs.
inline void interleave(const uint16_t* r0, const uint16_t* r1, int64_t n, uint16_t* out) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + j));
    __m256i y = r1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + j)) : _mm256_setzero_si256();
    __m256i lo = _mm256_unpacklo_epi16(x, y), hi = _mm256_unpackhi_epi16(x, y);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * j), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * j + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  for (; j < n; ++j) {
    out[2 * j] = r0[j];
    out[2 * j + 1] = r1 ? r1[j] : 0;
  }
}

// Pair q of source row i (src + i * lds, 16-bit values) to dst pair q * ldd + i, for i < rows and
// q < pairs: a 32-bit transpose, in 8x8 tiles.
inline void transpose_pairs(const uint16_t* src, int64_t lds, int64_t rows, int64_t pairs, uint16_t* dst, int64_t ldd) {
  int64_t i0 = 0;
  for (; i0 + 8 <= rows; i0 += 8) {
    int64_t q = 0;
    for (; q + 8 <= pairs; q += 8)
      transpose_tile_rows([&](int i) { return reinterpret_cast<const float*>(src + (i0 + i) * lds + 2 * q); },
                          reinterpret_cast<float*>(dst + 2 * (q * ldd + i0)), ldd);
    for (; q < pairs; ++q)
      for (int64_t i = i0; i < i0 + 8; ++i) std::memcpy(dst + 2 * (q * ldd + i), src + i * lds + 2 * q, 4);
  }
  for (int64_t i = i0; i < rows; ++i)
    for (int64_t q = 0; q < pairs; ++q) std::memcpy(dst + 2 * (q * ldd + i), src + i * lds + 2 * q, 4);
}

// A for VDPBF16PS: out[q][i][t] = A(i, 2q + t), zero past kc and mc: one 32-bit broadcast per row.
void pack_a_pairs(const BFloat16* a_in, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int mr, uint16_t* out,
                  float*) {
  const uint16_t* a = bits(a_in);
  const int64_t kp = (kc + 1) / 2;
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - s);
    const uint16_t* as = a + s * rsa;
    if (rows < mr || kc % 2) std::fill(out, out + kp * 2 * mr, uint16_t(0));
    if (csa == 1) {
      transpose_pairs(as, rsa, rows, kc / 2, out, mr);
      if (kc % 2)
        for (int64_t i = 0; i < rows; ++i) out[(kp - 1) * 2 * mr + 2 * i] = as[i * rsa + kc - 1];
    } else if (rsa == 1) {
      for (int64_t q = 0; q < kp; ++q)
        interleave(as + 2 * q * csa, 2 * q + 1 < kc ? as + (2 * q + 1) * csa : nullptr, rows, out + q * 2 * mr);
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < rows; ++i) out[(p / 2) * 2 * mr + 2 * i + p % 2] = as[i * rsa + p * csa];
    }
    out += kp * 2 * mr;
  }
}

// B for both bfloat16 kernels: out[q][j][t] = B(2q + t, j), zero past kc (up to `kpad` values of k)
// and past nc.
void pack_b_pairs_to(const BFloat16* b_in, int64_t rsb, int64_t csb, int64_t kc, int64_t kpad, int64_t nc, int nr,
                     uint16_t* out) {
  const uint16_t* b = bits(b_in);
  const int64_t kp = kpad / 2, full = kc / 2;
  for (int64_t s = 0; s < nc; s += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - s);
    const uint16_t* bs = b + s * csb;
    if (cols < nr || kc != kpad) std::fill(out, out + kp * 2 * nr, uint16_t(0));
    if (csb == 1) {
      for (int64_t q = 0; 2 * q < kc; ++q)
        interleave(bs + 2 * q * rsb, 2 * q + 1 < kc ? bs + (2 * q + 1) * rsb : nullptr, cols, out + q * 2 * nr);
    } else if (rsb == 1) {
      transpose_pairs(bs, csb, cols, full, out, nr);
      if (kc % 2)
        for (int64_t j = 0; j < cols; ++j) out[full * 2 * nr + 2 * j] = bs[j * csb + kc - 1];
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = 0; j < cols; ++j) out[(p / 2) * 2 * nr + 2 * j + p % 2] = bs[p * rsb + j * csb];
    }
    out += kp * 2 * nr;
  }
}
void pack_b_pairs(const BFloat16* b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int nr, uint16_t* out, float*) {
  pack_b_pairs_to(b, rsb, csb, kc, round_up(kc, 2), nc, nr, out);
}

// AMX tiles: A as mr rows of k (out[i][p], row length kc rounded up to 32), B as pairs (above).
constexpr int64_t kAmxK = 32;  // k values per tile row (64 bytes of bfloat16)
void pack_a_amx(const BFloat16* a_in, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int mr, uint16_t* out, float*) {
  const uint16_t* a = bits(a_in);
  const int64_t kpad = round_up(kc, kAmxK);
  for (int64_t s = 0; s < mc; s += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - s);
    const uint16_t* as = a + s * rsa;
    if (rows < mr || kc != kpad) std::fill(out, out + kpad * mr, uint16_t(0));
    if (csa == 1) {
      for (int64_t i = 0; i < rows; ++i) std::memcpy(out + i * kpad, as + i * rsa, kc * sizeof(uint16_t));
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < rows; ++i) out[i * kpad + p] = as[i * rsa + p * csa];
    }
    out += kpad * mr;
  }
}
void pack_b_amx(const BFloat16* b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int nr, uint16_t* out, float*) {
  pack_b_pairs_to(b, rsb, csb, kc, round_up(kc, kAmxK), nc, nr, out);
}

// ---- micro-kernels -------------------------------------------------------------------------------

#define NABLA_AVX512_BF16 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx512bf16,fma")))

// VDPBF16PS: an MR x 32 tile of float32 accumulators (MR rows of 2 zmm); per pair of k, two loads of B
// (16 columns x 2 k each) and one 32-bit broadcast of A per row.
template <int MR>
NABLA_AVX512_BF16 void ukernel_dpbf16(int64_t kc, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc,
                                      float alpha, float beta, int64_t m, int64_t n) {
  using S = Avx512<float>;
  constexpr int L = 16, NR = 32;
  __m512 r[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) r[i][0] = r[i][1] = S::zero();
  prefetch_tile(c, ldc, m, NR * sizeof(float));
  const int64_t kp = (kc + 1) / 2;
  for (int64_t q = 0; q < kp; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 2 * L);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + 2 * i, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      r[i][0] = _mm512_dpbf16_ps(r[i][0], av, b0);
      r[i][1] = _mm512_dpbf16_ps(r[i][1], av, b1);
    }
    a += 2 * MR;
    b += 2 * NR;
  }
  if (m == MR && n == NR) {
    const __m512 va = S::set1(alpha), vb = S::set1(beta);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
      __m512 x0 = S::mul(va, r[i][0]), x1 = S::mul(va, r[i][1]);
      if (beta != 0.0f) {
        x0 = S::fma(vb, S::loadu(ci), x0);
        x1 = S::fma(vb, S::loadu(ci + L), x1);
      }
      S::storeu(ci, x0);
      S::storeu(ci + L, x1);
    }
    return;
  }
  alignas(64) float acc[MR * NR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    S::storeu(acc + i * NR, r[i][0]);
    S::storeu(acc + i * NR + L, r[i][1]);
  }
  store_tile<float, NR>(acc, m, n, c, ldc, alpha, beta);
}

// AMX: a 32 x 32 block of C in four 16 x 16 float32 tiles (tmm0-3), A in tmm4-5 (16 rows x 32 k
// each), B in tmm6-7 (16 pairs of k x 16 columns each); per 32 values of k, four TDPBF16PS.
#define NABLA_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512dq,avx512vl,avx512bw,fma")))
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
NABLA_AMX void amx_begin() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&cfg);
}
NABLA_AMX void amx_end() { _tile_release(); }

NABLA_AMX void ukernel_amx(int64_t kc, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, float alpha,
                           float beta, int64_t m, int64_t n) {
  constexpr int64_t MR = 32, NR = 32;
  const int64_t kpad = round_up(kc, kAmxK), lda = kpad * 2;  // bytes between rows of A
  const bool direct = m == MR && n == NR && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  const int64_t ldcb = ldc * 4;
  __asm__ volatile("" ::: "memory");  // the tile loads below read what packing wrote
  if (direct && beta == 1.0f) {
    _tile_loadd(0, c, ldcb);
    _tile_loadd(1, c + 16, ldcb);
    _tile_loadd(2, c + 16 * ldc, ldcb);
    _tile_loadd(3, c + 16 * ldc + 16, ldcb);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const uint16_t* a1 = a + 16 * kpad;
  for (int64_t p = 0; p < kpad; p += kAmxK) {
    const uint16_t* bp = b + p * NR;  // pairs p/2 .. p/2 + 15, 2 * NR values each
    _tile_loadd(4, a + p, lda);
    _tile_loadd(6, bp, NR * 4);
    _tile_loadd(5, a1 + p, lda);
    _tile_loadd(7, bp + 32, NR * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (direct) {
    _tile_stored(0, c, ldcb);
    _tile_stored(1, c + 16, ldcb);
    _tile_stored(2, c + 16 * ldc, ldcb);
    _tile_stored(3, c + 16 * ldc + 16, ldcb);
    return;
  }
  alignas(64) float acc[MR * NR];
  _tile_stored(0, acc, NR * 4);
  _tile_stored(1, acc + 16, NR * 4);
  _tile_stored(2, acc + 16 * NR, NR * 4);
  _tile_stored(3, acc + 16 * NR + 16, NR * 4);
  store_tile<float, NR>(acc, m, n, c, ldc, alpha, beta);
}
#endif  // NABLA_GEMM_AVX2

// ---- the driver ----------------------------------------------------------------------------------

// One way to compute: packed element P (float for the convert path, bfloat16 bits for the others),
// tile and block sizes, the packing routines and the micro-kernel.
template <class In, class P>
struct LowpPath {
  int mr, nr;
  int64_t kc, mc, nc;
  int64_t kalign;  // packed slivers hold kc rounded up to this many values of k
  void (*pack_a)(const In* a, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int mr, P* out, float* tmp);
  void (*pack_b)(const In* b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int nr, P* out, float* tmp);
  void (*fn)(int64_t kc, const P* a, const P* b, float* c, int64_t ldc, float alpha, float beta, int64_t m, int64_t n);
  bool amx = false;
  double speed = 1.0;
};

template <class In>
LowpPath<In, float> convert_path(int64_t m) {
  const KernelSpec<float>& ks = kernel_spec_for_rows<float>(m);
  return {ks.mr, ks.nr, ks.kc, ks.mc, ks.nc, 1, pack_a_convert<In>, pack_b_convert<In>, ks.fn};
}

#ifdef NABLA_GEMM_AVX2
// The VDPBF16PS kernels, tallest first: kc counts values of k (256 pairs: B's 32 x kc sliver is 32 KB,
// as the float32 kernel's), mc rows of A (240 x 512 bfloat16, 240 KB) stay in L2.
LowpPath<BFloat16, uint16_t> dpbf16_path(int64_t m) {
  static const LowpPath<BFloat16, uint16_t> family[3] = {
      {12, 32, 512, 240, 4096, 2, pack_a_pairs, pack_b_pairs, ukernel_dpbf16<12>},
      {10, 32, 512, 240, 4096, 2, pack_a_pairs, pack_b_pairs, ukernel_dpbf16<10>},
      {8, 32, 512, 240, 4096, 2, pack_a_pairs, pack_b_pairs, ukernel_dpbf16<8>}};
  auto cost = [m](const LowpPath<BFloat16, uint16_t>& s) { return static_cast<double>(round_up(m, s.mr)) / s.speed; };
  const LowpPath<BFloat16, uint16_t>* best = &family[0];
  for (const auto& s : family)
    if (cost(s) < cost(*best)) best = &s;
  return *best;
}
// AMX: B's 32 x 512 sliver (32 KB) in L1, A's 256 x 512 block (256 KB) in L2.
LowpPath<BFloat16, uint16_t> amx_path() {
  LowpPath<BFloat16, uint16_t> p{32, 32, 512, 256, 4096, kAmxK, pack_a_amx, pack_b_amx, ukernel_amx};
  p.amx = true;
  return p;
}
#endif

// Rows [m0, m1) and columns [n0, n1) of C, single-threaded.
template <class In, class P, class Out>
void lowp_block(const LowpPath<In, P>& ks, int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k, float alpha,
                const In* a, int64_t rsa, int64_t csa, const In* b, int64_t rsb, int64_t csb, float beta, Out* c,
                int64_t ldc) {
  constexpr bool kStaged = !std::is_same_v<Out, float>;
  const int64_t kblocks = (k + ks.kc - 1) / ks.kc;
  // 16-bit C: the float32 sums of rc_rows x nc of C live in scratch until the last k block. With one
  // k block a block of A's rows is enough (B is packed once); with more, B is packed again for each
  // rc_rows, so they are several blocks of A (B packed once per 4 of them, 4 MB of sums).
  const int64_t nc_blk = kStaged && kblocks > 1 ? std::min<int64_t>(ks.nc, 1024) : ks.nc;
  const int64_t rc_blk = !kStaged ? m1 - m0 : kblocks > 1 ? 4 * ks.mc : ks.mc;
  const int64_t kc_max = std::min<int64_t>(ks.kc, std::max<int64_t>(k, 1)), kp_max = round_up(kc_max, ks.kalign);
  const int64_t mc_max = std::min<int64_t>(ks.mc, round_up(m1 - m0, ks.mr));
  const int64_t nc_max = std::min<int64_t>(nc_blk, round_up(n1 - n0, ks.nr));
  P* pa = thread_scratch<P>(Scratch::lowp_a, mc_max * kp_max);
  P* pb = thread_scratch<P>(Scratch::lowp_b, nc_max * kp_max);
  float* tmp = thread_scratch<float>(Scratch::lowp_t, std::max(ks.mr, ks.nr) * kc_max);
  const int64_t ldf = round_up(nc_max, 16);
  float* sums = kStaged ? thread_scratch<float>(Scratch::lowp_c, std::min(rc_blk, m1 - m0) * ldf) : nullptr;
#ifdef NABLA_GEMM_AVX2
  struct AmxScope {
    bool on;
    explicit AmxScope(bool amx) : on(amx) {
      if (on) amx_begin();
    }
    ~AmxScope() {
      if (on) amx_end();
    }
  } amx_scope(ks.amx);
#endif
  for (int64_t jc = n0; jc < n1; jc += nc_blk) {
    const int64_t nc = std::min<int64_t>(nc_blk, n1 - jc);
    for (int64_t rc = m0; rc < m1; rc += rc_blk) {
      const int64_t rc_end = std::min<int64_t>(m1, rc + rc_blk);
      for (int64_t pc = 0; pc < k; pc += ks.kc) {
        const int64_t kc = std::min<int64_t>(ks.kc, k - pc), kp = round_up(kc, ks.kalign);
        if (kblocks > 1 || rc == m0) ks.pack_b(b + pc * rsb + jc * csb, rsb, csb, kc, nc, ks.nr, pb, tmp);
        for (int64_t ic = rc; ic < rc_end; ic += ks.mc) {
          const int64_t mc = std::min<int64_t>(ks.mc, rc_end - ic);
          ks.pack_a(a + ic * rsa + pc * csa, rsa, csa, mc, kc, ks.mr, pa, tmp);
          for (int64_t jr = 0; jr < nc; jr += ks.nr) {
            const int64_t nn = std::min<int64_t>(ks.nr, nc - jr);
            const P* bp = pb + (jr / ks.nr) * kp * ks.nr;
            for (int64_t ir = 0; ir < mc; ir += ks.mr) {
              const int64_t mm = std::min<int64_t>(ks.mr, mc - ir);
              const P* ap = pa + (ir / ks.mr) * kp * ks.mr;
              if constexpr (kStaged) {
                ks.fn(kc, ap, bp, sums + (ic - rc + ir) * ldf + jr, ldf, 1.0f, pc == 0 ? 0.0f : 1.0f, mm, nn);
              } else {
                ks.fn(kc, ap, bp, c + (ic + ir) * ldc + jc + jr, ldc, alpha, pc == 0 ? beta : 1.0f, mm, nn);
              }
            }
          }
        }
      }
      if constexpr (kStaged)
        for (int64_t i = rc; i < rc_end; ++i) store_rounded(sums + (i - rc) * ldf, nc, alpha, beta, c + i * ldc + jc);
    }
  }
}

// Splits C over threads by tiles of m or n (whichever has more), as the float32 GEMM does.
template <class In, class P, class Out>
void lowp_run(const LowpPath<In, P>& ks, int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa,
              int64_t csa, const In* b, int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc) {
  const int64_t mt = (m + ks.mr - 1) / ks.mr, nt = (n + ks.nr - 1) / ks.nr;
  int nthreads = in_parallel_region() ? 1 : get_num_threads();
  if (m * n * k < 64 * 64 * 64) nthreads = 1;  // threading costs more than it saves
  const bool split_m = mt >= nt;
  const int64_t tiles = split_m ? mt : nt;
  nthreads = static_cast<int>(std::min<int64_t>(nthreads, tiles));
  if (nthreads <= 1) {
    lowp_block(ks, 0, m, 0, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    return;
  }
  parallel_for(0, nthreads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t lo = tiles * t / nthreads, hi = tiles * (t + 1) / nthreads;
      if (split_m) {
        lowp_block(ks, lo * ks.mr, std::min(m, hi * ks.mr), 0, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
      } else {
        lowp_block(ks, 0, m, lo * ks.nr, std::min(n, hi * ks.nr), k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
      }
    }
  });
}

float dot(const float* x, const float* y, int64_t k) {
  constexpr int kLanes = 16;
  int64_t p = 0;
  float s = 0.0f;
  if (k >= kLanes) {
    float acc[kLanes] = {};
    for (; p + kLanes <= k; p += kLanes)
      for (int u = 0; u < kLanes; ++u) acc[u] += x[p + u] * y[p + u];
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
    s = acc[0];
  }
  for (; p < k; ++p) s += x[p] * y[p];
  return s;
}

// Small products (and a few rows or columns): direct loops in float32 over converted rows, the
// same on every kernel.
template <class In, class Out>
void lowp_small(int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa, int64_t csa, const In* b,
                int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc) {
  constexpr int64_t kChunk = 256;
  float* arow = thread_scratch<float>(Scratch::lowp_a, k);
  float* bvec = thread_scratch<float>(Scratch::lowp_b, std::max(k, kChunk));
  float acc[kChunk];
  for (int64_t i = 0; i < m; ++i) {
    to_float(a + i * rsa, csa, k, arow);
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t nn = std::min(kChunk, n - j0);
      if (rsb == 1 && csb != 1) {  // columns of B contiguous: one dot product per element
        for (int64_t j = 0; j < nn; ++j) {
          to_float(b + (j0 + j) * csb, 1, k, bvec);
          acc[j] = dot(arow, bvec, k);
        }
      } else {
        std::fill(acc, acc + nn, 0.0f);
        for (int64_t p = 0; p < k; ++p) {
          to_float(b + p * rsb + j0 * csb, csb, nn, bvec);
          const float av = arow[p];
          for (int64_t j = 0; j < nn; ++j) acc[j] += av * bvec[j];
        }
      }
      store_rounded(acc, nn, alpha, beta, c + i * ldc + j0);
    }
  }
}

template <class In, class Out>
void gemm_lowp_impl(LowpKernel kernel, int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa,
                    int64_t csa, const In* b, int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0f) {  // C = beta * C (A and B unread)
    constexpr int64_t kMaxZeroRow = 256;
    const float zeros[kMaxZeroRow] = {};
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j0 = 0; j0 < n; j0 += kMaxZeroRow)
        store_rounded(zeros, std::min<int64_t>(kMaxZeroRow, n - j0), 1.0f, beta, c + i * ldc + j0);
    return;
  }
  if (m * n * k <= 16 * 16 * 16 || m < 4 || (n < 8 && csb == 1)) {
    lowp_small(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    return;
  }
#ifdef NABLA_GEMM_AVX2
  if constexpr (std::is_same_v<In, BFloat16>) {
    if (kernel == LowpKernel::amx_bf16)
      return lowp_run(amx_path(), m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    if (kernel == LowpKernel::avx512_bf16)
      return lowp_run(dpbf16_path(m), m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
  }
#endif
  lowp_run(convert_path<In>(m), m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}

}  // namespace

const LowpGemms& lowp_gemms() {
  static const LowpGemms table{gemm_lowp_impl<BFloat16, BFloat16>, gemm_lowp_impl<BFloat16, float>,
                               gemm_lowp_impl<Half, Half>, gemm_lowp_impl<Half, float>};
  return table;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
