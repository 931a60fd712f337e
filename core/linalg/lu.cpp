// The LU family of torch.linalg: inv, solve, det, slogdet (core/linalg.h). Device forward: getrf and
// getrs of the device solver; host forward: LAPACK's getrf and getrs; backward and front-end below.
#include "core/linalg/common.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/linalg/lapack.h"

namespace nabla {

using namespace linalg_internal;

namespace {

// ---- errors (the same from LAPACK on the host and from a device solver) -------------------------

[[noreturn]] void raise_inv_singular(const Tensor& A, int64_t b, int info) {
  throw ValueError(internal::str(
      "linalg.inv: ", batch_prefix(A, b), "The diagonal element ", info,
      " is zero, the inversion could not be completed because the input matrix is singular (A: ", internal::describe(A),
      ")"));
}
[[noreturn]] void raise_solve_singular(const Tensor& A, int64_t b, int) {
  throw ValueError(internal::str("linalg.solve: ", batch_prefix(A, b),
                                 "The solver failed because the input matrix is singular (A: ", internal::describe(A),
                                 ")"));
}

// ---- device forwards ----------------------------------------------------------------------------

// inv: as inv_forward, getrf + getrs on the identity, A's row-major copy read as A^T.
Tensor inv_device(const linalg_device::Solver& s, const Tensor& A) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A);
  Tensor y = device_fresh(eye_like(n, A).expand(A.sizes()));
  Tensor ipiv = int_buffer(with(bs, {n}), A.device()), info = int_buffer(bs, A.device());
  s.getrf(a, ipiv, info);
  s.getrs(false, a, ipiv, y);
  check_infos("linalg.inv", info, [&](int64_t b, int code) { raise_inv_singular(A, b, code); });
  return y;
}

// solve (same batch): A^T's LU from the row-major copy, B column-major, getrs 'T'.
Tensor solve_device(const linalg_device::Solver& s, const Tensor& A, const Tensor& B) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A), x = device_fresh(B.mT());  // x: (*, k, n), column-major B, overwritten by X
  Tensor ipiv = int_buffer(with(bs, {n}), A.device()), info = int_buffer(bs, A.device());
  s.getrf(a, ipiv, info);
  s.getrs(true, a, ipiv, x);
  check_infos("linalg.solve", info, [&](int64_t b, int code) { raise_solve_singular(A, b, code); });
  return x.mT().contiguous();
}

// det, sign, log|det| from the LU of A^T (no error: a singular matrix has det 0): the product of U's
// diagonal, its sign flipped per row swap (ipiv[i] != i + 1), as lu_det on the host.
std::tuple<Tensor, Tensor, Tensor> lu_det_device(const linalg_device::Solver& s, const Tensor& A) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A);
  Tensor ipiv = int_buffer(with(bs, {n}), A.device()), info = int_buffer(bs, A.device());
  s.getrf(a, ipiv, info);
  autograd::NoGradGuard ng;
  Tensor u = a.diagonal(0, -2, -1);  // (*, n)
  Tensor swaps = ne(ipiv, arange(1, n + 1, 1, dtype(kInt32).device(A.device()))).sum({-1});
  Tensor perm_sign = (1 - 2 * remainder(swaps, 2)).to(A.dtype());
  Tensor det = perm_sign * prod(u, -1);
  Tensor sign = perm_sign * prod(nabla::sign(u), -1);
  Tensor logabs = where(eq(sign, 0), -std::numeric_limits<double>::infinity(), log(abs(u)).sum({-1}));
  return {det, sign, logabs};
}

// ---- host forwards (LAPACK) ---------------------------------------------------------------------

// inv of each matrix: the row-major buffer holds A^T column-major; its LU solves A^T Y = I, and
// Y = inv(A^T) = inv(A)^T column-major is inv(A) row-major. (getrf + getrs on the identity, as
// PyTorch: OpenBLAS's blocked triangular solves beat getri's reference code.)
Tensor inv_forward(const Tensor& A) {
  if (const auto* s = device_solver(A)) return inv_device(*s, A);
  const int64_t n = cols(A);
  Tensor a = rowmajor_copy(A);
  const int64_t batch = shape_numel(batch_shape(A));
  Tensor y = internal::make_empty(A.sizes(), A.dtype(), kCPU);  // the identity, filled below (serially)
  if (y.numel() > 0) std::memset(y.data_ptr(), 0, y.nbytes());
  if (n > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T *p = a.data_ptr<T>(), *py = y.data_ptr<T>();
      std::vector<int> ipiv(n);
      int info = 0;
      for (int64_t b = 0; b < batch; ++b) {
        T* m = p + b * n * n;
        for (int64_t i = 0; i < n; ++i) py[b * n * n + i * n + i] = 1;
        lapack::getrf(n, n, m, ld(n), ipiv.data(), &info);
        if (info > 0) raise_inv_singular(A, b, info);
        lapack::getrs('N', n, n, m, ld(n), ipiv.data(), py + b * n * n, ld(n), &info);
      }
    });
  }
  return on_device(y, A.device());
}

// X with A X = B for same-batch A (*, n, n), B (*, n, k): the LU of the row-major buffer (A^T
// column-major, no transposing copy) solves A X = B as (A^T)^T X = B (getrs 'T').
Tensor solve_forward(const Tensor& A, const Tensor& B) {
  if (const auto* s = device_solver(A); s && B.numel() > 0) return solve_device(*s, A, B);
  const int64_t n = cols(A), k = cols(B);
  Tensor a = rowmajor_copy(A), x = colmajor_copy(B);  // x: (*, k, n), column-major B, overwritten by X
  const int64_t batch = shape_numel(batch_shape(A));
  if (n > 0 && k > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T *pa = a.data_ptr<T>(), *px = x.data_ptr<T>();
      std::vector<int> ipiv(n);
      int info = 0;
      for (int64_t b = 0; b < batch; ++b) {
        lapack::getrf(n, n, pa + b * n * n, ld(n), ipiv.data(), &info);
        if (info > 0) raise_solve_singular(A, b, info);
        lapack::getrs('T', n, k, pa + b * n * n, ld(n), ipiv.data(), px + b * n * k, ld(n), &info);
      }
    });
  }
  return on_device(x.mT(), A.device());
}

// LU of each matrix: (determinant sign times product of |U_ii|'s signs, log|det|) per matrix.
std::tuple<Tensor, Tensor, Tensor> lu_det(const Tensor& A) {
  if (const auto* s = device_solver(A)) return lu_det_device(*s, A);
  const int64_t n = cols(A);
  Tensor a = rowmajor_copy(A);  // det(A^T) = det(A)
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor det = empty(bs, dtype(A.dtype())), sign = empty(bs, dtype(A.dtype())), logabs = empty(bs, dtype(A.dtype()));
  by_dtype(A.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = a.data_ptr<T>();
    T *pd = det.data_ptr<T>(), *ps = sign.data_ptr<T>(), *pl = logabs.data_ptr<T>();
    std::vector<int> ipiv(std::max<int64_t>(n, 1));
    for (int64_t b = 0; b < batch; ++b) {
      T* m = p + b * n * n;
      int info = 0;
      if (n > 0) lapack::getrf(n, n, m, ld(n), ipiv.data(), &info);
      T d = 1, s = 1, l = 0;
      for (int64_t i = 0; i < n; ++i) {
        T u = m[i * n + i];
        d *= u;
        if (ipiv[i] != i + 1) {
          d = -d;
          s = -s;
        }
        s = u < 0 ? -s : (u == 0 ? 0 : s);
        l += std::log(std::abs(u));
      }
      pd[b] = d;
      ps[b] = s;
      pl[b] = s == 0 ? -std::numeric_limits<T>::infinity() : l;
    }
  });
  return {on_device(det, A.device()), on_device(sign, A.device()), on_device(logabs, A.device())};
}

}  // namespace

namespace linalg {

// ---- front-ends and backward --------------------------------------------------------------------

Tensor inv(const Tensor& A) {
  if (auto ac = autocast_internal::cast<OpId::linalg_inv>(A)) [[unlikely]]
    return inv(ac[0]);
  check_square("linalg.inv", A);
  Tensor out = inv_forward(A);
  if (autograd::needs_grad(A))
    autograd::record("LinalgInvBackward", {&A}, {&out}, [sy = save_output(out)](Node& n, GradList& g) {
      Tensor Yt = sy.unpack(n).mT();
      return GradList{-matmul(Yt, matmul(g[0], Yt))};  // -A^{-T} gY A^{-T}
    });
  return out;
}

namespace {
// X with A X = B for A (*, n, n) and B (*, n, k), batch dims broadcast.
Tensor solve_matrix(const Tensor& A, const Tensor& B) {
  const int64_t n = cols(A), k = cols(B);
  Shape bs = broadcast_shapes(batch_shape(A), batch_shape(B), "linalg.solve");
  Tensor Ae = A.expand(with(bs, {n, n})), Be = B.expand(with(bs, {n, k}));
  Tensor X = solve_forward(Ae, Be);
  if (autograd::needs_grad(Ae, Be))
    autograd::record("LinalgSolveBackward", {&Ae, &Be}, {&X},
                     [sa = save(Ae), sx = save_output(X)](Node& nd, GradList& g) {
                       Tensor Av = sa.unpack(nd), Xv = sx.unpack(nd);
                       Tensor gB = solve_matrix(Av.mT(), g[0]);  // A^{-T} gX
                       GradList r(2);
                       if (nd.needs_input_grad(0)) r[0] = -matmul(gB, Xv.mT());
                       if (nd.needs_input_grad(1)) r[1] = gB;
                       return r;
                     });
  return X;
}
}  // namespace

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  if (auto ac = autocast_internal::cast<OpId::linalg_solve>(A, B)) [[unlikely]]
    return solve(ac[0], ac[1], left);
  check_square("linalg.solve", A);
  check_pair("linalg.solve", A, B);
  const int64_t n = cols(A);
  const bool vector =
      B.dim() == 1 || (B.dim() == A.dim() - 1 && B.sizes() == Shape(A.sizes().begin(), A.sizes().end() - 1));
  if (vector) {
    NABLA_CHECK(ShapeError, left,
                "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. In "
                "this case linalg.solve is equivalent to B / A.squeeze(-1)");
    NABLA_CHECK(ShapeError, B.sizes().back() == n,
                "linalg.solve: incompatible shapes of A and B for the equation AX = B (", A.sizes(), " and ", B.sizes(),
                ")");
    return solve_matrix(A, B.unsqueeze(-1)).squeeze(-1);
  }
  NABLA_CHECK(ShapeError, B.dim() >= 2, "linalg.solve: B must have at least 2 dimensions, got ", internal::describe(B));
  if (!left) {
    // X A = B  <=>  A^T X^T = B^T
    NABLA_CHECK(ShapeError, cols(B) == n, "linalg.solve: incompatible shapes of A and B for the equation XA = B (",
                A.sizes(), " and ", B.sizes(), ")");
    return solve_matrix(A.mT(), B.mT()).mT();
  }
  NABLA_CHECK(ShapeError, rows(B) == n, "linalg.solve: incompatible shapes of A and B for the equation AX = B (",
              A.sizes(), " and ", B.sizes(), ")");
  return solve_matrix(A, B);
}

Tensor det(const Tensor& A) {
  check_square("linalg.det", A);
  Tensor d = std::get<0>(lu_det(A));
  if (autograd::needs_grad(A))
    autograd::record("LinalgDetBackward", {&A}, {&d}, [sa = save(A), sd = save_output(d)](Node& n, GradList& g) {
      // g det A^{-T}
      Tensor s = (g[0] * sd.unpack(n)).unsqueeze(-1).unsqueeze(-1);
      return GradList{s * inv(sa.unpack(n)).mT()};
    });
  return d;
}

std::tuple<Tensor, Tensor> slogdet(const Tensor& A) {
  check_square("linalg.slogdet", A);
  auto [d, sign, logabs] = lu_det(A);
  if (autograd::needs_grad(A)) {
    // The sign takes part in autograd as PyTorch's does, with no gradient (it is piecewise constant):
    // a node of its own, so a backward through the sign alone computes nothing, even at a singular A.
    autograd::record("LinalgSlogdetBackward", {&A}, {&sign}, [](Node&, GradList&) { return GradList{Tensor()}; });
    autograd::record("LinalgSlogdetBackward", {&A}, {&logabs}, [sa = save(A)](Node& n, GradList& g) {
      return GradList{g[0].unsqueeze(-1).unsqueeze(-1) * inv(sa.unpack(n)).mT()};  // g A^{-T}
    });
  }
  return {sign, logabs};
}

}  // namespace linalg
}  // namespace nabla
