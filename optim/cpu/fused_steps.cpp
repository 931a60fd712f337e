// The CPU's fused optimizer updates (optim/fused.h): SGD, Adam/AdamW, RMSprop, Adagrad, Adadelta.
// Compiled into each CPU kernel build (base, AVX2), as core/cpu/ is, and with -fno-math-errno
// (CMakeLists.txt) so the loops, which take sqrt of non-negative values only, vectorize.
#include <cmath>

#include "core/impl.h"
#include "core/parallel.h"
#include "optim/fused_math.h"

#ifndef NABLA_CPU_ISA
#define NABLA_CPU_ISA base
#endif

namespace nabla::optim::cpu::NABLA_CPU_ISA {

namespace {

using namespace fused_math;

// Elements [i0, i1) of each update; the variant is a template argument so the loops have no
// branches; __restrict and coefficients taken by value (no aliasing with the arrays) let them vectorize.
template <int WD, bool AMS, class T>
void adam_range(T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v, T* __restrict vmax,
                int64_t i0, int64_t i1, const AdamCoeffs<T> c) {
  for (int64_t i = i0; i < i1; ++i) adam_update<WD, AMS>(p[i], grad[i], m[i], v[i], AMS ? vmax + i : nullptr, c);
}

// The loops below split a parameter into chunks of this many elements over the threads.
constexpr int64_t kStepGrain = 1 << 15;

template <class T>
void adam_loop(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& a) {
  T *p = param.data_ptr<T>(), *m = exp_avg.data_ptr<T>(), *v = exp_avg_sq.data_ptr<T>();
  T* vmax = a.amsgrad ? max_exp_avg_sq.data_ptr<T>() : nullptr;
  const T* g = grad.data_ptr<T>();
  const AdamCoeffs<T> c(a);
  visit_adam_variant(a, [&](auto wd, auto ams) {
    parallel_for(0, param.numel(), kStepGrain, [&](int64_t i0, int64_t i1) {
      adam_range<decltype(wd)::value, decltype(ams)::value>(p, g, m, v, vmax, i0, i1, c);
    });
  });
}

template <bool WD, bool CENTERED, bool MOM, class T>
void rmsprop_range(T* __restrict p, const T* __restrict grad, T* __restrict sq, T* __restrict gavg, T* __restrict buf,
                   int64_t i0, int64_t i1, const RmspropCoeffs<T> c) {
  for (int64_t i = i0; i < i1; ++i)
    rmsprop_update<WD, CENTERED, MOM>(p[i], grad[i], sq[i], CENTERED ? gavg + i : nullptr, MOM ? buf + i : nullptr, c);
}

template <class T>
void rmsprop_loop(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const RmspropStep& r) {
  T *p = param.data_ptr<T>(), *sq = square_avg.data_ptr<T>();
  T* gavg = r.centered ? grad_avg.data_ptr<T>() : nullptr;
  T* buf = r.momentum > 0 ? momentum_buffer.data_ptr<T>() : nullptr;
  const T* g = grad.data_ptr<T>();
  const RmspropCoeffs<T> c(r);
  with_flags(
      [&](auto wd, auto centered, auto mom) {
        parallel_for(0, param.numel(), kStepGrain, [&](int64_t i0, int64_t i1) {
          rmsprop_range<decltype(wd)::value, decltype(centered)::value, decltype(mom)::value>(p, g, sq, gavg, buf, i0,
                                                                                              i1, c);
        });
      },
      r.weight_decay != 0, r.centered, r.momentum > 0);
}

template <bool WD, class T>
void adagrad_range(T* __restrict p, const T* __restrict grad, T* __restrict sum, int64_t i0, int64_t i1,
                   const AdagradCoeffs<T> c) {
  for (int64_t i = i0; i < i1; ++i) adagrad_update<WD>(p[i], grad[i], sum[i], c);
}

template <class T>
void adagrad_loop(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a) {
  T *p = param.data_ptr<T>(), *s = sum.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const AdagradCoeffs<T> c(a);
  with_flags(
      [&](auto wd) {
        parallel_for(0, param.numel(), kStepGrain,
                     [&](int64_t i0, int64_t i1) { adagrad_range<decltype(wd)::value>(p, g, s, i0, i1, c); });
      },
      a.weight_decay != 0);
}

template <bool WD, class T>
void adadelta_range(T* __restrict p, const T* __restrict grad, T* __restrict sq, T* __restrict acc, int64_t i0,
                    int64_t i1, const AdadeltaCoeffs<T> c) {
  for (int64_t i = i0; i < i1; ++i) adadelta_update<WD>(p[i], grad[i], sq[i], acc[i], c);
}

template <class T>
void adadelta_loop(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                   const AdadeltaStep& a) {
  T *p = param.data_ptr<T>(), *sq = square_avg.data_ptr<T>(), *acc = acc_delta.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  const AdadeltaCoeffs<T> c(a);
  with_flags(
      [&](auto wd) {
        parallel_for(0, param.numel(), kStepGrain,
                     [&](int64_t i0, int64_t i1) { adadelta_range<decltype(wd)::value>(p, g, sq, acc, i0, i1, c); });
      },
      a.weight_decay != 0);
}

template <bool WD, int MOM, bool NESTEROV, class T>
void sgd_range(T* __restrict p, const T* __restrict grad, T* __restrict buf, int64_t i0, int64_t i1,
               const SgdCoeffs<T> c) {
  for (int64_t i = i0; i < i1; ++i) sgd_update<WD, MOM, NESTEROV>(p[i], grad[i], MOM ? buf + i : nullptr, c);
}

template <class T>
void sgd_loop(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* buf = s.momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr;
  const SgdCoeffs<T> c(s);
  visit_sgd_variant(s, [&](auto wd, auto mom, auto nesterov) {
    parallel_for(0, param.numel(), kStepGrain, [&](int64_t i0, int64_t i1) {
      sgd_range<decltype(wd)::value, decltype(mom)::value, decltype(nesterov)::value>(p, g, buf, i0, i1, c);
    });
  });
}

bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
  return run_fused_step(sgd_step_fits(param, grad, momentum_buffer, s), param,
                        [&](auto tag) { sgd_loop<typename decltype(tag)::type>(param, grad, momentum_buffer, s); });
}

bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& a) {
  return run_fused_step(adam_step_fits(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a), param, [&](auto tag) {
    adam_loop<typename decltype(tag)::type>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a);
  });
}

bool rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const RmspropStep& r) {
  return run_fused_step(rmsprop_step_fits(param, grad, square_avg, grad_avg, momentum_buffer, r), param, [&](auto tag) {
    rmsprop_loop<typename decltype(tag)::type>(param, grad, square_avg, grad_avg, momentum_buffer, r);
  });
}

bool adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a) {
  return run_fused_step(fused_step_fits(param, grad, {&sum}), param,
                        [&](auto tag) { adagrad_loop<typename decltype(tag)::type>(param, grad, sum, a); });
}

bool adadelta_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                   const AdadeltaStep& a) {
  return run_fused_step(fused_step_fits(param, grad, {&square_avg, &acc_delta}), param, [&](auto tag) {
    adadelta_loop<typename decltype(tag)::type>(param, grad, square_avg, acc_delta, a);
  });
}

}  // namespace

// This build's updates, for optim/fused.cpp's CPU table.
void fill_fused_steps(FusedSteps& table) {
  namespace impl = nabla::optim::cpu::NABLA_CPU_ISA;
  NABLA_FUSED_STEPS(NABLA_FILL_ENTRY)
}

}  // namespace nabla::optim::cpu::NABLA_CPU_ISA
