// The layout of a reduction as the CPU and CUDA kernels plan it: dims split into kept and reduced
// ones, each with its input and output strides, and adjacent dims merged where memory allows.
#pragma once

#include <cstdint>
#include <utility>

#include "core/shape.h"

namespace nabla::detail {

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

}  // namespace nabla::detail
