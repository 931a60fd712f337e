// Direct convolution kernels for few input taps (a first layer on images), float32, AVX2 and
// AVX-512: the forward pass and the weight gradient without the GEMM (see conv_common.h).
#include <algorithm>
#include <type_traits>

#include "core/cpu/conv_common.h"

namespace nabla::cpu::NABLA_CPU_ISA::conv_detail {

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
NABLA_AVX512 void direct_rows(const float* xpad, int64_t Hp, int64_t Wp, int64_t C, int64_t kh, int64_t kw,
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
NABLA_AVX512 void direct_wgrad_o(const float* xpad, int64_t n0, int64_t n1, int64_t C, int64_t Hp, int64_t Wp,
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
NABLA_AVX512 void direct_wgrad_row(const float* xpad, const ConvGeom& g, int64_t Hp, int64_t Wp, const float* gy,
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
#else
bool direct_conv_applies(const ConvGeom&) { return false; }
bool direct_wgrad_applies(const ConvGeom&) { return false; }
void direct_conv(const float*, const float*, const float*, const ConvGeom&, float*) {}
void direct_conv_weight_grad(const float*, const float*, const ConvGeom&, float*) {}
#endif

}  // namespace nabla::cpu::NABLA_CPU_ISA::conv_detail
