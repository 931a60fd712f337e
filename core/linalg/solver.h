// The device solver: the factorizations a device backend runs for core/linalg/'s device forwards
// (CUDA's through cuSOLVER and cuBLAS, cuda/solver.cpp), a table of core/device_table.h's kind
// generated from NABLA_LINALG_SOLVER. Internal to nabla: core/linalg/ calls it, a backend fills and
// registers it; nothing here includes a device header.
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

#include "../device_table.h"
#include "../tensor.h"

namespace nabla::linalg_device {

// X(name, return type, (parameters), when missing), as core/device_table.h's lists:
//   getrf: LU with partial pivoting of each n x n matrix of a (*, n, n); ipiv (*, n): 1-based row swaps.
//   getrs: op(A) X = B with getrf's lu and ipiv, op(A) = A or A^T (transpose); b (*, k, n): the n x k
//          right sides, overwritten by X.
//   potrf: Cholesky factor of each n x n matrix's upper (U^T U) or lower (L L^T) triangle, in that triangle.
//   geqrf: Householder QR of each m x n matrix of a (*, n, m); tau (*, min(m, n)).
//   orgqr: the first c columns of Q from geqrf's reflectors in the first tau.size(-1) columns of q (*, c, m).
//   syevd: eigenvalues w (*, n) ascending, and when `vectors` eigenvectors (columns of a) of each
//          symmetric n x n matrix of a (*, n, n), reading its upper or lower triangle.
//   gesvd: SVD of each m x n matrix of a (*, n, m) (destroyed): s (*, min(m, n)) descending; when u and
//          v are defined, U into u (*, c, m) and V (not V^T) into v (*, d, n), c = m and d = n for the
//          full SVD, c = d = min(m, n) for the reduced one.
#define NABLA_LINALG_SOLVER(X)                                                                            \
  X(getrf, void, (const Tensor& a, const Tensor& ipiv, const Tensor& info), raise)                        \
  X(getrs, void, (bool transpose, const Tensor& lu, const Tensor& ipiv, const Tensor& b), raise)          \
  X(potrf, void, (bool upper, const Tensor& a, const Tensor& info), raise)                                \
  X(geqrf, void, (const Tensor& a, const Tensor& tau), raise)                                             \
  X(orgqr, void, (const Tensor& q, const Tensor& tau), raise)                                             \
  X(syevd, void, (bool vectors, bool upper, const Tensor& a, const Tensor& w, const Tensor& info), raise) \
  X(gesvd, void, (const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& v, const Tensor& info), raise)

// One device's solver: s.getrf(a, ipiv, info), ...
struct Solver {
  NABLA_DEVICE_ENTRIES(NABLA_LINALG_SOLVER)
};

// Registers the backend's solver for a device type (once, when the backend loads; nullptr removes it).
void register_solver(DeviceType type, const Solver* solver);
// The registered solver for `type`, or nullptr (then the op computes on the host).
const Solver* solver_for(DeviceType type);

}  // namespace nabla::linalg_device
