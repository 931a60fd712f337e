// torch.linalg.eigh and eigvalsh (core/linalg.h). Device forward: syevd of the device solver
// (cuSOLVER's syevd or batched syevj); host forward: LAPACK's syevd; backward and front-ends below.
#include "core/linalg/common.h"

#include <vector>

#include "core/linalg/lapack.h"

namespace nabla {

using namespace linalg_internal;

namespace {

// ---- errors -------------------------------------------------------------------------------------

[[noreturn]] void raise_eigh_failed(const Tensor& A, int64_t b, int info) {
  throw ValueError(
      internal::str("linalg.eigh: ", batch_prefix(A, b),
                    "The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                    "many repeated eigenvalues (error code: ",
                    info, "; A: ", internal::describe(A), ")"));
}

// ---- device forward -----------------------------------------------------------------------------

// eigh: syevd on the row-major copy (A^T column-major: its upper triangle is A's lower one).
std::tuple<Tensor, Tensor> eigh_device(const linalg_device::Solver& s, const Tensor& A, char uplo, bool vectors) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A);
  Tensor w = internal::make_empty(with(bs, {n}), A.dtype(), A.device());
  Tensor info = int_buffer(bs, A.device());
  s.syevd(vectors, /*upper=*/uplo == 'L', a, w, info);
  check_infos("linalg.eigh", info, [&](int64_t b, int code) { raise_eigh_failed(A, b, code); });
  autograd::NoGradGuard ng;
  return {w, vectors ? a.mT().contiguous() : Tensor()};
}

// ---- host forward (LAPACK) ----------------------------------------------------------------------

// Eigenvalues (*, n) ascending and eigenvectors (*, n, n) as columns of symmetric A's `uplo` triangle.
std::tuple<Tensor, Tensor> eigh_forward(const Tensor& A, char uplo, bool vectors) {
  if (const auto* s = device_solver(A)) return eigh_device(*s, A, uplo, vectors);
  const int64_t n = cols(A);
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor a = rowmajor_copy(A);  // A^T column-major: its upper triangle is A's lower one
  Tensor w = empty(with(bs, {n}), dtype(A.dtype()));
  if (n > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      const char lapack_uplo = uplo == 'L' ? 'U' : 'L';
      const char jobz = vectors ? 'V' : 'N';
      T* p = a.data_ptr<T>();
      int info = 0, iwq = 0;
      T wq{};
      lapack::syevd(jobz, lapack_uplo, n, p, ld(n), w.data_ptr<T>(), &wq, -1, &iwq, -1, &info);
      std::vector<T> work(std::max<int64_t>(static_cast<int64_t>(wq), 1));
      std::vector<int> iwork(std::max(iwq, 1));
      for (int64_t b = 0; b < batch; ++b) {
        lapack::syevd(jobz, lapack_uplo, n, p + b * n * n, ld(n), w.data_ptr<T>() + b * n, work.data(),
                      static_cast<int>(work.size()), iwork.data(), static_cast<int>(iwork.size()), &info);
        if (info > 0) raise_eigh_failed(A, b, info);
      }
    });
  }
  // The column-major eigenvector matrix read row-major is its transpose.
  return {on_device(w, A.device()), vectors ? on_device(a.mT(), A.device()) : Tensor()};
}

// ---- backward (differentiable) ------------------------------------------------------------------

// PyTorch's linalg_eig_backward for a symmetric input: gA = V (diag(gL) + skew(V^T gV)/2 / E) V^T.
Tensor eigh_backward(const Tensor& gL, const Tensor& gV, const Tensor& L, const Tensor& V) {
  const int64_t n = L.sizes().back();
  Tensor inner;
  if (all_zero(gV)) {
    inner = gL.unsqueeze(-1) * eye_like(n, L);
  } else {
    Tensor VhgV = matmul(V.mT(), gV);
    VhgV = (VhgV - VhgV.mT()) * 0.5;
    Tensor E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye_like(n, L);  // E_ij = L_j - L_i, 1 on the diagonal
    inner = VhgV / E + gL.unsqueeze(-1) * eye_like(n, L);
  }
  return matmul(V, matmul(inner, V.mT()));
}

char check_uplo(const char* op, std::string_view UPLO) {
  NABLA_CHECK(ValueError, UPLO == "L" || UPLO == "U" || UPLO == "l" || UPLO == "u", op,
              ": Expected UPLO argument to be 'L' or 'U', but got ", UPLO);
  return UPLO == "L" || UPLO == "l" ? 'L' : 'U';
}

}  // namespace

namespace linalg {

// ---- front-ends ---------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> eigh(const Tensor& A, std::string_view UPLO) {
  if (auto ac = autocast_internal::cast<OpId::linalg_eigh>(A)) [[unlikely]]
    return eigh(ac[0], UPLO);
  check_square("linalg.eigh", A);
  auto [L, V] = eigh_forward(A, check_uplo("linalg.eigh", UPLO), true);
  if (autograd::needs_grad(A))
    autograd::record("LinalgEighBackward", {&A}, {&L, &V},
                     [sl = save_output_nr(L, 0), sv = save_output_nr(V, 1)](Node& n, GradList& g) {
                       return GradList{eigh_backward(g[0], g[1], sl.unpack(n), sv.unpack(n))};
                     });
  return {L, V};
}

Tensor eigvalsh(const Tensor& A, std::string_view UPLO) {
  if (auto ac = autocast_internal::cast<OpId::linalg_eigvalsh>(A)) [[unlikely]]
    return eigvalsh(ac[0], UPLO);
  check_square("linalg.eigvalsh", A);
  char uplo = check_uplo("linalg.eigvalsh", UPLO);
  if (!autograd::needs_grad(A)) return std::get<0>(eigh_forward(A, uplo, false));
  auto [L, V] = eigh(A, UPLO);
  Tensor out = L.detach().clone();
  autograd::record("LinalgEigvalshBackward", {&A}, {&out}, [sv = save(V)](Node& n, GradList& g) {
    Tensor Vv = sv.unpack(n);
    return GradList{matmul(Vv * g[0].unsqueeze(-2), Vv.mT())};  // V diag(gL) V^T
  });
  return out;
}

}  // namespace linalg
}  // namespace nabla
