// Fused optimizer updates on the GPU (optim/fused.h: sgd_step, adam_step, rmsprop_step, adagrad_step,
// adadelta_step), registered in optim's table when the backend loads: one kernel reads a parameter,
// its gradient and its state once and writes them back, instead of the chain of elementwise
// kernels (and temporaries) the composed update launches. The per-element formulas are the CPU's
// (optim/fused_math.h), so both devices take the same steps. (optim/ owns the table: this is the
// one place cuda/ includes a header from above core/.)
#include "cuda/common.h"
#include "cuda/kernels.h"
#include "optim/fused_math.h"

namespace nabla::cuda {
namespace {

using namespace optim::fused_math;
using optim::AdadeltaStep;
using optim::AdagradStep;
using optim::AdamStep;
using optim::RmspropStep;
using optim::SgdStep;

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + kThreads - 1) / kThreads, 1), 1 << 20));
}

template <int WD, bool AMS, class T>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                            T* __restrict__ vmax, int64_t n, AdamCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adam_update<WD, AMS>(p[i], g[i], m[i], v[i], AMS ? vmax + i : nullptr, c);
}

template <bool WD, bool CENTERED, bool MOM, class T>
__global__ void rmsprop_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq, T* __restrict__ gavg,
                               T* __restrict__ buf, int64_t n, RmspropCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    rmsprop_update<WD, CENTERED, MOM>(p[i], g[i], sq[i], CENTERED ? gavg + i : nullptr, MOM ? buf + i : nullptr, c);
}

template <bool WD, class T>
__global__ void adagrad_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sum, int64_t n,
                               AdagradCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adagrad_update<WD>(p[i], g[i], sum[i], c);
}

template <bool WD, class T>
__global__ void adadelta_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq, T* __restrict__ acc,
                                int64_t n, AdadeltaCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adadelta_update<WD>(p[i], g[i], sq[i], acc[i], c);
}

template <bool WD, int MOM, bool NESTEROV, class T>
__global__ void sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t n, SgdCoeffs<T> c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    sgd_update<WD, MOM, NESTEROV>(p[i], g[i], MOM ? buf + i : nullptr, c);
}

template <class T>
void launch_adam(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamStep& a) {
  const int64_t n = param.numel();
  T *p = param.data_ptr<T>(), *m = exp_avg.data_ptr<T>(), *v = exp_avg_sq.data_ptr<T>();
  T* vmax = a.amsgrad ? max_exp_avg_sq.data_ptr<T>() : nullptr;
  const T* g = grad.data_ptr<T>();
  const AdamCoeffs<T> c(a);
  visit_adam_variant(a, [&](auto wd, auto ams) {
    adam_kernel<decltype(wd)::value, decltype(ams)::value>
        <<<grid_for(n), kThreads, 0, stream_of(param)>>>(p, g, m, v, vmax, n, c);
  });
  NABLA_KERNEL_CHECK("adam_kernel");
}

template <class T>
void launch_rmsprop(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                    const Tensor& momentum_buffer, const RmspropStep& r) {
  const int64_t n = param.numel();
  T *p = param.data_ptr<T>(), *sq = square_avg.data_ptr<T>();
  T* gavg = r.centered ? grad_avg.data_ptr<T>() : nullptr;
  T* buf = r.momentum > 0 ? momentum_buffer.data_ptr<T>() : nullptr;
  const T* g = grad.data_ptr<T>();
  const RmspropCoeffs<T> c(r);
  with_flags(
      [&](auto wd, auto centered, auto mom) {
        rmsprop_kernel<decltype(wd)::value, decltype(centered)::value, decltype(mom)::value>
            <<<grid_for(n), kThreads, 0, stream_of(param)>>>(p, g, sq, gavg, buf, n, c);
      },
      r.weight_decay != 0, r.centered, r.momentum > 0);
  NABLA_KERNEL_CHECK("rmsprop_kernel");
}

template <class T>
void launch_adagrad(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a) {
  const int64_t n = param.numel();
  T *p = param.data_ptr<T>(), *s = sum.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const AdagradCoeffs<T> c(a);
  with_flags(
      [&](auto wd) {
        adagrad_kernel<decltype(wd)::value><<<grid_for(n), kThreads, 0, stream_of(param)>>>(p, g, s, n, c);
      },
      a.weight_decay != 0);
  NABLA_KERNEL_CHECK("adagrad_kernel");
}

template <class T>
void launch_adadelta(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                     const AdadeltaStep& a) {
  const int64_t n = param.numel();
  T *p = param.data_ptr<T>(), *sq = square_avg.data_ptr<T>(), *acc = acc_delta.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const AdadeltaCoeffs<T> c(a);
  with_flags(
      [&](auto wd) {
        adadelta_kernel<decltype(wd)::value><<<grid_for(n), kThreads, 0, stream_of(param)>>>(p, g, sq, acc, n, c);
      },
      a.weight_decay != 0);
  NABLA_KERNEL_CHECK("adadelta_kernel");
}

template <class T>
void launch_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
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

// run_fused_step with the parameter's device current for the launch.
template <class F>
bool cuda_step(bool fits, const Tensor& param, F&& launch) {
  return run_fused_step(fits, param, [&](auto tag) {
    DeviceScope ds(param);
    launch(tag);
  });
}

bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
  return cuda_step(sgd_step_fits(param, grad, momentum_buffer, s), param,
                   [&](auto tag) { launch_sgd<typename decltype(tag)::type>(param, grad, momentum_buffer, s); });
}

bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& a) {
  return cuda_step(adam_step_fits(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a), param, [&](auto tag) {
    launch_adam<typename decltype(tag)::type>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a);
  });
}

bool rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const RmspropStep& r) {
  return cuda_step(rmsprop_step_fits(param, grad, square_avg, grad_avg, momentum_buffer, r), param, [&](auto tag) {
    launch_rmsprop<typename decltype(tag)::type>(param, grad, square_avg, grad_avg, momentum_buffer, r);
  });
}

bool adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a) {
  return cuda_step(fused_step_fits(param, grad, {&sum}), param,
                   [&](auto tag) { launch_adagrad<typename decltype(tag)::type>(param, grad, sum, a); });
}

bool adadelta_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                   const AdadeltaStep& a) {
  return cuda_step(fused_step_fits(param, grad, {&square_avg, &acc_delta}), param, [&](auto tag) {
    launch_adadelta<typename decltype(tag)::type>(param, grad, square_avg, acc_delta, a);
  });
}

}  // namespace

void register_fused_optimizer_steps() {
  static const optim::FusedSteps steps = [] {
    optim::FusedSteps table;
    name_entries(table, "cuda");
    namespace impl = nabla::cuda;
    NABLA_FUSED_STEPS(NABLA_FILL_ENTRY)
    return table;
  }();
  optim::register_fused_steps(DeviceType::cuda, &steps);
}

}  // namespace nabla::cuda
