// torch.linalg.lstsq (core/linalg.h). No device forward: the device solver has no least-squares
// routine, so CUDA inputs are copied to the host and back. Host forward: LAPACK's gelsd or gels;
// backward through the pseudo-inverse (full-rank A) and front-end below.
#include "core/linalg/common.h"

#include <limits>
#include <vector>

#include "core/linalg/lapack.h"

namespace nabla {

using namespace linalg_internal;

namespace {

// ---- backward (differentiable) ------------------------------------------------------------------

// The pseudo-inverse of a full-rank A (*, m, n), differentiable.
Tensor pinv_full_rank(const Tensor& A) {
  if (rows(A) >= cols(A)) return linalg::solve(matmul(A.mT(), A), A.mT());  // (A^T A)^-1 A^T
  return linalg::solve(matmul(A, A.mT()), A).mT();                          // A^T (A A^T)^-1
}

// PyTorch's pinv_backward: the gradient of pinv(A) with respect to A.
Tensor pinv_backward(const Tensor& grad, const Tensor& pinvA, const Tensor& A) {
  const int64_t m = rows(A), n = cols(A);
  Tensor pinvAh = pinvA.mT(), gradh = grad.mT();
  if (m <= n) {
    Tensor K = matmul(gradh, pinvA);
    Tensor KpinvAh = matmul(K, pinvAh);
    return -matmul(pinvA, K).mT() + KpinvAh - matmul(matmul(A, pinvA), KpinvAh) +
           matmul(matmul(pinvAh, pinvA), gradh - matmul(K, A));
  }
  Tensor K = matmul(pinvA, gradh);
  Tensor pinvAhK = matmul(pinvAh, K);
  return -matmul(K, pinvA).mT() + matmul(matmul(gradh - matmul(A, K), pinvA), pinvAh) + pinvAhK -
         matmul(matmul(pinvAhK, pinvA), A);
}

// ---- host forward (LAPACK) ------------------------------------------------------------------------

// What gelsd/gels leave for same-batch Ae (*, m, n) and Be (*, m, k) on the host: x (*, k, max(m, n))
// column-major, its first n rows the solution and, for m > n, the rest the residuals' terms;
// singular values (*, min(m, n)) and ranks (*) for gelsd, empty for gels.
struct HostLstsq {
  Tensor x, sv, rank;
  bool full_rank = true;
};

HostLstsq lstsq_forward(const Tensor& A, const Tensor& Ae, const Tensor& Be, std::optional<double> rcond, bool gelsd) {
  const int64_t m = rows(Ae), n = cols(Ae), k = cols(Be), mx = std::max(m, n), kmin = std::min(m, n);
  const Shape bs = batch_shape(Ae);
  const int64_t batch = shape_numel(bs);
  Tensor a = colmajor_copy(Ae);
  Tensor bpad = Be.detach().to(kCPU);
  if (n > m) bpad = cat({bpad, zeros(with(bs, {n - m, k}), dtype(A.dtype()))}, -2);
  HostLstsq r;
  r.x = colmajor_copy(bpad);  // (*, k, mx)
  r.sv = empty(with(bs, {gelsd ? kmin : 0}), dtype(A.dtype()));
  r.rank = empty(gelsd ? bs : Shape{0}, dtype(kInt64));
  if (kmin == 0 || k == 0) {
    if (gelsd) {
      r.rank.fill_(0);
      if (kmin > 0 && k == 0) r.full_rank = false;
    }
    return r;
  }
  by_dtype(A.dtype(), [&](auto z) {
    using T = decltype(z);
    const T rc = rcond ? static_cast<T>(*rcond) : std::numeric_limits<T>::epsilon() * static_cast<T>(mx);
    T *pa = a.data_ptr<T>(), *px = r.x.data_ptr<T>();
    int info = 0, iwq = 0;
    T wq{};
    if (gelsd) {
      int rk = 0;
      lapack::gelsd(m, n, k, pa, ld(m), px, ld(mx), r.sv.data_ptr<T>(), rc, &rk, &wq, -1, &iwq, &info);
    } else {
      lapack::gels('N', m, n, k, pa, ld(m), px, ld(mx), &wq, -1, &info);
    }
    std::vector<T> work(std::max<int64_t>(static_cast<int64_t>(wq), 1));
    std::vector<int> iwork(std::max(iwq, 1));
    for (int64_t b = 0; b < batch; ++b) {
      if (gelsd) {
        int rk = 0;
        lapack::gelsd(m, n, k, pa + b * m * n, ld(m), px + b * k * mx, ld(mx), r.sv.data_ptr<T>() + b * kmin, rc, &rk,
                      work.data(), static_cast<int>(work.size()), iwork.data(), &info);
        r.rank.data_ptr<int64_t>()[b] = rk;
        r.full_rank = r.full_rank && rk == n;
        NABLA_CHECK(ValueError, info <= 0, "linalg.lstsq: ", batch_prefix(A, b),
                    "The algorithm failed to converge (error code: ", info, "; A: ", internal::describe(A), ")");
      } else {
        lapack::gels('N', m, n, k, pa + b * m * n, ld(m), px + b * k * mx, ld(mx), work.data(),
                     static_cast<int>(work.size()), &info);
        NABLA_CHECK(ValueError, info <= 0, "linalg.lstsq: ", batch_prefix(A, b),
                    "The least squares solution could not be computed because the input matrix does not have "
                    "full rank (error code: ",
                    info, "; A: ", internal::describe(A), ")");
      }
    }
  });
  return r;
}

}  // namespace

namespace linalg {

// ---- front-end ------------------------------------------------------------------------------------

LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond, std::string_view driver) {
  if (auto ac = autocast_internal::cast<OpId::linalg_lstsq>(A, B)) [[unlikely]]
    return lstsq(ac[0], ac[1], rcond, driver);
  check_matrix("linalg.lstsq", A);
  check_pair("linalg.lstsq", A, B);
  NABLA_CHECK(ValueError, driver == "gelsd" || driver == "gels",
              "linalg.lstsq: parameter `driver` should be one of "
              "(gels, gelsd) here (gelsy and gelss are not built), got '",
              driver, "'");
  // As PyTorch: B of A's dims is a batch of matrices (*, m, k); B of one dim fewer a batch of
  // vectors (*, m), solved as (*, m, 1): the solution is (*, n), the residuals keep their (*, 1).
  NABLA_CHECK(ShapeError, A.dim() == B.dim() || A.dim() == B.dim() + 1,
              "linalg.lstsq: B must have A's number of dims "
              "(a batch of matrices) or one fewer (a batch of vectors), got ",
              internal::describe(A), " and ", internal::describe(B));
  if (B.dim() == A.dim() - 1) {
    NABLA_CHECK(ShapeError, B.sizes().back() == rows(A),
                "linalg.lstsq: input.size(-2) should match other.size(-1) for B "
                "of vectors, got ",
                internal::describe(A), " and ", internal::describe(B));
    LstsqResult r = lstsq(A, B.unsqueeze(-1), rcond, driver);
    r.solution = r.solution.squeeze(-1);
    return r;
  }
  const int64_t m = rows(A), n = cols(A), k = cols(B);
  NABLA_CHECK(ShapeError, rows(B) == m, "linalg.lstsq: input.size(-2) should match other.size(-2), got ",
              internal::describe(A), " and ", internal::describe(B));
  Shape bs = broadcast_shapes(batch_shape(A), batch_shape(B), "linalg.lstsq");
  Tensor Ae = A.expand(with(bs, {m, n})), Be = B.expand(with(bs, {m, k}));
  HostLstsq h = lstsq_forward(A, Ae, Be, rcond, driver == "gelsd");
  Tensor xr = h.x.mT();  // (*, mx, k)
  LstsqResult r;
  r.solution = on_device(xr.narrow(-2, 0, n), A.device());
  if (m > n && h.full_rank) {
    Tensor tail = xr.narrow(-2, n, m - n);
    r.residuals = on_device((tail * tail).sum({-2}), A.device());
  } else {
    r.residuals = empty({0}, like(A));
  }
  r.rank = on_device(h.rank, A.device());
  r.singular_values = on_device(h.sv, A.device());
  if (autograd::needs_grad(Ae, Be))
    autograd::record("LinalgLstsqBackward", {&Ae, &Be}, {&r.solution},
                     [sa = save(Ae), sb = save(Be)](Node& nd, GradList& g) {
                       // X = pinv(A) B: PyTorch's formula through the pseudo-inverse (A of full rank).
                       Tensor Av = sa.unpack(nd), Bv = sb.unpack(nd);
                       Tensor pinvA = pinv_full_rank(Av);
                       GradList out(2);
                       if (nd.needs_input_grad(0)) out[0] = pinv_backward(matmul(g[0], Bv.mT()), pinvA, Av);
                       if (nd.needs_input_grad(1)) out[1] = matmul(pinvA.mT(), g[0]);
                       return out;
                     });
  return r;
}

}  // namespace linalg
}  // namespace nabla
