// CPU convolution and pooling kernels, NCHW.
//
// Convolutions are GEMMs between the weights and the images' patch matrices, which are never
// materialized whole: the patches are packed straight from the image into the GEMM's panels.
// Which packing, per shape (each measured faster than the others where it is used):
// - few taps per output (a first layer on images), AVX-512: direct kernels, no GEMM;
// - stride 1 where the padding adds little width: "padded rows" (the image copied into a padded
//   buffer, outputs computed over whole padded rows), so packing is contiguous copies; the input
//   gradient then runs as a convolution with flipped weights through the same path;
// - otherwise, forward packing gathers each tap (AVX-512 gathers, or row segments), the input
//   gradient is W^T @ gy followed by col2im, and the weight gradient is one GEMM per thread over
//   all its images, with the transposed patches gathered on the fly (AVX-512) or unfolded.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/gemm_kernels.h"
#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/impl.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

struct ConvGeom {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, G, Cg, Og;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t ckk() const { return Cg * kh * kw; }
  int64_t hw_out() const { return Ho * Wo; }
  bool is_pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

ConvGeom geom(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
  ConvGeom g{};
  g.N = x.sizes()[0];
  g.C = x.sizes()[1];
  g.H = x.sizes()[2];
  g.W = x.sizes()[3];
  g.O = w.sizes()[0];
  g.kh = w.sizes()[2];
  g.kw = w.sizes()[3];
  g.Ho = y.sizes()[2];
  g.Wo = y.sizes()[3];
  g.G = p.groups;
  g.Cg = g.C / g.G;
  g.Og = g.O / g.G;
  g.sh = p.stride[0];
  g.sw = p.stride[1];
  g.ph = p.padding[0];
  g.pw = p.padding[1];
  g.dh = p.dilation[0];
  g.dw = p.dilation[1];
  return g;
}

// Whether the AVX-512 paths below run (cpu::vector_isa(), chosen once at start-up); never in the
// portable build.
bool avx512_kernels() {
#ifdef NABLA_GEMM_AVX2
  return vector_isa() == Isa::avx512;
#else
  return false;
#endif
}

// col (Cg*kh*kw, Ho*Wo) <- patches of one image's group (Cg, H, W); column stride ldcol.
template <class T>
void im2col(const T* x, const ConvGeom& g, T* col, int64_t ldcol) {
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        T* row = col + ((c * g.kh + ki) * g.kw + kj) * ldcol;
        const T* xc = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          T* r = row + oh * g.Wo;
          if (ih < 0 || ih >= g.H) {
            std::fill(r, r + g.Wo, T(0));
            continue;
          }
          const T* xr = xc + ih * g.W;
          int64_t off = kj * g.dw - g.pw;
          if (g.sw == 1) {
            // iw = ow + off must lie in [0, W)
            int64_t lo = std::clamp<int64_t>(-off, 0, g.Wo), hi = std::clamp<int64_t>(g.W - off, lo, g.Wo);
            std::fill(r, r + lo, T(0));
            std::memcpy(r + lo, xr + lo + off, (hi - lo) * sizeof(T));
            std::fill(r + hi, r + g.Wo, T(0));
          } else {
            for (int64_t ow = 0; ow < g.Wo; ++ow) {
              int64_t iw = ow * g.sw + off;
              r[ow] = (iw >= 0 && iw < g.W) ? xr[iw] : T(0);
            }
          }
        }
      }
    }
  }
}

// x (Cg, H, W) += patches in col (the adjoint of im2col).
template <class T>
void col2im(const T* col, const ConvGeom& g, T* x, int64_t ldcol) {
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const T* row = col + ((c * g.kh + ki) * g.kw + kj) * ldcol;
        T* xc = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          const T* r = row + oh * g.Wo;
          T* xr = xc + ih * g.W;
          int64_t off = kj * g.dw - g.pw;
          if (g.sw == 1) {
            int64_t lo = std::clamp<int64_t>(-off, 0, g.Wo), hi = std::clamp<int64_t>(g.W - off, lo, g.Wo);
            for (int64_t ow = lo; ow < hi; ++ow) xr[ow + off] += r[ow];
          } else {
            for (int64_t ow = 0; ow < g.Wo; ++ow) {
              int64_t iw = ow * g.sw + off;
              if (iw >= 0 && iw < g.W) xr[iw] += r[ow];
            }
          }
        }
      }
    }
  }
}

// out[i] = sum over t < parts of partial[t * total + i]: the weight gradient from per-thread shares.
template <class T>
void sum_shares(const T* partial, int64_t parts, int64_t total, T* out) {
  parallel_for(0, total, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      T v = partial[i];
      for (int64_t t = 1; t < parts; ++t) v += partial[t * total + i];
      out[i] = v;
    }
  });
}

// A weight gradient summed over the images in shares, one per thread: f(n_begin, n_end, partial)
// writes the whole gradient (`total` values) of images [n_begin, n_end) to `partial`, and the
// partial gradients are summed into out.
template <class T, class F>
void over_image_shares(int64_t N, int64_t total, T* out, const F& f) {
  const int64_t parts = std::clamp<int64_t>(get_num_threads(), 1, std::max<int64_t>(N, 1));
  Tensor acc = detail::make_empty({parts * total}, dtype_of<T>(), kCPU);
  T* accp = acc.data_ptr<T>();
  parallel_for(0, parts, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) f(N * t / parts, N * (t + 1) / parts, accp + t * total);
  });
  sum_shares(accp, parts, total, out);
}

// Copies C planes of H rows of W values from src into dst, plane c row h going to
// dst + c * dst_plane + h * dst_row: an image into the interior of a padded buffer.
template <class T>
void copy_planes(const T* src, int64_t C, int64_t H, int64_t W, T* dst, int64_t dst_plane, int64_t dst_row) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h) std::memcpy(dst + c * dst_plane + h * dst_row, src + (c * H + h) * W, W * sizeof(T));
}

}  // namespace

// Packs B(p0:p0+kc, j0:j0+nc) of one image's patch matrix (rows p = (c, ki, kj), columns
// j = (oh, ow)) straight from the image into nr-column slivers: im2col fused into GEMM packing.
#ifdef NABLA_GEMM_AVX2
#define NABLA_DC_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma")))
// 16 patch values of one tap: x[base + ih * W + iw] at the shifted positions, 0 outside the image.
NABLA_DC_AVX512 inline __m512 gather_tap(const float* x, __m512i ih, __m512i iw, __m512i dy, __m512i dx, __m512i base,
                                        __m512i vH, __m512i vW, __m512i zero, __mmask16 live) {
  ih = _mm512_add_epi32(ih, dy);
  iw = _mm512_add_epi32(iw, dx);
  __mmask16 m = live & _mm512_cmpge_epi32_mask(ih, zero) & _mm512_cmplt_epi32_mask(ih, vH) &
                _mm512_cmpge_epi32_mask(iw, zero) & _mm512_cmplt_epi32_mask(iw, vW);
  __m512i idx = _mm512_add_epi32(base, _mm512_add_epi32(_mm512_mullo_epi32(ih, vW), iw));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, x, 4);
}

// The im2col packing of Im2colPacker for 32-column slivers with AVX-512 gathers: the input
// coordinates of a sliver's 32 output positions are computed once, and each tap (c, ki, kj) is then
// two masked gathers (padding reads as 0), instead of a row-segment walk with short copies.
NABLA_DC_AVX512 void im2col_pack32(const float* x, int64_t H, int64_t W, int64_t Wo, int64_t kh, int64_t kw,
                                  int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t p0,
                                  int64_t kc, int64_t j0, int64_t nc, float* out) {
  const int64_t khw = kh * kw;
  for (int64_t js = j0; js < j0 + nc; js += 32) {
    const int64_t cols = std::min<int64_t>(32, j0 + nc - js);
    float* o = out + ((js - j0) / 32) * kc * 32;
    alignas(64) int32_t ihb[32], iwb[32];
    for (int t = 0; t < 32; ++t) {
      int64_t j = js + std::min<int64_t>(t, cols - 1);
      ihb[t] = static_cast<int32_t>((j / Wo) * sh - ph);
      iwb[t] = static_cast<int32_t>((j % Wo) * sw - pw);
    }
    __m512i ih0 = _mm512_load_si512(ihb), ih1 = _mm512_load_si512(ihb + 16);
    __m512i iw0 = _mm512_load_si512(iwb), iw1 = _mm512_load_si512(iwb + 16);
    const __mmask16 live0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
    const __mmask16 live1 = cols > 16 ? __mmask16(cols >= 32 ? 0xFFFF : (1u << (cols - 16)) - 1) : __mmask16(0);
    const __m512i vH = _mm512_set1_epi32(static_cast<int32_t>(H)), vW = _mm512_set1_epi32(static_cast<int32_t>(W));
    const __m512i zero = _mm512_setzero_si512();
    int64_t c = p0 / khw, r = p0 % khw, ki = r / kw, kj = r % kw;
    for (int64_t p = 0; p < kc; ++p) {
      const __m512i dy = _mm512_set1_epi32(static_cast<int32_t>(ki * dh)), dx = _mm512_set1_epi32(static_cast<int32_t>(kj * dw));
      const __m512i base = _mm512_set1_epi32(static_cast<int32_t>(c * H * W));
      _mm512_store_ps(o + p * 32, gather_tap(x, ih0, iw0, dy, dx, base, vH, vW, zero, live0));
      _mm512_store_ps(o + p * 32 + 16, gather_tap(x, ih1, iw1, dy, dx, base, vH, vW, zero, live1));
      if (++kj == kw) {
        kj = 0;
        if (++ki == kh) {
          ki = 0;
          ++c;
        }
      }
    }
  }
}
#endif

template <class T>
struct Im2colPacker {
  const T* x;  // (Cg, H, W) of one image and group
  const ConvGeom& g;
  int nr;
  void operator()(int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) const {
#ifdef NABLA_GEMM_AVX2
    if constexpr (std::is_same_v<T, float>) {
      // 32-wide slivers are the AVX-512 kernel's; indices must fit in int32.
      if (nr == 32 && g.Cg * g.H * g.W < (int64_t(1) << 31)) {
        im2col_pack32(x, g.H, g.W, g.Wo, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, p0, kc, j0, nc, out);
        return;
      }
    }
#endif
    const int64_t khw = g.kh * g.kw;
    for (int64_t js = j0; js < j0 + nc; js += nr) {
      int64_t cols = std::min<int64_t>(nr, j0 + nc - js);
      T* o = out + ((js - j0) / nr) * kc * nr;
      for (int64_t p = p0; p < p0 + kc; ++p) {
        int64_t c = p / khw, r = p % khw, ki = r / g.kw, kj = r % g.kw;
        const T* xc = x + c * g.H * g.W;
        T* row = o + (p - p0) * nr;
        int64_t j = js, jj = 0;
        while (jj < cols) {
          int64_t oh = j / g.Wo, ow = j % g.Wo;
          int64_t seg = std::min<int64_t>(cols - jj, g.Wo - ow);
          int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) {
            std::fill(row + jj, row + jj + seg, T(0));
          } else {
            const T* xr = xc + ih * g.W;
            int64_t iw0 = ow * g.sw - g.pw + kj * g.dw;
            if (g.sw == 1) {
              // iw = iw0 + t must lie in [0, W)
              int64_t lo = std::clamp<int64_t>(-iw0, 0, seg), hi = std::clamp<int64_t>(g.W - iw0, lo, seg);
              std::fill(row + jj, row + jj + lo, T(0));
              std::memcpy(row + jj + lo, xr + iw0 + lo, (hi - lo) * sizeof(T));
              std::fill(row + jj + hi, row + jj + seg, T(0));
            } else {
              for (int64_t t = 0; t < seg; ++t) {
                int64_t iw = iw0 + t * g.sw;
                row[jj + t] = (iw >= 0 && iw < g.W) ? xr[iw] : T(0);
              }
            }
          }
          jj += seg;
          j += seg;
        }
        std::fill(row + cols, row + nr, T(0));
      }
    }
  }
};

// ---- direct convolution for few input taps (AVX-512) ---------------------------------------------
// When each output sees few input values (C_in * kh * kw small, e.g. a first layer on images), the
// GEMM's packing costs more than its arithmetic. This kernel instead walks output rows, keeping
// 2 vectors x up to 8 output channels of accumulators in registers, and adds each tap's shifted
// input row times its weight. Stride 1, dilation 1, one group, float, rows of at most 32.
#ifdef NABLA_GEMM_AVX2

// Splits O output channels into blocks for the direct kernels, whose accumulators live in
// registers: f(std::integral_constant<int, OB>{}, o0) for blocks of OBmax channels, then one
// block of the channels left over (fewer than OBmax).
template <int R, class F>
void channel_tail(int64_t rest, int64_t o0, const F& f) {
  if constexpr (R >= 1) {
    if (rest == R) f(std::integral_constant<int, R>{}, o0);
    else channel_tail<R - 1>(rest, o0, f);
  }
}

template <int OBmax, class F>
void over_channel_blocks(int64_t O, const F& f) {
  int64_t o = 0;
  for (; o + OBmax <= O; o += OBmax) f(std::integral_constant<int, OBmax>{}, o);
  channel_tail<OBmax - 1>(O - o, o, f);
}

template <int OB>
NABLA_DC_AVX512 void direct_rows(const float* xpad, int64_t Hp, int64_t Wp, int64_t C, int64_t kh, int64_t kw,
                                 const float* w, const float* bias, int64_t o0, int64_t Ho, int64_t Wo, float* y) {
  const __mmask16 m0 = Wo >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << Wo) - 1);
  const __mmask16 m1 = Wo > 16 ? __mmask16((1u << (Wo - 16)) - 1) : __mmask16(0);
  const int64_t ckk = C * kh * kw;
  for (int64_t oy = 0; oy < Ho; ++oy) {
    // Every loop over the accumulators is unrolled: one that indexes them with a variable makes
    // GCC keep them in memory (see ukernel_avx2 in gemm_kernels.h).
    __m512 acc[OB][2];
#pragma GCC unroll 8
    for (int ob = 0; ob < OB; ++ob) acc[ob][0] = acc[ob][1] = _mm512_set1_ps(bias ? bias[o0 + ob] : 0.0f);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        const float* row = xpad + (c * Hp + oy + ki) * Wp;
        for (int64_t kj = 0; kj < kw; ++kj) {
          __m512 x0 = _mm512_loadu_ps(row + kj), x1 = _mm512_loadu_ps(row + kj + 16);
          const float* wt = w + o0 * ckk + (c * kh + ki) * kw + kj;
#pragma GCC unroll 8
          for (int ob = 0; ob < OB; ++ob) {
            __m512 wv = _mm512_set1_ps(wt[ob * ckk]);
            acc[ob][0] = _mm512_fmadd_ps(wv, x0, acc[ob][0]);
            acc[ob][1] = _mm512_fmadd_ps(wv, x1, acc[ob][1]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int ob = 0; ob < OB; ++ob) {
      float* yr = y + ((o0 + ob) * Ho + oy) * Wo;
      _mm512_mask_storeu_ps(yr, m0, acc[ob][0]);
      if (m1) _mm512_mask_storeu_ps(yr + 16, m1, acc[ob][1]);
    }
  }
}

// ---- the same direct kernels with AVX2 (CPUs without AVX-512) ------------------------------------
// A row of up to 32 outputs is NV <= 4 8-lane vectors, the last one stored under a mask. The 16
// vector registers hold OB x NV accumulators, the NV input vectors and a broadcast weight.

// Lanes [0, n) all ones, the rest zero (n <= 8).
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline float sum_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

template <int OB, int NV>
void direct_rows_avx2(const float* xpad, int64_t Hp, int64_t Wp, int64_t C, int64_t kh, int64_t kw, const float* w,
                      const float* bias, int64_t o0, int64_t Ho, int64_t Wo, float* y) {
  const __m256i last = first_lanes(Wo - 8 * (NV - 1));
  const int64_t ckk = C * kh * kw;
  for (int64_t oy = 0; oy < Ho; ++oy) {
    __m256 acc[OB][NV];  // in registers: every loop over it is unrolled (see direct_rows)
#pragma GCC unroll 8
    for (int ob = 0; ob < OB; ++ob)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[ob][v] = _mm256_set1_ps(bias ? bias[o0 + ob] : 0.0f);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        const float* row = xpad + (c * Hp + oy + ki) * Wp;
        for (int64_t kj = 0; kj < kw; ++kj) {
          __m256 xv[NV];
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) xv[v] = _mm256_loadu_ps(row + kj + 8 * v);
          const float* wt = w + o0 * ckk + (c * kh + ki) * kw + kj;
#pragma GCC unroll 8
          for (int ob = 0; ob < OB; ++ob) {
            const __m256 wv = _mm256_broadcast_ss(wt + ob * ckk);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[ob][v] = _mm256_fmadd_ps(wv, xv[v], acc[ob][v]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int ob = 0; ob < OB; ++ob) {
      float* yr = y + ((o0 + ob) * Ho + oy) * Wo;
#pragma GCC unroll 4
      for (int v = 0; v + 1 < NV; ++v) _mm256_storeu_ps(yr + 8 * v, acc[ob][v]);
      _mm256_maskstore_ps(yr + 8 * (NV - 1), last, acc[ob][NV - 1]);
    }
  }
}

// All output channels of one image: blocks of as many channels as the registers allow.
template <int NV>
void direct_image_avx2(const float* xpad, int64_t Hp, int64_t Wp, const ConvGeom& g, const float* w, const float* bias,
                       float* y) {
  constexpr int OBmax = NV == 1 ? 8 : NV == 2 ? 6 : NV == 3 ? 4 : 2;  // OB * NV + NV + 1 <= 16
  over_channel_blocks<OBmax>(g.O, [&](auto ob, int64_t o) {
    direct_rows_avx2<decltype(ob)::value, NV>(xpad, Hp, Wp, g.C, g.kh, g.kw, w, bias, o, g.Ho, g.Wo, y);
  });
}

// The weight gradient's kernel-row block (direct_wgrad_row) with AVX2: OB output channels x KW
// taps; each gy row is NV vectors, the last loaded under a mask.
template <int OB, int KW, int NV>
void direct_wgrad_row_avx2(const float* xpad, const ConvGeom& g, int64_t Hp, int64_t Wp, const float* gy, int64_t n0,
                           int64_t n1, int64_t o0, int64_t c, int64_t ki, float* gw) {
  const __m256i last = first_lanes(g.Wo - 8 * (NV - 1));
  __m256 acc[OB][KW];
#pragma GCC unroll 4
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) acc[b][j] = _mm256_setzero_ps();
  for (int64_t n = n0; n < n1; ++n) {
    const float* xc = xpad + (n * g.C + c) * Hp * Wp + ki * Wp;
    const float* gn = gy + (n * g.O + o0) * g.Ho * g.Wo;
    for (int64_t oy = 0; oy < g.Ho; ++oy) {
      const float* row = xc + oy * Wp;
      const float* gr = gn + oy * g.Wo;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        __m256 gv[OB];
#pragma GCC unroll 4
        for (int b = 0; b < OB; ++b)
          gv[b] = v + 1 < NV ? _mm256_loadu_ps(gr + b * g.Ho * g.Wo + 8 * v)
                             : _mm256_maskload_ps(gr + b * g.Ho * g.Wo + 8 * v, last);
#pragma GCC unroll 5
        for (int j = 0; j < KW; ++j) {
          const __m256 xv = _mm256_loadu_ps(row + j + 8 * v);
#pragma GCC unroll 4
          for (int b = 0; b < OB; ++b) acc[b][j] = _mm256_fmadd_ps(gv[b], xv, acc[b][j]);
        }
      }
    }
  }
  const int64_t ckk = g.ckk();
#pragma GCC unroll 4
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) gw[(o0 + b) * ckk + (c * g.kh + ki) * KW + j] = sum_lanes(acc[b][j]);
}

template <int KW, int NV>
void direct_wgrad_avx2(const float* xpad, const ConvGeom& g, int64_t Hp, int64_t Wp, const float* gy, int64_t n0,
                       int64_t n1, float* gw) {
  constexpr int OBmax = KW == 3 ? 4 : 2;  // OB * KW + OB + 1 <= 16 (the input vector may be a memory operand)
  over_channel_blocks<OBmax>(g.O, [&](auto ob, int64_t o0) {
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t ki = 0; ki < g.kh; ++ki)
        direct_wgrad_row_avx2<decltype(ob)::value, KW, NV>(xpad, g, Hp, Wp, gy, n0, n1, o0, c, ki, gw);
  });
}

// Calls f(std::integral_constant<int, NV>) with NV = the 8-lane vectors of an output row (Wo <= 32).
template <class F>
void with_row_vectors(int64_t Wo, F&& f) {
  switch ((Wo + 7) / 8) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    default: f(std::integral_constant<int, 4>{}); break;
  }
}

// Direct kernels apply to stride 1, dilation 1, one group, few taps (a first layer on images) and
// rows of at most 32 outputs; the AVX2 weight gradient only to kernels 3 or 5 wide.
bool direct_conv_applies(const ConvGeom& g) {
  return g.G == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.ckk() <= 64 && g.Wo >= 1 && g.Wo <= 32;
}

bool direct_wgrad_applies(const ConvGeom& g) {
  return direct_conv_applies(g) && (avx512_kernels() || g.kw == 3 || g.kw == 5);
}

void direct_conv(const float* xp, const float* wp, const float* bp, const ConvGeom& g, float* yp) {
  // Rows are read as two 16-wide vectors from kj on: pad the image so every load stays inside.
  const int64_t Hp = g.H + 2 * g.ph, Wp = std::max<int64_t>(g.W + 2 * g.pw, g.kw + 32);
  const bool avx512 = avx512_kernels();
  parallel_for(0, g.N, 1, [&](int64_t n0, int64_t n1) {
    float* xpad = thread_scratch<float>(Scratch::conv_image, g.C * Hp * Wp);
    std::fill(xpad, xpad + g.C * Hp * Wp, 0.0f);
    for (int64_t n = n0; n < n1; ++n) {
      copy_planes(xp + n * g.C * g.H * g.W, g.C, g.H, g.W, xpad + g.ph * Wp + g.pw, Hp * Wp, Wp);
      float* yn = yp + n * g.O * g.Ho * g.Wo;
      if (!avx512) {
        with_row_vectors(g.Wo, [&](auto nv) { direct_image_avx2<decltype(nv)::value>(xpad, Hp, Wp, g, wp, bp, yn); });
        continue;
      }
      over_channel_blocks<8>(g.O, [&](auto ob, int64_t o) {
        direct_rows<decltype(ob)::value>(xpad, Hp, Wp, g.C, g.kh, g.kw, wp, bp, o, g.Ho, g.Wo, yn);
      });
    }
  });
}

// Weight gradient of the same convolutions: gw[o][tap] = sum over images and output pixels of
// gy[n][o][pixel] * x_padded[n][c][oy + ki][ox + kj]. Each output channel accumulates all its
// taps in vector registers over the images [n0, n1) of one thread's share.
NABLA_DC_AVX512 void direct_wgrad_o(const float* xpad, int64_t n0, int64_t n1, int64_t C, int64_t Hp, int64_t Wp,
                                    int64_t kh, int64_t kw, const float* gy, int64_t O, int64_t o, int64_t Ho,
                                    int64_t Wo, float* gw) {
  const __mmask16 m0 = Wo >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << Wo) - 1);
  const __mmask16 m1 = Wo > 16 ? __mmask16((1u << (Wo - 16)) - 1) : __mmask16(0);
  const int taps = static_cast<int>(C * kh * kw);  // at most 64 (direct_conv_applies)
  __m512 acc[64];
  int64_t off[64];  // where each tap's window starts in the padded image
  for (int t = 0; t < taps; ++t) {
    int64_t c = t / (kh * kw), r = t % (kh * kw);
    off[t] = (c * Hp + r / kw) * Wp + r % kw;
    acc[t] = _mm512_setzero_ps();
  }
  for (int64_t n = n0; n < n1; ++n) {
    const float* xn = xpad + n * C * Hp * Wp;
    for (int64_t oy = 0; oy < Ho; ++oy) {
      const float* gr = gy + ((n * O + o) * Ho + oy) * Wo;
      __m512 g0 = _mm512_maskz_loadu_ps(m0, gr), g1 = _mm512_maskz_loadu_ps(m1, gr + 16);
#pragma GCC unroll 32
      for (int t = 0; t < taps; ++t) {
        const float* row = xn + oy * Wp + off[t];
        acc[t] = _mm512_fmadd_ps(g0, _mm512_loadu_ps(row), acc[t]);
        acc[t] = _mm512_fmadd_ps(g1, _mm512_loadu_ps(row + 16), acc[t]);
      }
    }
  }
  for (int t = 0; t < taps; ++t) gw[o * taps + t] = _mm512_reduce_add_ps(acc[t]);
}

// The same weight gradient for one kernel row: OB output channels x KW taps (input channel c, row
// ki) accumulate in registers over the images [n0, n1) and their output rows. Each loaded input
// vector serves OB channels and each loaded gy vector KW taps, so the loop is bound by FMAs.
template <int OB, int KW>
NABLA_DC_AVX512 void direct_wgrad_row(const float* xpad, const ConvGeom& g, int64_t Hp, int64_t Wp, const float* gy,
                                      int64_t n0, int64_t n1, int64_t o0, int64_t c, int64_t ki, float* gw) {
  const __mmask16 m0 = g.Wo >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << g.Wo) - 1);
  const __mmask16 m1 = g.Wo > 16 ? __mmask16((1u << (g.Wo - 16)) - 1) : __mmask16(0);
  __m512 acc[OB][KW];  // in registers: every loop over it is unrolled (see direct_rows)
#pragma GCC unroll 4
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) acc[b][j] = _mm512_setzero_ps();
  for (int64_t n = n0; n < n1; ++n) {
    const float* xc = xpad + (n * g.C + c) * Hp * Wp + ki * Wp;
    const float* gn = gy + (n * g.O + o0) * g.Ho * g.Wo;
    for (int64_t oy = 0; oy < g.Ho; ++oy) {
      __m512 g0[OB], g1[OB];
#pragma GCC unroll 4
      for (int b = 0; b < OB; ++b) {
        const float* gr = gn + (b * g.Ho + oy) * g.Wo;
        g0[b] = _mm512_maskz_loadu_ps(m0, gr);
        g1[b] = _mm512_maskz_loadu_ps(m1, gr + 16);
      }
      const float* row = xc + oy * Wp;
#pragma GCC unroll 5
      for (int j = 0; j < KW; ++j) {
        const __m512 x0 = _mm512_loadu_ps(row + j), x1 = _mm512_loadu_ps(row + j + 16);
#pragma GCC unroll 4
        for (int b = 0; b < OB; ++b) {
          acc[b][j] = _mm512_fmadd_ps(g0[b], x0, acc[b][j]);
          acc[b][j] = _mm512_fmadd_ps(g1[b], x1, acc[b][j]);
        }
      }
    }
  }
  const int64_t ckk = g.ckk();
#pragma GCC unroll 4
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) gw[(o0 + b) * ckk + (c * g.kh + ki) * KW + j] = _mm512_reduce_add_ps(acc[b][j]);
}

void direct_conv_weight_grad(const float* xp, const float* gyp, const ConvGeom& g, float* gwp) {
  const int64_t Hp = g.H + 2 * g.ph, Wp = std::max<int64_t>(g.W + 2 * g.pw, g.kw + 32), ckk = g.ckk();
  // The images are split into one share per thread; each share pads its images and accumulates a
  // whole weight gradient of its own, and the shares are summed at the end. (Splitting the output
  // channels instead left the threads unequal work: 10 channels in blocks of 4 are 4+4+2.)
  Tensor buf = detail::make_empty({g.N * g.C * Hp * Wp}, DType::f32, kCPU);
  float* xpad = buf.data_ptr<float>();
  over_image_shares(g.N, g.O * ckk, gwp, [&](int64_t n0, int64_t n1, float* gw) {
    std::fill(xpad + n0 * g.C * Hp * Wp, xpad + n1 * g.C * Hp * Wp, 0.0f);
    for (int64_t n = n0; n < n1; ++n)
      copy_planes(xp + n * g.C * g.H * g.W, g.C, g.H, g.W, xpad + (n * g.C * Hp + g.ph) * Wp + g.pw, Hp * Wp, Wp);
    if (!avx512_kernels()) {
      with_row_vectors(g.Wo, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if (g.kw == 3) direct_wgrad_avx2<3, NV>(xpad, g, Hp, Wp, gyp, n0, n1, gw);
        else direct_wgrad_avx2<5, NV>(xpad, g, Hp, Wp, gyp, n0, n1, gw);
      });
      return;
    }
    if (g.kw != 3 && g.kw != 5) {
      // Other kernel widths: one output channel at a time, all its taps in registers.
      for (int64_t o = 0; o < g.O; ++o) direct_wgrad_o(xpad, n0, n1, g.C, Hp, Wp, g.kh, g.kw, gyp, g.O, o, g.Ho, g.Wo, gw);
      return;
    }
    // Blocks of up to 4 output channels, for each input channel and kernel row.
    auto blocks = [&](auto kw_tag) {
      over_channel_blocks<4>(g.O, [&](auto ob, int64_t o0) {
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t ki = 0; ki < g.kh; ++ki)
            direct_wgrad_row<decltype(ob)::value, decltype(kw_tag)::value>(xpad, g, Hp, Wp, gyp, n0, n1, o0, c, ki, gw);
      });
    };
    if (g.kw == 3) blocks(std::integral_constant<int, 3>{});
    else blocks(std::integral_constant<int, 5>{});
  });
}

// ---- weight gradient through the GEMM with transposed patches gathered on the fly (AVX-512) -------
// gw_g (Og, ckk) = sum over images of gy_g[n] (Og, hw) @ patches[n]^T (hw, ckk). The GEMM's K runs
// over the pixels of all images of a thread's share, in panels that may span images, so every micro-
// kernel call sees a full K panel. B panels (pixels x taps) are gathered straight from the image:
// each pixel's taps are fixed offsets from its window origin. A panels are transposed slices of gy.
// Each thread accumulates its own gradient; the partial gradients are summed at the end.

struct TapTable {
  // Per tap (padded to whole 32-tap slivers): offset in the group's (Cg, H, W) block, and the
  // row/column displacement inside the window; padding taps get dy far out of range (never loaded).
  int32_t* off;
  int32_t* dy;
  int32_t* dx;
};

NABLA_DC_AVX512 void gather_pixel_taps(const float* x, const TapTable& tt, int64_t slivers, int32_t ih0, int32_t iw0,
                                       int32_t H, int32_t W, int64_t kc, float* out) {
  const __m512i vih = _mm512_set1_epi32(ih0), viw = _mm512_set1_epi32(iw0);
  const __m512i vbase = _mm512_set1_epi32(ih0 * W + iw0);
  const __m512i vH = _mm512_set1_epi32(H), vW = _mm512_set1_epi32(W), zero = _mm512_setzero_si512();
  for (int64_t h = 0; h < slivers * 2; ++h) {
    __m512i ih = _mm512_add_epi32(vih, _mm512_load_si512(tt.dy + h * 16));
    __m512i iw = _mm512_add_epi32(viw, _mm512_load_si512(tt.dx + h * 16));
    __mmask16 m = _mm512_cmpge_epi32_mask(ih, zero) & _mm512_cmplt_epi32_mask(ih, vH) &
                  _mm512_cmpge_epi32_mask(iw, zero) & _mm512_cmplt_epi32_mask(iw, vW);
    __m512i idx = _mm512_add_epi32(vbase, _mm512_load_si512(tt.off + h * 16));
    // sliver h/2 of the panel, this pixel's row, half h%2
    _mm512_store_ps(out + (h / 2) * kc * 32 + (h % 2) * 16, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, x, 4));
  }
}

bool wgrad_gather_applies(const ConvGeom& g) {
  return avx512_kernels() &&
         g.Cg * g.H * g.W < (int64_t(1) << 30) && g.H < (1 << 20) && g.W < (1 << 20);
}

void wgrad_gather(const float* xp, const float* gyp, const ConvGeom& g, float* gwp) {
  using namespace gemm_detail;
  const KernelSpec<float>& ks = kernel_spec_for_rows<float>(g.Og);
  const int64_t hw = g.hw_out(), ckk = g.ckk(), mr = ks.mr, kcmax = ks.kc;
  const int64_t nsl = (ckk + 31) / 32, msl = (g.Og + mr - 1) / mr, gsize = g.Og * ckk;
  Tensor taps = detail::make_empty({3 * nsl * 32}, DType::i32, kCPU);
  TapTable tt{static_cast<int32_t*>(taps.data_ptr()), nullptr, nullptr};
  tt.dy = tt.off + nsl * 32;
  tt.dx = tt.dy + nsl * 32;
  for (int64_t t = 0; t < nsl * 32; ++t) {
    int64_t c = t / (g.kh * g.kw), r = t % (g.kh * g.kw), ki = r / g.kw, kj = r % g.kw;
    bool live = t < ckk;
    tt.off[t] = live ? static_cast<int32_t>(c * g.H * g.W + ki * g.dh * g.W + kj * g.dw) : 0;
    tt.dy[t] = live ? static_cast<int32_t>(ki * g.dh) : -(1 << 30);
    tt.dx[t] = live ? static_cast<int32_t>(kj * g.dw) : 0;
  }
  over_image_shares(g.N, g.G * gsize, gwp, [&](int64_t n_begin, int64_t n_end, float* partial) {
    float* ap = thread_scratch<float>(Scratch::conv_panel_a, msl * mr * kcmax);
    float* bp = thread_scratch<float>(Scratch::conv_panel_b, nsl * 32 * kcmax);
    const int64_t kpix = (n_end - n_begin) * hw;  // this share's K
    for (int64_t gr = 0; gr < g.G; ++gr) {
      float* c = partial + gr * gsize;
      for (int64_t pc = 0; pc < kpix; pc += kcmax) {
        const int64_t kc = std::min(kcmax, kpix - pc);
        // Pack this K panel of A (gy rows, transposed) and B (gathered taps), image segment by segment.
        for (int64_t q = pc; q < pc + kc;) {
          const int64_t n = n_begin + q / hw, j0 = q % hw, seg = std::min(hw - j0, pc + kc - q), poff = q - pc;
          const float* gyn = gyp + (n * g.O + gr * g.Og) * hw + j0;
          for (int64_t s = 0; s < msl; ++s) {
            int64_t rows = std::min<int64_t>(mr, g.Og - s * mr);
            float* dst = ap + s * kc * mr + poff * mr;
            transpose_copy(gyn + s * mr * hw, hw, rows, seg, dst, mr);
            if (rows < mr)
              for (int64_t p = 0; p < seg; ++p) std::fill(dst + p * mr + rows, dst + (p + 1) * mr, 0.0f);
          }
          const float* xg = xp + (n * g.C + gr * g.Cg) * g.H * g.W;
          for (int64_t j = j0; j < j0 + seg; ++j) {
            int32_t ih0 = static_cast<int32_t>((j / g.Wo) * g.sh - g.ph), iw0 = static_cast<int32_t>((j % g.Wo) * g.sw - g.pw);
            gather_pixel_taps(xg, tt, nsl, ih0, iw0, static_cast<int32_t>(g.H), static_cast<int32_t>(g.W), kc,
                              bp + (poff + j - j0) * 32);
          }
          q += seg;
        }
        const float beta = pc == 0 ? 0.0f : 1.0f;
        for (int64_t sn = 0; sn < nsl; ++sn)
          for (int64_t sm = 0; sm < msl; ++sm)
            ks.fn(kc, ap + sm * kc * mr, bp + sn * kc * 32, c + sm * mr * ckk + sn * 32, ckk, 1.0f, beta,
                  std::min<int64_t>(mr, g.Og - sm * mr), std::min<int64_t>(32, ckk - sn * 32));
      }
      if (kpix == 0) std::fill(c, c + gsize, 0.0f);
    }
  });
}

// col2im for narrow images (W <= 16), stride 1, dilation 1: for each (c, ki, oh), the kw taps'
// patch rows are added into one register holding the image row, each loaded at its shift under a
// mask (masked-off lanes are never read), instead of kw short scalar loops. Writes x (no += needed).
bool narrow_col2im_applies(const ConvGeom& g) {
  return g.W <= 16 && g.kw <= 16 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}

// Lanes of mask m from r shifted back by `shift` bytes; masked-off lanes are never read, so the
// shifted start may lie before the row.
NABLA_DC_AVX512 inline __m512 shifted_load(const float* r, __mmask16 m, int64_t shift) {
  return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(r) - shift));
}

NABLA_DC_AVX512 void col2im_narrow_avx512(const float* col, const ConvGeom& g, float* x, int64_t ldcol) {
  const __mmask16 row_mask = static_cast<__mmask16>((1u << g.W) - 1);
  // Per kernel column kj: image column iw receives patch column ow = iw - off for ow in [0, Wo) and
  // iw in [0, W): a lane mask, and the shift from the patch row to the image row.
  SmallVector<__mmask16, 16> mask(static_cast<size_t>(g.kw));
  SmallVector<int64_t, 16> shift(static_cast<size_t>(g.kw));
  for (int64_t kj = 0; kj < g.kw; ++kj) {
    const int64_t off = kj - g.pw, lo = std::max<int64_t>(0, off), hi = std::min<int64_t>(g.W, g.Wo + off);
    mask[kj] = hi > lo ? static_cast<__mmask16>(((1u << (hi - lo)) - 1) << lo) : __mmask16(0);
    shift[kj] = off * static_cast<int64_t>(sizeof(float));
  }
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t ih = 0; ih < g.H; ++ih) {
      // Four accumulators (kernel column and row parity) keep the adds from waiting on each other.
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      // The output rows oh = ih + ph - ki that exist, for the kernel rows ki that land on ih.
      const int64_t ki0 = std::max<int64_t>(0, ih + g.ph - g.Ho + 1), ki1 = std::min<int64_t>(g.kh, ih + g.ph + 1);
      for (int64_t ki = ki0; ki < ki1; ++ki) {
        const float* r = col + (c * g.kh + ki) * g.kw * ldcol + (ih + g.ph - ki) * g.Wo;
        int64_t kj = 0;
        for (; kj + 1 < g.kw; kj += 2) {
          a0 = _mm512_add_ps(a0, shifted_load(r + kj * ldcol, mask[kj], shift[kj]));
          a1 = _mm512_add_ps(a1, shifted_load(r + (kj + 1) * ldcol, mask[kj + 1], shift[kj + 1]));
        }
        if (kj < g.kw) a0 = _mm512_add_ps(a0, shifted_load(r + kj * ldcol, mask[kj], shift[kj]));
        std::swap(a0, a2);
        std::swap(a1, a3);
      }
      _mm512_mask_storeu_ps(x + (c * g.H + ih) * g.W, row_mask, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
  }
}

// The same with AVX2: the image row (up to 16 wide) as two 8-lane halves, masked loads
// (_mm256_maskload_ps never reads masked-off lanes either).
void col2im_narrow_avx2(const float* col, const ConvGeom& g, float* x, int64_t ldcol) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
  auto lanes_in = [&](int64_t lo, int64_t hi, __m256i first) {  // lanes first + l with lo <= first + l < hi
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(hi)), first),
                            _mm256_cmpgt_epi32(first, _mm256_set1_epi32(static_cast<int32_t>(lo - 1))));
  };
  __m256i mlo[16], mhi[16];  // per kernel column kj: the image columns it reaches (see col2im_narrow_avx512)
  int64_t off[16];
  for (int64_t kj = 0; kj < g.kw; ++kj) {
    off[kj] = kj - g.pw;
    const int64_t lo = std::max<int64_t>(0, off[kj]), hi = std::min<int64_t>(g.W, g.Wo + off[kj]);
    mlo[kj] = lanes_in(lo, hi, lane);
    mhi[kj] = lanes_in(lo, hi, _mm256_add_epi32(lane, eight));
  }
  const __m256i row_lo = lanes_in(0, g.W, lane), row_hi = lanes_in(0, g.W, _mm256_add_epi32(lane, eight));
  const bool wide = g.W > 8;
  for (int64_t c = 0; c < g.Cg; ++c) {
    for (int64_t ih = 0; ih < g.H; ++ih) {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;  // low and high half, kernel column parity
      const int64_t ki0 = std::max<int64_t>(0, ih + g.ph - g.Ho + 1), ki1 = std::min<int64_t>(g.kh, ih + g.ph + 1);
      for (int64_t ki = ki0; ki < ki1; ++ki) {
        const float* r = col + (c * g.kh + ki) * g.kw * ldcol + (ih + g.ph - ki) * g.Wo;
        for (int64_t kj = 0; kj < g.kw; ++kj) {
          // Image column iw takes patch column iw - off: the row read from r - off (lanes outside
          // [lo, hi) are masked off, so the shifted start may lie before the row).
          const float* p = r + kj * ldcol - off[kj];
          if (kj & 1) {
            a1 = _mm256_add_ps(a1, _mm256_maskload_ps(p, mlo[kj]));
            if (wide) b1 = _mm256_add_ps(b1, _mm256_maskload_ps(p + 8, mhi[kj]));
          } else {
            a0 = _mm256_add_ps(a0, _mm256_maskload_ps(p, mlo[kj]));
            if (wide) b0 = _mm256_add_ps(b0, _mm256_maskload_ps(p + 8, mhi[kj]));
          }
        }
      }
      float* xr = x + (c * g.H + ih) * g.W;
      _mm256_maskstore_ps(xr, row_lo, _mm256_add_ps(a0, a1));
      if (wide) _mm256_maskstore_ps(xr + 8, row_hi, _mm256_add_ps(b0, b1));
    }
  }
}

void col2im_narrow(const float* col, const ConvGeom& g, float* x, int64_t ldcol) {
  if (avx512_kernels()) col2im_narrow_avx512(col, g, x, ldcol);
  else col2im_narrow_avx2(col, g, x, ldcol);
}
#else
bool direct_conv_applies(const ConvGeom&) { return false; }
bool direct_wgrad_applies(const ConvGeom&) { return false; }
void direct_conv(const float*, const float*, const float*, const ConvGeom&, float*) {}
void direct_conv_weight_grad(const float*, const float*, const ConvGeom&, float*) {}
bool wgrad_gather_applies(const ConvGeom&) { return false; }
void wgrad_gather(const float*, const float*, const ConvGeom&, float*) {}
bool narrow_col2im_applies(const ConvGeom&) { return false; }
void col2im_narrow(const float*, const ConvGeom&, float*, int64_t) {}
#endif

// ---- stride-1 convolution over padded rows --------------------------------------------------------
// With stride 1, copy the image into a zero-padded buffer of width Wp and compute the outputs over
// whole padded rows: output "pixel" j = oh * Wp + ow (ow < Wp; columns past Wo are computed and
// dropped). Tap (c, ki, kj) then reads x_pad[c*Hp*Wp + ki*dh*Wp + kj*dw + j]: every row of the
// patch matrix is a contiguous run of the buffer, so GEMM packing is plain copies, no gathers. It
// pays while the dropped columns cost less than the gathers they save: Wp up to num/den times Wo.
bool padded_rows_applies(const ConvGeom& g, int64_t num = 3, int64_t den = 2) {
  return g.sh == 1 && g.sw == 1 && !g.is_pointwise() && g.ckk() > 0 && (g.W + 2 * g.pw) * den <= g.Wo * num;
}

// Packs columns [j0, j0+nc) of the padded-rows patch matrix (row p starts at xpad + offs[p]) into
// NR-column slivers.
template <int NR, class T>
void pack_rows(const T* xpad, const int64_t* offs, int64_t kc, int64_t j0, int64_t nc, T* out) {
  for (int64_t js = j0; js < j0 + nc; js += NR) {
    T* o = out + ((js - j0) / NR) * kc * NR;
    for (int64_t p = 0; p < kc; ++p) std::memcpy(o + p * NR, xpad + offs[p] + js, NR * sizeof(T));
  }
}

template <class T>
void conv_forward_padded_rows(const T* xp, const gemm_detail::KernelSpec<T>& ks,
                              const SmallVector<gemm_detail::PackedA<T>, 2>& wpack, const T* bp, const ConvGeom& g,
                              T* yp) {
  using namespace gemm_detail;
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw, plane = Hp * Wp, ckk = g.ckk(), hw = g.hw_out();
  const int64_t ncols = (g.Ho - 1) * Wp + g.Wo;  // the last row's dropped columns are not computed
  const int64_t xbuf = g.Cg * plane + ks.nr;    // slack: packing copies whole nr-wide slivers
  Tensor offs_buf = detail::make_empty({ckk}, DType::i64, kCPU);
  int64_t* offs = static_cast<int64_t*>(offs_buf.data_ptr());
  for (int64_t p = 0; p < ckk; ++p) {
    int64_t c = p / (g.kh * g.kw), r = p % (g.kh * g.kw);
    offs[p] = c * plane + (r / g.kw) * g.dh * Wp + (r % g.kw) * g.dw;
  }
  parallel_for(0, g.N * g.G, 1, [&](int64_t i0, int64_t i1) {
    T* xpad = thread_scratch<T>(Scratch::conv_image, xbuf + g.Og * g.Ho * Wp);
    T* ybuf = xpad + xbuf;
    std::fill(xpad, xpad + xbuf, T(0));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / g.G, gr = i % g.G;
      copy_planes(xp + (n * g.C + gr * g.Cg) * g.H * g.W, g.Cg, g.H, g.W, xpad + g.ph * Wp + g.pw, plane, Wp);
      gemm_prepacked<T>(ks, wpack[gr], ncols, [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) {
        switch (ks.nr) {  // copies of a compile-time size compile to a few vector moves, not calls
          case 8: return pack_rows<8>(xpad, offs + p0, kc, j0, nc, out);
          case 16: return pack_rows<16>(xpad, offs + p0, kc, j0, nc, out);
          case 32: return pack_rows<32>(xpad, offs + p0, kc, j0, nc, out);
        }
        for (int64_t js = j0; js < j0 + nc; js += ks.nr) {
          T* o = out + ((js - j0) / ks.nr) * kc * ks.nr;
          for (int64_t p = 0; p < kc; ++p) std::memcpy(o + p * ks.nr, xpad + offs[p0 + p] + js, ks.nr * sizeof(T));
        }
      }, T(1), T(0), ybuf, g.Ho * Wp);
      T* yg = yp + (n * g.O + gr * g.Og) * hw;
      for (int64_t o = 0; o < g.Og; ++o) {
        const T b = bp ? bp[gr * g.Og + o] : T(0);
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const T* src = ybuf + (o * g.Ho + oh) * Wp;
          T* dst = yg + (o * g.Ho + oh) * g.Wo;
          for (int64_t ow = 0; ow < g.Wo; ++ow) dst[ow] = src[ow] + b;
        }
      }
    }
  });
}

// dst[p * ldd + i] = rows[i][p] for i < nrows, p < cols: a transposing copy whose source rows start
// anywhere (the taps of a padded image), in 8x8 register tiles for float on AVX2 machines.
template <class T>
void transpose_rows(const T* const* rows, int64_t nrows, int64_t cols, T* dst, int64_t ldd) {
  int64_t i0 = 0;
#ifdef NABLA_GEMM_AVX2
  if constexpr (std::is_same_v<T, float>) {
    for (; i0 + 8 <= nrows; i0 += 8) {
      const float* const* r = rows + i0;
      int64_t p = 0;
      for (; p + 8 <= cols; p += 8)
        gemm_detail::transpose_tile_rows([&](int i) { return r[i] + p; }, dst + p * ldd + i0, ldd);
      for (; p < cols; ++p)
        for (int64_t i = i0; i < i0 + 8; ++i) dst[p * ldd + i] = rows[i][p];
    }
  }
#endif
  for (int64_t i = i0; i < nrows; ++i)
    for (int64_t p = 0; p < cols; ++p) dst[p * ldd + i] = rows[i][p];
}

// The weight gradient over padded rows (see conv_forward_padded_rows): gw_g (Og, ckk) = sum over
// images of gy_g[n] (Og, K) @ patches[n]^T (K, ckk), K running over padded-row pixels, where gy is
// laid out on the same padded rows with zeros in the dropped columns. Patch rows are contiguous runs
// of the padded image, so packing B is a transposing copy from tap start pointers. Images are split
// into per-thread shares; each share accumulates its own gradient, summed at the end.
template <class T>
void conv_weight_grad_padded_rows(const T* xp, const T* gyp, const ConvGeom& g, T* gwp) {
  using namespace gemm_detail;
  const KernelSpec<T>& ks = kernel_spec_for_rows<T>(g.Og);
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw, plane = Hp * Wp, ckk = g.ckk(), hw = g.hw_out();
  const int64_t kimg = (g.Ho - 1) * Wp + g.Wo, mr = ks.mr, nr = ks.nr, kcmax = ks.kc;
  const int64_t msl = (g.Og + mr - 1) / mr, nsl = (ckk + nr - 1) / nr, gsize = g.Og * ckk;
  Tensor offs_buf = detail::make_empty({ckk}, DType::i64, kCPU);
  int64_t* offs = static_cast<int64_t*>(offs_buf.data_ptr());
  for (int64_t p = 0; p < ckk; ++p) {
    int64_t c = p / (g.kh * g.kw), r = p % (g.kh * g.kw);
    offs[p] = c * plane + (r / g.kw) * g.dh * Wp + (r % g.kw) * g.dw;
  }
  over_image_shares(g.N, g.G * gsize, gwp, [&](int64_t n_begin, int64_t n_end, T* partial) {
    // Packed panels must be 64-byte aligned for the micro-kernels (the buffer itself is).
    constexpr int64_t align = 64 / sizeof(T);
    const int64_t xsize = g.Cg * plane, gysize = (g.Og * kimg + align - 1) / align * align;
    T* gypad = thread_scratch<T>(Scratch::conv_image, xsize + gysize + kcmax * (msl * mr + nsl * nr));
    T* ap = gypad + gysize;
    T* xpad = ap + kcmax * (msl * mr + nsl * nr);
    T* bp = ap + kcmax * msl * mr;
    const T** rows = thread_scratch<const T*>(Scratch::conv_rows, nr);
    // Borders and dropped columns stay zero: only the interior is written per image.
    std::fill(gypad, gypad + gysize, T(0));
    std::fill(xpad, xpad + xsize, T(0));
    for (int64_t gr = 0; gr < g.G; ++gr) {
      T* c = partial + gr * gsize;
      bool first = true;
      for (int64_t n = n_begin; n < n_end; ++n) {
        copy_planes(xp + (n * g.C + gr * g.Cg) * g.H * g.W, g.Cg, g.H, g.W, xpad + g.ph * Wp + g.pw, plane, Wp);
        copy_planes(gyp + (n * g.O + gr * g.Og) * hw, g.Og, g.Ho, g.Wo, gypad, kimg, Wp);
        for (int64_t pc = 0; pc < kimg; pc += kcmax) {
          const int64_t kc = std::min(kcmax, kimg - pc);
          for (int64_t sm = 0; sm < msl; ++sm) {
            const int64_t nrow = std::min(mr, g.Og - sm * mr);
            T* dst = ap + sm * kc * mr;
            transpose_copy(gypad + sm * mr * kimg + pc, kimg, nrow, kc, dst, mr);
            if (nrow < mr)
              for (int64_t p = 0; p < kc; ++p) std::fill(dst + p * mr + nrow, dst + (p + 1) * mr, T(0));
          }
          for (int64_t sn = 0; sn < nsl; ++sn) {
            const int64_t ncol = std::min(nr, ckk - sn * nr);
            for (int64_t j = 0; j < ncol; ++j) rows[j] = xpad + offs[sn * nr + j] + pc;
            T* dst = bp + sn * kc * nr;
            transpose_rows(rows, ncol, kc, dst, nr);
            if (ncol < nr)
              for (int64_t p = 0; p < kc; ++p) std::fill(dst + p * nr + ncol, dst + (p + 1) * nr, T(0));
          }
          const T beta = first ? T(0) : T(1);
          first = false;
          for (int64_t sn = 0; sn < nsl; ++sn)
            for (int64_t sm = 0; sm < msl; ++sm)
              ks.fn(kc, ap + sm * kc * mr, bp + sn * kc * nr, c + sm * mr * ckk + sn * nr, ckk, T(1), beta,
                    std::min(mr, g.Og - sm * mr), std::min(nr, ckk - sn * nr));
        }
      }
      if (first) std::fill(c, c + gsize, T(0));
    }
  });
}

// y (N, O, Ho, Wo) = conv(x, w) + bias, all contiguous, with geometry g.
template <class T>
void conv_forward(const T* xp, const T* wp, const T* bp, const ConvGeom& g, T* yp) {
  using namespace gemm_detail;
  if constexpr (std::is_same_v<T, float>) {
    if (direct_conv_applies(g)) return direct_conv(xp, wp, bp, g, yp);
  }
  const KernelSpec<T>& ks = kernel_spec_for_rows<T>(g.Og);
  int64_t hw = g.hw_out(), ckk = g.ckk();
  // The weights of each group, packed once for all images.
  SmallVector<PackedA<T>, 2> wpack;
  for (int64_t gr = 0; gr < g.G; ++gr) wpack.push_back(pack_a_all(ks, wp + gr * g.Og * ckk, ckk, 1, g.Og, ckk));
  if (padded_rows_applies(g)) return conv_forward_padded_rows<T>(xp, ks, wpack, bp, g, yp);
  parallel_for(0, g.N * g.G, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t n = i / g.G, gr = i % g.G;
      const T* xg = xp + (n * g.C + gr * g.Cg) * g.H * g.W;
      T* yg = yp + (n * g.O + gr * g.Og) * hw;
      T beta = T(0);
      if (bp) {
        for (int64_t o = 0; o < g.Og; ++o) std::fill(yg + o * hw, yg + (o + 1) * hw, bp[gr * g.Og + o]);
        beta = T(1);
      }
      if (ckk == 0) {
        if (!bp) std::fill(yg, yg + g.Og * hw, T(0));
        continue;
      }
      // y_g (Og, hw) = W_g (Og, ckk) @ patches (ckk, hw)
      if (g.is_pointwise()) {
        gemm_prepacked<T>(ks, wpack[gr], hw, [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) {
          pack_b(xg + p0 * hw + j0, hw, int64_t(1), kc, nc, ks.nr, out);
        }, T(1), beta, yg, hw);
      } else {
        gemm_prepacked<T>(ks, wpack[gr], hw, Im2colPacker<T>{xg, g, ks.nr}, T(1), beta, yg, hw);
      }
    }
  });
}

void conv(const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const ConvParams& p, const Tensor& out) {
  if (p.ndim != 2) return conv_nd(x_in, w_in, bias, p, out);
  Tensor x = contig(x_in), w = contig(w_in);
  ConvGeom g = geom(x, w, out, p);
  Tensor y = out.is_contiguous() ? out : detail::make_empty(out.sizes(), out.dtype(), out.device());
  Tensor b = bias.defined() ? contig(bias) : bias;
  visit_float(x.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_forward<T>(static_cast<const T*>(x.data_ptr()), static_cast<const T*>(w.data_ptr()),
                    b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr, g, static_cast<T*>(y.data_ptr()));
  });
  if (!y.is_same(out)) copy(y, out);
}

// A stride-1 input gradient is itself a convolution: of gy, padded by (k-1)*d - p, with the weights
// flipped in space and their in/out channels swapped (per group). This is its geometry.
ConvGeom flipped_geom(const ConvGeom& g) {
  ConvGeom f = g;
  f.C = g.O;
  f.H = g.Ho;
  f.W = g.Wo;
  f.O = g.C;
  f.Ho = g.H;
  f.Wo = g.W;
  f.Cg = g.Og;
  f.Og = g.Cg;
  f.ph = (g.kh - 1) * g.dh - g.ph;
  f.pw = (g.kw - 1) * g.dw - g.pw;
  return f;
}

// Whether conv2d_input_grad runs as that convolution rather than GEMM + col2im: when it can take
// the padded-rows path (its own padding adds little) and has rows enough (input channels) for the
// GEMM. (Through im2col gathers it was measured slower than col2im.)
bool input_grad_as_conv(const ConvGeom& g) {
  return g.sh == 1 && g.sw == 1 && g.ph <= (g.kh - 1) * g.dh && g.pw <= (g.kw - 1) * g.dw && g.Cg >= 8 &&
         padded_rows_applies(flipped_geom(g), 5, 4);
}

void conv_input_grad(const Tensor& gy_in, const Tensor& w_in, const ConvParams& p, const Tensor& gx) {
  if (p.ndim != 2) return conv_nd_input_grad(gy_in, w_in, p, gx);
  Tensor gy = contig(gy_in), w = contig(w_in);
  ConvGeom g = geom(gx, w, gy, p);
  Tensor out = gx.is_contiguous() ? gx : detail::make_empty(gx.sizes(), gx.dtype(), gx.device());
  visit_float(gy.dtype(), "conv2d_input_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    const T* wp = static_cast<const T*>(w.data_ptr());
    T* gxp = static_cast<T*>(out.data_ptr());
    int64_t hw = g.hw_out(), ckk = g.ckk();
    if (input_grad_as_conv(g)) {
      Tensor wt_buf = detail::make_empty({g.C * g.Og * g.kh * g.kw}, gy.dtype(), kCPU);
      T* wt = static_cast<T*>(wt_buf.data_ptr());
      const int64_t khw = g.kh * g.kw;
      for (int64_t gr = 0; gr < g.G; ++gr)
        for (int64_t o = 0; o < g.Og; ++o)
          for (int64_t c = 0; c < g.Cg; ++c)
            for (int64_t t = 0; t < khw; ++t)
              wt[((gr * g.Cg + c) * g.Og + o) * khw + t] = wp[((gr * g.Og + o) * g.Cg + c) * khw + (khw - 1 - t)];
      conv_forward<T>(gyp, wt, nullptr, flipped_geom(g), gxp);
      return;
    }
    // Per image: the patch gradients (ckk, hw) = W^T @ gy, then scattered back (col2im).
    parallel_for(0, g.N, 1, [&](int64_t n0, int64_t n1) {
      T* col = thread_scratch<T>(Scratch::conv_col, ckk * hw);
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t gr = 0; gr < g.G; ++gr) {
          T* xg = gxp + (n * g.C + gr * g.Cg) * g.H * g.W;
          const T* gyg = gyp + (n * g.O + gr * g.Og) * hw;
          const T* wg = wp + gr * g.Og * ckk;
          if (g.is_pointwise()) {
            // gx_g (Cg, hw) = W_g^T (Cg, Og) @ gy_g (Og, hw)
            gemm_t<T>(ckk, hw, g.Og, T(1), wg, 1, ckk, gyg, hw, 1, T(0), xg, hw);
            continue;
          }
          gemm_t<T>(ckk, hw, g.Og, T(1), wg, 1, ckk, gyg, hw, 1, T(0), col, hw);
          if constexpr (std::is_same_v<T, float>) {
            if (narrow_col2im_applies(g)) {
              col2im_narrow(col, g, xg, hw);
              continue;
            }
          }
          std::fill(xg, xg + g.Cg * g.H * g.W, T(0));
          col2im(col, g, xg, hw);
        }
      }
    });
  });
  if (!out.is_same(gx)) copy(out, gx);
}

void conv_weight_grad(const Tensor& x_in, const Tensor& gy_in, const ConvParams& p, const Tensor& gw) {
  if (p.ndim != 2) return conv_nd_weight_grad(x_in, gy_in, p, gw);
  Tensor x = contig(x_in), gy = contig(gy_in);
  ConvGeom g = geom(x, gw, gy, p);
  Tensor out = gw.is_contiguous() ? gw : detail::make_empty(gw.sizes(), gw.dtype(), gw.device());
  if (x.dtype() == DType::f32 && direct_wgrad_applies(g)) {
    direct_conv_weight_grad(static_cast<const float*>(x.data_ptr()), static_cast<const float*>(gy.data_ptr()), g,
                            static_cast<float*>(out.data_ptr()));
    if (!out.is_same(gw)) copy(out, gw);
    return;
  }
  if (g.N > 0 && padded_rows_applies(g)) {
    visit_float(x.dtype(), "conv2d_weight_grad", [&](auto tag) {
      using T = typename decltype(tag)::type;
      conv_weight_grad_padded_rows<T>(static_cast<const T*>(x.data_ptr()), static_cast<const T*>(gy.data_ptr()), g,
                                      static_cast<T*>(out.data_ptr()));
    });
    if (!out.is_same(gw)) copy(out, gw);
    return;
  }
  if (x.dtype() == DType::f32 && g.N > 0 && wgrad_gather_applies(g)) {
    wgrad_gather(static_cast<const float*>(x.data_ptr()), static_cast<const float*>(gy.data_ptr()), g,
                 static_cast<float*>(out.data_ptr()));
    if (!out.is_same(gw)) copy(out, gw);
    return;
  }
  visit_float(x.dtype(), "conv2d_weight_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    T* gwp = static_cast<T*>(out.data_ptr());
    int64_t hw = g.hw_out(), ckk = g.ckk();
    // Images per chunk: keep the unfolded patches of a chunk around 16 MB.
    int64_t chunk = std::clamp<int64_t>((int64_t(4) << 20) / std::max<int64_t>(ckk * hw, 1), 1, g.N);
    Tensor col_buf = detail::make_empty({ckk * hw * chunk}, x.dtype(), kCPU);
    Tensor gyt_buf = detail::make_empty({g.Og * hw * chunk}, x.dtype(), kCPU);
    T* colp = static_cast<T*>(col_buf.data_ptr());
    T* gytp = static_cast<T*>(gyt_buf.data_ptr());
    for (int64_t gr = 0; gr < g.G; ++gr) {
      T* gwg = gwp + gr * g.Og * ckk;
      for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
        int64_t nc = std::min(chunk, g.N - n0), cols = nc * hw;
        // Unfold the chunk: col (ckk, nc*hw); gather gy (Og, nc*hw).
        parallel_for(0, nc, 1, [&](int64_t a, int64_t b) {
          for (int64_t i = a; i < b; ++i) {
            const T* xg = xp + ((n0 + i) * g.C + gr * g.Cg) * g.H * g.W;
            if (g.is_pointwise()) {
              for (int64_t c = 0; c < ckk; ++c) std::memcpy(colp + c * cols + i * hw, xg + c * hw, hw * sizeof(T));
            } else {
              im2col(xg, g, colp + i * hw, cols);
            }
            const T* gyg = gyp + ((n0 + i) * g.O + gr * g.Og) * hw;
            for (int64_t o = 0; o < g.Og; ++o) std::memcpy(gytp + o * cols + i * hw, gyg + o * hw, hw * sizeof(T));
          }
        });
        // gw_g (Og, ckk) (+)= gy (Og, cols) @ col^T (cols, ckk)
        gemm_t<T>(g.Og, ckk, cols, T(1), gytp, cols, 1, colp, 1, cols, n0 == 0 ? T(0) : T(1), gwg, ckk);
      }
      if (g.N == 0) std::fill(gwg, gwg + g.Og * ckk, T(0));
    }
  });
  if (!out.is_same(gw)) copy(out, gw);
}

// ---- pooling ------------------------------------------------------------------------------------
using detail::PoolGeom;
using detail::pool_geom;

namespace {
#ifdef NABLA_GEMM_AVX2
// The first maximum of each window's four candidates (a, b: top row; c, d: bottom row), NaN winning:
// the window's value and its offset among {0, 1, W, W + 1}.
NABLA_DC_AVX512 inline void max4_first(__m512 a, __m512 b, __m512 c, __m512 d, int32_t W, __m512* best_out,
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
      __mmask16 take = _mm512_cmp_ps_mask(cand[k], best, _CMP_GT_OQ) |
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
        ea, _mm512_mask_blend_epi32(eb, _mm512_mask_blend_epi32(ec, _mm512_set1_epi32(W + 1), _mm512_set1_epi32(W)),
                                    _mm512_set1_epi32(1)),
        _mm512_setzero_si512());
  }
  *best_out = best;
  *off_out = off;
}

NABLA_DC_AVX512 inline void store_idx16(int64_t* ir, __mmask16 out, __m512i idx32) {
  _mm512_mask_storeu_epi64(ir, static_cast<__mmask8>(out & 0xFF), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(idx32)));
  _mm512_mask_storeu_epi64(ir + 8, static_cast<__mmask8>(out >> 8),
                           _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(idx32, 1)));
}

// 2x2 windows, stride 2, over planes [p0, p1), AVX-512: 16 outputs of a row at a time, their two
// input rows deinterleaved by permutes. (Gathering the corners of 16 outputs across rows, to fill
// the lanes on narrow planes, measured slower: gathers are slow on the CPUs at hand.)
NABLA_DC_AVX512 void maxpool2x2_avx512(const float* xp, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t p0,
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
      int64_t* ir = ip + pl * plane_out + oh * Wo;
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
        store_idx16(ir + ow, out,
                    _mm512_add_epi32(_mm512_add_epi32(off, lane2), _mm512_set1_epi32(static_cast<int32_t>(2 * oh * W + c))));
      }
    }
  }
}

// The same with AVX2 (CPUs without AVX-512): 8 outputs of a row at a time, masked loads and stores
// at the end of a row. The scalar loop's data-dependent branches cost ~20x this on random data.
inline __m256 blend_where(__m256 mask, __m256 if_false, __m256 if_true) { return _mm256_blendv_ps(if_false, if_true, mask); }
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
      __m256 take = _mm256_or_ps(_mm256_cmp_ps(cand[k], best, _CMP_GT_OQ),
                                 _mm256_and_ps(_mm256_cmp_ps(cand[k], cand[k], _CMP_UNORD_Q), _mm256_cmp_ps(best, best, _CMP_ORD_Q)));
      best = blend_where(take, best, cand[k]);
      off = blend_where(take, off, offs[k]);
    }
    *best_out = best;
    *off_out = off;
    return;
  }
  const __m256 m = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
  const __m256 ea = _mm256_cmp_ps(a, m, _CMP_EQ_OQ), eb = _mm256_cmp_ps(b, m, _CMP_EQ_OQ), ec = _mm256_cmp_ps(c, m, _CMP_EQ_OQ);
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
      int64_t* ir = ip + pl * plane_out + oh * Wo;
      for (int64_t ow = 0; ow < Wo; ow += 8) {
        const int64_t n = std::min<int64_t>(8, Wo - ow), c = 2 * ow;  // n outputs read 2n inputs per row
        __m256 a, b, cc, d;
        if (n == 8) {
          deinterleave(_mm256_loadu_ps(r0 + c), _mm256_loadu_ps(r0 + c + 8), &a, &b);
          deinterleave(_mm256_loadu_ps(r1 + c), _mm256_loadu_ps(r1 + c + 8), &cc, &d);
        } else {
          const __m256i in_lo = first_lanes(std::min<int64_t>(8, 2 * n)), in_hi = first_lanes(std::max<int64_t>(0, 2 * n - 8));
          deinterleave(_mm256_maskload_ps(r0 + c, in_lo), _mm256_maskload_ps(r0 + c + 8, in_hi), &a, &b);
          deinterleave(_mm256_maskload_ps(r1 + c, in_lo), _mm256_maskload_ps(r1 + c + 8, in_hi), &cc, &d);
        }
        __m256 best;
        __m256i off;
        max4_first(a, b, cc, d, W32, &best, &off);
        // flat index = 2 * oh * W + 2 * (ow + lane) + offset
        const __m256i idx = _mm256_add_epi32(_mm256_add_epi32(off, lane2), _mm256_set1_epi32(static_cast<int32_t>(2 * oh * W + c)));
        const __m256i i0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(idx)), i1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(idx, 1));
        if (n == 8) {
          _mm256_storeu_ps(yr + ow, best);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(ir + ow), i0);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(ir + ow + 4), i1);
        } else {
          const __m256i out = first_lanes(n);
          _mm256_maskstore_ps(yr + ow, out, best);
          _mm256_maskstore_epi64(reinterpret_cast<long long*>(ir + ow), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(out)), i0);
          _mm256_maskstore_epi64(reinterpret_cast<long long*>(ir + ow + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(out, 1)), i1);
        }
      }
    }
  }
}
#else
void maxpool2x2_avx512(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*, int64_t*) {}
void maxpool2x2_avx2(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*, int64_t*) {}
#endif
}  // namespace

void max_pool2d(const Tensor& x_in, const Pool2dParams& p, const Tensor& out, const Tensor& indices) {
  Tensor x = contig(x_in);
  PoolGeom g = pool_geom(x, out);
  check<ValueError>(out.is_contiguous() && indices.is_contiguous(), "max_pool2d: outputs must be contiguous");
  visit_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    int64_t* ip = indices.data_ptr<int64_t>();
    // First valid kernel offset and one past the last for output position o along one axis.
    auto window = [](int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t k, int64_t n, int64_t* lo, int64_t* hi) {
      int64_t start = o * stride - pad;
      *lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
      *hi = start >= n ? 0 : std::min<int64_t>(k, (n - start + dil - 1) / dil);
      return start;
    };
    const bool simple = p.padding[0] == 0 && p.padding[1] == 0 && p.dilation[0] == 1 && p.dilation[1] == 1 &&
                        p.kernel[0] == 2 && p.kernel[1] == 2 && p.stride[0] == 2 && p.stride[1] == 2 &&
                        g.Ho * 2 <= g.H && g.Wo * 2 <= g.W;
    // Indices are computed in int32 lanes: planes below 2^30 elements.
    const bool vectorized = simple && std::is_same_v<T, float> && g.H * g.W < (int64_t(1) << 30);
    const bool avx512 = vectorized && avx512_kernels();
#ifdef NABLA_GEMM_AVX2
    const bool avx2 = vectorized && !avx512;
#else
    const bool avx2 = false;
#endif
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.Ho * g.Wo, 1)), [&](int64_t a, int64_t b) {
      if constexpr (std::is_same_v<T, float>) {
        if (avx512) {
          maxpool2x2_avx512(xp, g.H, g.W, g.Ho, g.Wo, a, b, yp, ip);
          return;
        }
        if (avx2) {
          maxpool2x2_avx2(xp, g.H, g.W, g.Ho, g.Wo, a, b, yp, ip);
          return;
        }
      }
      for (int64_t pl = a; pl < b; ++pl) {
        const T* xpl = xp + pl * g.H * g.W;
        T* ypl = yp + pl * g.Ho * g.Wo;
        int64_t* ipl = ip + pl * g.Ho * g.Wo;
        if (simple) {
          // 2x2 windows, stride 2: the common case, without bounds checks.
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const T* r0 = xpl + (2 * oh) * g.W;
            const T* r1 = r0 + g.W;
            T* yr = ypl + oh * g.Wo;
            int64_t* ir = ipl + oh * g.Wo;
            const int64_t rbase = 2 * oh * g.W;
            // A later value wins if it is larger, or NaN while the best is not.
            for (int64_t ow = 0; ow < g.Wo; ++ow) {
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
              bi = t ? c + g.W : bi;
              v = r1[c + 1];
              t = (v > best) | ((v != v) & (best == best));
              best = t ? v : best;
              bi = t ? c + g.W + 1 : bi;
              yr[ow] = best;
              ir[ow] = rbase + bi;
            }
          }
          continue;
        }
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          int64_t ki0, ki1;
          int64_t h0 = window(oh, p.stride[0], p.padding[0], p.dilation[0], p.kernel[0], g.H, &ki0, &ki1);
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            int64_t kj0, kj1;
            int64_t w0 = window(ow, p.stride[1], p.padding[1], p.dilation[1], p.kernel[1], g.W, &kj0, &kj1);
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
            ipl[oh * g.Wo + ow] = bi < 0 ? 0 : bi;
          }
        }
      }
    });
  });
}

void max_pool2d_backward(const Tensor& gy_in, const Tensor& indices_in, const Tensor& gx) {
  Tensor gy = contig(gy_in), indices = contig(indices_in);
  check<ValueError>(gx.is_contiguous(), "max_pool2d_backward: grad_input must be contiguous");
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
  Tensor x = contig(x_in);
  PoolGeom g = pool_geom(x, out);
  check<ValueError>(out.is_contiguous(), "avg_pool2d: output must be contiguous");
  visit_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.Ho * g.Wo, 1)), [&](int64_t a, int64_t b) {
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
  Tensor gy = contig(gy_in);
  check<ValueError>(gx.is_contiguous(), "avg_pool2d_backward: grad_input must be contiguous");
  PoolGeom g = pool_geom(gx, gy);
  fill(gx, 0);
  visit_float(gy.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    T* gxp = static_cast<T*>(gx.data_ptr());
    parallel_for(0, g.planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.Ho * g.Wo, 1)), [&](int64_t a, int64_t b) {
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
