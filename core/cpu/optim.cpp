// Fused optimizer updates (SGD, Adam/AdamW): one pass over a parameter and its state instead of a
// chain of Tensor ops (each a pass over memory and a temporary). Compiled with -fno-math-errno
// (CMakeLists.txt) so the loops, which take sqrt of non-negative values only, vectorize.
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

// SGD over [i0, i1): MOM 0 without momentum, 1 on the first step (buf = g), 2 after it.
template <class T, bool WD, int MOM, bool NESTEROV>
void sgd_range(T* __restrict p, const T* __restrict grad, T* __restrict buf, int64_t i0, int64_t i1,
               const Backend::SgdStep& s) {
  const T lr = static_cast<T>(s.lr), mom = static_cast<T>(s.momentum), damp = static_cast<T>(1 - s.dampening),
          wd = static_cast<T>(s.weight_decay), sign = s.maximize ? T(-1) : T(1);
  for (int64_t i = i0; i < i1; ++i) {
    T g = sign * grad[i];
    if constexpr (WD) g += wd * p[i];
    if constexpr (MOM != 0) {
      const T b = MOM == 1 ? g : mom * buf[i] + damp * g;
      buf[i] = b;
      g = NESTEROV ? g + mom * b : b;
    }
    p[i] -= lr * g;
  }
}

template <class T>
void sgd_loop(T* p, const T* grad, T* buf, int64_t n, const Backend::SgdStep& s) {
  using Range = void (*)(T*, const T*, T*, int64_t, int64_t, const Backend::SgdStep&);
  // [weight decay][momentum: none, first, later][nesterov]
  static constexpr Range table[2][3][2] = {
      {{sgd_range<T, false, 0, false>, sgd_range<T, false, 0, true>},
       {sgd_range<T, false, 1, false>, sgd_range<T, false, 1, true>},
       {sgd_range<T, false, 2, false>, sgd_range<T, false, 2, true>}},
      {{sgd_range<T, true, 0, false>, sgd_range<T, true, 0, true>},
       {sgd_range<T, true, 1, false>, sgd_range<T, true, 1, true>},
       {sgd_range<T, true, 2, false>, sgd_range<T, true, 2, true>}}};
  const int mom = s.momentum == 0 ? 0 : s.first_step ? 1 : 2;
  const Range f = table[s.weight_decay != 0][mom][s.nesterov && mom != 0];
  parallel_for(0, n, 1 << 15, [&](int64_t i0, int64_t i1) { f(p, grad, buf, i0, i1, s); });
}

}  // namespace

bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s) {
  const DType dt = param.dtype();
  if (dt != DType::f32 && dt != DType::f64) return false;
  const bool mom = s.momentum != 0;
  auto fits = [&](const Tensor& t) { return t.dtype() == dt && t.is_contiguous() && t.numel() == param.numel(); };
  if (!fits(param) || !fits(grad) || (mom && !fits(momentum_buffer))) return false;
  const int64_t n = param.numel();
  if (dt == DType::f32) {
    sgd_loop(static_cast<float*>(param.data_ptr()), static_cast<const float*>(grad.data_ptr()),
             mom ? static_cast<float*>(momentum_buffer.data_ptr()) : nullptr, n, s);
  } else {
    sgd_loop(static_cast<double*>(param.data_ptr()), static_cast<const double*>(grad.data_ptr()),
             mom ? static_cast<double*>(momentum_buffer.data_ptr()) : nullptr, n, s);
  }
  return true;
}

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
