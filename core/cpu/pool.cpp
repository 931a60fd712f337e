// Max and average pooling, 2-D, on the CPU (NCHW planes); 2x2 max pooling with stride 2 has AVX2
// and AVX-512 kernels.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/cpu/conv_common.h"

namespace nabla::cpu::NABLA_CPU_ISA {

using conv_internal::avx512_kernels;
using internal::pool_geom;
using internal::PoolGeom;

namespace {
#ifdef NABLA_GEMM_AVX2
// The first maximum of each window's four candidates (a, b: top row; c, d: bottom row), NaN winning:
// the window's value and its offset among {0, 1, W, W + 1}.
NABLA_AVX512 inline void max4_first(__m512 a, __m512 b, __m512 c, __m512 d, int32_t W, __m512* best_out,
                                    __m512i* off_out) {
  __m512i off;
  __m512 best;
  if (_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, d, _CMP_UNORD_Q)) {
    // Some NaN: a later candidate wins if it is larger, or NaN while the best is not.
    const __m512 cand[4] = {a, b, c, d};
    const int32_t offs[4] = {0, 1, W, W + 1};
    best = a;
    off = _mm512_setzero_si512();
    for (int k = 1; k < 4; ++k) {
      __mmask16 take =
          _mm512_cmp_ps_mask(cand[k], best, _CMP_GT_OQ) |
          (_mm512_cmp_ps_mask(cand[k], cand[k], _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
      best = _mm512_mask_blend_ps(take, best, cand[k]);
      off = _mm512_mask_blend_epi32(take, off, _mm512_set1_epi32(offs[k]));
    }
  } else {
    // No NaN: the maximum, then the first candidate equal to it (its own value, so -0 and +0 keep
    // the first one's sign, as the scalar loop does).
    const __m512 m = _mm512_max_ps(_mm512_max_ps(a, b), _mm512_max_ps(c, d));
    const __mmask16 ea = _mm512_cmp_ps_mask(a, m, _CMP_EQ_OQ), eb = _mm512_cmp_ps_mask(b, m, _CMP_EQ_OQ),
                    ec = _mm512_cmp_ps_mask(c, m, _CMP_EQ_OQ);
    best = _mm512_mask_blend_ps(ea, _mm512_mask_blend_ps(eb, _mm512_mask_blend_ps(ec, d, c), b), a);
    off = _mm512_mask_blend_epi32(
        ea,
        _mm512_mask_blend_epi32(eb, _mm512_mask_blend_epi32(ec, _mm512_set1_epi32(W + 1), _mm512_set1_epi32(W)),
                                _mm512_set1_epi32(1)),
        _mm512_setzero_si512());
  }
  *best_out = best;
  *off_out = off;
}

NABLA_AVX512 inline void store_idx16(int64_t* ir, __mmask16 out, __m512i idx32) {
  _mm512_mask_storeu_epi64(ir, static_cast<__mmask8>(out & 0xFF), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(idx32)));
  _mm512_mask_storeu_epi64(ir + 8, static_cast<__mmask8>(out >> 8),
                           _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(idx32, 1)));
}

// 2x2 windows, stride 2, over planes [p0, p1), AVX-512: 16 outputs of a row at a time, their two
// input rows deinterleaved by permutes. (Gathering the corners of 16 outputs across rows, to fill
// the lanes on narrow planes, measured slower: gathers are slow on the CPUs at hand.)
NABLA_AVX512 void maxpool2x2_avx512(const float* xp, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t p0,
                                    int64_t p1, float* yp, int64_t* ip) {
  const int64_t plane_out = Ho * Wo;
  const int32_t W32 = static_cast<int32_t>(W);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
  for (int64_t pl = p0; pl < p1; ++pl) {
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const float* r0 = xp + pl * H * W + 2 * oh * W;
      const float* r1 = r0 + W;
      float* yr = yp + pl * plane_out + oh * Wo;
      int64_t* ir = ip ? ip + pl * plane_out + oh * Wo : nullptr;
      for (int64_t ow = 0; ow < Wo; ow += 16) {
        const int64_t n = std::min<int64_t>(16, Wo - ow), c = 2 * ow;  // n outputs read 2n inputs per row
        const __mmask16 in_lo = n >= 8 ? __mmask16(0xFFFF) : __mmask16((1u << (2 * n)) - 1);
        const __mmask16 in_hi = n > 8 ? __mmask16((1u << (2 * n - 16)) - 1) : __mmask16(0);
        __m512 lo0 = _mm512_maskz_loadu_ps(in_lo, r0 + c), hi0 = _mm512_maskz_loadu_ps(in_hi, r0 + c + 16);
        __m512 lo1 = _mm512_maskz_loadu_ps(in_lo, r1 + c), hi1 = _mm512_maskz_loadu_ps(in_hi, r1 + c + 16);
        __m512 best;
        __m512i off;
        max4_first(_mm512_permutex2var_ps(lo0, even, hi0), _mm512_permutex2var_ps(lo0, odd, hi0),
                   _mm512_permutex2var_ps(lo1, even, hi1), _mm512_permutex2var_ps(lo1, odd, hi1), W32, &best, &off);
        const __mmask16 out = static_cast<__mmask16>((1u << n) - 1);  // n <= 16
        _mm512_mask_storeu_ps(yr + ow, out, best);
        // flat index = 2 * oh * W + 2 * (ow + lane) + offset
        if (ir)
          store_idx16(
              ir + ow, out,
              _mm512_add_epi32(_mm512_add_epi32(off, lane2), _mm512_set1_epi32(static_cast<int32_t>(2 * oh * W + c))));
      }
    }
  }
}

using Avx2f = gemm_internal::Avx2<float>;

// The same with AVX2 (CPUs without AVX-512): 8 outputs of a row at a time, masked loads and stores
// at the end of a row. The scalar loop's data-dependent branches cost ~20x this on random data.
inline __m256 blend_where(__m256 mask, __m256 if_false, __m256 if_true) {
  return _mm256_blendv_ps(if_false, if_true, mask);
}
inline __m256i blend_where(__m256 mask, __m256i if_false, __m256i if_true) {
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(if_false), _mm256_castsi256_ps(if_true), mask));
}

// max4_first for 8 lanes.
inline void max4_first(__m256 a, __m256 b, __m256 c, __m256 d, int32_t W, __m256* best_out, __m256i* off_out) {
  const __m256i o1 = _mm256_set1_epi32(1), oW = _mm256_set1_epi32(W), oW1 = _mm256_set1_epi32(W + 1);
  if (_mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c, d, _CMP_UNORD_Q)))) {
    const __m256 cand[4] = {a, b, c, d};
    const __m256i offs[4] = {_mm256_setzero_si256(), o1, oW, oW1};
    __m256 best = a;
    __m256i off = offs[0];
    for (int k = 1; k < 4; ++k) {
      __m256 take = _mm256_or_ps(
          _mm256_cmp_ps(cand[k], best, _CMP_GT_OQ),
          _mm256_and_ps(_mm256_cmp_ps(cand[k], cand[k], _CMP_UNORD_Q), _mm256_cmp_ps(best, best, _CMP_ORD_Q)));
      best = blend_where(take, best, cand[k]);
      off = blend_where(take, off, offs[k]);
    }
    *best_out = best;
    *off_out = off;
    return;
  }
  const __m256 m = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
  const __m256 ea = _mm256_cmp_ps(a, m, _CMP_EQ_OQ), eb = _mm256_cmp_ps(b, m, _CMP_EQ_OQ),
               ec = _mm256_cmp_ps(c, m, _CMP_EQ_OQ);
  *best_out = blend_where(ea, blend_where(eb, blend_where(ec, d, c), b), a);
  *off_out = blend_where(ea, blend_where(eb, blend_where(ec, oW1, oW), o1), _mm256_setzero_si256());
}

// The even and the odd elements of the 16 floats lo:hi, in order.
inline void deinterleave(__m256 lo, __m256 hi, __m256* even, __m256* odd) {
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

void maxpool2x2_avx2(const float* xp, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t p0, int64_t p1, float* yp,
                     int64_t* ip) {
  const int64_t plane_out = Ho * Wo;
  const int32_t W32 = static_cast<int32_t>(W);
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  for (int64_t pl = p0; pl < p1; ++pl) {
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const float* r0 = xp + pl * H * W + 2 * oh * W;
      const float* r1 = r0 + W;
      float* yr = yp + pl * plane_out + oh * Wo;
      int64_t* ir = ip ? ip + pl * plane_out + oh * Wo : nullptr;
      for (int64_t ow = 0; ow < Wo; ow += 8) {
        const int64_t n = std::min<int64_t>(8, Wo - ow), c = 2 * ow;  // n outputs read 2n inputs per row
        __m256 a, b, cc, d;
        if (n == 8) {
          deinterleave(_mm256_loadu_ps(r0 + c), _mm256_loadu_ps(r0 + c + 8), &a, &b);
          deinterleave(_mm256_loadu_ps(r1 + c), _mm256_loadu_ps(r1 + c + 8), &cc, &d);
        } else {
          const __m256i in_lo = Avx2f::first(std::min<int64_t>(8, 2 * n)),
                        in_hi = Avx2f::first(std::max<int64_t>(0, 2 * n - 8));
          deinterleave(_mm256_maskload_ps(r0 + c, in_lo), _mm256_maskload_ps(r0 + c + 8, in_hi), &a, &b);
          deinterleave(_mm256_maskload_ps(r1 + c, in_lo), _mm256_maskload_ps(r1 + c + 8, in_hi), &cc, &d);
        }
        __m256 best;
        __m256i off;
        max4_first(a, b, cc, d, W32, &best, &off);
        // flat index = 2 * oh * W + 2 * (ow + lane) + offset
        const __m256i idx =
            _mm256_add_epi32(_mm256_add_epi32(off, lane2), _mm256_set1_epi32(static_cast<int32_t>(2 * oh * W + c)));
        const __m256i i0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(idx)),
                      i1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(idx, 1));
        if (n == 8) {
          _mm256_storeu_ps(yr + ow, best);
          if (ir) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(ir + ow), i0);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(ir + ow + 4), i1);
          }
        } else {
          const __m256i out = Avx2f::first(n);
          _mm256_maskstore_ps(yr + ow, out, best);
          if (ir) {
            _mm256_maskstore_epi64(reinterpret_cast<long long*>(ir + ow),
                                   _mm256_cvtepi32_epi64(_mm256_castsi256_si128(out)), i0);
            _mm256_maskstore_epi64(reinterpret_cast<long long*>(ir + ow + 4),
                                   _mm256_cvtepi32_epi64(_mm256_extracti128_si256(out, 1)), i1);
          }
        }
      }
    }
  }
}
#else
void maxpool2x2_avx512(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*, int64_t*) {}
void maxpool2x2_avx2(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*, int64_t*) {}
#endif

// 2x2 windows, stride 2, over planes [p0, p1), any float type: the common case, without bounds
// checks. A later value wins if it is larger, or NaN while the best is not.
template <class T>
void maxpool2x2(const T* xp, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t p0, int64_t p1, T* yp, int64_t* ip) {
  for (int64_t pl = p0; pl < p1; ++pl) {
    const T* xpl = xp + pl * H * W;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const T* r0 = xpl + (2 * oh) * W;
      const T* r1 = r0 + W;
      T* yr = yp + (pl * Ho + oh) * Wo;
      int64_t* ir = ip ? ip + (pl * Ho + oh) * Wo : nullptr;
      const int64_t rbase = 2 * oh * W;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t c = 2 * ow;
        T best = r0[c];
        int64_t bi = c;
        T v = r0[c + 1];
        bool t = (v > best) | ((v != v) & (best == best));
        best = t ? v : best;
        bi = t ? c + 1 : bi;
        v = r1[c];
        t = (v > best) | ((v != v) & (best == best));
        best = t ? v : best;
        bi = t ? c + W : bi;
        v = r1[c + 1];
        t = (v > best) | ((v != v) & (best == best));
        best = t ? v : best;
        bi = t ? c + W + 1 : bi;
        yr[ow] = best;
        if (ir) ir[ow] = rbase + bi;
      }
    }
  }
}

// First valid kernel offset and one past the last for output position o along one axis; returns
// the window's start.
inline int64_t pool_window(int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t k, int64_t n, int64_t* lo,
                           int64_t* hi) {
  int64_t start = o * stride - pad;
  *lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
  *hi = start >= n ? 0 : std::min<int64_t>(k, (n - start + dil - 1) / dil);
  return start;
}

// Any window, stride, padding and dilation over planes [p0, p1): NaN propagates, the first
// maximum wins.
template <class T>
void maxpool_general(const T* xp, const PoolGeom& g, const Pool2dParams& p, int64_t p0, int64_t p1, T* yp,
                     int64_t* ip) {
  for (int64_t pl = p0; pl < p1; ++pl) {
    const T* xpl = xp + pl * g.H * g.W;
    T* ypl = yp + pl * g.Ho * g.Wo;
    int64_t* ipl = ip ? ip + pl * g.Ho * g.Wo : nullptr;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      int64_t ki0, ki1;
      int64_t h0 = pool_window(oh, p.stride[0], p.padding[0], p.dilation[0], p.kernel[0], g.H, &ki0, &ki1);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        int64_t kj0, kj1;
        int64_t w0 = pool_window(ow, p.stride[1], p.padding[1], p.dilation[1], p.kernel[1], g.W, &kj0, &kj1);
        T best = -std::numeric_limits<T>::infinity();
        int64_t bi = -1;
        for (int64_t ki = ki0; ki < ki1; ++ki) {
          const T* row = xpl + (h0 + ki * p.dilation[0]) * g.W;
          for (int64_t kj = kj0; kj < kj1; ++kj) {
            int64_t iw = w0 + kj * p.dilation[1];
            T v = row[iw];
            if (bi < 0 || v > best || (v != v && best == best)) {  // NaN propagates, first max wins
              best = v;
              bi = (h0 + ki * p.dilation[0]) * g.W + iw;
            }
          }
        }
        ypl[oh * g.Wo + ow] = best;
        if (ipl) ipl[oh * g.Wo + ow] = bi < 0 ? 0 : bi;
      }
    }
  }
}
}  // namespace

void max_pool2d(const Tensor& x_in, const Pool2dParams& p, const Tensor& out, const Tensor& indices) {
  if (lowp::is_lowp(x_in.dtype())) {  // through float32: the maxima are the same values
    Tensor y = f32_out(out);
    max_pool2d(as_f32(x_in), p, y, indices);
    return store_out(y, out);
  }
  Tensor x = contig(x_in);
  PoolGeom g = pool_geom(x, out);
  NABLA_CHECK(ValueError, out.is_contiguous() && (!indices.defined() || indices.is_contiguous()),
              "max_pool2d: outputs must be contiguous");
  const bool simple = p.padding[0] == 0 && p.padding[1] == 0 && p.dilation[0] == 1 && p.dilation[1] == 1 &&
                      p.kernel[0] == 2 && p.kernel[1] == 2 && p.stride[0] == 2 && p.stride[1] == 2 && g.Ho * 2 <= g.H &&
                      g.Wo * 2 <= g.W;
  visit_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    int64_t* ip = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;  // undefined: values only
    // Indices are computed in int32 lanes: planes below 2^30 elements.
    const bool vectorized = simple && std::is_same_v<T, float> && g.H * g.W < (int64_t(1) << 30);
    const bool avx512 = vectorized && avx512_kernels();
#ifdef NABLA_GEMM_AVX2
    const bool avx2 = vectorized && !avx512;
#else
    const bool avx2 = false;
#endif
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.Ho * g.Wo, 1)),
                 [&](int64_t a, int64_t b) {
                   if constexpr (std::is_same_v<T, float>) {
                     if (avx512) return maxpool2x2_avx512(xp, g.H, g.W, g.Ho, g.Wo, a, b, yp, ip);
                     if (avx2) return maxpool2x2_avx2(xp, g.H, g.W, g.Ho, g.Wo, a, b, yp, ip);
                   }
                   if (simple) return maxpool2x2(xp, g.H, g.W, g.Ho, g.Wo, a, b, yp, ip);
                   maxpool_general(xp, g, p, a, b, yp, ip);
                 });
  });
}

void max_pool2d_backward(const Tensor& gy_in, const Tensor& indices_in, const Tensor& gx) {
  if (lowp::is_lowp(gy_in.dtype())) {  // overlapping windows sum in float32, rounded once
    Tensor g = f32_out(gx);
    max_pool2d_backward(as_f32(gy_in), indices_in, g);
    return store_out(g, gx);
  }
  Tensor gy = contig(gy_in), indices = contig(indices_in);
  NABLA_CHECK(ValueError, gx.is_contiguous(), "max_pool2d_backward: grad_input must be contiguous");
  PoolGeom g = pool_geom(gx, gy);
  visit_float(gy.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    const int64_t* ip = indices.data_ptr<int64_t>();
    T* gxp = static_cast<T*>(gx.data_ptr());
    int64_t plane_out = g.Ho * g.Wo, plane_in = g.H * g.W;
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(plane_out, 1)), [&](int64_t a, int64_t b) {
      for (int64_t pl = a; pl < b; ++pl) {
        // Each plane is zeroed right before its scatter, while it is in cache.
        T* gxpl = gxp + pl * plane_in;
        std::fill(gxpl, gxpl + plane_in, T(0));
        const int64_t* ipl = ip + pl * plane_out;
        const T* gypl = gyp + pl * plane_out;
        for (int64_t o = 0; o < plane_out; ++o) gxpl[ipl[o]] += gypl[o];
      }
    });
  });
}

namespace {
// Window bounds and divisor of avg_pool2d at (oh, ow), following PyTorch.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
inline AvgWindow avg_window(const Pool2dParams& p, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
  int64_t h1 = std::min(h0 + p.kernel[0], H + p.padding[0]), w1 = std::min(w0 + p.kernel[1], W + p.padding[1]);
  int64_t pool = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, H);
  w1 = std::min(w1, W);
  int64_t div = p.count_include_pad ? pool : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, std::max<int64_t>(div, 1)};
}
}  // namespace

void avg_pool2d(const Tensor& x_in, const Pool2dParams& p, const Tensor& out) {
  if (lowp::is_lowp(x_in.dtype())) {  // the float32 kernel's double sums, rounded once
    Tensor y = f32_out(out);
    avg_pool2d(as_f32(x_in), p, y);
    return store_out(y, out);
  }
  Tensor x = contig(x_in);
  PoolGeom g = pool_geom(x, out);
  NABLA_CHECK(ValueError, out.is_contiguous(), "avg_pool2d: output must be contiguous");
  visit_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.Ho * g.Wo, 1)),
                 [&](int64_t a, int64_t b) {
                   for (int64_t pl = a; pl < b; ++pl) {
                     const T* xpl = xp + pl * g.H * g.W;
                     for (int64_t oh = 0; oh < g.Ho; ++oh)
                       for (int64_t ow = 0; ow < g.Wo; ++ow) {
                         AvgWindow w = avg_window(p, g.H, g.W, oh, ow);
                         double s = 0;
                         for (int64_t ih = w.h0; ih < w.h1; ++ih)
                           for (int64_t iw = w.w0; iw < w.w1; ++iw) s += xpl[ih * g.W + iw];
                         yp[(pl * g.Ho + oh) * g.Wo + ow] = static_cast<T>(s / static_cast<double>(w.divisor));
                       }
                   }
                 });
  });
}

void avg_pool2d_backward(const Tensor& gy_in, const Pool2dParams& p, const Tensor& gx) {
  if (lowp::is_lowp(gy_in.dtype())) {
    Tensor g = f32_out(gx);
    avg_pool2d_backward(as_f32(gy_in), p, g);
    return store_out(g, gx);
  }
  Tensor gy = contig(gy_in);
  NABLA_CHECK(ValueError, gx.is_contiguous(), "avg_pool2d_backward: grad_input must be contiguous");
  PoolGeom g = pool_geom(gx, gy);
  fill(gx, 0);
  visit_float(gy.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    T* gxp = static_cast<T*>(gx.data_ptr());
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.Ho * g.Wo, 1)),
                 [&](int64_t a, int64_t b) {
                   for (int64_t pl = a; pl < b; ++pl) {
                     T* gpl = gxp + pl * g.H * g.W;
                     for (int64_t oh = 0; oh < g.Ho; ++oh)
                       for (int64_t ow = 0; ow < g.Wo; ++ow) {
                         AvgWindow w = avg_window(p, g.H, g.W, oh, ow);
                         T v = gyp[(pl * g.Ho + oh) * g.Wo + ow] / static_cast<T>(w.divisor);
                         for (int64_t ih = w.h0; ih < w.h1; ++ih)
                           for (int64_t iw = w.w0; iw < w.w1; ++iw) gpl[ih * g.W + iw] += v;
                       }
                   }
                 });
  });
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
