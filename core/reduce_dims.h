// What the CPU and CUDA reductions share: the algebra of each reduction (identity and merge), and
// the layout of a reduction as both plan it: dims split into kept and reduced ones, each with its
// input and output strides, and adjacent dims merged where memory allows.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "dtype.h"
#include "scalar_math.h"
#include "shape.h"

namespace nabla {

enum class ReduceOp : uint8_t { sum, prod, max, min, any, all };

// The accumulator of sums and products of T: double for floating types (16-bit ones included),
// bool for bool, int64 for the other integers.
template <class T>
using sum_acc_t = std::conditional_t<std::is_floating_point_v<T> || scalar::is_16bit_float_v<T>, double,
                                     std::conditional_t<std::is_same_v<T, bool>, bool, int64_t>>;

// Reduction OP over accumulators of type A (double for float sums, int64 for integer ones, bool for
// any/all): its identity and how two partial results merge. max/min propagate NaN; sum and prod
// of bools are "any" and "all".
template <ReduceOp OP, class A>
struct ReduceAlgebra {
  NABLA_HOST_DEVICE static A identity() {
    if constexpr (OP == ReduceOp::sum) return A(0);
    else if constexpr (OP == ReduceOp::prod) return A(1);
    else if constexpr (OP == ReduceOp::any) return false;
    else if constexpr (OP == ReduceOp::all) return true;
    else if constexpr (OP == ReduceOp::max) {
      if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::lowest();
    } else {
      if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::max();
    }
  }
  NABLA_HOST_DEVICE static A merge(A a, A b) {
    if constexpr (OP == ReduceOp::sum) {
      if constexpr (std::is_same_v<A, bool>) return a || b;
      else return a + b;
    } else if constexpr (OP == ReduceOp::prod) {
      if constexpr (std::is_same_v<A, bool>) return a && b;
      else return a * b;
    } else if constexpr (OP == ReduceOp::any) {
      return a || b;
    } else if constexpr (OP == ReduceOp::all) {
      return a && b;
    } else if constexpr (OP == ReduceOp::max) {
      return scalar::max(a, b);
    } else {
      return scalar::min(a, b);
    }
  }
};

}  // namespace nabla

namespace nabla::internal {

struct ReduceDims {
  SmallVector<int64_t, 6> size, xstride, ostride;  // outer to inner
};

// Merges adjacent dims (outer, inner order) contiguous with each other in both strides, and drops
// dims of size 1.
inline ReduceDims coalesce_dims(const ReduceDims& d) {
  ReduceDims r;
  for (size_t i = 0; i < d.size.size(); ++i) {
    if (d.size[i] == 1) continue;
    if (!r.size.empty() && r.xstride.back() == d.xstride[i] * d.size[i] &&
        r.ostride.back() == d.ostride[i] * d.size[i]) {
      r.size.back() *= d.size[i];
      r.xstride.back() = d.xstride[i];
      r.ostride.back() = d.ostride[i];
      continue;
    }
    r.size.push_back(d.size[i]);
    r.xstride.push_back(d.xstride[i]);
    r.ostride.push_back(d.ostride[i]);
  }
  return r;
}

}  // namespace nabla::internal
