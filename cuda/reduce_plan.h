// How a CUDA reduction is laid out on the GPU, in plain C++ (no CUDA headers) so that
// tests/cuda/test_plan.cpp checks it on any machine.
//
// The kept dims and the reduced dims of x are each merged where memory allows (as the CPU does),
// giving an output index space (kept) and a reduction index space (red), innermost first. Then:
//   row mode    (the innermost reduced dim is contiguous): a row of threads (threadIdx.x) walks the
//               reduction of one output, threadIdx.y picks the output: coalesced reads;
//   column mode (otherwise): threadIdx.x picks the output, threadIdx.y strides over the reduction,
//               e.g. a bias gradient sum over the batch, where neighbouring outputs are neighbours.
// When there are too few outputs to fill the GPU, blockIdx.y splits the reduction into `splits`
// chunks that write partial results, and a second pass (row mode over the partials) combines
// them. Every choice depends only on the shapes and the SM count, and every combination happens
// in a fixed order, so results are reproducible run to run. Beyond 2^31 elements per output the
// host cuts the reduction into pieces (plan_reduce_pieces) whose partials the second pass combines.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "../core/error.h"
#include "../core/reduce_dims.h"
#include "../core/shape.h"
#include "iter.h"

namespace nabla::cuda {

using internal::coalesce_dims;
using internal::ReduceDims;

struct ReducePlan {
  ReduceDims kept, red;  // coalesced, outer to inner; strides in elements
  int64_t nout = 1, nred = 1;
  bool row_mode = true;
  int bx = 32, by = 1;  // block shape
  int64_t grid_x = 1;   // blocks over outputs
  int64_t splits = 1;   // blocks over the reduction (gridDim.y)
  int64_t chunk = 1;    // reduction elements per split
};

// The kept and the reduced dims of x, each coalesced.
inline std::pair<ReduceDims, ReduceDims> reduce_dims_of(IntArrayRef sizes, IntArrayRef xstrides, IntArrayRef ostrides,
                                                        const SmallVector<bool, 8>& mask) {
  ReduceDims kept, red;
  for (size_t d = 0; d < sizes.size(); ++d) {
    ReduceDims& t = mask[d] ? red : kept;
    t.size.push_back(sizes[d]);
    t.xstride.push_back(xstrides[d]);
    t.ostride.push_back(mask[d] ? 0 : ostrides[d]);
  }
  return {coalesce_dims(kept), coalesce_dims(red)};
}

// x: sizes/strides (elements); out: keepdim strides; mask: reduced dims; sms: the GPU's SM count.
// At most 2^31 - 1 outputs and elements per output (plan_reduce_pieces splits larger reductions).
inline ReducePlan plan_reduce(IntArrayRef sizes, IntArrayRef xstrides, IntArrayRef ostrides,
                              const SmallVector<bool, 8>& mask, int sms) {  // mask: internal::DimMask
  ReducePlan p;
  std::tie(p.kept, p.red) = reduce_dims_of(sizes, xstrides, ostrides, mask);
  for (int64_t s : p.kept.size) p.nout *= s;
  for (int64_t s : p.red.size) p.nred *= s;
  NABLA_CHECK(NotImplemented, p.nout <= kMax32, "CUDA reductions: more than 2^31 outputs are not supported yet (shape ",
              sizes, ")");
  NABLA_CHECK(NotImplemented, p.nred <= kMax32,
              "CUDA reductions: a piece of more than 2^31 elements per output (shape ", sizes,
              "; plan_reduce_pieces splits it)");
  NABLA_CHECK(
      NotImplemented,
      p.kept.size.size() <= static_cast<size_t>(kMaxIterDims) && p.red.size.size() <= static_cast<size_t>(kMaxIterDims),
      "CUDA reductions: too many non-mergeable dims (shape ", sizes, "); make x contiguous first");
  const int64_t nred = p.nred, nout = p.nout;
  p.row_mode = !p.red.size.empty() && p.red.xstride.back() == 1 && nred >= 32;
  if (p.row_mode) {
    int64_t bx = 32;
    while (bx < nred && bx < 512) bx *= 2;
    p.bx = static_cast<int>(bx);
    p.by = static_cast<int>(std::min<int64_t>(std::max<int64_t>(512 / bx, 1), std::max<int64_t>(nout, 1)));
    // by must keep bx * by <= 512; a power of two no larger than the number of outputs.
    int by = 1;
    while (by * 2 <= p.by) by *= 2;
    p.by = by;
    p.grid_x = (nout + p.by - 1) / p.by;
  } else {
    int64_t bx = 32;
    while (bx < nout && bx < 256) bx *= 2;
    p.bx = static_cast<int>(bx);
    int64_t by = 1;
    while (by * 2 <= 512 / bx && by * 16 < nred) by *= 2;
    p.by = static_cast<int>(by);
    p.grid_x = (nout + p.bx - 1) / p.bx;
  }
  // Split the reduction over more blocks when the outputs alone leave the GPU mostly idle and each
  // thread would otherwise loop over many elements.
  int64_t lanes = p.row_mode ? p.bx : p.by;  // threads sharing one output's reduction
  int64_t target_blocks = 4 * static_cast<int64_t>(std::max(sms, 1));
  if (p.grid_x < target_blocks && nred >= lanes * 64) {
    int64_t want = (target_blocks + p.grid_x - 1) / p.grid_x;
    int64_t most = nred / (lanes * 16);  // at least 16 elements per thread
    p.splits = std::clamp<int64_t>(std::min(want, most), 1, 65535);
  }
  p.chunk = (nred + p.splits - 1) / p.splits;
  return p;
}

// A reduction with more elements per output than the kernel's 32-bit indexing reaches is cut on the
// host into pieces along its outer reduced dims, each at most `max_red` elements per output with a
// plan of its own, starting `offset` elements into x. Every piece writes its partial results into
// its own columns of one partial buffer, and the second pass combines them all (cuda/reduce.cu).
struct ReducePiece {
  int64_t offset = 0;
  ReducePlan plan;
};

inline std::vector<ReducePiece> plan_reduce_pieces(IntArrayRef sizes, IntArrayRef xstrides, IntArrayRef ostrides,
                                                   const SmallVector<bool, 8>& mask, int sms,
                                                   int64_t max_red = kMax32) {
  auto [kept, red] = reduce_dims_of(sizes, xstrides, ostrides, mask);
  int64_t nred = 1;
  for (int64_t s : red.size) nred *= s;
  if (nred <= max_red) return {{0, plan_reduce(sizes, xstrides, ostrides, mask, sms)}};
  // The outermost reduced dim j whose inner part (dims after j) fits; dims before j are enumerated
  // on the host, dim j is cut into runs of `run` indices.
  const size_t nr = red.size.size();
  size_t j = nr - 1;
  int64_t inner = 1;  // product of red.size[j + 1 ...]
  while (j > 0 && inner * red.size[j] <= max_red) inner *= red.size[j--];
  const int64_t run = std::max<int64_t>(max_red / inner, 1);
  NABLA_CHECK(NotImplemented, inner <= max_red, "CUDA reductions: a dim too large to split (shape ", sizes, ")");
  // The piece's x: the kept dims, then the reduced dims from j on (dim j shortened to the run).
  Shape psizes, pxs, pos;
  SmallVector<bool, 8> pmask;
  for (size_t d = 0; d < kept.size.size(); ++d) {
    psizes.push_back(kept.size[d]);
    pxs.push_back(kept.xstride[d]);
    pos.push_back(kept.ostride[d]);
    pmask.push_back(false);
  }
  const size_t first_red = psizes.size();
  for (size_t d = j; d < nr; ++d) {
    psizes.push_back(red.size[d]);
    pxs.push_back(red.xstride[d]);
    pos.push_back(0);
    pmask.push_back(true);
  }
  std::vector<ReducePiece> pieces;
  std::vector<int64_t> idx(j, 0);  // multi-index over red dims 0 .. j-1
  while (true) {
    int64_t base = 0;
    for (size_t d = 0; d < j; ++d) base += idx[d] * red.xstride[d];
    for (int64_t start = 0; start < red.size[j]; start += run) {
      psizes[first_red] = std::min(run, red.size[j] - start);
      pieces.push_back({base + start * red.xstride[j], plan_reduce(psizes, pxs, pos, pmask, sms)});
    }
    size_t d = j;
    while (d > 0 && ++idx[d - 1] == red.size[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
  return pieces;
}

}  // namespace nabla::cuda
