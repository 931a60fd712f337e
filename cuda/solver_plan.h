// How cuda/solver.cpp hands a batch of matrices to cuSOLVER (and cuBLAS's batched LU), in plain C++
// (no CUDA headers) so that tests/cuda/test_solver.cpp checks it on any machine.
//
// cuSOLVER is column-major like LAPACK: core/linalg/'s device forwards pass a tensor (*, c, r) whose
// last dim has unit stride, holding r x c column-major matrices with leading dimension ld = the
// stride of dim -2. Three kinds of call take a batch:
//   looped    one call per matrix (cusolverDn<t>getrf, potrf, geqrf, orgqr, syevd, gesvdj), each at
//             its own offset, so batch dims may have any strides (transposed, broadcast-free views);
//   pointers  one call for the batch with an array of matrix pointers (cublas<t>getrfBatched /
//             getrsBatched, cusolverDn<t>potrfBatched): any batch strides too;
//   strided   one call for matrices stored back to back, matrix i at i * ld * c
//             (cusolverDn<t>syevjBatched, gesvdjBatched): only for an evenly strided, packed batch.
// Batched calls take an int batch count: larger batches go in chunks of at most kMaxBatchCount.
// Which kind an op takes follows PyTorch's choices (aten/src/ATen/native/cuda/linalg/
// BatchLinearAlgebraLib.cpp): batched LU through cuBLAS for many small matrices, potrfBatched for
// any batch, the Jacobi solvers for batches of matrices up to 32 x 32, a loop otherwise.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/dtype.h"

namespace nabla::cuda::solver {

enum class Call { looped, pointers, strided };

// The largest batch count one batched call takes (the APIs' int).
inline constexpr int64_t kMaxBatchCount = INT_MAX;
// cuBLAS's batched LU is faster than one cuSOLVER call per matrix for small matrices (PyTorch's
// cut-off for its non-MAGMA path); larger ones are looped.
inline constexpr int64_t kMaxBatchedLuN = 128;
// syevjBatched and gesvdjBatched take matrices of at most 32 x 32.
inline constexpr int64_t kMaxJacobiBatchedN = 32;

// The scalar type of a cuSOLVER call: float32 (S) or float64 (D); anything else is not a solver dtype.
enum class Scalar { f32, f64, none };
inline Scalar scalar_of(DType dt) {
  if (dt == DType::f32) return Scalar::f32;
  if (dt == DType::f64) return Scalar::f64;
  return Scalar::none;
}
inline int64_t scalar_bytes(Scalar s) { return s == Scalar::f64 ? 8 : s == Scalar::f32 ? 4 : 0; }

// A batch of column-major matrices read in place from a tensor (*, c, r) of sizes/strides (elements).
struct MatrixBatch {
  bool ok = false;  // column-major (unit stride down a column, ld >= rows): cuSOLVER reads it in place
  std::string why;  // when not ok: what is wrong (for the internal error)
  int rows = 0, cols = 0, ld = 1;
  int64_t count = 0;             // matrices in the batch
  std::vector<int64_t> offsets;  // element offset of each matrix from the tensor's data pointer
  // Whether matrix i starts at i * ld * cols: what the strided batched calls need.
  bool packed = false;
};

inline MatrixBatch column_major_batch(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  MatrixBatch b;
  const size_t nd = sizes.size();
  if (nd < 2 || strides.size() != nd) {
    b.why = "a batch of matrices needs at least 2 dims";
    return b;
  }
  const int64_t r = sizes[nd - 1], c = sizes[nd - 2];
  if (r > INT_MAX || c > INT_MAX) {
    b.why = "matrices too large for cuSOLVER's int sizes";
    return b;
  }
  b.rows = static_cast<int>(r);
  b.cols = static_cast<int>(c);
  b.count = 1;
  for (size_t d = 0; d + 2 < nd; ++d) b.count *= sizes[d];
  // Down a column: unit stride (any stride is unit for a single row).
  if (r > 1 && strides[nd - 1] != 1) {
    b.why = "not column-major: the stride down a column is not 1";
    return b;
  }
  // ld: the distance between columns, at least the number of rows (a single column: any ld >= rows).
  const int64_t ld = c > 1 ? strides[nd - 2] : std::max<int64_t>(r, 1);
  if (ld < std::max<int64_t>(r, 1) || ld > INT_MAX) {
    b.why = "the leading dimension is smaller than the number of rows (or too large)";
    return b;
  }
  b.ld = static_cast<int>(ld);
  // A broadcast batch dim (stride 0) would have every call write the same matrix in place.
  for (size_t d = 0; d + 2 < nd; ++d)
    if (sizes[d] > 1 && strides[d] == 0) {
      b.why = "a broadcast batch (stride 0): the calls write their matrices in place";
      return b;
    }
  b.ok = true;
  // Offsets of the matrices, batch dims in row-major order (the order of the tensor's elements).
  b.offsets.assign(static_cast<size_t>(std::max<int64_t>(b.count, 0)), 0);
  const size_t lead = nd - 2;
  std::vector<int64_t> idx(lead, 0);
  for (int64_t i = 0; i < b.count; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < lead; ++d) off += idx[d] * strides[d];
    b.offsets[static_cast<size_t>(i)] = off;
    for (size_t d = lead; d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  const int64_t mat = ld * std::max<int64_t>(c, 1);
  b.packed = true;
  for (int64_t i = 0; i < b.count; ++i)
    if (b.offsets[static_cast<size_t>(i)] != i * mat) {
      b.packed = false;
      break;
    }
  return b;
}

// The call each op makes for `batch` matrices (m x n; square ops pass n twice).
inline Call lu_call(int64_t batch, int64_t n) {
  return batch > 1 && n <= kMaxBatchedLuN ? Call::pointers : Call::looped;  // cuBLAS getrfBatched
}
inline Call lu_solve_call(int64_t batch, int64_t n) { return lu_call(batch, n); }               // getrsBatched alike
inline Call cholesky_call(int64_t batch) { return batch > 1 ? Call::pointers : Call::looped; }  // potrfBatched
// syevjBatched needs the packed layout; otherwise (and for one or large matrices) syevd per matrix.
inline Call eigh_call(int64_t batch, int64_t n, bool packed) {
  return batch > 1 && n <= kMaxJacobiBatchedN && packed ? Call::strided : Call::looped;
}
// gesvdjBatched (full U and V, m, n <= 32, packed) or gesvdj per matrix.
inline Call svd_call(int64_t batch, int64_t m, int64_t n, bool packed) {
  return batch > 1 && m <= kMaxJacobiBatchedN && n <= kMaxJacobiBatchedN && packed ? Call::strided : Call::looped;
}

// [first, first + count) ranges of at most `max_count` matrices: the chunks of a batched call.
struct Chunk {
  int64_t first = 0;
  int count = 0;
};
inline std::vector<Chunk> batch_chunks(int64_t batch, int64_t max_count = kMaxBatchCount) {
  std::vector<Chunk> out;
  for (int64_t first = 0; first < batch; first += max_count)
    out.push_back({first, static_cast<int>(std::min(max_count, batch - first))});
  return out;
}

// A workspace of `lwork` elements (what a *_bufferSize call returned) of `s`, in bytes; at least one
// element, so that the pointer handed to cuSOLVER is never null.
inline size_t workspace_bytes(int64_t lwork, Scalar s) {
  return static_cast<size_t>(std::max<int64_t>(lwork, 1)) * static_cast<size_t>(scalar_bytes(s));
}

}  // namespace nabla::cuda::solver
