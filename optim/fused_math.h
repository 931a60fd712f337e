// Per-element fused optimizer updates shared by the CPU loops (optim/cpu/fused_steps.cpp) and the
// CUDA kernels (cuda/optim.cu), so both devices compute the same formulas in the same order: the
// algorithms of optim/fused.h's sgd_step, adam_step, rmsprop_step, adagrad_step and adadelta_step. Each takes the coefficients once per step (converted to the parameter's dtype
// T) and updates one element in place.
#pragma once

#include <cmath>
#include <type_traits>

#include "../core/dtype.h"
#include "fused.h"

// Compiled into each CPU kernel build (base, AVX2) and into CUDA: an inline namespace per build keeps
// the copies apart, so the linker never hands one build's instructions to another.
#ifdef NABLA_CPU_ISA
#define NABLA_OPTIM_MATH_BUILD NABLA_CPU_ISA
#else
#define NABLA_OPTIM_MATH_BUILD generic
#endif

namespace nabla::optim::fused_math {
inline namespace NABLA_OPTIM_MATH_BUILD {

template <class T>
struct AdamCoeffs {
  T b1, b2, c1, c2, eps, bc2, step, wd, decay, sign;
  explicit AdamCoeffs(const AdamStep& a)
      : b1(static_cast<T>(a.beta1)),
        b2(static_cast<T>(a.beta2)),
        c1(static_cast<T>(1 - a.beta1)),
        c2(static_cast<T>(1 - a.beta2)),
        eps(static_cast<T>(a.eps)),
        bc2(static_cast<T>(a.bias_correction2_sqrt)),
        step(static_cast<T>(a.step_size)),
        wd(static_cast<T>(a.weight_decay)),
        decay(static_cast<T>(1 - a.lr * a.weight_decay)),
        sign(a.maximize ? T(-1) : T(1)) {}
};

// WD: 0 no weight decay, 1 L2 added to the gradient (Adam), 2 decoupled (AdamW).
enum : int { kNoDecay = 0, kL2Decay = 1, kDecoupledDecay = 2 };

// AMS: amsgrad, with the running maximum of v in *vmax (NaN propagates, as maximum() does).
template <int WD, bool AMS, class T>
NABLA_HOST_DEVICE inline void adam_update(T& p, T grad, T& m, T& v, T* vmax, const AdamCoeffs<T>& c) {
  using std::sqrt;
  T g = c.sign * grad;
  T w = p;
  if constexpr (WD == kDecoupledDecay) w *= c.decay;
  if constexpr (WD == kL2Decay) g += c.wd * w;
  const T mi = c.b1 * m + c.c1 * g, vi = c.b2 * v + c.c2 * (g * g);
  m = mi;
  v = vi;
  T d = vi;
  if constexpr (AMS) {
    const T mx = *vmax;
    d = (mx > vi || mx != mx) ? mx : vi;
    *vmax = d;
  }
  p = w - c.step * (mi / (sqrt(d) / c.bc2 + c.eps));
}

template <class T>
struct RmspropCoeffs {
  T lr, alpha, c, eps, wd, mom, sign;
  explicit RmspropCoeffs(const RmspropStep& r)
      : lr(static_cast<T>(r.lr)),
        alpha(static_cast<T>(r.alpha)),
        c(static_cast<T>(1 - r.alpha)),
        eps(static_cast<T>(r.eps)),
        wd(static_cast<T>(r.weight_decay)),
        mom(static_cast<T>(r.momentum)),
        sign(r.maximize ? T(-1) : T(1)) {}
};

// gavg is read only when CENTERED, buf only with MOM(entum).
template <bool WD, bool CENTERED, bool MOM, class T>
NABLA_HOST_DEVICE inline void rmsprop_update(T& p, T grad, T& sq, T* gavg, T* buf, const RmspropCoeffs<T>& c) {
  using std::sqrt;
  T g = c.sign * grad;
  if constexpr (WD) g += c.wd * p;
  const T s = c.alpha * sq + c.c * (g * g);
  sq = s;
  T avg;
  if constexpr (CENTERED) {
    const T a = c.alpha * *gavg + c.c * g;
    *gavg = a;
    avg = sqrt(s - a * a) + c.eps;
  } else {
    avg = sqrt(s) + c.eps;
  }
  if constexpr (MOM) {
    const T b = c.mom * *buf + g / avg;
    *buf = b;
    p -= c.lr * b;
  } else {
    p -= c.lr * (g / avg);
  }
}

template <class T>
struct AdagradCoeffs {
  T clr, eps, wd, sign;
  explicit AdagradCoeffs(const AdagradStep& a)
      : clr(static_cast<T>(a.clr)),
        eps(static_cast<T>(a.eps)),
        wd(static_cast<T>(a.weight_decay)),
        sign(a.maximize ? T(-1) : T(1)) {}
};

template <bool WD, class T>
NABLA_HOST_DEVICE inline void adagrad_update(T& p, T grad, T& sum, const AdagradCoeffs<T>& c) {
  using std::sqrt;
  T g = c.sign * grad;
  if constexpr (WD) g += c.wd * p;
  const T s = sum + g * g;
  sum = s;
  p -= c.clr * (g / (sqrt(s) + c.eps));
}

template <class T>
struct AdadeltaCoeffs {
  T lr, rho, c, eps, wd, sign;
  explicit AdadeltaCoeffs(const AdadeltaStep& a)
      : lr(static_cast<T>(a.lr)),
        rho(static_cast<T>(a.rho)),
        c(static_cast<T>(1 - a.rho)),
        eps(static_cast<T>(a.eps)),
        wd(static_cast<T>(a.weight_decay)),
        sign(a.maximize ? T(-1) : T(1)) {}
};

template <bool WD, class T>
NABLA_HOST_DEVICE inline void adadelta_update(T& p, T grad, T& sq, T& acc, const AdadeltaCoeffs<T>& c) {
  using std::sqrt;
  T g = c.sign * grad;
  if constexpr (WD) g += c.wd * p;
  const T s = c.rho * sq + c.c * (g * g);
  sq = s;
  const T delta = sqrt(acc + c.eps) / sqrt(s + c.eps) * g;
  acc = c.rho * acc + c.c * (delta * delta);
  p -= c.lr * delta;
}

template <class T>
struct SgdCoeffs {
  T lr, mom, damp, wd, sign;
  explicit SgdCoeffs(const SgdStep& s)
      : lr(static_cast<T>(s.lr)),
        mom(static_cast<T>(s.momentum)),
        damp(static_cast<T>(1 - s.dampening)),
        wd(static_cast<T>(s.weight_decay)),
        sign(s.maximize ? T(-1) : T(1)) {}
};

// MOM: 0 without momentum (buf unused), 1 on the first step (buf = g), 2 after it.
template <bool WD, int MOM, bool NESTEROV, class T>
NABLA_HOST_DEVICE inline void sgd_update(T& p, T grad, T* buf, const SgdCoeffs<T>& c) {
  T g = c.sign * grad;
  if constexpr (WD) g += c.wd * p;
  if constexpr (MOM != 0) {
    const T b = MOM == 1 ? g : c.mom * *buf + c.damp * g;
    *buf = b;
    g = NESTEROV ? g + c.mom * b : b;
  }
  p -= c.lr * g;
}

// Calls f with the step's variant as compile-time constants, so the kernels have no branch per
// element: f(std::integral_constant<int, WD>, bool_constant<AMS>) for Adam,
// f(bool_constant<WD>, integral_constant<int, MOM>, bool_constant<NESTEROV>) for SGD (Nesterov
// only where there is momentum), and with_flags(f, b1, b2, ...) calls f(bool_constant<b1>,
// bool_constant<b2>, ...) for the others.
template <class F>
void with_flags(F&& f) {
  f();
}
template <class F, class... B>
void with_flags(F&& f, bool first, B... rest) {
  if (first) with_flags([&](auto... flags) { f(std::true_type{}, flags...); }, rest...);
  else with_flags([&](auto... flags) { f(std::false_type{}, flags...); }, rest...);
}
template <class F>
void visit_adam_variant(const AdamStep& a, F&& f) {
  auto with_ams = [&](auto wd) { with_flags([&](auto ams) { f(wd, ams); }, a.amsgrad); };
  if (a.weight_decay == 0) with_ams(std::integral_constant<int, kNoDecay>{});
  else if (a.decoupled) with_ams(std::integral_constant<int, kDecoupledDecay>{});
  else with_ams(std::integral_constant<int, kL2Decay>{});
}
template <class F>
void visit_sgd_variant(const SgdStep& s, F&& f) {
  auto with_momentum = [&](auto wd) {
    using I = std::integral_constant<int, 0>;
    if (s.momentum == 0) {
      f(wd, I{}, std::false_type{});
      return;
    }
    auto with_nesterov = [&](auto mom) {
      if (s.nesterov) f(wd, mom, std::true_type{});
      else f(wd, mom, std::false_type{});
    };
    if (s.first_step) with_nesterov(std::integral_constant<int, 1>{});
    else with_nesterov(std::integral_constant<int, 2>{});
  };
  if (s.weight_decay != 0) with_momentum(std::true_type{});
  else with_momentum(std::false_type{});
}

// True when the tensors of a fused step qualify: one floating dtype (f32 or f64, and with `lowp`
// f16 or bf16 too: the CPU's steps), contiguous, the same number of elements. `state` lists the
// optimizer-state tensors the step reads and writes (nullptr for those this variant does not use).
inline bool fused_step_fits(const Tensor& param, const Tensor& grad, std::initializer_list<const Tensor*> state,
                            bool lowp = false) {
  const DType dt = param.dtype();
  if (dt != DType::f32 && dt != DType::f64 && !(lowp && is_reduced_float(dt))) return false;
  auto fits = [&](const Tensor& t) {
    return t.defined() && t.dtype() == dt && t.device() == param.device() && t.is_contiguous() &&
           t.numel() == param.numel();
  };
  if (!fits(param) || !fits(grad)) return false;
  for (const Tensor* t : state)
    if (t && !fits(*t)) return false;
  return true;
}
// The common frame of every backend's fused step: declines (false) when the tensors do not fit,
// else calls f(type_tag<float>{}) or f(type_tag<double>{}) for a non-empty parameter and returns true.
// With Lowp (the CPU's steps, whose `fits` allowed them) also f(type_tag<BFloat16>{}) and
// f(type_tag<Half>{}).
template <bool Lowp = false, class F>
bool run_fused_step(bool fits, const Tensor& param, F&& f) {
  if (!fits) return false;
  if (param.numel() == 0) return true;
  if constexpr (Lowp) {
    if (param.dtype() == DType::bf16) return f(type_tag<BFloat16>{}), true;
    if (param.dtype() == DType::f16) return f(type_tag<Half>{}), true;
  }
  if (param.dtype() == DType::f32) f(type_tag<float>{});
  else f(type_tag<double>{});
  return true;
}
inline bool sgd_step_fits(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s,
                          bool lowp = false) {
  return fused_step_fits(param, grad, {s.momentum != 0 ? &momentum_buffer : nullptr}, lowp);
}
inline bool adam_step_fits(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& max_exp_avg_sq, const AdamStep& a, bool lowp = false) {
  return fused_step_fits(param, grad, {&exp_avg, &exp_avg_sq, a.amsgrad ? &max_exp_avg_sq : nullptr}, lowp);
}
inline bool rmsprop_step_fits(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                              const Tensor& momentum_buffer, const RmspropStep& r, bool lowp = false) {
  return fused_step_fits(
      param, grad, {&square_avg, r.centered ? &grad_avg : nullptr, r.momentum > 0 ? &momentum_buffer : nullptr}, lowp);
}

}  // namespace NABLA_OPTIM_MATH_BUILD
}  // namespace nabla::optim::fused_math
