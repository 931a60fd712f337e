// torch.linalg.cholesky (core/linalg.h). Device forward: potrf of the device solver; host forward:
// LAPACK's potrf; backward (Murray 2016) and front-end below.
#include "core/linalg/common.h"

#include "core/linalg/lapack.h"

namespace nabla {

using namespace linalg_internal;

namespace {

// ---- errors -------------------------------------------------------------------------------------

[[noreturn]] void raise_not_positive_definite(const Tensor& A, int64_t b, int info) {
  throw ValueError(
      internal::str("linalg.cholesky: ", batch_prefix(A, b),
                    "The factorization could not be completed because the input is not positive-definite (the "
                    "leading minor of order ",
                    info, " is not positive-definite; A: ", internal::describe(A), ")"));
}

// ---- device forward -----------------------------------------------------------------------------

// cholesky: potrf('U') on the row-major copy (A^T column-major) leaves L in its lower triangle.
Tensor cholesky_device(const linalg_device::Solver& s, const Tensor& A) {
  Tensor a = device_fresh(A);
  Tensor info = int_buffer(batch_shape(A), A.device());
  s.potrf(/*upper=*/true, a, info);
  check_infos("linalg.cholesky", info, [&](int64_t b, int code) { raise_not_positive_definite(A, b, code); });
  autograd::NoGradGuard ng;
  return a.tril();
}

// ---- host forward (LAPACK) ----------------------------------------------------------------------

// Lower Cholesky factor of A's lower triangle: potrf('U') on the row-major buffer (A^T column-major)
// reads A^T's upper triangle (A's lower) and leaves U with A^T = U^T U there, that is L = U^T row-major.
Tensor cholesky_forward(const Tensor& A) {
  if (const auto* s = device_solver(A)) return cholesky_device(*s, A);
  const int64_t n = cols(A);
  Tensor a = rowmajor_copy(A);
  const int64_t batch = shape_numel(batch_shape(A));
  if (n > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = a.data_ptr<T>();
      for (int64_t b = 0; b < batch; ++b) {
        int info = 0;
        lapack::potrf('U', n, p + b * n * n, ld(n), &info);
        if (info > 0) raise_not_positive_definite(A, b, info);
      }
    });
  }
  zero_triangle(a, /*upper=*/true);
  return on_device(a, A.device());
}

}  // namespace

namespace linalg {

// ---- front-end and backward ---------------------------------------------------------------------

Tensor cholesky(const Tensor& A, bool upper) {
  if (auto ac = autocast_internal::cast<OpId::linalg_cholesky>(A)) [[unlikely]]
    return cholesky(ac[0], upper);
  check_square("linalg.cholesky", A);
  Tensor L = cholesky_forward(A);
  if (autograd::needs_grad(A))
    autograd::record("LinalgCholeskyBackward", {&A}, {&L}, [sl = save_output(L)](Node& n, GradList& g) {
      // Murray (2016): gA = L^{-T} Phi(L^T gL) L^{-1}, Phi symmetrizing the lower triangle.
      Tensor Lv = sl.unpack(n);
      Tensor gA = matmul(Lv.mT(), g[0]).tril();
      gA = (gA + gA.tril(-1).mT()) * 0.5;
      gA = solve(Lv.mT(), gA);
      return GradList{solve(Lv, gA, /*left=*/false)};
    });
  return upper ? L.mT() : L;
}

}  // namespace linalg
}  // namespace nabla
