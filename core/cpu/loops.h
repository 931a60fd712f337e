// The CPU's N-d iteration engine for elementwise kernels (a small TensorIterator).
//
// make_loop() is the plan shared with the CUDA kernels (core/iter_plan.h: dims ordered by the
// output's memory layout, merged where contiguous across all operands), and for_each() splits the
// flat range over threads and calls the kernel body on 1-D runs:
//   body(char* ptrs[], const int64_t strides_in_bytes[], int64_t n)
// so the body's inner loop is a plain (vectorizable) loop over contiguous data in the common case.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "../iter_plan.h"
#include "../parallel.h"
#include "../shape.h"
#include "../tensor.h"

namespace nabla::cpu {

constexpr int kMaxOperands = kMaxIterOperands;
// Elements per thread chunk below which elementwise kernels stay single-threaded.
constexpr int64_t kElementwiseGrain = 32768;

using Loop = IterPlan;
inline Loop make_loop(std::initializer_list<const Tensor*> operands) { return plan_iter(operands); }

template <class Body>
void for_each(const Loop& L, const Body& body, int64_t grain = kElementwiseGrain) {
  if (L.numel == 0) return;
  const int nd = static_cast<int>(L.sizes.size());
  if (nd == 0) {
    std::array<char*, kMaxOperands> p = L.base;
    std::array<int64_t, kMaxOperands> s{};
    body(p.data(), s.data(), int64_t(1));
    return;
  }
  auto run = [&](int64_t begin, int64_t end) {
    SmallVector<int64_t, 6> idx(nd);
    std::array<char*, kMaxOperands> p = L.base;
    int64_t rem = begin;
    for (int d = 0; d < nd; ++d) {
      idx[d] = rem % L.sizes[d];
      rem /= L.sizes[d];
      for (int o = 0; o < L.nops; ++o) p[o] += idx[d] * L.strides[d][o];
    }
    const int64_t* inner = L.strides[0].data();
    int64_t pos = begin;
    while (pos < end) {
      int64_t n = std::min(L.sizes[0] - idx[0], end - pos);
      body(p.data(), inner, n);
      pos += n;
      if (pos >= end) break;
      idx[0] += n;
      for (int o = 0; o < L.nops; ++o) p[o] += n * L.strides[0][o];
      for (int d = 0; d + 1 < nd && idx[d] == L.sizes[d]; ++d) {
        idx[d] = 0;
        ++idx[d + 1];
        for (int o = 0; o < L.nops; ++o) p[o] += L.strides[d + 1][o] - L.sizes[d] * L.strides[d][o];
      }
    }
  };
  parallel_for(0, L.numel, grain, run);
}

// out[i] = f(a[i]) with out of type R and a of type A.
template <class R, class A, class F>
void unary_loop(const Loop& L, const F& f, int64_t grain = kElementwiseGrain) {
  for_each(
      L,
      [&](char** p, const int64_t* s, int64_t n) {
        R* out = reinterpret_cast<R*>(p[0]);
        const A* a = reinterpret_cast<const A*>(p[1]);
        if (s[0] == sizeof(R) && s[1] == sizeof(A)) {
          for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(f(a[i]));
        } else if (s[0] == sizeof(R) && s[1] == 0) {
          R v = static_cast<R>(f(*a));
          for (int64_t i = 0; i < n; ++i) out[i] = v;
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<R*>(p[0] + i * s[0]) = static_cast<R>(f(*reinterpret_cast<const A*>(p[1] + i * s[1])));
        }
      },
      grain);
}

// out[i] = f(a[i], b[i]); the contiguous and scalar-broadcast cases get their own plain loops.
template <class R, class A, class B, class F>
void binary_loop(const Loop& L, const F& f, int64_t grain = kElementwiseGrain) {
  for_each(
      L,
      [&](char** p, const int64_t* s, int64_t n) {
        R* out = reinterpret_cast<R*>(p[0]);
        const A* a = reinterpret_cast<const A*>(p[1]);
        const B* b = reinterpret_cast<const B*>(p[2]);
        if (s[0] == sizeof(R) && s[1] == sizeof(A) && s[2] == sizeof(B)) {
          for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(f(a[i], b[i]));
        } else if (s[0] == sizeof(R) && s[1] == sizeof(A) && s[2] == 0) {
          const B bv = *b;
          for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(f(a[i], bv));
        } else if (s[0] == sizeof(R) && s[1] == 0 && s[2] == sizeof(B)) {
          const A av = *a;
          for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(f(av, b[i]));
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<R*>(p[0] + i * s[0]) = static_cast<R>(
                f(*reinterpret_cast<const A*>(p[1] + i * s[1]), *reinterpret_cast<const B*>(p[2] + i * s[2])));
        }
      },
      grain);
}

// out[i] = f(a[i], b[i], c[i]).
template <class R, class A, class B, class C, class F>
void ternary_loop(const Loop& L, const F& f, int64_t grain = kElementwiseGrain) {
  for_each(
      L,
      [&](char** p, const int64_t* s, int64_t n) {
        if (s[0] == sizeof(R) && s[1] == sizeof(A) && s[2] == sizeof(B) && s[3] == sizeof(C)) {
          R* out = reinterpret_cast<R*>(p[0]);
          const A* a = reinterpret_cast<const A*>(p[1]);
          const B* b = reinterpret_cast<const B*>(p[2]);
          const C* c = reinterpret_cast<const C*>(p[3]);
          for (int64_t i = 0; i < n; ++i) out[i] = static_cast<R>(f(a[i], b[i], c[i]));
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<R*>(p[0] + i * s[0]) = static_cast<R>(f(*reinterpret_cast<const A*>(p[1] + i * s[1]),
                                                                      *reinterpret_cast<const B*>(p[2] + i * s[2]),
                                                                      *reinterpret_cast<const C*>(p[3] + i * s[3])));
        }
      },
      grain);
}

}  // namespace nabla::cpu
