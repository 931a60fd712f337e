// CPU batch normalization, fused: one pass for the per-channel statistics, one to normalize (and
// apply weight and bias); the backward is one pass for the two per-channel sums and one for the
// input gradient. Channels run in parallel. x is (N, C, *) and contiguous here.
// float32 sums run in float lanes over blocks of kBlock elements and add the blocks up in double
// (as fast as float, about as exact as double); the statistics come from one pass over x shifted
// by one of its values (no cancellation worth the name). float64 sums in double, in two passes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/impl.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

struct Dims {
  int64_t N, C, S;  // batch, channels, elements per (n, c) plane
};
Dims dims_of(const Tensor& x) {
  Dims d{x.sizes()[0], x.sizes()[1], 1};
  for (int64_t i = 2; i < x.dim(); ++i) d.S *= x.sizes()[i];
  return d;
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// Sum over one (n, c) plane in double lanes (vectorizes).
template <class T>
inline double plane_sum(const T* p, int64_t s) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= s; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] += static_cast<double>(p[i + j]);
  double t = 0;
  for (int j = 0; j < 8; ++j) t += lanes[j];
  for (; i < s; ++i) t += p[i];
  return t;
}

// Float lanes within blocks, the blocks' totals in double. The lanes are GCC/Clang vector
// extensions (two vectors per sum; with two sums per loop the auto-vectorizer gave up): 8 floats
// where the build has AVX, else 4 (the portable build's SSE registers).
constexpr int64_t kBlock = 1024;
#if defined(__AVX__)
typedef float FV __attribute__((vector_size(32)));
#else
typedef float FV __attribute__((vector_size(16)));
#endif
constexpr int kW = sizeof(FV) / sizeof(float);
inline FV loadv(const float* p) {
  FV v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float lane_total(FV v) {
  float t = 0;
  for (int j = 0; j < kW; ++j) t += v[j];
  return t;
}

// Over one plane p[0, s): sum(p - k) and sum((p - k)^2).
inline void shifted_sums(const float* p, int64_t s, float k, double& s1, double& s2) {
  for (int64_t b = 0; b < s; b += kBlock) {
    const int64_t e = std::min(s, b + kBlock);
    FV a1 = {}, b1 = {}, a2 = {}, b2 = {};
    int64_t i = b;
    for (; i + 2 * kW <= e; i += 2 * kW) {
      FV u = loadv(p + i) - k, v = loadv(p + i + kW) - k;
      a1 += u;
      b1 += v;
      a2 += u * u;
      b2 += v * v;
    }
    float t1 = lane_total(a1 + b1), t2 = lane_total(a2 + b2);
    for (; i < e; ++i) {
      float v = p[i] - k;
      t1 += v;
      t2 += v * v;
    }
    s1 += t1;
    s2 += t2;
  }
}

// Over one plane: sum(g) and sum(g * (x - mean)).
inline void grad_sums(const float* g, const float* x, int64_t s, float mean, double& sg, double& sgx) {
  for (int64_t b = 0; b < s; b += kBlock) {
    const int64_t e = std::min(s, b + kBlock);
    FV a1 = {}, b1 = {}, a2 = {}, b2 = {};
    int64_t i = b;
    for (; i + 2 * kW <= e; i += 2 * kW) {
      FV g0 = loadv(g + i), g1 = loadv(g + i + kW);
      a1 += g0;
      b1 += g1;
      a2 += g0 * (loadv(x + i) - mean);
      b2 += g1 * (loadv(x + i + kW) - mean);
    }
    float t1 = lane_total(a1 + b1), t2 = lane_total(a2 + b2);
    for (; i < e; ++i) {
      t1 += g[i];
      t2 += g[i] * (x[i] - mean);
    }
    sg += t1;
    sgx += t2;
  }
}

}  // namespace

bool has_fused_batch_norm(const Tensor& x, bool /*training*/, double /*eps*/) {
  return x.dtype() == DType::f32 || x.dtype() == DType::f64;
}

void batch_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, const Tensor& out,
                const Tensor& save_mean, const Tensor& save_invstd) {
  Tensor x = contig(x_in), w = weight.defined() ? contig(weight) : weight, b = bias.defined() ? contig(bias) : bias;
  // Running statistics are updated in place: through contiguous copies when they are strided.
  Tensor rmc = running_mean.defined() ? contig(running_mean) : running_mean;
  Tensor rvc = running_var.defined() ? contig(running_var) : running_var;
  Dims d = dims_of(x);
  const double m = static_cast<double>(d.N * d.S);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    const T* wp = ptr_or_null<T>(w);
    const T* bp = ptr_or_null<T>(b);
    T* rm = rmc.defined() ? static_cast<T*>(rmc.data_ptr()) : nullptr;
    T* rv = rvc.defined() ? static_cast<T*>(rvc.data_ptr()) : nullptr;
    T* sm = training ? static_cast<T*>(save_mean.data_ptr()) : nullptr;
    T* si = training ? static_cast<T*>(save_invstd.data_ptr()) : nullptr;
    parallel_for(0, d.C, std::max<int64_t>(1, 32768 / std::max<int64_t>(d.N * d.S, 1)), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double mean, invstd;
        if (training) {
          double var;
          if constexpr (std::is_same_v<T, float>) {
            // One pass over x - k, with k one of the channel's values: mean = k + s1 / m and
            // var = (s2 - s1^2 / m) / m.
            const float k = xp[c * d.S];
            double s1 = 0, s2 = 0;
            for (int64_t n = 0; n < d.N; ++n) shifted_sums(xp + (n * d.C + c) * d.S, d.S, k, s1, s2);
            mean = k + s1 / m;
            var = std::max(0.0, (s2 - s1 * s1 / m) / m);
          } else {
            double s = 0;
            for (int64_t n = 0; n < d.N; ++n) s += plane_sum(xp + (n * d.C + c) * d.S, d.S);
            mean = s / m;
            double q = 0;  // second pass: sum of squared deviations (exact, no cancellation)
            for (int64_t n = 0; n < d.N; ++n) {
              const T* p = xp + (n * d.C + c) * d.S;
              double lanes[8] = {};
              int64_t i = 0;
              for (; i + 8 <= d.S; i += 8)
                for (int j = 0; j < 8; ++j) {
                  double v = static_cast<double>(p[i + j]) - mean;
                  lanes[j] += v * v;
                }
              for (int j = 0; j < 8; ++j) q += lanes[j];
              for (; i < d.S; ++i) q += (p[i] - mean) * (p[i] - mean);
            }
            var = q / m;
          }
          invstd = 1.0 / std::sqrt(var + eps);
          sm[c] = static_cast<T>(mean);
          si[c] = static_cast<T>(invstd);
          if (rm) rm[c] = static_cast<T>((1 - momentum) * rm[c] + momentum * mean);
          if (rv) rv[c] = static_cast<T>((1 - momentum) * rv[c] + momentum * var * m / (m - 1));
        } else {
          mean = rm[c];
          invstd = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
        }
        // y = x * scale + shift
        const T scale = static_cast<T>(invstd * (wp ? wp[c] : 1.0));
        const T shift = static_cast<T>((bp ? bp[c] : 0.0) - mean * invstd * (wp ? wp[c] : 1.0));
        for (int64_t n = 0; n < d.N; ++n) {
          const T* p = xp + (n * d.C + c) * d.S;
          T* y = yp + (n * d.C + c) * d.S;
          for (int64_t i = 0; i < d.S; ++i) y[i] = p[i] * scale + shift;
        }
      }
    });
  };
  if (x.dtype() == DType::f32) run(type_tag<float>{});
  else run(type_tag<double>{});
  if (training && rmc.defined() && !rmc.is_same(running_mean)) copy(rmc, running_mean);
  if (training && rvc.defined() && !rvc.is_same(running_var)) copy(rvc, running_var);
}

void batch_norm_backward(const Tensor& g_in, const Tensor& x_in, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, double, const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  Tensor x = contig(x_in), g = contig(g_in), w = weight.defined() ? contig(weight) : weight;
  Dims d = dims_of(x);
  const double m = static_cast<double>(d.N * d.S);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* wp = ptr_or_null<T>(w);
    const T* sm = static_cast<const T*>(save_mean.data_ptr());
    const T* si = static_cast<const T*>(save_invstd.data_ptr());
    T* gxp = gx.defined() ? static_cast<T*>(gx.data_ptr()) : nullptr;
    T* gwp = gw.defined() ? static_cast<T*>(gw.data_ptr()) : nullptr;
    T* gbp = gb.defined() ? static_cast<T*>(gb.data_ptr()) : nullptr;
    parallel_for(0, d.C, std::max<int64_t>(1, 32768 / std::max<int64_t>(d.N * d.S, 1)), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const double mean = sm[c], invstd = si[c];
        // sum_g = sum(g), sum_gx = sum(g * xhat)
        double sum_g = 0, sum_gxc = 0;
        if constexpr (std::is_same_v<T, float>) {
          for (int64_t n = 0; n < d.N; ++n)
            grad_sums(gp + (n * d.C + c) * d.S, xp + (n * d.C + c) * d.S, d.S, static_cast<float>(mean), sum_g,
                      sum_gxc);
        } else {
          for (int64_t n = 0; n < d.N; ++n) {
            const T* xr = xp + (n * d.C + c) * d.S;
            const T* gr = gp + (n * d.C + c) * d.S;
            double a[8] = {}, b[8] = {};
            int64_t i = 0;
            for (; i + 8 <= d.S; i += 8)
              for (int j = 0; j < 8; ++j) {
                a[j] += static_cast<double>(gr[i + j]);
                b[j] += static_cast<double>(gr[i + j]) * (static_cast<double>(xr[i + j]) - mean);
              }
            for (int j = 0; j < 8; ++j) {
              sum_g += a[j];
              sum_gxc += b[j];
            }
            for (; i < d.S; ++i) {
              sum_g += gr[i];
              sum_gxc += gr[i] * (xr[i] - mean);
            }
          }
        }
        const double sum_gx = sum_gxc * invstd;
        if (gwp) gwp[c] = static_cast<T>(sum_gx);
        if (gbp) gbp[c] = static_cast<T>(sum_g);
        if (!gxp) continue;
        // gx = w * invstd / m * (m * g - sum_g - xhat * sum_gx)
        const double w = wp ? wp[c] : 1.0;
        const T k = static_cast<T>(w * invstd);
        const T kg = static_cast<T>(w * invstd * sum_g / m);
        const T kx = static_cast<T>(w * invstd * invstd * sum_gx / m);
        const T mu = static_cast<T>(mean);
        for (int64_t n = 0; n < d.N; ++n) {
          const T* xr = xp + (n * d.C + c) * d.S;
          const T* gr = gp + (n * d.C + c) * d.S;
          T* o = gxp + (n * d.C + c) * d.S;
          for (int64_t i = 0; i < d.S; ++i) o[i] = k * gr[i] - kg - kx * (xr[i] - mu);
        }
      }
    });
  };
  if (x.dtype() == DType::f32) run(type_tag<float>{});
  else run(type_tag<double>{});
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
