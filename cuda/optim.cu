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
  T* p = static_cast<T*>(param.data_ptr());
  const T* g = static_cast<const T*>(grad.data_ptr());
  T* m = static_cast<T*>(exp_avg.data_ptr());
  T* v = static_cast<T*>(exp_avg_sq.data_ptr());
  const AdamCoeffs<T> c(a);
  const cudaStream_t stream = stream_of(param);
  switch (adam_decay_mode(a)) {
    case kNoDecay: adam_kernel<kNoDecay><<<grid_for(n), kThreads, 0, stream>>>(p, g, m, v, n, c); break;
    case kL2Decay: adam_kernel<kL2Decay><<<grid_for(n), kThreads, 0, stream>>>(p, g, m, v, n, c); break;
    default: adam_kernel<kDecoupledDecay><<<grid_for(n), kThreads, 0, stream>>>(p, g, m, v, n, c); break;
  }
  NABLA_KERNEL_CHECK("adam_kernel");
}

template <bool WD, int MOM, class T>
void launch_sgd_nesterov(bool nesterov, T* p, const T* g, T* buf, int64_t n, const SgdCoeffs<T>& c,
                         cudaStream_t stream) {
  if (nesterov) sgd_kernel<WD, MOM, true><<<grid_for(n), kThreads, 0, stream>>>(p, g, buf, n, c);
  else sgd_kernel<WD, MOM, false><<<grid_for(n), kThreads, 0, stream>>>(p, g, buf, n, c);
}

template <bool WD, class T>
void launch_sgd_momentum(int mom, bool nesterov, T* p, const T* g, T* buf, int64_t n, const SgdCoeffs<T>& c,
                         cudaStream_t stream) {
  if (mom == 0) launch_sgd_nesterov<WD, 0>(false, p, g, buf, n, c, stream);
  else if (mom == 1) launch_sgd_nesterov<WD, 1>(nesterov, p, g, buf, n, c, stream);
  else launch_sgd_nesterov<WD, 2>(nesterov, p, g, buf, n, c, stream);
}

template <class T>
void launch_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s) {
  const int64_t n = param.numel();
  const int mom = sgd_momentum_mode(s);
  T* p = static_cast<T*>(param.data_ptr());
  const T* g = static_cast<const T*>(grad.data_ptr());
  T* buf = mom ? static_cast<T*>(momentum_buffer.data_ptr()) : nullptr;
  const SgdCoeffs<T> c(s);
  const cudaStream_t stream = stream_of(param);
  if (s.weight_decay != 0) launch_sgd_momentum<true>(mom, s.nesterov, p, g, buf, n, c, stream);
  else launch_sgd_momentum<false>(mom, s.nesterov, p, g, buf, n, c, stream);
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
