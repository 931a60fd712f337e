// The CUDA side of the elementwise iteration plan (core/iter_plan.h, shared with the CPU), in plain
// C++ without CUDA headers so that tests/cuda/test_plan.cpp can check it on any machine.
// split_32bit() cuts a plan whose element count does not fit the kernels' 32-bit element index into
// pieces that do. Iter<N> is what a kernel receives: per-dim sizes as fast dividers and byte
// strides per operand, so a contiguous tensor's addresses take one multiply.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>

#include "../core/dtype.h"
#include "../core/error.h"
#include "../core/iter_plan.h"
#include "../core/tensor.h"

namespace nabla::cuda {

// Division by a fixed divisor with a multiply and a shift (Granlund and Montgomery's magic
// numbers), exact for dividends below 2^31 and divisors in [1, 2^31].
struct IntDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;
  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    for (shift = 0; shift < 32; ++shift)
      if ((uint64_t(1) << shift) >= d) break;
    uint64_t one = 1;
    magic = static_cast<uint32_t>(((one << 32) * ((one << shift) - d)) / d + 1);
  }
  NABLA_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    uint32_t t = __umulhi(n, magic);
#else
    uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
};

constexpr int kMaxIterDims = 10;

constexpr int64_t kMax32 = (int64_t(1) << 31) - 1;

// Calls f(piece) for pieces of the plan whose element count fits below 2^31, splitting the
// outermost dim in halves as often as needed.
inline void split_32bit(const IterPlan& L, const std::function<void(const IterPlan&)>& f) {
  if (L.numel == 0) return;
  if (L.numel <= kMax32) {
    f(L);
    return;
  }
  IterPlan a = L;
  size_t outer = a.sizes.size() - 1;
  int64_t s = a.sizes[outer];
  if (s == 1) {  // only the inner dims are left to split
    a.sizes.pop_back();
    a.strides.pop_back();
    split_32bit(a, f);
    return;
  }
  int64_t h = s / 2;
  IterPlan b = a;
  a.sizes[outer] = h;
  a.numel = L.numel / s * h;
  b.sizes[outer] = s - h;
  b.numel = L.numel / s * (s - h);
  for (int o = 0; o < L.nops; ++o)
    if (b.base[o]) b.base[o] += h * L.strides[outer][o];
  split_32bit(a, f);
  split_32bit(b, f);
}

// What a kernel receives.
template <int N>
struct Iter {
  int ndim = 0;
  IntDivider sizes[kMaxIterDims];
  int64_t strides[kMaxIterDims][N];
  char* base[N];

  // Addresses of element `i` (row-major over the plan's dims) for every operand.
  NABLA_HOST_DEVICE void pointers(uint32_t i, char* (&p)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = base[k];
    if (ndim == 1) {
#pragma unroll
      for (int k = 0; k < N; ++k) p[k] += static_cast<int64_t>(i) * strides[0][k];
      return;
    }
#pragma unroll
    for (int d = 0; d < kMaxIterDims; ++d) {
      if (d == ndim) break;
      uint32_t q = sizes[d].div(i);
      uint32_t r = i - q * sizes[d].divisor;
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) p[k] += static_cast<int64_t>(r) * strides[d][k];
    }
  }
};

template <int N>
Iter<N> make_iter(const IterPlan& L) {
  NABLA_CHECK(NotImplemented, static_cast<int>(L.sizes.size()) <= kMaxIterDims,
              "CUDA elementwise kernel: ", L.sizes.size(), " non-mergeable dims exceed the limit of ", kMaxIterDims,
              "; make the tensors contiguous first");
  Iter<N> it;
  it.ndim = static_cast<int>(L.sizes.size());
  for (int d = 0; d < it.ndim; ++d) {
    it.sizes[d] = IntDivider(static_cast<uint32_t>(L.sizes[d]));
    for (int k = 0; k < N; ++k) it.strides[d][k] = L.strides[d][k];
  }
  for (int d = it.ndim; d < kMaxIterDims; ++d) {
    it.sizes[d] = IntDivider(1);
    for (int k = 0; k < N; ++k) it.strides[d][k] = 0;
  }
  for (int k = 0; k < N; ++k) it.base[k] = L.base[k];
  return it;
}

}  // namespace nabla::cuda
