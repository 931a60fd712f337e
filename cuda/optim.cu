// Fused optimizer updates on the GPU (Backend::sgd_step, Backend::adam_step): one kernel reads a
// parameter, its gradient and its state once and writes them back, instead of the chain of
// elementwise kernels (and temporaries) the composed update launches. The per-element formulas
// are the CPU's (core/optim_math.h), so both devices take the same steps.
#include "core/optim_math.h"
#include "cuda/common.h"
#include "cuda/kernels.h"

namespace nabla::cuda {
namespace {

using namespace optim_math;

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + kThreads - 1) / kThreads, 1), 1 << 20));
}

template <int WD, class T>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                            int64_t n, AdamCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adam_update<WD>(p[i], g[i], m[i], v[i], c);
}

template <bool WD, int MOM, bool NESTEROV, class T>
__global__ void sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t n,
                           SgdCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    sgd_update<WD, MOM, NESTEROV>(p[i], g[i], MOM ? buf + i : nullptr, c);
}

template <class T>
void launch_adam(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Backend::AdamStep& a) {
  const int64_t n = param.numel();
  T *p = param.data_ptr<T>(), *m = exp_avg.data_ptr<T>(), *v = exp_avg_sq.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const AdamCoeffs<T> c(a);
  visit_adam_variant(a, [&](auto wd) {
    adam_kernel<decltype(wd)::value><<<grid_for(n), kThreads, 0, stream_of(param)>>>(p, g, m, v, n, c);
  });
  NABLA_KERNEL_CHECK("adam_kernel");
}

template <class T>
void launch_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s) {
  const int64_t n = param.numel();
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* buf = s.momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr;
  const SgdCoeffs<T> c(s);
  visit_sgd_variant(s, [&](auto wd, auto mom, auto nesterov) {
    sgd_kernel<decltype(wd)::value, decltype(mom)::value, decltype(nesterov)::value>
        <<<grid_for(n), kThreads, 0, stream_of(param)>>>(p, g, buf, n, c);
  });
  NABLA_KERNEL_CHECK("sgd_kernel");
}

}  // namespace

bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s) {
  if (!sgd_step_fits(param, grad, momentum_buffer, s)) return false;
  if (param.numel() == 0) return true;
  DeviceScope ds(param);
  if (param.dtype() == DType::f32) launch_sgd<float>(param, grad, momentum_buffer, s);
  else launch_sgd<double>(param, grad, momentum_buffer, s);
  return true;
}

bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Backend::AdamStep& a) {
  if (!fused_step_fits(param, grad, {&exp_avg, &exp_avg_sq})) return false;
  if (param.numel() == 0) return true;
  DeviceScope ds(param);
  if (param.dtype() == DType::f32) launch_adam<float>(param, grad, exp_avg, exp_avg_sq, a);
  else launch_adam<double>(param, grad, exp_avg, exp_avg_sq, a);
  return true;
}

}  // namespace nabla::cuda
