// CUDA 2-d pooling (NCHW or CHW), with the CPU's semantics (core/cpu/conv.cpp): max pooling
// returns the flat (h * W + w) position of each maximum within its plane and propagates NaN;
// average pooling follows PyTorch's window and divisor rules (ceil_mode, count_include_pad).
//
// nabla's own kernels rather than cuDNN's: cuDNN pooling returns no indices and has no ceil_mode.
// max_pool2d_backward scatters with atomics (its windows may overlap), or under
// use_deterministic_algorithms adds each plane's contributions in output order (scatter_add_ordered);
// avg_pool2d_backward gathers (each input element sums the windows that contain it), so it is
// deterministic.
#include <cmath>

#include "core/determinism.h"
#include "core/impl.h"
#include "cuda/block.cuh"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {

using internal::pool_geom;
using internal::PoolGeom;

struct PoolArgs {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
};

PoolArgs args_of(const Pool2dParams& p) {
  return {p.kernel[0],  p.kernel[1],   p.stride[0],   p.stride[1],        p.padding[0],
          p.padding[1], p.dilation[0], p.dilation[1], p.count_include_pad};
}

template <class T>
__global__ void max_pool_kernel(const T* x, T* y, int64_t* indices, PoolGeom g, PoolArgs a) {
  using C = opmath_t<T>;
  int64_t total = g.planes * g.Ho * g.Wo;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    int64_t ow = o % g.Wo, t = o / g.Wo, oh = t % g.Ho, pl = t / g.Ho;
    const T* xp = x + pl * g.H * g.W;
    int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
    C best = static_cast<C>(-INFINITY);
    int64_t bi = -1;
    bool done = false;
    for (int64_t ki = 0; ki < a.kh && !done; ++ki) {
      int64_t ih = h0 + ki * a.dh;
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t kj = 0; kj < a.kw; ++kj) {
        int64_t iw = w0 + kj * a.dw;
        if (iw < 0 || iw >= g.W) continue;
        C v = static_cast<C>(xp[ih * g.W + iw]);
        if (bi < 0 || v > best || v != v) {
          best = v;
          bi = ih * g.W + iw;
          if (v != v) {  // NaN propagates
            done = true;
            break;
          }
        }
      }
    }
    y[o] = static_cast<T>(best);
    indices[o] = bi < 0 ? 0 : bi;
  }
}

template <class T>
__global__ void max_pool_backward_kernel(const T* gy, const int64_t* indices, T* gx, int64_t planes, int64_t plane_out,
                                         int64_t plane_in) {
  int64_t total = planes * plane_out;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    int64_t pl = o / plane_out;
    atomic_add(gx + pl * plane_in + indices[o], gy[o]);
  }
}

// Window bounds and divisor of avg_pool2d at (oh, ow), as the CPU (and PyTorch).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
__device__ __forceinline__ AvgWindow avg_window(const PoolArgs& a, int64_t H, int64_t W, int64_t oh, int64_t ow) {
  int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
  int64_t h1 = ::min(h0 + a.kh, H + a.ph), w1 = ::min(w0 + a.kw, W + a.pw);
  int64_t pool = (h1 - h0) * (w1 - w0);
  h0 = ::max(h0, int64_t(0));
  w0 = ::max(w0, int64_t(0));
  h1 = ::min(h1, H);
  w1 = ::min(w1, W);
  int64_t div = a.count_include_pad ? pool : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, ::max(div, int64_t(1))};
}

template <class T>
__global__ void avg_pool_kernel(const T* x, T* y, PoolGeom g, PoolArgs a) {
  int64_t total = g.planes * g.Ho * g.Wo;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    int64_t ow = o % g.Wo, t = o / g.Wo, oh = t % g.Ho, pl = t / g.Ho;
    const T* xp = x + pl * g.H * g.W;
    AvgWindow w = avg_window(a, g.H, g.W, oh, ow);
    double s = 0;
    for (int64_t ih = w.h0; ih < w.h1; ++ih)
      for (int64_t iw = w.w0; iw < w.w1; ++iw) s += static_cast<double>(static_cast<opmath_t<T>>(xp[ih * g.W + iw]));
    y[o] = static_cast<T>(static_cast<opmath_t<T>>(s / static_cast<double>(w.divisor)));
  }
}

// First output index whose window (start o * s - p, length k) can reach input position i.
__device__ __forceinline__ int64_t first_window(int64_t i, int64_t k, int64_t s, int64_t p) {
  int64_t num = i + p - k + 1;  // o * s >= num
  if (num <= 0) return 0;
  return (num + s - 1) / s;
}

template <class T>
__global__ void avg_pool_backward_kernel(const T* gy, T* gx, PoolGeom g, PoolArgs a) {
  using C = opmath_t<T>;
  int64_t total = g.planes * g.H * g.W;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t iw = e % g.W, t = e / g.W, ih = t % g.H, pl = t / g.H;
    const T* gp = gy + pl * g.Ho * g.Wo;
    int64_t oh0 = first_window(ih, a.kh, a.sh, a.ph), oh1 = ::min(g.Ho - 1, (ih + a.ph) / a.sh);
    int64_t ow0 = first_window(iw, a.kw, a.sw, a.pw), ow1 = ::min(g.Wo - 1, (iw + a.pw) / a.sw);
    C acc = C(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        AvgWindow w = avg_window(a, g.H, g.W, oh, ow);
        if (ih < w.h0 || ih >= w.h1 || iw < w.w0 || iw >= w.w1) continue;
        acc += static_cast<C>(gp[oh * g.Wo + ow]) / static_cast<C>(w.divisor);
      }
    gx[e] = static_cast<T>(acc);
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + 255) / 256, 1), 1 << 20));
}

}  // namespace

void max_pool2d(const Tensor& x_in, const Pool2dParams& p, const Tensor& out, const Tensor& indices) {
  DeviceScope ds(out);
  NABLA_CHECK(ValueError, out.is_contiguous() && indices.is_contiguous(), "max_pool2d: outputs must be contiguous");
  Tensor x = contiguous(x_in);
  PoolGeom g = pool_geom(x, out);
  if (out.numel() == 0) return;
  visit_cuda_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_kernel<T><<<grid_for(out.numel()), 256, 0, stream_of(out)>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), static_cast<int64_t*>(indices.data_ptr()),
        g, args_of(p));
    NABLA_KERNEL_CHECK("max_pool_kernel");
  });
}

void max_pool2d_backward(const Tensor& gy_in, const Tensor& indices_in, const Tensor& gx) {
  DeviceScope ds(gx);
  NABLA_CHECK(ValueError, gx.is_contiguous(), "max_pool2d_backward: grad_input must be contiguous");
  Tensor gy = contiguous(gy_in), indices = contiguous(indices_in);
  PoolGeom g = pool_geom(gx, gy);
  fill(gx, 0);
  if (gy.numel() == 0) return;
  if (are_deterministic_algorithms_enabled()) {
    const int64_t plane_out = g.Ho * g.Wo, plane_in = g.H * g.W;
    auto planes_of = [&](const Tensor& t, int64_t len) {
      return internal::make_view(t, {g.planes, len}, {len, 1}, t.storage_offset());
    };
    scatter_add_ordered(planes_of(gx, plane_in), 1, planes_of(indices, plane_out), planes_of(gy, plane_out),
                        /*check_index=*/false);
    return;
  }
  visit_cuda_float(gy.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_backward_kernel<T><<<grid_for(gy.numel()), 256, 0, stream_of(gx)>>>(
        static_cast<const T*>(gy.data_ptr()), static_cast<const int64_t*>(indices.data_ptr()),
        static_cast<T*>(gx.data_ptr()), g.planes, g.Ho * g.Wo, g.H * g.W);
    NABLA_KERNEL_CHECK("max_pool_backward_kernel");
  });
}

void avg_pool2d(const Tensor& x_in, const Pool2dParams& p, const Tensor& out) {
  DeviceScope ds(out);
  NABLA_CHECK(ValueError, out.is_contiguous(), "avg_pool2d: output must be contiguous");
  Tensor x = contiguous(x_in);
  PoolGeom g = pool_geom(x, out);
  if (out.numel() == 0) return;
  visit_cuda_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool_kernel<T><<<grid_for(out.numel()), 256, 0, stream_of(out)>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), g, args_of(p));
    NABLA_KERNEL_CHECK("avg_pool_kernel");
  });
}

void avg_pool2d_backward(const Tensor& gy_in, const Pool2dParams& p, const Tensor& gx) {
  DeviceScope ds(gx);
  NABLA_CHECK(ValueError, gx.is_contiguous(), "avg_pool2d_backward: grad_input must be contiguous");
  Tensor gy = contiguous(gy_in);
  PoolGeom g = pool_geom(gx, gy);
  if (gx.numel() == 0) return;
  visit_cuda_float(gy.dtype(), "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool_backward_kernel<T><<<grid_for(gx.numel()), 256, 0, stream_of(gx)>>>(
        static_cast<const T*>(gy.data_ptr()), static_cast<T*>(gx.data_ptr()), g, args_of(p));
    NABLA_KERNEL_CHECK("avg_pool_backward_kernel");
  });
}

}  // namespace nabla::cuda
