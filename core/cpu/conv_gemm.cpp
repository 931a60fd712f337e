// 2-D convolutions on the CPU, NCHW: the forward pass and the input gradient (the weight gradient
// is in conv_wgrad.cpp, the direct kernels in conv_direct.cpp, pooling in pool.cpp).
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
#include <cstring>
#include <type_traits>

#include "core/cpu/conv_common.h"

namespace nabla::cpu::NABLA_CPU_ISA {

using namespace conv_internal;

namespace {

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

// Packs B(p0:p0+kc, j0:j0+nc) of one image's patch matrix (rows p = (c, ki, kj), columns
// j = (oh, ow)) straight from the image into nr-column slivers: im2col fused into GEMM packing.
#ifdef NABLA_GEMM_AVX2
// 16 patch values of one tap: x[base + ih * W + iw] at the shifted positions, 0 outside the image.
NABLA_AVX512 inline __m512 gather_tap(const float* x, __m512i ih, __m512i iw, __m512i dy, __m512i dx, __m512i base,
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
NABLA_AVX512 void im2col_pack32(const float* x, int64_t H, int64_t W, int64_t Wo, int64_t kh, int64_t kw, int64_t sh,
                                int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t p0, int64_t kc,
                                int64_t j0, int64_t nc, float* out) {
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
      const __m512i dy = _mm512_set1_epi32(static_cast<int32_t>(ki * dh)),
                    dx = _mm512_set1_epi32(static_cast<int32_t>(kj * dw));
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

#ifdef NABLA_GEMM_AVX2
// col2im for narrow images (W <= 16), stride 1, dilation 1: for each (c, ki, oh), the kw taps'
// patch rows are added into one register holding the image row, each loaded at its shift under a
// mask (masked-off lanes are never read), instead of kw short scalar loops. Writes x (no += needed).
bool narrow_col2im_applies(const ConvGeom& g) {
  return g.W <= 16 && g.kw <= 16 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}

// Lanes of mask m from r shifted back by `shift` bytes; masked-off lanes are never read, so the
// shifted start may lie before the row.
NABLA_AVX512 inline __m512 shifted_load(const float* r, __mmask16 m, int64_t shift) {
  return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(r) - shift));
}

NABLA_AVX512 void col2im_narrow_avx512(const float* col, const ConvGeom& g, float* x, int64_t ldcol) {
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
      _mm512_mask_storeu_ps(x + (c * g.H + ih) * g.W, row_mask,
                            _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
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
bool narrow_col2im_applies(const ConvGeom&) { return false; }
void col2im_narrow(const float*, const ConvGeom&, float*, int64_t) {}
#endif

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
void conv_forward_padded_rows(const T* xp, const gemm_internal::KernelSpec<T>& ks,
                              const SmallVector<gemm_internal::PackedA<T>, 2>& wpack, const T* bp, const ConvGeom& g,
                              T* yp) {
  using namespace gemm_internal;
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw, plane = Hp * Wp, ckk = g.ckk(), hw = g.hw_out();
  const int64_t ncols = (g.Ho - 1) * Wp + g.Wo;  // the last row's dropped columns are not computed
  const int64_t xbuf = g.Cg * plane + ks.nr;     // slack: packing copies whole nr-wide slivers
  Tensor offs_buf = internal::make_empty({ckk}, DType::i64, kCPU);
  int64_t* offs = static_cast<int64_t*>(offs_buf.data_ptr());
  for (int64_t p = 0; p < ckk; ++p) {
    int64_t c = p / (g.kh * g.kw), r = p % (g.kh * g.kw);
    offs[p] = c * plane + (r / g.kw) * g.dh * Wp + (r % g.kw) * g.dw;
  }
  const int64_t slivers = (g.Og + ks.mr - 1) / ks.mr, parts = row_parts(g.N * g.G, slivers);
  parallel_for(0, g.N * g.G * parts, 1, [&](int64_t t0, int64_t t1) {
    T* xpad = thread_scratch<T>(Scratch::conv_image, xbuf + g.Og * g.Ho * Wp);
    T* ybuf = xpad + xbuf;
    std::fill(xpad, xpad + xbuf, T(0));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / parts, part = t % parts, n = i / g.G, gr = i % g.G;
      const int64_t s0 = slivers * part / parts, s1 = slivers * (part + 1) / parts;
      const int64_t o0 = s0 * ks.mr, o1 = std::min<int64_t>(g.Og, s1 * ks.mr);
      copy_planes(xp + (n * g.C + gr * g.Cg) * g.H * g.W, g.Cg, g.H, g.W, xpad + g.ph * Wp + g.pw, plane, Wp);
      gemm_prepacked<T>(
          ks, wpack[gr], ncols,
          [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) {
            switch (ks.nr) {  // copies of a compile-time size compile to a few vector moves, not calls
              case 8: return pack_rows<8>(xpad, offs + p0, kc, j0, nc, out);
              case 16: return pack_rows<16>(xpad, offs + p0, kc, j0, nc, out);
              case 32: return pack_rows<32>(xpad, offs + p0, kc, j0, nc, out);
            }
            for (int64_t js = j0; js < j0 + nc; js += ks.nr) {
              T* o = out + ((js - j0) / ks.nr) * kc * ks.nr;
              for (int64_t p = 0; p < kc; ++p) std::memcpy(o + p * ks.nr, xpad + offs[p0 + p] + js, ks.nr * sizeof(T));
            }
          },
          T(1), T(0), ybuf, g.Ho * Wp, s0, s1);
      T* yg = yp + (n * g.O + gr * g.Og) * hw;
      for (int64_t o = o0; o < o1; ++o) {
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

// y (N, O, Ho, Wo) = conv(x, w) + bias, all contiguous, with geometry g.
template <class T>
void conv_forward(const T* xp, const T* wp, const T* bp, const ConvGeom& g, T* yp) {
  using namespace gemm_internal;
  if constexpr (std::is_same_v<T, float>) {
    if (direct_conv_applies(g)) return direct_conv(xp, wp, bp, g, yp);
  }
  const KernelSpec<T>& ks = kernel_spec_for_rows<T>(g.Og);
  int64_t hw = g.hw_out(), ckk = g.ckk();
  // The weights of each group, packed once for all images.
  SmallVector<PackedA<T>, 2> wpack;
  for (int64_t gr = 0; gr < g.G; ++gr) wpack.push_back(pack_a_all(ks, wp + gr * g.Og * ckk, ckk, 1, g.Og, ckk));
  if (padded_rows_applies(g)) return conv_forward_padded_rows<T>(xp, ks, wpack, bp, g, yp);
  const int64_t slivers = (g.Og + ks.mr - 1) / ks.mr, parts = row_parts(g.N * g.G, slivers);
  parallel_for(0, g.N * g.G * parts, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / parts, part = t % parts, n = i / g.G, gr = i % g.G;
      const int64_t s0 = slivers * part / parts, s1 = slivers * (part + 1) / parts;
      const int64_t o0 = s0 * ks.mr, o1 = std::min<int64_t>(g.Og, s1 * ks.mr);
      const T* xg = xp + (n * g.C + gr * g.Cg) * g.H * g.W;
      T* yg = yp + (n * g.O + gr * g.Og) * hw;
      T beta = T(0);
      if (bp) {
        for (int64_t o = o0; o < o1; ++o) std::fill(yg + o * hw, yg + (o + 1) * hw, bp[gr * g.Og + o]);
        beta = T(1);
      }
      if (ckk == 0) {
        if (!bp) std::fill(yg + o0 * hw, yg + o1 * hw, T(0));
        continue;
      }
      // y_g (Og, hw) = W_g (Og, ckk) @ patches (ckk, hw), rows o0..o1 of it
      if (g.is_pointwise()) {
        gemm_prepacked<T>(
            ks, wpack[gr], hw,
            [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) {
              pack_b(xg + p0 * hw + j0, hw, int64_t(1), kc, nc, ks.nr, out);
            },
            T(1), beta, yg, hw, s0, s1);
      } else {
        gemm_prepacked<T>(ks, wpack[gr], hw, Im2colPacker<T>{xg, g, ks.nr}, T(1), beta, yg, hw, s0, s1);
      }
    }
  });
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

}  // namespace

void conv(const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const ConvParams& p, const Tensor& out) {
  if (p.ndim != 2 || lowp::is_lowp(x_in.dtype())) return conv_nd(x_in, w_in, bias, p, out);
  Tensor x = contig(x_in), w = contig(w_in);
  ConvGeom g = geom(x, w, out, p);
  Tensor y = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  Tensor b = bias.defined() ? contig(bias) : bias;
  visit_float(x.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    conv_forward<T>(static_cast<const T*>(x.data_ptr()), static_cast<const T*>(w.data_ptr()),
                    b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr, g, static_cast<T*>(y.data_ptr()));
  });
  if (!y.is_same(out)) copy(y, out);
}

void conv_input_grad(const Tensor& gy_in, const Tensor& w_in, const ConvParams& p, const Tensor& gx) {
  if (p.ndim != 2 || lowp::is_lowp(gy_in.dtype())) return conv_nd_input_grad(gy_in, w_in, p, gx);
  Tensor gy = contig(gy_in), w = contig(w_in);
  ConvGeom g = geom(gx, w, gy, p);
  Tensor out = gx.is_contiguous() ? gx : internal::make_empty(gx.sizes(), gx.dtype(), gx.device());
  visit_float(gy.dtype(), "conv2d_input_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    const T* wp = static_cast<const T*>(w.data_ptr());
    T* gxp = static_cast<T*>(out.data_ptr());
    int64_t hw = g.hw_out(), ckk = g.ckk();
    if (input_grad_as_conv(g)) {
      Tensor wt_buf = internal::make_empty({g.C * g.Og * g.kh * g.kw}, gy.dtype(), kCPU);
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

}  // namespace nabla::cpu::NABLA_CPU_ISA
