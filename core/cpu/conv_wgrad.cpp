// The weight gradient of 2-D convolutions on the CPU, gw (O, C/G, kh, kw) = sum over images of
// gy @ patches^T: direct kernels for few taps (conv_direct.cpp), the GEMM over padded rows for
// stride 1, the GEMM with patches gathered on the fly (AVX-512), else the patches unfolded in
// chunks of images.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/cpu/conv_common.h"

namespace nabla::cpu::NABLA_CPU_ISA {

using namespace conv_internal;

namespace {

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

#ifdef NABLA_GEMM_AVX2
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

NABLA_AVX512 void gather_pixel_taps(const float* x, const TapTable& tt, int64_t slivers, int32_t ih0, int32_t iw0,
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
    _mm512_store_ps(out + (h / 2) * kc * 32 + (h % 2) * 16,
                    _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, x, 4));
  }
}

bool wgrad_gather_applies(const ConvGeom& g) {
  return avx512_kernels() && g.Cg * g.H * g.W < (int64_t(1) << 30) && g.H < (1 << 20) && g.W < (1 << 20);
}

void wgrad_gather(const float* xp, const float* gyp, const ConvGeom& g, float* gwp) {
  using namespace gemm_internal;
  const KernelSpec<float>& ks = kernel_spec_for_rows<float>(g.Og);
  const int64_t hw = g.hw_out(), ckk = g.ckk(), mr = ks.mr, kcmax = ks.kc;
  const int64_t nsl = (ckk + 31) / 32, msl = (g.Og + mr - 1) / mr, gsize = g.Og * ckk;
  Tensor taps = internal::make_empty({3 * nsl * 32}, DType::i32, kCPU);
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
            int32_t ih0 = static_cast<int32_t>((j / g.Wo) * g.sh - g.ph),
                    iw0 = static_cast<int32_t>((j % g.Wo) * g.sw - g.pw);
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
#else
bool wgrad_gather_applies(const ConvGeom&) { return false; }
void wgrad_gather(const float*, const float*, const ConvGeom&, float*) {}
#endif

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
        gemm_internal::transpose_tile_rows([&](int i) { return r[i] + p; }, dst + p * ldd + i0, ldd);
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
  using namespace gemm_internal;
  const KernelSpec<T>& ks = kernel_spec_for_rows<T>(g.Og);
  const int64_t Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw, plane = Hp * Wp, ckk = g.ckk(), hw = g.hw_out();
  const int64_t kimg = (g.Ho - 1) * Wp + g.Wo, mr = ks.mr, nr = ks.nr, kcmax = ks.kc;
  const int64_t msl = (g.Og + mr - 1) / mr, nsl = (ckk + nr - 1) / nr, gsize = g.Og * ckk;
  Tensor offs_buf = internal::make_empty({ckk}, DType::i64, kCPU);
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

// Any other convolution: gw_g (Og, ckk) = sum over chunks of images of gy (Og, nc*hw) @ col^T, where
// col (ckk, nc*hw) holds the chunk's patches unfolded.
template <class T>
void conv_weight_grad_unfold(const T* xp, const T* gyp, const ConvGeom& g, T* gwp) {
  int64_t hw = g.hw_out(), ckk = g.ckk();
  // Images per chunk: keep the unfolded patches of a chunk around 16 MB.
  int64_t chunk = std::clamp<int64_t>((int64_t(4) << 20) / std::max<int64_t>(ckk * hw, 1), 1, g.N);
  Tensor col_buf = internal::make_empty({ckk * hw * chunk}, dtype_of<T>(), kCPU);
  Tensor gyt_buf = internal::make_empty({g.Og * hw * chunk}, dtype_of<T>(), kCPU);
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
}

}  // namespace

void conv_weight_grad(const Tensor& x_in, const Tensor& gy_in, const ConvParams& p, const Tensor& gw) {
  if (p.ndim != 2 || lowp::is_lowp(x_in.dtype())) return conv_nd_weight_grad(x_in, gy_in, p, gw);
  Tensor x = contig(x_in), gy = contig(gy_in);
  ConvGeom g = geom(x, gw, gy, p);
  Tensor out = gw.is_contiguous() ? gw : internal::make_empty(gw.sizes(), gw.dtype(), gw.device());
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
    conv_weight_grad_unfold<T>(static_cast<const T*>(x.data_ptr()), static_cast<const T*>(gy.data_ptr()), g,
                               static_cast<T*>(out.data_ptr()));
  });
  if (!out.is_same(gw)) copy(out, gw);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
