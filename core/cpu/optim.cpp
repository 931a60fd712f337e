// Fused optimizer updates: one pass over a parameter and its state instead of a chain of Tensor
// ops (each a pass over memory and a temporary). Compiled with -fno-math-errno (CMakeLists.txt) so
// the loops, which take sqrt of non-negative values only, vectorize.
#include <cmath>

#include "core/cpu/kernels.h"
#include "core/impl.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

// Elements [i0, i1) of the update; the weight-decay variant is a template argument so the loop
// has no branches (0: none, 1: L2 into the gradient, 2: decoupled).
template <class T, int WD>
void adam_range(T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v,
                int64_t i0, int64_t i1, const Backend::AdamStep& a) {
  const T b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2), c1 = static_cast<T>(1 - a.beta1),
          c2 = static_cast<T>(1 - a.beta2), eps = static_cast<T>(a.eps), bc2 = static_cast<T>(a.bias_correction2_sqrt),
          step = static_cast<T>(a.step_size), wd = static_cast<T>(a.weight_decay),
          decay = static_cast<T>(1 - a.lr * a.weight_decay), sign = a.maximize ? T(-1) : T(1);
  for (int64_t i = i0; i < i1; ++i) {
    T g = sign * grad[i];
    T w = p[i];
    if constexpr (WD == 2) w *= decay;
    if constexpr (WD == 1) g += wd * w;
    const T mi = b1 * m[i] + c1 * g, vi = b2 * v[i] + c2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    p[i] = w - step * (mi / (std::sqrt(vi) / bc2 + eps));
  }
}

template <class T>
void adam_loop(T* p, const T* grad, T* m, T* v, int64_t n, const Backend::AdamStep& a) {
  const int wd = a.weight_decay == 0 ? 0 : a.decoupled ? 2 : 1;
  parallel_for(0, n, 1 << 15, [&](int64_t i0, int64_t i1) {
    if (wd == 0) adam_range<T, 0>(p, grad, m, v, i0, i1, a);
    else if (wd == 1) adam_range<T, 1>(p, grad, m, v, i0, i1, a);
    else adam_range<T, 2>(p, grad, m, v, i0, i1, a);
  });
}

}  // namespace

bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Backend::AdamStep& a) {
  const DType dt = param.dtype();
  if (dt != DType::f32 && dt != DType::f64) return false;
  for (const Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq})
    if (t->dtype() != dt || !t->is_contiguous() || t->numel() != param.numel()) return false;
  const int64_t n = param.numel();
  if (dt == DType::f32) {
    adam_loop(static_cast<float*>(param.data_ptr()), static_cast<const float*>(grad.data_ptr()),
              static_cast<float*>(exp_avg.data_ptr()), static_cast<float*>(exp_avg_sq.data_ptr()), n, a);
  } else {
    adam_loop(static_cast<double*>(param.data_ptr()), static_cast<const double*>(grad.data_ptr()),
              static_cast<double*>(exp_avg.data_ptr()), static_cast<double*>(exp_avg_sq.data_ptr()), n, a);
  }
  return true;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
