// Range checks that layers and losses make on values before using them (class targets, embedding
// indices, probabilities, variances). Internal to nn/.
//
// On the CPU they are made at once. For a CUDA tensor a check needs the values on the host; it
// follows cuda::index_checks_mode(), the switch of the indexing kernels' checks: deferred (the
// default) computes the minimum and maximum on the device and reports at the next synchronization
// of the stream (cuda::check_later), so a training step waits on nothing; immediate reads them
// back at once (one host synchronization); off skips the check (an out-of-range value then gives
// unspecified results).
#pragma once

#include <type_traits>
#include <utility>

#include "../autograd/autograd.h"
#include "../core/cuda_api.h"
#include "../core/ops.h"
#include "../core/trace.h"

namespace nabla::nn::value_checks {

// Whether to check the values of `t`: non-empty, and on the CPU or with index checks on.
inline bool check_now(const Tensor& t) { return t.numel() > 0 && (!t.is_cuda() || cuda::index_checks()); }

// {min, max} of a non-empty tensor (one host synchronization for a CUDA tensor).
template <class T>
std::pair<T, T> min_max(const Tensor& t) {
  autograd::NoGradGuard ng;
  if (!t.is_cuda()) return {t.min().item<T>(), t.max().item<T>()};
  Tensor both = stack({t.min(), t.max()}).to(kCPU);
  return {both[0].item<T>(), both[1].item<T>()};
}

// Calls check(min, max) (T: int64_t or double) for the minimum and maximum of `t` when check_now(t):
// at once on the CPU and in immediate mode, at the next synchronization of the stream in deferred
// mode (what check throws is thrown there).
template <class T, class F>
void check_min_max(const Tensor& t, F check) {
  if (!check_now(t)) return;
  autograd::NoGradGuard ng;
  if (!t.is_cuda()) {
    if (trace::tl_current) [[unlikely]]  // compile replays the check (core/trace.h)
      return trace::value_check(t, [check](const Tensor& v) {
        autograd::NoGradGuard ng2;
        if (v.numel() > 0) check(v.min().item<T>(), v.max().item<T>());
      });
    check(t.min().item<T>(), t.max().item<T>());
    return;
  }
  Tensor both = stack({t.min(), t.max()}).to(std::is_integral_v<T> ? kInt64 : kFloat64);
  cuda::check_later(both, [check](const Tensor& host) { check(host[0].item<T>(), host[1].item<T>()); });
}

}  // namespace nabla::nn::value_checks
