// How a strided matrix is handed to cuBLAS without a copy, in plain C++ (no CUDA headers) so that
// tests/cuda/test_plan.cpp checks it on any machine.
//
// cuBLAS is column-major; nabla's matrices are row-major views with any strides. C = A @ B is
// computed as C^T = B^T @ A^T: each operand X (rows r, cols c, strides rs, cs) is passed as X^T,
// which is free when X is row-major (cs == 1: X^T is column-major with ld = rs, op N) or
// column-major (rs == 1: X is column-major with ld = cs, so X^T is op T). Other layouts (and
// broadcast rows, stride 0) need a contiguous copy first. Strides of size-1 dims do not matter.
#pragma once

#include <algorithm>
#include <cstdint>

namespace nabla::cuda {

struct GemmOperand {
  bool ok = false;     // representable without a copy
  bool trans = false;  // pass with op T (else op N)
  int64_t ld = 0;      // leading dimension
};

// X^T as a cuBLAS operand, for X of r rows and c cols with strides rs, cs (in elements).
inline GemmOperand transposed_operand(int64_t r, int64_t c, int64_t rs, int64_t cs) {
  GemmOperand g;
  const int64_t r1 = std::max<int64_t>(r, 1), c1 = std::max<int64_t>(c, 1);
  // Row-major X (unit column stride; with one column any stride is unit): X^T is column-major.
  if (cs == 1 || c <= 1) {
    int64_t ld = r <= 1 ? c1 : rs;  // a single row: any ld >= c will do
    if (ld >= c1) {
      g.ok = true;
      g.ld = ld;
      return g;
    }
  }
  // Column-major X (unit row stride, or a single row): pass X with op T.
  if (rs == 1 || r <= 1) {
    int64_t ld = c <= 1 ? r1 : cs;
    if (ld >= r1) {
      g.ok = true;
      g.trans = true;
      g.ld = ld;
    }
  }
  return g;
}

// The output C (m x n, strides rs, cs) as cuBLAS's column-major C^T: only a row-major C works.
inline GemmOperand output_operand(int64_t m, int64_t n, int64_t rs, int64_t cs) {
  GemmOperand g;
  const int64_t n1 = std::max<int64_t>(n, 1);
  if (cs == 1 || n <= 1) {
    int64_t ld = m <= 1 ? n1 : rs;
    if (ld >= n1) {
      g.ok = true;
      g.ld = ld;
    }
  }
  return g;
}

}  // namespace nabla::cuda
