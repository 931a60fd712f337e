// Direct convolution kernels for few input taps, float32, AVX2 and AVX-512: the forward pass and
// the weight gradient without the GEMM.
//
// When each output sees few input values (C_in * kh * kw small, e.g. a first layer on images), the
// GEMM's packing costs more than its arithmetic. These kernels instead walk output rows, keeping
// a block of output channels x the row's vectors of accumulators in registers, and add each tap's
// shifted input row times its weight. Stride 1, dilation 1, one group, rows of at most 32 outputs.
// Each kernel is written once for a SIMD-traits type S (gemm_kernels.h's Avx2<float> or
// Avx512<float>), as the GEMM's micro-kernels are; avx512_call compiles the AVX-512 instances.
#include <algorithm>
#include <type_traits>

#include "core/cpu/conv_common.h"

namespace nabla::cpu::NABLA_CPU_ISA::conv_internal {

#ifdef NABLA_GEMM_AVX2
namespace {
using gemm_internal::Avx2;
using gemm_internal::Avx512;

// f(std::integral_constant<int, n>{}) for a run-time n in [1, Max] (larger n: Max).
template <int Max, class F>
void with_constant(int64_t n, const F& f) {
  if constexpr (Max > 1) {
    if (n < Max) return with_constant<Max - 1>(n, f);
  }
  f(std::integral_constant<int, Max>{});
}

// Splits O output channels into blocks for the direct kernels, whose accumulators live in
// registers: f(std::integral_constant<int, OB>{}, o0) for blocks of OBmax channels, then one
// block of the channels left over (fewer than OBmax).
template <int OBmax, class F>
void over_channel_blocks(int64_t O, const F& f) {
  int64_t o = 0;
  for (; o + OBmax <= O; o += OBmax) f(std::integral_constant<int, OBmax>{}, o);
  if constexpr (OBmax > 1) {
    if (o < O) with_constant<OBmax - 1>(O - o, [&](auto ob) { f(ob, o); });
  }
}

// Calls f(std::integral_constant<int, NV>) with NV = the vectors of S an output row needs (Wo <= 32).
template <class S, class F>
void with_row_vectors(int64_t Wo, const F& f) {
  with_constant<32 / S::L>((Wo + S::L - 1) / S::L, f);
}

// Kernel K for traits S. For Avx512, compiled for AVX-512 as a function of its own: flatten inlines
// K into avx512_call and, into K, the traits' functions (which carry the target attribute
// themselves; one on the kernel template would apply to its AVX2 instances too). For Avx2, a plain
// call, or with Isolated one kept out of the caller: inlined into the dispatch code around it, the
// AVX2 forward kernel ran 1.4x slower (short of general registers, GCC reloaded the input rows once
// per channel), while the weight gradient's kernel ran 1.15x slower when not inlined.
template <auto K, class... A>
[[gnu::flatten]] NABLA_AVX512 void avx512_call(A... a) {
  K(a...);
}
template <auto K, class... A>
[[gnu::flatten, gnu::noinline]] void isolated_call(A... a) {
  K(a...);
}
template <class S, auto K, bool Isolated = false, class... A>
void run(const A&... a) {
  if constexpr (std::is_same_v<S, Avx512<float>>) avx512_call<K>(a...);
  else if constexpr (Isolated) isolated_call<K>(a...);
  else K(a...);
}

// Whether the templated kernels get AVX-512 instances. clang checks the vector ABI of every call in
// an instance before inlining (GCC after it, inside avx512_call), so it refuses __m512 values in
// the instances compiled without the AVX-512 target: a clang build runs the AVX2 instances on an
// AVX-512 machine (same results; the hand-written direct_wgrad_o keeps its AVX-512 code).
#if defined(__clang__)
constexpr bool kAvx512Instances = false;
#else
constexpr bool kAvx512Instances = true;
#endif

// The kernels below are instantiated on Avx512 traits in functions without the AVX-512 target
// (inlined into avx512_call before code generation), where GCC warns that __m512 values would be
// passed differently: they never are.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// ---- forward --------------------------------------------------------------------------------------
// y rows of output channels [o0, o0 + OB) = bias + sum over taps (c, ki, kj) of w * the padded
// input row shifted by kj: OB x NV accumulators (a row of Wo <= NV * L outputs, the last vector
// stored under a mask), NV input vectors and a broadcast weight in registers.
template <class S, int OB, int NV>
void direct_rows(const float* xpad, int64_t Hp, int64_t Wp, int64_t C, int64_t kh, int64_t kw, const float* w,
                 const float* bias, int64_t o0, int64_t Ho, int64_t Wo, float* y) {
  using V = typename S::V;
  constexpr int L = S::L;
  const typename S::M last = S::first(Wo - L * (NV - 1));
  const int64_t ckk = C * kh * kw;
  for (int64_t oy = 0; oy < Ho; ++oy) {
    // Every loop over the accumulators is unrolled: one that indexes them with a variable makes
    // GCC keep them in memory (see ukernel_avx2 in gemm_kernels.h).
    V acc[OB][NV];
#pragma GCC unroll 8
    for (int ob = 0; ob < OB; ++ob)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[ob][v] = S::set1(bias ? bias[o0 + ob] : 0.0f);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        const float* row = xpad + (c * Hp + oy + ki) * Wp;
        for (int64_t kj = 0; kj < kw; ++kj) {
          V xv[NV];
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) xv[v] = S::loadu(row + kj + L * v);
          const float* wt = w + o0 * ckk + (c * kh + ki) * kw + kj;
#pragma GCC unroll 8
          for (int ob = 0; ob < OB; ++ob) {
            const V wv = S::bcast(wt + ob * ckk);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[ob][v] = S::fma(wv, xv[v], acc[ob][v]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int ob = 0; ob < OB; ++ob) {
      float* yr = y + ((o0 + ob) * Ho + oy) * Wo;
#pragma GCC unroll 4
      for (int v = 0; v + 1 < NV; ++v) S::storeu(yr + L * v, acc[ob][v]);
      S::mask_storeu(yr + L * (NV - 1), last, acc[ob][NV - 1]);
    }
  }
}

// All output channels of one image: blocks of as many channels as the registers allow
// (OB * NV + NV + 1 <= registers, at most 8).
template <class S>
void direct_image(const float* xpad, int64_t Hp, int64_t Wp, const ConvGeom& g, const float* w, const float* bias,
                  float* y) {
  with_row_vectors<S>(g.Wo, [&](auto nv) {
    constexpr int NV = decltype(nv)::value, OBmax = std::min(8, (S::registers - NV - 1) / NV);
    over_channel_blocks<OBmax>(g.O, [&](auto ob, int64_t o) {
      run<S, &direct_rows<S, decltype(ob)::value, NV>, true>(xpad, Hp, Wp, g.C, g.kh, g.kw, w, bias, o, g.Ho, g.Wo, y);
    });
  });
}

// ---- weight gradient ------------------------------------------------------------------------------
// gw[o][tap] = sum over images and output pixels of gy[n][o][pixel] * x_padded[n][c][oy + ki][ox + kj].

// One kernel row: OB output channels x KW taps (input channel c, row ki) accumulate in registers
// over the images [n0, n1) and their output rows; each gy row is NV vectors, the last loaded under
// a mask. Each loaded input vector serves OB channels and each loaded gy vector KW taps, so the
// loop is bound by FMAs.
template <class S, int OB, int KW, int NV>
void direct_wgrad_row(const float* xpad, const ConvGeom& g, int64_t Hp, int64_t Wp, const float* gy, int64_t n0,
                      int64_t n1, int64_t o0, int64_t c, int64_t ki, float* gw) {
  using V = typename S::V;
  constexpr int L = S::L;
  const typename S::M last = S::first(g.Wo - L * (NV - 1));
  V acc[OB][KW];  // in registers: every loop over it is unrolled (see direct_rows)
#pragma GCC unroll 4
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) acc[b][j] = S::zero();
  for (int64_t n = n0; n < n1; ++n) {
    const float* xc = xpad + (n * g.C + c) * Hp * Wp + ki * Wp;
    const float* gn = gy + (n * g.O + o0) * g.Ho * g.Wo;
    for (int64_t oy = 0; oy < g.Ho; ++oy) {
      const float* row = xc + oy * Wp;
      const float* gr = gn + oy * g.Wo;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        V gv[OB];
#pragma GCC unroll 4
        for (int b = 0; b < OB; ++b)
          gv[b] =
              v + 1 < NV ? S::loadu(gr + b * g.Ho * g.Wo + L * v) : S::maskz_loadu(gr + b * g.Ho * g.Wo + L * v, last);
#pragma GCC unroll 5
        for (int j = 0; j < KW; ++j) {
          const V xv = S::loadu(row + j + L * v);
#pragma GCC unroll 4
          for (int b = 0; b < OB; ++b) acc[b][j] = S::fma(gv[b], xv, acc[b][j]);
        }
      }
    }
  }
  const int64_t ckk = g.ckk();
#pragma GCC unroll 4
  for (int b = 0; b < OB; ++b)
#pragma GCC unroll 5
    for (int j = 0; j < KW; ++j) gw[(o0 + b) * ckk + (c * g.kh + ki) * KW + j] = S::sum(acc[b][j]);
}

#pragma GCC diagnostic pop

// Kernels KW = 3 or 5 wide: blocks of output channels (OB * KW + OB <= registers, at most 4; the
// input vector may be a memory operand), for each input channel and kernel row.
template <class S, int KW>
void direct_wgrad(const float* xpad, const ConvGeom& g, int64_t Hp, int64_t Wp, const float* gy, int64_t n0, int64_t n1,
                  float* gw) {
  constexpr int OBmax = std::min(4, S::registers / (KW + 1));
  with_row_vectors<S>(g.Wo, [&](auto nv) {
    over_channel_blocks<OBmax>(g.O, [&](auto ob, int64_t o0) {
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t ki = 0; ki < g.kh; ++ki)
          run<S, &direct_wgrad_row<S, decltype(ob)::value, KW, decltype(nv)::value>>(xpad, g, Hp, Wp, gy, n0, n1, o0, c,
                                                                                     ki, gw);
    });
  });
}

// Other kernel widths (AVX-512 only): one output channel at a time, all its taps in registers.
NABLA_AVX512 void direct_wgrad_o(const float* xpad, int64_t n0, int64_t n1, int64_t C, int64_t Hp, int64_t Wp,
                                 int64_t kh, int64_t kw, const float* gy, int64_t O, int64_t o, int64_t Ho, int64_t Wo,
                                 float* gw) {
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

// The padded images' geometry: rows are read as vectors of up to 32 values from kj on, so the
// buffer is wide enough for every load to stay inside.
int64_t padded_height(const ConvGeom& g) { return g.H + 2 * g.ph; }
int64_t padded_width(const ConvGeom& g) { return std::max<int64_t>(g.W + 2 * g.pw, g.kw + 32); }

}  // namespace

// Direct kernels apply to stride 1, dilation 1, one group, few taps (a first layer on images) and
// rows of at most 32 outputs; the AVX2 weight gradient only to kernels 3 or 5 wide.
bool direct_conv_applies(const ConvGeom& g) {
  return g.G == 1 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.ckk() <= 64 && g.Wo >= 1 && g.Wo <= 32;
}

bool direct_wgrad_applies(const ConvGeom& g) {
  return direct_conv_applies(g) && (avx512_kernels() || g.kw == 3 || g.kw == 5);
}

void direct_conv(const float* xp, const float* wp, const float* bp, const ConvGeom& g, float* yp) {
  const int64_t Hp = padded_height(g), Wp = padded_width(g);
  const bool avx512 = avx512_kernels();
  parallel_for(0, g.N, 1, [&](int64_t n0, int64_t n1) {
    float* xpad = thread_scratch<float>(Scratch::conv_image, g.C * Hp * Wp);
    std::fill(xpad, xpad + g.C * Hp * Wp, 0.0f);
    for (int64_t n = n0; n < n1; ++n) {
      copy_planes(xp + n * g.C * g.H * g.W, g.C, g.H, g.W, xpad + g.ph * Wp + g.pw, Hp * Wp, Wp);
      float* yn = yp + n * g.O * g.Ho * g.Wo;
      if constexpr (kAvx512Instances) {
        if (avx512) {
          direct_image<Avx512<float>>(xpad, Hp, Wp, g, wp, bp, yn);
          continue;
        }
      }
      direct_image<Avx2<float>>(xpad, Hp, Wp, g, wp, bp, yn);
    }
  });
}

void direct_conv_weight_grad(const float* xp, const float* gyp, const ConvGeom& g, float* gwp) {
  const int64_t Hp = padded_height(g), Wp = padded_width(g), ckk = g.ckk();
  const bool avx512 = avx512_kernels();
  // The images are split into one share per thread; each share pads its images and accumulates a
  // whole weight gradient of its own, and the shares are summed at the end. (Splitting the output
  // channels instead left the threads unequal work: 10 channels in blocks of 4 are 4+4+2.)
  Tensor buf = internal::make_empty({g.N * g.C * Hp * Wp}, DType::f32, kCPU);
  float* xpad = buf.data_ptr<float>();
  over_image_shares(g.N, g.O * ckk, gwp, [&](int64_t n0, int64_t n1, float* gw) {
    std::fill(xpad + n0 * g.C * Hp * Wp, xpad + n1 * g.C * Hp * Wp, 0.0f);
    for (int64_t n = n0; n < n1; ++n)
      copy_planes(xp + n * g.C * g.H * g.W, g.C, g.H, g.W, xpad + (n * g.C * Hp + g.ph) * Wp + g.pw, Hp * Wp, Wp);
    if (avx512 && g.kw != 3 && g.kw != 5) {
      for (int64_t o = 0; o < g.O; ++o)
        direct_wgrad_o(xpad, n0, n1, g.C, Hp, Wp, g.kh, g.kw, gyp, g.O, o, g.Ho, g.Wo, gw);
      return;
    }
    auto rows = [&](auto simd) {
      using S = typename decltype(simd)::type;
      if (g.kw == 3) direct_wgrad<S, 3>(xpad, g, Hp, Wp, gyp, n0, n1, gw);
      else direct_wgrad<S, 5>(xpad, g, Hp, Wp, gyp, n0, n1, gw);
    };
    if constexpr (kAvx512Instances) {
      if (avx512) return rows(type_tag<Avx512<float>>{});
    }
    rows(type_tag<Avx2<float>>{});
  });
}
#else
bool direct_conv_applies(const ConvGeom&) { return false; }
bool direct_wgrad_applies(const ConvGeom&) { return false; }
void direct_conv(const float*, const float*, const float*, const ConvGeom&, float*) {}
void direct_conv_weight_grad(const float*, const float*, const ConvGeom&, float*) {}
#endif

}  // namespace nabla::cpu::NABLA_CPU_ISA::conv_internal
