// What the CPU convolution kernels share (conv_gemm.cpp: forward and input gradient through the
// GEMM; conv_direct.cpp: direct kernels for few taps; conv_wgrad.cpp: weight gradients; pool.cpp):
// the 2-D geometry, whether the AVX-512 paths run, and helpers more than one of them uses.
// Internal to core/cpu; compiled into each ISA build (see kernels.h).
#pragma once

#include <algorithm>
#include <cstring>

#include "../impl.h"
#include "../parallel.h"
#include "gemm_kernels.h"
#include "isa.h"
#include "kernels.h"

namespace nabla::cpu::NABLA_CPU_ISA::conv_internal {

struct ConvGeom {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, G, Cg, Og;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t ckk() const { return Cg * kh * kw; }
  int64_t hw_out() const { return Ho * Wo; }
  bool is_pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

inline ConvGeom geom(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
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

// Whether the AVX-512 paths run (cpu::vector_isa(), chosen once at start-up); never in the
// portable build.
inline bool avx512_kernels() {
#ifdef NABLA_GEMM_AVX2
  return vector_isa() == Isa::avx512;
#else
  return false;
#endif
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
  Tensor acc = internal::make_empty({parts * total}, dtype_of<T>(), kCPU);
  T* accp = acc.data_ptr<T>();
  parallel_for(0, parts, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) f(N * t / parts, N * (t + 1) / parts, accp + t * total);
  });
  sum_shares(accp, parts, total, out);
}

// How many parts the output rows (the GEMM's mr-row slivers of output channels) of one image and
// group are split into, so that a convolution of fewer images x groups than threads (batch 1 at
// inference) still uses every thread: each part computes its rows from the same packed input.
inline int64_t row_parts(int64_t items, int64_t slivers) {
  const int64_t threads = get_num_threads();
  if (items >= threads || slivers < 2) return 1;
  return std::min<int64_t>(slivers, (threads + items - 1) / items);
}

// Copies C planes of H rows of W values from src into dst, plane c row h going to
// dst + c * dst_plane + h * dst_row: an image into the interior of a padded buffer.
template <class T>
void copy_planes(const T* src, int64_t C, int64_t H, int64_t W, T* dst, int64_t dst_plane, int64_t dst_row) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(dst + c * dst_plane + h * dst_row, src + (c * H + h) * W, W * sizeof(T));
}

// ---- stride-1 convolutions over padded rows (conv_gemm.cpp, conv_wgrad.cpp) ---------------------
// With stride 1, copy the image into a zero-padded buffer of width Wp and compute the outputs over
// whole padded rows: output "pixel" j = oh * Wp + ow (ow < Wp; columns past Wo are computed and
// dropped). Tap (c, ki, kj) then reads x_pad[c*Hp*Wp + ki*dh*Wp + kj*dw + j]: every row of the
// patch matrix is a contiguous run of the buffer, so GEMM packing is plain copies, no gathers. It
// pays while the dropped columns cost less than the gathers they save: Wp up to num/den times Wo.
inline bool padded_rows_applies(const ConvGeom& g, int64_t num = 3, int64_t den = 2) {
  return g.sh == 1 && g.sw == 1 && !g.is_pointwise() && g.ckk() > 0 && (g.W + 2 * g.pw) * den <= g.Wo * num;
}

// Direct kernels for few input taps (conv_direct.cpp): whether they apply to a float32 convolution,
// its forward pass and its weight gradient (x, w, gy, y, gw contiguous). False and no-ops in the
// portable build.
bool direct_conv_applies(const ConvGeom& g);
bool direct_wgrad_applies(const ConvGeom& g);
void direct_conv(const float* xp, const float* wp, const float* bp, const ConvGeom& g, float* yp);
void direct_conv_weight_grad(const float* xp, const float* gyp, const ConvGeom& g, float* gwp);

}  // namespace nabla::cpu::NABLA_CPU_ISA::conv_internal
