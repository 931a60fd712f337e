// Range checks that layers and losses make on values before using them (class targets, embedding
// indices, probabilities, variances). Internal to nn/.
//
// On the CPU they are free. For a CUDA tensor a check has to read values back, a host
// synchronization: it reads the minimum and the maximum in one copy, and it is skipped when
// cuda::index_checks() is off (cuda::set_index_checks(false) or NABLA_CUDA_INDEX_CHECKS=0), the
// switch that also turns off the indexing kernels' checks, so a training step waits on nothing.
// Unchecked, an out-of-range value gives unspecified results (PyTorch's CUDA kernels fail
// asynchronously with a device-side assert instead).
#pragma once

#include <utility>

#include "autograd/autograd.h"
#include "core/cuda_api.h"
#include "core/ops.h"

namespace nabla::nn::value_checks {

// Whether to check the values of `t` now: non-empty, and on the CPU or with index checks on.
inline bool check_now(const Tensor& t) { return t.numel() > 0 && (!t.is_cuda() || cuda::index_checks()); }

// {min, max} of a non-empty tensor, with one host synchronization for a CUDA tensor.
template <class T>
std::pair<T, T> min_max(const Tensor& t) {
  autograd::NoGradGuard ng;
  if (!t.is_cuda()) return {t.min().item<T>(), t.max().item<T>()};
  Tensor both = stack({t.min(), t.max()}).to(kCPU);
  return {both[0].item<T>(), both[1].item<T>()};
}

}  // namespace nabla::nn::value_checks
