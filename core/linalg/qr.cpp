// torch.linalg.qr (core/linalg.h). Device forward: geqrf and orgqr of the device solver; host forward:
// LAPACK's geqrf and orgqr; backward (square, tall and wide inputs) and front-end below.
#include "core/linalg/common.h"

#include <cstring>
#include <vector>

#include "core/linalg/lapack.h"

namespace nabla {

using namespace linalg_internal;

namespace {

// ---- device forward -----------------------------------------------------------------------------

// qr (m, n > 0): geqrf on the column-major copy; Q from orgqr on a zero-padded copy of its reflectors.
std::tuple<Tensor, Tensor> qr_device(const linalg_device::Solver& s, const Tensor& A, bool complete, bool compute_q) {
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const int64_t qcols = complete ? m : k, rrows = complete ? m : k;
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A.mT());  // (*, n, m)
  Tensor tau = internal::make_empty(with(bs, {k}), A.dtype(), A.device());
  s.geqrf(a, tau);
  autograd::NoGradGuard ng;
  Tensor Q;
  if (compute_q) {
    Tensor q = zeros(with(bs, {qcols, m}), like(A));  // column-major Q
    const int64_t c = std::min(n, qcols);
    q.narrow(-2, 0, c).copy_(a.narrow(-2, 0, c));
    s.orgqr(q, tau);
    Q = q.mT().contiguous();
  }
  Tensor R = a.mT().narrow(-2, 0, rrows).triu();
  return {Q, R};
}

// ---- host forward (LAPACK) ----------------------------------------------------------------------

// Q (*, m, qcols) and R (*, rrows, n) of A (*, m, n).
std::tuple<Tensor, Tensor> qr_forward(const Tensor& A, bool complete, bool compute_q) {
  if (const auto* s = device_solver(A)) return qr_device(*s, A, complete, compute_q);
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const int64_t qcols = complete ? m : k, rrows = complete ? m : k;
  Tensor a = colmajor_copy(A);  // (*, n, m)
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor q;  // column-major Q
  if (compute_q) {
    q = internal::make_empty(with(bs, {qcols, m}), A.dtype(), kCPU);
    if (q.numel() > 0) std::memset(q.data_ptr(), 0, q.nbytes());
  }
  by_dtype(A.dtype(), [&](auto z) {
    using T = decltype(z);
    if (m == 0 || n == 0) {
      if (compute_q && qcols > 0) q.copy_(eye(m, std::nullopt, dtype(A.dtype())).narrow(0, 0, qcols));
      return;
    }
    T* p = a.data_ptr<T>();
    std::vector<T> tau(k);
    int info = 0;
    T wq{}, wq2{};
    lapack::geqrf(m, n, p, ld(m), tau.data(), &wq, -1, &info);
    if (compute_q) lapack::orgqr(m, qcols, k, q.data_ptr<T>(), ld(m), tau.data(), &wq2, -1, &info);
    std::vector<T> work(std::max<int64_t>({static_cast<int64_t>(wq), static_cast<int64_t>(wq2), n, m, 1}));
    const int lwork = static_cast<int>(work.size());
    for (int64_t b = 0; b < batch; ++b) {
      T* mat = p + b * m * n;
      lapack::geqrf(m, n, mat, ld(m), tau.data(), work.data(), lwork, &info);
      if (!compute_q) continue;
      T* qm = q.data_ptr<T>() + b * m * qcols;
      std::memcpy(qm, mat, sizeof(T) * m * std::min(n, qcols));
      lapack::orgqr(m, qcols, k, qm, ld(m), tau.data(), work.data(), lwork, &info);
    }
  });
  Tensor R = serial_copy(a.mT().narrow(-2, 0, rrows));
  zero_triangle(R, /*upper=*/false);
  return {compute_q ? on_device(q.mT(), A.device()) : Tensor(), on_device(R, A.device())};
}

// ---- backward (differentiable) ------------------------------------------------------------------

// gQ, gR -> gA for A = QR with A square or tall (R square, invertible).
Tensor qr_backward_tall(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  // gA = [gQ + Q copyutl(gR R^T - Q^T gQ)] R^{-T}
  Tensor M = (matmul(gR, R.mT()) - matmul(Q.mT(), gQ)).triu();
  M = M + M.triu(1).mT();
  Tensor gA = gQ + matmul(Q, M);
  return linalg::solve(R.mT(), gA, /*left=*/false);
}

Tensor qr_backward(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R, bool complete) {
  const int64_t m = rows(Q), n = cols(R);
  NABLA_CHECK(ValueError, !(complete && m > n),
              "linalg.qr: The QR decomposition is not differentiable when mode='complete' "
              "and nrows > ncols.");
  if (m >= n) return qr_backward_tall(gQ, gR, Q, R);
  // Wide A = [X | Y] with X = Q U (U = R[:, :m]) and Y = Q V (V = R[:, m:] = Q^T Y): V's gradient
  // reaches Q through V = Q^T Y.
  Tensor U = R.narrow(-1, 0, m), V = R.narrow(-1, m, n - m);
  Tensor gU = gR.narrow(-1, 0, m), gV = gR.narrow(-1, m, n - m);
  Tensor Y = matmul(Q, V);
  Tensor gX = qr_backward_tall(gQ + matmul(Y, gV.mT()), gU, Q, U);
  return cat({gX, matmul(Q, gV)}, -1);
}

}  // namespace

namespace linalg {

// ---- front-end ----------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> qr(const Tensor& A, std::string_view mode) {
  if (auto ac = autocast_internal::cast<OpId::linalg_qr>(A)) [[unlikely]]
    return qr(ac[0], mode);
  check_matrix("linalg.qr", A);
  NABLA_CHECK(ValueError, mode == "reduced" || mode == "complete" || mode == "r",
              "linalg.qr: qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const bool complete = mode == "complete", compute_q = mode != "r";
  auto [Q, R] = qr_forward(A, complete, compute_q);
  if (!compute_q) {
    Q = empty({0}, like(A));
    if (autograd::needs_grad(A))
      autograd::record("LinalgQrBackward", {&A}, {&R}, [](Node&, GradList&) -> GradList {
        throw ValueError(
            "linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
            "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
      });
    return {Q, R};
  }
  if (autograd::needs_grad(A))
    autograd::record("LinalgQrBackward", {&A}, {&Q, &R},
                     [sq = save_output_nr(Q, 0), sr = save_output_nr(R, 1), complete](Node& n, GradList& g) {
                       return GradList{qr_backward(g[0], g[1], sq.unpack(n), sr.unpack(n), complete)};
                     });
  return {Q, R};
}

}  // namespace linalg
}  // namespace nabla
