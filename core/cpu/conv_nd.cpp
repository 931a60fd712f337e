// Convolution over any number of spatial dims (1 to 3) on the CPU, the path of conv3d: per image
// and group, the input patches are unfolded into a matrix (vol2col) and multiplied with the
// weights by the GEMM; the input gradient folds the patch gradients back (col2vol), the weight
// gradient multiplies the output gradient with the unfolded patches. 2-D float32/float64
// convolutions have their own faster kernels (core/cpu/conv_gemm.cpp).
//
// float16 and bfloat16 convolutions of every dimension run here too. Where the products would take
// the low-precision GEMM's convert kernel, 2-D ones run as the float32 convolution of float32 copies
// (through_float32 below). Otherwise the patches of a chunk of
// images are unfolded side by side in the 16-bit dtype (a copy), the products run on the low-precision GEMM (gemm_lowp.h: AMX or
// AVX512_BF16 for bfloat16, a float32 conversion in the packing otherwise) with float32 sums, the
// bias is added to the float32 sums, and each output is rounded once. The input gradient's
// fold-back and the weight gradient's sum over the images stay in float32 until the last store.
#include <algorithm>
#include <array>
#include <cstring>

#include "core/cpu/gemm_lowp.h"
#include "core/cpu/kernels.h"
#include "core/cpu/lowp.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {
namespace {

// The geometry, with every spatial dim (up to 3; unused dims have size 1).
struct GeomNd {
  int64_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0, nd = 0;
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
  int64_t rows() const { return Cg * k_size(); }  // of the unfolded matrix: (c, kd, kh, kw)
};

GeomNd geom_nd(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
  GeomNd g;
  g.nd = p.ndim;
  g.N = x.sizes()[0];
  g.C = x.sizes()[1];
  g.O = w.sizes()[0];
  g.G = p.groups;
  g.Cg = g.C / g.G;
  g.Og = g.O / g.G;
  // Spatial dims right-aligned in the 3 slots (a 1-D conv uses the last one).
  for (int64_t i = 0; i < g.nd; ++i) {
    int64_t s = 3 - g.nd + i;
    g.in[s] = x.sizes()[2 + i];
    g.k[s] = w.sizes()[2 + i];
    g.out[s] = y.sizes()[2 + i];
    g.stride[s] = p.stride[i];
    g.pad[s] = p.padding[i];
    g.dil[s] = p.dilation[i];
  }
  return g;
}

// col (rows, out_size; row stride ldcol) from one image's group, channels [c0, c1) (x points at
// channel c0's plane): col[(c, t), o] = x[c - c0, o * stride - pad + t * dil], zero outside the input. With `fold`, the other
// way: x[...] += col[...] (x zeroed by the caller). A stride-1 last dim copies (or adds) whole row
// segments, the padding clamped off their ends.
template <bool Fold, class T>
void unfold(const GeomNd& g, std::conditional_t<Fold, T*, const T*> x, std::conditional_t<Fold, const T*, T*> col,
            int64_t ldcol, int64_t c0, int64_t c1) {
  const int64_t ow_n = g.out[2];
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t a = 0; a < g.k[0]; ++a)
      for (int64_t b = 0; b < g.k[1]; ++b)
        for (int64_t e = 0; e < g.k[2]; ++e) {
          const int64_t row = ((c * g.k[0] + a) * g.k[1] + b) * g.k[2] + e;
          auto cr = col + row * ldcol;
          const int64_t iw0 = e * g.dil[2] - g.pad[2];  // the input column of ow = 0
          // With stride 1, ow in [lo, hi) reads inside the row (iw = iw0 + ow in [0, in[2])).
          const int64_t lo = std::clamp<int64_t>(-iw0, 0, ow_n), hi = std::clamp<int64_t>(g.in[2] - iw0, lo, ow_n);
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.stride[0] - g.pad[0] + a * g.dil[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.stride[1] - g.pad[1] + b * g.dil[1];
              auto r = cr + (od * g.out[1] + oh) * ow_n;
              const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
              if (!inside) {
                if constexpr (!Fold) std::fill(r, r + ow_n, T(0));
                continue;
              }
              auto xr = x + (((c - c0) * g.in[0] + id) * g.in[1] + ih) * g.in[2];
              if (g.stride[2] == 1) {
                if constexpr (Fold) {
                  for (int64_t ow = lo; ow < hi; ++ow) xr[iw0 + ow] += r[ow];
                } else {
                  std::fill(r, r + lo, T(0));
                  std::copy(xr + iw0 + lo, xr + iw0 + hi, r + lo);
                  std::fill(r + hi, r + ow_n, T(0));
                }
                continue;
              }
              for (int64_t ow = 0; ow < ow_n; ++ow) {
                const int64_t iw = ow * g.stride[2] + iw0;
                const bool ok = iw >= 0 && iw < g.in[2];
                if constexpr (Fold) {
                  if (ok) xr[iw] += r[ow];
                } else {
                  r[ow] = ok ? xr[iw] : T(0);
                }
              }
            }
          }
        }
}
template <bool Fold, class T>
void unfold(const GeomNd& g, std::conditional_t<Fold, T*, const T*> x, std::conditional_t<Fold, const T*, T*> col) {
  unfold<Fold, T>(g, x, col, g.out_size(), 0, g.Cg);
}

// Runs f(T*) on out's memory, through a contiguous temporary when out is strided.
template <class T, class F>
void into(const Tensor& out, F&& f) {
  if (out.is_contiguous()) return f(static_cast<T*>(out.data_ptr()));
  Tensor tmp = internal::make_empty(out.sizes(), out.dtype(), out.device());
  f(static_cast<T*>(tmp.data_ptr()));
  copy(tmp, out);
}

// ---- float16 / bfloat16 ------------------------------------------------------------------------
// The images go through the GEMM a chunk at a time, side by side: the chunk's unfolded patches are
// the columns of one B (rows, chunk * out_size), so the weights are packed once per chunk rather
// than once per image and the GEMM is wide enough to thread well. The unfolding, the fold-back and
// the rounding are threaded over (image, channel). A chunk's buffers stay under kChunkBytes; how many
// images that is depends on the shapes only, so the bits of a result never depend on the threads.

constexpr int64_t kChunkBytes = int64_t(24) << 20;

// Images per chunk, when one image's column of the chunk takes `per_image` bytes.
int64_t chunk_images(const GeomNd& g, int64_t per_image) {
  return std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(per_image, 1), 1, g.N);
}

// f(i, c) for the images i in [0, ni) and channels c in [0, nc), threaded.
template <class F>
void for_image_channels(int64_t ni, int64_t nc, int64_t work_per_item, const F& f) {
  parallel_for(0, ni * nc, std::max<int64_t>(1, 32768 / std::max<int64_t>(work_per_item, 1)),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) f(t / nc, t % nc);
               });
}

template <class T>
void conv_lowp(const GeomNd& g, const T* xp, const T* wp, const T* bp, T* yp) {
  const int64_t osz = g.out_size(), rows = g.rows(), ksz = g.k_size();
  const int64_t chunk = chunk_images(g, rows * osz * int64_t(sizeof(T)) + g.Og * osz * int64_t(sizeof(float)));
  T* col = thread_scratch<T>(Scratch::conv_col, rows * chunk * osz);
  float* acc = thread_scratch<float>(Scratch::conv_panel_a, g.Og * chunk * osz);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t ni = std::min(chunk, g.N - n0), ld = ni * osz;
    for (int64_t gr = 0; gr < g.G; ++gr) {
      // col (rows, ni * osz): image i's patches in columns [i * osz, (i + 1) * osz)
      for_image_channels(ni, g.Cg, ksz * osz, [&](int64_t i, int64_t c) {
        unfold<false, T>(g, xp + ((n0 + i) * g.C + gr * g.Cg + c) * g.in_size(), col + i * osz, ld, c, c + 1);
      });
      // acc (Og, ni * osz) = W_g (Og, rows) @ col, in float32
      gemm_lowp<T, float>(g.Og, ld, rows, 1.0f, wp + gr * g.Og * rows, rows, 1, col, ld, 1, 0.0f, acc, ld);
      for_image_channels(ni, g.Og, osz, [&](int64_t i, int64_t o) {
        float* a = acc + o * ld + i * osz;
        if (bp) {
          const float v = static_cast<float>(bp[gr * g.Og + o]);
          for (int64_t s = 0; s < osz; ++s) a[s] += v;
        }
        lowp::from_float(a, osz, yp + ((n0 + i) * g.O + gr * g.Og + o) * osz);
      });
    }
  }
}

// gy of a chunk's images, group gr, as one (Og, ni * osz) matrix: image i in columns [i * osz, ...).
template <class T>
void gather_grad_out(const GeomNd& g, const T* gyp, int64_t n0, int64_t ni, int64_t gr, T* dst) {
  const int64_t osz = g.out_size(), ld = ni * osz;
  for_image_channels(ni, g.Og, osz, [&](int64_t i, int64_t o) {
    std::memcpy(dst + o * ld + i * osz, gyp + ((n0 + i) * g.O + gr * g.Og + o) * osz, osz * sizeof(T));
  });
}

template <class T>
void conv_input_grad_lowp(const GeomNd& g, const T* gyp, const T* wp, T* gxp) {
  const int64_t osz = g.out_size(), rows = g.rows(), isz = g.in_size(), ksz = g.k_size();
  const int64_t chunk = chunk_images(g, rows * osz * int64_t(sizeof(float)) + g.Og * osz * int64_t(sizeof(T)));
  float* col = thread_scratch<float>(Scratch::conv_panel_a, rows * chunk * osz);
  T* gyc = thread_scratch<T>(Scratch::conv_panel_b, g.Og * chunk * osz);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t ni = std::min(chunk, g.N - n0), ld = ni * osz;
    for (int64_t gr = 0; gr < g.G; ++gr) {
      gather_grad_out(g, gyp, n0, ni, gr, gyc);
      // col (rows, ni * osz) = W_g^T (rows, Og) @ gy_g (Og, ni * osz), in float32, folded back per channel.
      gemm_lowp<T, float>(rows, ld, g.Og, 1.0f, wp + gr * g.Og * rows, 1, rows, gyc, ld, 1, 0.0f, col, ld);
      for_image_channels(ni, g.Cg, ksz * osz, [&](int64_t i, int64_t c) {
        float* img = thread_scratch<float>(Scratch::conv_image, isz);
        std::fill(img, img + isz, 0.0f);
        unfold<true, float>(g, img, col + i * osz, ld, c, c + 1);
        lowp::from_float(img, isz, gxp + ((n0 + i) * g.C + gr * g.Cg + c) * isz);
      });
    }
  }
}

template <class T>
void conv_weight_grad_lowp(const GeomNd& g, const T* xp, const T* gyp, T* gwp) {
  const int64_t osz = g.out_size(), rows = g.rows(), ksz = g.k_size();
  const int64_t chunk = chunk_images(g, (rows + g.Og) * osz * int64_t(sizeof(T)));
  T* col = thread_scratch<T>(Scratch::conv_col, rows * chunk * osz);
  T* gyc = thread_scratch<T>(Scratch::conv_panel_b, g.Og * chunk * osz);
  // The float32 sum over the images, rounded once at the end.
  float* acc = thread_scratch<float>(Scratch::conv_panel_a, g.O * rows);
  std::fill(acc, acc + g.O * rows, 0.0f);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t ni = std::min(chunk, g.N - n0), ld = ni * osz;
    for (int64_t gr = 0; gr < g.G; ++gr) {
      for_image_channels(ni, g.Cg, ksz * osz, [&](int64_t i, int64_t c) {
        unfold<false, T>(g, xp + ((n0 + i) * g.C + gr * g.Cg + c) * g.in_size(), col + i * osz, ld, c, c + 1);
      });
      gather_grad_out(g, gyp, n0, ni, gr, gyc);
      // gw_g (Og, rows) += gy_g (Og, ni * osz) @ col^T (ni * osz, rows)
      gemm_lowp<T, float>(g.Og, rows, ld, 1.0f, gyc, ld, 1, col, 1, ld, 1.0f, acc + gr * g.Og * rows, rows);
    }
  }
  lowp::from_float(acc, g.O * rows, gwp);
}

// Whether a 16-bit 2-D convolution runs as the float32 one on float32 copies of its operands: where
// its products would take the GEMM's convert kernel anyway (float16 always; bfloat16 on CPUs without
// AMX or a fast VDPBF16PS, gemm_lowp.h), that is the same arithmetic (float32 products and sums,
// rounded once on store), and the float32 kernels (patches packed straight into the GEMM's panels,
// direct kernels for few taps) do it faster than unfolding the 16-bit patches first.
bool through_float32(DType dt, const ConvParams& p) {
  return p.ndim == 2 && (dt == DType::f16 || lowp_kernel() == LowpKernel::convert);
}

Tensor float32_copy(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor r = internal::make_empty(t.sizes(), DType::f32, kCPU);
  copy(t, r);
  return r;
}

// out = f(float32 result), rounded once.
template <class F>
void via_float32(const Tensor& out, F&& f) {
  Tensor r = internal::make_empty(out.sizes(), DType::f32, kCPU);
  f(r);
  copy(r, out);
}

}  // namespace

void conv_nd(const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const ConvParams& p, const Tensor& out) {
  Tensor x = contig(x_in), w = contig(w_in), b = bias.defined() ? contig(bias) : bias;
  if (lowp::is_lowp(x.dtype()) && through_float32(x.dtype(), p))
    return via_float32(out, [&](const Tensor& r) { conv(float32_copy(x), float32_copy(w), float32_copy(b), p, r); });
  const GeomNd g = geom_nd(x, w, out, p);
  if (lowp::is_lowp(x.dtype())) {
    return lowp::visit(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      into<T>(out, [&](T* yp) {
        conv_lowp<T>(g, static_cast<const T*>(x.data_ptr()), static_cast<const T*>(w.data_ptr()),
                     b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr, yp);
      });
    });
  }
  visit_float(x.dtype(), "conv", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* wp = static_cast<const T*>(w.data_ptr());
    const T* bp = b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr;
    const int64_t osz = g.out_size(), rows = g.rows();
    into<T>(out, [&](T* yp) {
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gr = 0; gr < g.G; ++gr) {
          T* col = thread_scratch<T>(Scratch::conv_col, rows * osz);
          unfold<false, T>(g, xp + (n * g.C + gr * g.Cg) * g.in_size(), col);
          T* yg = yp + (n * g.O + gr * g.Og) * osz;
          // y_g (Og, osz) = W_g (Og, rows) @ col (rows, osz)
          gemm_t<T>(g.Og, osz, rows, T(1), wp + gr * g.Og * rows, rows, 1, col, osz, 1, T(0), yg, osz);
          if (bp)
            for (int64_t o = 0; o < g.Og; ++o) {
              const T v = bp[gr * g.Og + o];
              for (int64_t i = 0; i < osz; ++i) yg[o * osz + i] += v;
            }
        }
    });
  });
}

void conv_nd_input_grad(const Tensor& gy_in, const Tensor& w_in, const ConvParams& p, const Tensor& gx) {
  Tensor gy = contig(gy_in), w = contig(w_in);
  if (lowp::is_lowp(gy.dtype()) && through_float32(gy.dtype(), p))
    return via_float32(gx, [&](const Tensor& r) { conv_input_grad(float32_copy(gy), float32_copy(w), p, r); });
  const GeomNd g = geom_nd(gx, w, gy, p);
  if (lowp::is_lowp(gy.dtype())) {
    return lowp::visit(gy.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      into<T>(gx, [&](T* gxp) {
        conv_input_grad_lowp<T>(g, static_cast<const T*>(gy.data_ptr()), static_cast<const T*>(w.data_ptr()), gxp);
      });
    });
  }
  visit_float(gy.dtype(), "conv_input_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    const T* wp = static_cast<const T*>(w.data_ptr());
    const int64_t osz = g.out_size(), rows = g.rows();
    into<T>(gx, [&](T* gxp) {
      std::fill(gxp, gxp + g.N * g.C * g.in_size(), T(0));
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gr = 0; gr < g.G; ++gr) {
          T* col = thread_scratch<T>(Scratch::conv_col, rows * osz);
          // col (rows, osz) = W_g^T (rows, Og) @ gy_g (Og, osz), folded back into the image.
          gemm_t<T>(rows, osz, g.Og, T(1), wp + gr * g.Og * rows, 1, rows, gyp + (n * g.O + gr * g.Og) * osz, osz, 1,
                    T(0), col, osz);
          unfold<true, T>(g, gxp + (n * g.C + gr * g.Cg) * g.in_size(), col);
        }
    });
  });
}

void conv_nd_weight_grad(const Tensor& x_in, const Tensor& gy_in, const ConvParams& p, const Tensor& gw) {
  Tensor x = contig(x_in), gy = contig(gy_in);
  if (lowp::is_lowp(x.dtype()) && through_float32(x.dtype(), p))
    return via_float32(gw, [&](const Tensor& r) { conv_weight_grad(float32_copy(x), float32_copy(gy), p, r); });
  const GeomNd g = geom_nd(x, gw, gy, p);
  if (lowp::is_lowp(x.dtype())) {
    return lowp::visit(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      into<T>(gw, [&](T* gwp) {
        conv_weight_grad_lowp<T>(g, static_cast<const T*>(x.data_ptr()), static_cast<const T*>(gy.data_ptr()), gwp);
      });
    });
  }
  visit_float(x.dtype(), "conv_weight_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* gyp = static_cast<const T*>(gy.data_ptr());
    const int64_t osz = g.out_size(), rows = g.rows();
    into<T>(gw, [&](T* gwp) {
      std::fill(gwp, gwp + g.O * rows, T(0));
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t gr = 0; gr < g.G; ++gr) {
          T* col = thread_scratch<T>(Scratch::conv_col, rows * osz);
          unfold<false, T>(g, xp + (n * g.C + gr * g.Cg) * g.in_size(), col);
          // gw_g (Og, rows) += gy_g (Og, osz) @ col^T (osz, rows)
          gemm_t<T>(g.Og, rows, osz, T(1), gyp + (n * g.O + gr * g.Og) * osz, osz, 1, col, 1, osz, T(1),
                    gwp + gr * g.Og * rows, rows);
        }
    });
  });
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
