// torch.linalg.svd and svdvals (core/linalg.h). Device forward: gesvd of the device solver (cuSOLVER's
// gesvdj); host forward: LAPACK's gesdd; backward (PyTorch's svd_backward) and front-ends below.
#include "core/linalg/common.h"

#include <vector>

#include "core/linalg/lapack.h"

namespace nabla {

using namespace linalg_internal;

namespace {

// ---- errors -------------------------------------------------------------------------------------

[[noreturn]] void raise_svd_failed(const Tensor& A, int64_t b, int info) {
  throw ValueError(
      internal::str("linalg.svd: ", batch_prefix(A, b),
                    "The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                    "many repeated singular values (error code: ",
                    info, "; A: ", internal::describe(A), ")"));
}

// ---- device forward -----------------------------------------------------------------------------

// svd (m, n > 0): gesvdj on the column-major copy; V column-major read row-major is Vh.
std::tuple<Tensor, Tensor, Tensor> svd_device(const linalg_device::Solver& s, const Tensor& A, char jobz) {
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const bool full = jobz == 'A', vectors = jobz != 'N';
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A.mT());  // (*, n, m)
  Tensor sv = internal::make_empty(with(bs, {k}), A.dtype(), A.device());
  Tensor u = vectors ? internal::make_empty(with(bs, {full ? m : k, m}), A.dtype(), A.device()) : Tensor();
  Tensor v = vectors ? internal::make_empty(with(bs, {full ? n : k, n}), A.dtype(), A.device()) : Tensor();
  Tensor info = int_buffer(bs, A.device());
  s.gesvd(a, sv, u, v, info);
  check_infos("linalg.svd", info, [&](int64_t b, int code) { raise_svd_failed(A, b, code); });
  autograd::NoGradGuard ng;
  return {vectors ? u.mT().contiguous() : Tensor(), sv, v};
}

// ---- host forward (LAPACK) ----------------------------------------------------------------------

// U (*, m, ucols), S (*, k), Vh (*, vrows, n); jobz 'A' (full), 'S' (reduced) or 'N' (S only).
std::tuple<Tensor, Tensor, Tensor> svd_forward(const Tensor& A, char jobz) {
  if (const auto* s = device_solver(A)) return svd_device(*s, A, jobz);
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const bool full = jobz == 'A', vectors = jobz != 'N';
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor s = empty(with(bs, {k}), dtype(A.dtype()));
  Tensor u = vectors ? empty(with(bs, {ucols, m}), dtype(A.dtype())) : Tensor();  // column-major
  Tensor vt = vectors ? empty(with(bs, {n, vrows}), dtype(A.dtype())) : Tensor();
  if (k == 0) {
    if (vectors) {
      u = eye(m, std::nullopt, dtype(A.dtype())).narrow(1, 0, ucols).expand(with(bs, {m, ucols})).mT();
      vt = eye(n, std::nullopt, dtype(A.dtype())).narrow(0, 0, vrows).expand(with(bs, {vrows, n})).mT();
    }
  } else {
    Tensor a = colmajor_copy(A);
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = a.data_ptr<T>();
      T dummy[1];
      T* pu = vectors ? u.data_ptr<T>() : dummy;
      T* pv = vectors ? vt.data_ptr<T>() : dummy;
      const int ldu = vectors ? ld(m) : 1, ldvt = vectors ? ld(vrows) : 1;
      std::vector<int> iwork(8 * k);
      int info = 0;
      T wq{};
      lapack::gesdd(jobz, m, n, p, ld(m), s.data_ptr<T>(), pu, ldu, pv, ldvt, &wq, -1, iwork.data(), &info);
      std::vector<T> work(std::max<int64_t>(static_cast<int64_t>(wq), 1));
      for (int64_t b = 0; b < batch; ++b) {
        lapack::gesdd(jobz, m, n, p + b * m * n, ld(m), s.data_ptr<T>() + b * k, vectors ? pu + b * m * ucols : pu, ldu,
                      vectors ? pv + b * n * vrows : pv, ldvt, work.data(), static_cast<int>(work.size()), iwork.data(),
                      &info);
        if (info > 0) raise_svd_failed(A, b, info);
      }
    });
  }
  return {vectors ? on_device(u.mT(), A.device()) : Tensor(), on_device(s, A.device()),
          vectors ? on_device(vt.mT(), A.device()) : Tensor()};
}

// ---- backward (differentiable) ------------------------------------------------------------------

// PyTorch's svd_backward for real inputs with U (*, m, k), S (*, k), Vh (*, k, n).
Tensor svd_backward(const Tensor& gU_in, const Tensor& gS, const Tensor& gVh_in, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const int64_t m = rows(U), n = cols(Vh), k = S.sizes().back();
  const bool has_gU = !all_zero(gU_in), has_gVh = !all_zero(gVh_in);
  if (!has_gU && !has_gVh) return m >= n ? matmul(U, gS.unsqueeze(-1) * Vh) : matmul(U * gS.unsqueeze(-2), Vh);
  const Tensor& gU = gU_in;
  const Tensor& gVh = gVh_in;
  auto skew = [](const Tensor& X) { return X - X.mT(); };
  Tensor S2 = S * S;
  Tensor E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_like(k, S);  // E_jk = S_k^2 - S_j^2, 1 on the diagonal
  Tensor gA;
  if (has_gU && has_gVh) {
    gA = (skew(matmul(U.mT(), gU)) * S.unsqueeze(-2) + S.unsqueeze(-1) * skew(matmul(Vh, gVh.mT()))) / E;
  } else if (has_gU) {
    gA = skew(matmul(U.mT(), gU)) * (S.unsqueeze(-2) / E);
  } else {
    gA = S.unsqueeze(-1) * (skew(matmul(Vh, gVh.mT())) / E);
  }
  gA = gA + gS.unsqueeze(-1) * eye_like(k, S);
  if (m > n && has_gU) {
    gA = matmul(U, gA);
    Tensor gUSinv = gU / S.unsqueeze(-2);
    gA = gA + gUSinv - matmul(U, matmul(U.mT(), gUSinv));
    return matmul(gA, Vh);
  }
  if (m < n && has_gVh) {
    gA = matmul(gA, Vh);
    Tensor SinvgVh = gVh / S.unsqueeze(-1);
    gA = gA + SinvgVh - matmul(matmul(SinvgVh, Vh.mT()), Vh);
    return matmul(U, gA);
  }
  return m >= n ? matmul(U, matmul(gA, Vh)) : matmul(matmul(U, gA), Vh);
}

}  // namespace

namespace linalg {

// ---- front-ends ---------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices) {
  if (auto ac = autocast_internal::cast<OpId::linalg_svd>(A)) [[unlikely]]
    return svd(ac[0], full_matrices);
  check_matrix("linalg.svd", A);
  auto [U, S, Vh] = svd_forward(A, full_matrices ? 'A' : 'S');
  if (autograd::needs_grad(A))
    autograd::record("LinalgSvdBackward", {&A}, {&U, &S, &Vh},
                     [su = save_output_nr(U, 0), ss = save_output_nr(S, 1), sv = save_output_nr(Vh, 2), full_matrices](
                         Node& n, GradList& g) {
                       Tensor Uv = su.unpack(n), Sv = ss.unpack(n), Vv = sv.unpack(n);
                       Tensor gU = g[0], gVh = g[2];
                       if (full_matrices) {
                         const int64_t k = Sv.sizes().back();
                         Uv = Uv.narrow(-1, 0, k);
                         Vv = Vv.narrow(-2, 0, k);
                         gU = gU.narrow(-1, 0, k);
                         gVh = gVh.narrow(-2, 0, k);
                       }
                       return GradList{svd_backward(gU, g[1], gVh, Uv, Sv, Vv)};
                     });
  return {U, S, Vh};
}

Tensor svdvals(const Tensor& A) {
  if (auto ac = autocast_internal::cast<OpId::linalg_svdvals>(A)) [[unlikely]]
    return svdvals(ac[0]);
  check_matrix("linalg.svdvals", A);
  if (!autograd::needs_grad(A)) return std::get<1>(svd_forward(A, 'N'));
  // The gradient U diag(gS) Vh reads U and Vh from an svd whose own node carries the second order.
  auto [U, S, Vh] = svd(A, false);
  Tensor out = S.detach().clone();
  autograd::record("LinalgSvdvalsBackward", {&A}, {&out}, [su = save(U), sv = save(Vh)](Node& n, GradList& g) {
    Tensor Uv = su.unpack(n), Vv = sv.unpack(n);
    return GradList{rows(Uv) >= cols(Vv) ? matmul(Uv, g[0].unsqueeze(-1) * Vv) : matmul(Uv * g[0].unsqueeze(-2), Vv)};
  });
  return out;
}

}  // namespace linalg
}  // namespace nabla
