// Device LAPACK: the factorizations a device backend runs for core/linalg_decomp.cpp's forwards
// (CUDA's through cuSOLVER and cuBLAS, cuda/solver.cpp). Internal to nabla: core/linalg_decomp.cpp
// calls it, a backend registers it; nothing here includes a device header.
//
// Conventions, LAPACK's: matrices are column-major, that is a contiguous tensor (*, c, r) holds
// r x c matrices (one per batch element); a kernel overwrites its inputs in place, as LAPACK does,
// so the caller passes fresh copies. Every tensor is on the same device, float32 or float64 (pivots
// and info int32); a kernel queues its work on the device's current stream and does not wait for
// it. `info` (*) receives LAPACK's per-matrix code (0: success, k > 0: LAPACK's failure k); the
// caller reads it back once per op, after the last kernel. Batch dims may have any strides
// (cuda/solver_plan.h decides what is handed over without a copy); the two matrix dims must be
// column-major with unit stride down a column.
#pragma once

#include "core/tensor.h"

namespace nabla::linalg_device {

struct Solver {
  // LU with partial pivoting of each n x n matrix of a (*, n, n); ipiv (*, n): 1-based row swaps.
  void (*getrf)(const Tensor& a, const Tensor& ipiv, const Tensor& info);
  // op(A) X = B with getrf's lu and ipiv, op(A) = A or A^T (transpose); b (*, k, n): the n x k right
  // sides, overwritten by X.
  void (*getrs)(bool transpose, const Tensor& lu, const Tensor& ipiv, const Tensor& b);
  // Cholesky factor of each n x n matrix's upper (U^T U) or lower (L L^T) triangle, in that triangle.
  void (*potrf)(bool upper, const Tensor& a, const Tensor& info);
  // Householder QR of each m x n matrix of a (*, n, m); tau (*, min(m, n)).
  void (*geqrf)(const Tensor& a, const Tensor& tau);
  // The first c columns of Q from geqrf's reflectors in the first tau.size(-1) columns of q (*, c, m).
  void (*orgqr)(const Tensor& q, const Tensor& tau);
  // Eigenvalues w (*, n) ascending, and when `vectors` eigenvectors (columns of a) of each symmetric
  // n x n matrix of a (*, n, n), reading its upper or lower triangle.
  void (*syevd)(bool vectors, bool upper, const Tensor& a, const Tensor& w, const Tensor& info);
  // SVD of each m x n matrix of a (*, n, m) (destroyed): s (*, min(m, n)) descending; when u and v are
  // defined, U into u (*, c, m) and V (not V^T) into v (*, d, n), c = m and d = n for the full SVD,
  // c = d = min(m, n) for the reduced one.
  void (*gesvd)(const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& v, const Tensor& info);
};

// Registers the backend's solver for a device type (once, when the backend loads).
void register_solver(DeviceType type, const Solver* solver);
// The registered solver for `type`, or nullptr (then the op computes on the host).
const Solver* solver_for(DeviceType type);

}  // namespace nabla::linalg_device
