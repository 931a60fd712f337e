// Convolution over any number of spatial dims (1 to 3) on the CPU, the path of conv3d: per image
// and group, the input patches are unfolded into a matrix (vol2col) and multiplied with the
// weights by the GEMM; the input gradient folds the patch gradients back (col2vol), the weight
// gradient multiplies the output gradient with the unfolded patches. 2-D float32/float64
// convolutions have their own faster kernels (core/cpu/conv_gemm.cpp).
//
// float16 and bfloat16 convolutions of every dimension run here too: the patches are unfolded in
// the 16-bit dtype (a copy), the products run on the low-precision GEMM (gemm_lowp.h: AMX or
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

// col (rows, out_size) from one image's group x (Cg, in...): col[(c, t), o] = x[c, o * stride - pad + t * dil],
// zero outside the input. With `fold`, the other way: x[...] += col[...] (x zeroed by the caller).
template <bool Fold, class T>
void unfold(const GeomNd& g, std::conditional_t<Fold, T*, const T*> x, std::conditional_t<Fold, const T*, T*> col) {
  const int64_t osz = g.out_size();
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t a = 0; a < g.k[0]; ++a)
      for (int64_t b = 0; b < g.k[1]; ++b)
        for (int64_t e = 0; e < g.k[2]; ++e) {
          const int64_t row = ((c * g.k[0] + a) * g.k[1] + b) * g.k[2] + e;
          auto cr = col + row * osz;
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.stride[0] - g.pad[0] + a * g.dil[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.stride[1] - g.pad[1] + b * g.dil[1];
              const int64_t base = (od * g.out[1] + oh) * g.out[2];
              const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
              auto xr = x + ((c * g.in[0] + id) * g.in[1] + ih) * g.in[2];
              for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                const int64_t iw = ow * g.stride[2] - g.pad[2] + e * g.dil[2];
                const bool ok = inside && iw >= 0 && iw < g.in[2];
                if constexpr (Fold) {
                  if (ok) xr[iw] += cr[base + ow];
                } else {
                  cr[base + ow] = ok ? xr[iw] : T(0);
                }
              }
            }
          }
        }
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

// Whether the unfolded matrix of an image is the image itself (1x1 kernel, stride 1, no padding).
bool unfold_is_identity(const GeomNd& g) {
  for (int i = 0; i < 3; ++i)
    if (g.k[i] != 1 || g.stride[i] != 1 || g.pad[i] != 0) return false;
  return true;
}

// The unfolded patches of image n, group gr: the image itself or the thread's scratch.
template <class T>
const T* patches(const GeomNd& g, const T* xp, int64_t n, int64_t gr) {
  const T* x = xp + (n * g.C + gr * g.Cg) * g.in_size();
  if (unfold_is_identity(g)) return x;
  T* col = thread_scratch<T>(Scratch::conv_col, g.rows() * g.out_size());
  unfold<false, T>(g, x, col);
  return col;
}

template <class T>
void conv_lowp(const GeomNd& g, const T* xp, const T* wp, const T* bp, T* yp) {
  const int64_t osz = g.out_size(), rows = g.rows();
  float* acc = thread_scratch<float>(Scratch::conv_image, g.Og * osz);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr) {
      const T* col = patches(g, xp, n, gr);
      // acc (Og, osz) = W_g (Og, rows) @ col (rows, osz), in float32
      gemm_lowp<T, float>(g.Og, osz, rows, 1.0f, wp + gr * g.Og * rows, rows, 1, col, osz, 1, 0.0f, acc, osz);
      T* yg = yp + (n * g.O + gr * g.Og) * osz;
      parallel_for(0, g.Og, std::max<int64_t>(1, 16384 / std::max<int64_t>(osz, 1)), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          float* a = acc + o * osz;
          if (bp) {
            const float v = static_cast<float>(bp[gr * g.Og + o]);
            for (int64_t i = 0; i < osz; ++i) a[i] += v;
          }
          lowp::from_float(a, osz, yg + o * osz);
        }
      });
    }
}

template <class T>
void conv_input_grad_lowp(const GeomNd& g, const T* gyp, const T* wp, T* gxp) {
  const int64_t osz = g.out_size(), rows = g.rows(), isz = g.Cg * g.in_size();
  const bool identity = unfold_is_identity(g);
  float* img = thread_scratch<float>(Scratch::conv_image, isz);
  float* col = identity ? img : thread_scratch<float>(Scratch::conv_rows, rows * osz);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr) {
      // col (rows, osz) = W_g^T (rows, Og) @ gy_g (Og, osz), in float32, folded back into the image.
      gemm_lowp<T, float>(rows, osz, g.Og, 1.0f, wp + gr * g.Og * rows, 1, rows, gyp + (n * g.O + gr * g.Og) * osz, osz,
                          1, 0.0f, col, osz);
      if (!identity) {
        std::fill(img, img + isz, 0.0f);
        unfold<true, float>(g, img, col);
      }
      lowp::from_float(img, isz, gxp + (n * g.C + gr * g.Cg) * g.in_size());
    }
}

template <class T>
void conv_weight_grad_lowp(const GeomNd& g, const T* xp, const T* gyp, T* gwp) {
  const int64_t osz = g.out_size(), rows = g.rows();
  // The float32 sum over the images, rounded once at the end.
  Tensor acc_t = internal::make_empty({g.O * rows}, DType::f32, kCPU);
  float* acc = acc_t.data_ptr<float>();
  std::fill(acc, acc + g.O * rows, 0.0f);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.G; ++gr) {
      const T* col = patches(g, xp, n, gr);
      // gw_g (Og, rows) += gy_g (Og, osz) @ col^T (osz, rows)
      gemm_lowp<T, float>(g.Og, rows, osz, 1.0f, gyp + (n * g.O + gr * g.Og) * osz, osz, 1, col, 1, osz, 1.0f,
                          acc + gr * g.Og * rows, rows);
    }
  lowp::from_float(acc, g.O * rows, gwp);
}

}  // namespace

void conv_nd(const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const ConvParams& p, const Tensor& out) {
  Tensor x = contig(x_in), w = contig(w_in), b = bias.defined() ? contig(bias) : bias;
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
