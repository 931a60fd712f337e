// The iteration plan of every elementwise kernel, CPU and CUDA (a small TensorIterator), in plain
// C++ so that tests can check it on any machine.
//
// plan_iter() takes an output and inputs of one shape (inputs may be broadcast with stride 0; the
// operands flagged in `by_value`, bit k for operand k, are host numbers whose value a CUDA kernel
// gets by argument: they get base nullptr and stride 0), drops size-1 dims, orders dims by the
// output's memory layout and merges dims that are contiguous across all operands, so a contiguous
// tensor becomes one dim. The CPU walks the plan in 1-D runs (core/cpu/loops.h); the CUDA kernels
// index it with fast dividers (cuda/iter.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "error.h"
#include "small_vector.h"
#include "tensor.h"

namespace nabla {

constexpr int kMaxIterOperands = 4;

// The host-side plan: dims innermost first, strides in bytes per operand.
struct IterPlan {
  int nops = 0;
  int64_t numel = 0;
  SmallVector<int64_t, 6> sizes;
  SmallVector<std::array<int64_t, kMaxIterOperands>, 6> strides;
  std::array<char*, kMaxIterOperands> base{};
};

inline IterPlan plan_iter(std::initializer_list<const Tensor*> operands, uint32_t by_value = 0) {
  IterPlan L;
  L.nops = static_cast<int>(operands.size());
  NABLA_CHECK(ValueError, L.nops <= kMaxIterOperands, "elementwise iterator: too many operands");
  const Tensor& out = **operands.begin();
  L.numel = out.numel();
  int nd = static_cast<int>(out.dim());
  int k = 0;
  for (const Tensor* t : operands) {
    L.base[k] = (by_value >> k) & 1 ? nullptr : static_cast<char*>(t->data_ptr());
    ++k;
  }
  auto stride_of = [&](int op, int d) -> int64_t {
    if ((by_value >> op) & 1) return 0;
    const Tensor* t = operands.begin()[op];
    return t->strides()[d] * static_cast<int64_t>(t->element_size());
  };

  SmallVector<int, 6> order;  // dims innermost first, size-1 dims dropped
  for (int d = nd - 1; d >= 0; --d)
    if (out.sizes()[d] != 1) order.push_back(d);
  // Insertion sort by |stride| of the output (then the next operands), stable, so a contiguous
  // output keeps its natural order; broadcast (stride-0) dims do not decide.
  auto key = [&](int d, int op) {
    int64_t s = stride_of(op, d);
    return s < 0 ? -s : s;
  };
  for (size_t i = 1; i < order.size(); ++i) {
    int d = order[i];
    size_t j = i;
    while (j > 0) {
      int e = order[j - 1];
      bool less = false;
      for (int op = 0; op < L.nops; ++op) {
        int64_t kd = key(d, op), ke = key(e, op);
        if (kd == 0 || ke == 0) continue;
        if (kd != ke) {
          less = kd < ke;
          break;
        }
      }
      if (!less) break;
      order[j] = order[j - 1];
      --j;
    }
    order[j] = d;
  }
  for (int d : order) {
    std::array<int64_t, kMaxIterOperands> st{};
    for (int op = 0; op < L.nops; ++op) st[op] = stride_of(op, d);
    int64_t size = out.sizes()[d];
    if (!L.sizes.empty()) {
      bool mergeable = true;
      for (int o = 0; o < L.nops; ++o)
        if (st[o] != L.strides.back()[o] * L.sizes.back()) mergeable = false;
      if (mergeable) {
        L.sizes.back() *= size;
        continue;
      }
    }
    L.sizes.push_back(size);
    L.strides.push_back(st);
  }
  return L;
}

}  // namespace nabla
