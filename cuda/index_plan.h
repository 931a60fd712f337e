// The index arithmetic of the CUDA indexing kernels' deterministic variants (cuda/index.cu), in plain
// C++ so that tests/cuda/test_plan.cpp checks it on any machine.
//
// With use_deterministic_algorithms(true), index_add and scatter_add do not add with atomics: the
// (wrapped) indices of each line are sorted stably, so the contributions to one destination form a
// run [lo, hi) of the sorted line, in index order; one thread per destination element finds its run
// by binary search and adds the run in order. That is the CPU's order of addition, so the result is
// reproducible and equal to the CPU's.
#pragma once

#include <cstdint>

#include "../core/dtype.h"

namespace nabla::cuda {

struct IndexRun {
  int64_t lo, hi;  // the positions of value v in the sorted line: [lo, hi), empty when absent
};

// The run of `v` in sorted[0, m) (ascending): std::equal_range.
NABLA_HOST_DEVICE inline IndexRun equal_run(const int64_t* sorted, int64_t m, int64_t v) {
  int64_t lo = 0, hi = m;
  while (lo < hi) {  // first position with sorted[p] >= v
    int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  int64_t end = lo, top = m;
  while (end < top) {  // first position with sorted[p] > v
    int64_t mid = end + (top - end) / 2;
    if (sorted[mid] <= v) end = mid + 1;
    else top = mid;
  }
  return {lo, end};
}

// An index as the kernels use it: negative ones count from the end (v + n). Out-of-range values stay
// out of [0, n), so no destination's run contains them (the index checker reports them).
NABLA_HOST_DEVICE inline int64_t wrapped_index(int64_t v, int64_t n) { return v < 0 && v >= -n ? v + n : v; }

}  // namespace nabla::cuda
