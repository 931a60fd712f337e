// Fused optimizer updates (SGD, Adam/AdamW): one pass over a parameter and its state instead of a
// chain of Tensor ops (each a pass over memory and a temporary). Compiled with -fno-math-errno
// (CMakeLists.txt) so the loops, which take sqrt of non-negative values only, vectorize.
#include <cmath>

#include "core/cpu/kernels.h"
#include "core/optim_math.h"
#include "core/impl.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

using namespace optim_math;

// Elements [i0, i1) of the update; the weight-decay variant is a template argument so the loop
// has no branches.
template <int WD, class T>
void adam_range(T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v, int64_t i0, int64_t i1,
                const AdamCoeffs<T>& c) {
  for (int64_t i = i0; i < i1; ++i) adam_update<WD>(p[i], grad[i], m[i], v[i], c);
}

template <class T>
void adam_loop(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Backend::AdamStep& a) {
  T *p = param.data_ptr<T>(), *m = exp_avg.data_ptr<T>(), *v = exp_avg_sq.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const AdamCoeffs<T> c(a);
  visit_adam_variant(a, [&](auto wd) {
    parallel_for(0, param.numel(), 1 << 15,
                 [&](int64_t i0, int64_t i1) { adam_range<decltype(wd)::value>(p, g, m, v, i0, i1, c); });
  });
}

template <bool WD, int MOM, bool NESTEROV, class T>
void sgd_range(T* __restrict p, const T* __restrict grad, T* __restrict buf, int64_t i0, int64_t i1,
               const SgdCoeffs<T>& c) {
  for (int64_t i = i0; i < i1; ++i) sgd_update<WD, MOM, NESTEROV>(p[i], grad[i], MOM ? buf + i : nullptr, c);
}

template <class T>
void sgd_loop(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* buf = s.momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr;
  const SgdCoeffs<T> c(s);
  visit_sgd_variant(s, [&](auto wd, auto mom, auto nesterov) {
    parallel_for(0, param.numel(), 1 << 15, [&](int64_t i0, int64_t i1) {
      sgd_range<decltype(wd)::value, decltype(mom)::value, decltype(nesterov)::value>(p, g, buf, i0, i1, c);
    });
  });
}

}  // namespace

bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s) {
  if (!optim_math::sgd_step_fits(param, grad, momentum_buffer, s)) return false;
  if (param.dtype() == DType::f32) sgd_loop<float>(param, grad, momentum_buffer, s);
  else sgd_loop<double>(param, grad, momentum_buffer, s);
  return true;
}

bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Backend::AdamStep& a) {
  if (!optim_math::fused_step_fits(param, grad, {&exp_avg, &exp_avg_sq})) return false;
  if (param.dtype() == DType::f32) adam_loop<float>(param, grad, exp_avg, exp_avg_sq, a);
  else adam_loop<double>(param, grad, exp_avg, exp_avg_sq, a);
  return true;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
