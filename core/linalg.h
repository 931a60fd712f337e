// Linear algebra beyond matrix products (torch.linalg and friends): decompositions, solvers,
// determinants and norms, batched over leading dims as PyTorch's are, in float32 and float64.
//
// CPU tensors go to LAPACK (OpenBLAS's, core/linalg/lapack.h), CUDA tensors to cuSOLVER
// (cuda/solver.cpp) with the same results and errors. Differs from PyTorch: lstsq copies CUDA
// tensors to the host, computes there with LAPACK and copies back (only slower). One file per op
// family in core/linalg/ holds each op's device forward, host forward, backward and front-end.
// Gradients are written with differentiable nabla ops (matmul, solve, ...), so second derivatives
// work, with PyTorch's formulas (FunctionsManual.cpp).
//
// Errors as PyTorch's: a singular matrix (inv, solve), a matrix that is not positive-definite
// (cholesky) or an algorithm that did not converge (svd, eigh) raise ValueError naming the op, the
// batch element, the input's dtype, shape and device.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "ops.h"

namespace nabla {

// x 1-D: a square matrix with x on its `diagonal`-th diagonal. x 2-D: that diagonal as a 1-D tensor.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
// input * beta + alpha * (b1 @ b2) for batches b1 (B, n, k) and b2 (B, k, m); input broadcasts to
// (B, n, m). beta == 0 ignores input (NaN in it does not propagate), as PyTorch.
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta = 1, Scalar alpha = 1);
// Sums the products over the last `dims` dims of a and the first `dims` of b (torch.tensordot).
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2);
// Sums over the listed dim pairs: a's dims_a[i] with b's dims_b[i].
Tensor tensordot(const Tensor& a, const Tensor& b, IntArrayRef dims_a, IntArrayRef dims_b);

namespace linalg {

// The sum of the main diagonal of a 2-D tensor (torch.trace; nabla::trace is the ONNX tracer's namespace).
Tensor trace(const Tensor& x);
// The cross product of 3-vectors along `dim` (size 3 in both), broadcasting the other dims; a and b
// must have the same number of dims (as in PyTorch: (2, 3) with (3) is a ShapeError, (1, 3) with
// (4, 3) broadcasts).
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim = -1);

// A: (*, n, n). The inverse; a singular matrix raises.
Tensor inv(const Tensor& A);
// X with A X = B (left) or X A = B (not left). A: (*, n, n); B: (*, n, k), or (n) / (*, n) when B
// is a vector (B.dim() == 1, or B's shape is A's without its last dim); batch dims broadcast.
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
// A: (*, n, n). The determinant (0 for a singular matrix; its gradient there raises, PyTorch's
// goes through an SVD).
Tensor det(const Tensor& A);
// (sign, log|det|) of A (*, n, n): sign 0 and logabsdet -inf for a singular matrix. Both require grad
// when A does (as in PyTorch); the sign passes no gradient to A (a backward through it alone leaves
// A's gradient undefined, as PyTorch's).
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);
// The Cholesky factor L (lower, A = L L^T) or U (upper, A = U^T U) of a symmetric positive-definite
// A (*, n, n); only A's lower triangle is read. Not positive-definite raises.
Tensor cholesky(const Tensor& A, bool upper = false);
// (Q, R) of A (*, m, n) = Q R. mode "reduced": Q (*, m, k), R (*, k, n), k = min(m, n);
// "complete": Q (*, m, m), R (*, m, n); "r": Q empty, R (*, k, n) (no gradient, as PyTorch).
std::tuple<Tensor, Tensor> qr(const Tensor& A, std::string_view mode = "reduced");
// (U, S, Vh) with A = U diag(S) Vh, S descending. full_matrices: U (*, m, m), Vh (*, n, n); else
// U (*, m, k), Vh (*, k, n). Gradients through U and Vh need distinct singular values (and are
// only defined for gauge-invariant functions, as PyTorch's).
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices = true);
// The singular values (*, k), descending.
Tensor svdvals(const Tensor& A);
// (eigenvalues ascending (*, n), eigenvectors (*, n, n) as columns) of a symmetric A, reading its
// lower ("L") or upper ("U") triangle.
std::tuple<Tensor, Tensor> eigh(const Tensor& A, std::string_view UPLO = "L");
Tensor eigvalsh(const Tensor& A, std::string_view UPLO = "L");

// torch.linalg.lstsq's result. solution: (*, n, k); residuals: the squared residual norms (*, k)
// when m > n and every A has full rank, else empty; rank (*) int64 and singular_values (*, min(m, n))
// as the gelsd driver gives them.
struct LstsqResult {
  Tensor solution, residuals, rank, singular_values;
};
// The least-squares solution of A X = B: A (*, m, n), B (*, m, k) with broadcasting batch dims, or
// B (*, m) of one dim fewer than A, a batch of vectors (solution (*, n), residuals (*, 1)), as in
// PyTorch; other numbers of dims are a ShapeError. Where PyTorch 1.13 fails an internal assertion
// (vectors whose batch dims broadcast: A (2, 3, 2), B (1, 3)), nabla broadcasts them.
// rcond: singular values below rcond * max(S) count
// as zero (default: machine epsilon * max(m, n)). driver: "gelsd" (the default here; PyTorch's CPU
// default gelsy gives the same solution for full-rank A) or "gels" (full rank only). Differs from
// PyTorch: the gradient (with respect to A and B, through the pseudo-inverse) requires A of full rank.
LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond = std::nullopt,
                  std::string_view driver = "gelsd");

// The vector p-norm of x over `dims` (all dims when empty): ord any real, inf, -inf or 0 (the number
// of nonzeros).
Tensor vector_norm(const Tensor& x, double ord = 2, IntArrayRef dims = {}, bool keepdim = false);
// The matrix norm over dims (2 of them, default the last two). float16/bfloat16 inputs as PyTorch's:
// "fro", 1 and inf in the input's dtype; "nuc", 2 and -2 through svdvals (an error outside CPU
// autocast, float32 inside). ord "fro" or "nuc" ...
Tensor matrix_norm(const Tensor& A, std::string_view ord = "fro", IntArrayRef dims = {-2, -1}, bool keepdim = false);
// ... or 1, -1 (max/min column abs sum), inf, -inf (max/min row abs sum), 2, -2 (largest/smallest
// singular value).
Tensor matrix_norm(const Tensor& A, double ord, IntArrayRef dims = {-2, -1}, bool keepdim = false);
// torch.linalg.norm: with ord, a vector norm for one dim (or a 1-D input), a matrix norm for two
// dims (or a 2-D input); without, the 2-norm of the flattened input (or over `dims`).
Tensor norm(const Tensor& x, std::optional<double> ord = std::nullopt, IntArrayRef dims = {}, bool keepdim = false);
Tensor norm(const Tensor& x, std::string_view ord, IntArrayRef dims = {}, bool keepdim = false);

}  // namespace linalg

}  // namespace nabla
