// The CPU's fused optimizer updates (optim/fused.h): SGD, Adam/AdamW, RMSprop, Adagrad, Adadelta, on
// float32/float64 parameters and on float16/bfloat16 ones (computed in float32, rounded once).
// Compiled into each CPU kernel build (base, AVX2), as core/cpu/ is, and with -fno-math-errno
// (CMakeLists.txt) so the loops, which take sqrt of non-negative values only, vectorize.
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "core/cpu/lowp.h"
#include "core/impl.h"
#include "core/parallel.h"
#include "optim/fused_math.h"

#ifndef NABLA_CPU_ISA
#define NABLA_CPU_ISA base
#endif

namespace nabla::optim::cpu::NABLA_CPU_ISA {

namespace {

using namespace fused_math;
namespace lowp = nabla::cpu::NABLA_CPU_ISA::lowp;

// Elements [i0, i1) of each update; the variant is a template argument so the loops have no
// branches; __restrict and coefficients taken by value (no aliasing with the arrays) let them vectorize.
template <int WD, bool AMS, class T>
void adam_range(T* __restrict p, const T* __restrict grad, T* __restrict m, T* __restrict v, T* __restrict vmax,
                int64_t i0, int64_t i1, const AdamCoeffs<T> c) {
  for (int64_t i = i0; i < i1; ++i) adam_update<WD, AMS>(p[i], grad[i], m[i], v[i], AMS ? vmax + i : nullptr, c);
}

// The loops below split a parameter into chunks of this many elements over the threads.
constexpr int64_t kStepGrain = 1 << 15;

// The arithmetic type of a parameter dtype: float for float16/bfloat16 (as PyTorch's fused
// optimizers compute, "opmath"), the dtype itself otherwise.
template <class T>
using Op = std::conditional_t<lowp::is_lowp_v<T>, float, T>;

// Runs range(p, g, s, i0, i1) over the whole parameter, threaded, with s the state tensors' data
// (nullptr for undefined ones). float32/float64 pass their own memory. float16/bfloat16 (state in the
// parameter's dtype, as PyTorch keeps it) pass blocks of lowp::kBlock elements converted to float32 on
// the stack; the parameter and the state are rounded once on store, the gradient is only read.
template <class T, class Range>
void for_blocks(const Tensor& param, const Tensor& grad, std::array<const Tensor*, 3> state, const Range& range) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  std::array<T*, 3> st{};
  for (size_t k = 0; k < state.size(); ++k)
    if (state[k] && state[k]->defined()) st[k] = state[k]->data_ptr<T>();
  if constexpr (!lowp::is_lowp_v<T>) {
    parallel_for(0, param.numel(), kStepGrain, [&](int64_t i0, int64_t i1) { range(p, g, st, i0, i1); });
  } else {
    parallel_for(0, param.numel(), kStepGrain, [&](int64_t i0, int64_t i1) {
      constexpr int64_t B = lowp::kBlock;
      alignas(64) float bp[B], bg[B], bs[3][B];
      for (int64_t b = i0; b < i1; b += B) {
        const int64_t n = std::min(B, i1 - b);
        std::array<float*, 3> fs{};
        lowp::to_float(p + b, n, bp);
        lowp::to_float(g + b, n, bg);
        for (size_t k = 0; k < st.size(); ++k)
          if (st[k]) {
            fs[k] = bs[k];
            lowp::to_float(st[k] + b, n, bs[k]);
          }
        range(bp, static_cast<const float*>(bg), fs, int64_t(0), n);
        lowp::from_float(bp, n, p + b);
        for (size_t k = 0; k < st.size(); ++k)
          if (st[k]) lowp::from_float(bs[k], n, st[k] + b);
      }
    });
  }
}

template <class T>
void adam_loop(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& a) {
  const AdamCoeffs<Op<T>> c(a);
  visit_adam_variant(a, [&](auto wd, auto ams) {
    for_blocks<T>(param, grad, {&exp_avg, &exp_avg_sq, a.amsgrad ? &max_exp_avg_sq : nullptr},
                  [&](auto* p, const auto* g, auto s, int64_t i0, int64_t i1) {
                    adam_range<decltype(wd)::value, decltype(ams)::value>(p, g, s[0], s[1], s[2], i0, i1, c);
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
  const RmspropCoeffs<Op<T>> c(r);
  with_flags(
      [&](auto wd, auto centered, auto mom) {
        for_blocks<T>(param, grad,
                      {&square_avg, r.centered ? &grad_avg : nullptr, r.momentum > 0 ? &momentum_buffer : nullptr},
                      [&](auto* p, const auto* g, auto s, int64_t i0, int64_t i1) {
                        rmsprop_range<decltype(wd)::value, decltype(centered)::value, decltype(mom)::value>(
                            p, g, s[0], s[1], s[2], i0, i1, c);
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
  const AdagradCoeffs<Op<T>> c(a);
  with_flags(
      [&](auto wd) {
        for_blocks<T>(param, grad, {&sum, nullptr, nullptr},
                      [&](auto* p, const auto* g, auto s, int64_t i0, int64_t i1) {
                        adagrad_range<decltype(wd)::value>(p, g, s[0], i0, i1, c);
                      });
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
  const AdadeltaCoeffs<Op<T>> c(a);
  with_flags(
      [&](auto wd) {
        for_blocks<T>(param, grad, {&square_avg, &acc_delta, nullptr},
                      [&](auto* p, const auto* g, auto s, int64_t i0, int64_t i1) {
                        adadelta_range<decltype(wd)::value>(p, g, s[0], s[1], i0, i1, c);
                      });
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
  const SgdCoeffs<Op<T>> c(s);
  visit_sgd_variant(s, [&](auto wd, auto mom, auto nesterov) {
    for_blocks<T>(param, grad, {s.momentum != 0 ? &momentum_buffer : nullptr, nullptr, nullptr},
                  [&](auto* p, const auto* g, auto st, int64_t i0, int64_t i1) {
                    sgd_range<decltype(wd)::value, decltype(mom)::value, decltype(nesterov)::value>(p, g, st[0], i0, i1,
                                                                                                    c);
                  });
  });
}

bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
  return run_fused_step<true>(sgd_step_fits(param, grad, momentum_buffer, s, true), param, [&](auto tag) {
    sgd_loop<typename decltype(tag)::type>(param, grad, momentum_buffer, s);
  });
}

bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const AdamStep& a) {
  return run_fused_step<true>(
      adam_step_fits(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a, true), param,
      [&](auto tag) { adam_loop<typename decltype(tag)::type>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, a); });
}

bool rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const RmspropStep& r) {
  return run_fused_step<true>(
      rmsprop_step_fits(param, grad, square_avg, grad_avg, momentum_buffer, r, true), param, [&](auto tag) {
        rmsprop_loop<typename decltype(tag)::type>(param, grad, square_avg, grad_avg, momentum_buffer, r);
      });
}

bool adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStep& a) {
  return run_fused_step<true>(fused_step_fits(param, grad, {&sum}, true), param,
                              [&](auto tag) { adagrad_loop<typename decltype(tag)::type>(param, grad, sum, a); });
}

bool adadelta_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                   const AdadeltaStep& a) {
  return run_fused_step<true>(fused_step_fits(param, grad, {&square_avg, &acc_delta}, true), param, [&](auto tag) {
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
