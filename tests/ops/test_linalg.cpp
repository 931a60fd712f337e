// torch.linalg and friends (core/linalg.h): known results, reconstruction identities, errors, and
// the registry coverage of every op the header lists. Gradients and agreement with PyTorch are
// checked over the op registry (tests/ops/opinfo_linalg.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/gradcheck.h"
#include "opinfo.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

Tensor A3() { return f64({4, 1, 2, 1, 3, 0, 2, 0, 5}, {3, 3}); }  // symmetric positive-definite

TEST(Linalg, SimpleOpsKnownValues) {
  Tensor m = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(tensor_is(linalg::trace(m), {}, {6}));
  EXPECT_TRUE(tensor_is(diag(m), {2}, {1, 5}));
  EXPECT_TRUE(tensor_is(diag(m, 1), {2}, {2, 6}));
  EXPECT_TRUE(tensor_is(diag(f64({1, 2}, {2}), -1), {3, 3}, {0, 0, 0, 1, 0, 0, 0, 2, 0}));
  EXPECT_TRUE(tensor_is(diag(tensor({3, 4})), {2, 2}, {3, 0, 0, 4}));
  EXPECT_EQ(diag(tensor({3, 4})).dtype(), kInt64);
  EXPECT_TRUE(tensor_is(linalg::cross(f64({1, 0, 0}, {3}), f64({0, 1, 0}, {3})), {3}, {0, 0, 1}));
  Tensor a = f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  EXPECT_TRUE(tensor_is(tensordot(a, a, 3), {}, {204}));
  EXPECT_TRUE(tensor_near(tensordot(a, a, {0, 1}, {0, 1}), einsum("ijk,ijl->kl", {a, a})));
  EXPECT_TRUE(tensor_near(baddbmm(ones({2, 2, 2}, kFloat64), a, a, 0.5, 2), bmm(a, a) * 2 + 0.5));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::cross(m, m, 0); }, {"linalg.cross", "length 3"}));
  // PyTorch 1.13: "linalg.cross: inputs must have the same number of dimensions." ((2, 3) with (3));
  // the sizes of dims both have broadcast.
  Tensor u = f64({1, 0, 0, 0, 1, 0}, {2, 3}), e3 = f64({0, 0, 1}, {3});
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::cross(u, e3); },
                                      {"linalg.cross", "same number of dimensions", "[2, 3]", "[3]"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::cross(e3, u); }, {"linalg.cross", "same number of dimensions"}));
  EXPECT_TRUE(tensor_is(linalg::cross(u, e3.unsqueeze(0)), {2, 3}, {0, -1, 0, 1, 0, 0}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::trace(a); }, {"trace", "matrix"}));
}

TEST(Linalg, InverseSolveAndDeterminants) {
  Tensor A = A3();
  Tensor Ai = linalg::inv(A);
  EXPECT_TRUE(tensor_near(matmul(A, Ai), eye(3, std::nullopt, kFloat64), 1e-12));
  EXPECT_TRUE(tensor_is(linalg::det(A), {}, {4 * 15 - 1 * 5 + 2 * (0 - 6)}, 1e-10));  // 43
  auto [s, l] = linalg::slogdet(-A);
  EXPECT_TRUE(tensor_is(s, {}, {-1}));
  EXPECT_TRUE(tensor_is(l, {}, {std::log(43.0)}, 1e-12));
  Tensor B = f64({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_TRUE(tensor_near(matmul(A, linalg::solve(A, B)), B, 1e-12));
  EXPECT_TRUE(tensor_near(matmul(linalg::solve(A, B.mT(), false), A), B.mT(), 1e-12));
  // Batched and broadcast: (2, 3, 3) against one B.
  Tensor Ab = stack({A, A * 2});
  Tensor X = linalg::solve(Ab, B);
  EXPECT_EQ(shape_of(X), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_TRUE(tensor_near(X.select(0, 1), linalg::solve(A, B) / 2, 1e-12));
  EXPECT_TRUE(tensor_is(linalg::det(Ab), {2}, {43, 344}, 1e-9));
  // float32
  EXPECT_TRUE(tensor_near(linalg::inv(A.to(kFloat32)), Ai, 1e-5));
  // Singular matrices: det 0, slogdet (0, -inf), inv and solve raise naming the op.
  Tensor S = f64({1, 2, 2, 4}, {2, 2});
  EXPECT_TRUE(tensor_is(linalg::det(S), {}, {0}));
  auto [s0, l0] = linalg::slogdet(S);
  EXPECT_TRUE(tensor_is(s0, {}, {0}));
  EXPECT_TRUE(tensor_is(l0, {}, {-kInf}));
  EXPECT_TRUE(throws_with<ValueError>([&] { linalg::inv(S); }, {"linalg.inv", "singular", "float64[2, 2] on cpu"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        linalg::inv(stack({A.narrow(0, 0, 2).narrow(1, 0, 2), S}));
      },
      {"linalg.inv", "(Batch element 1)", "singular"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { linalg::solve(S, f64({1, 1}, {2})); }, {"linalg.solve", "singular"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::inv(B); }, {"linalg.inv", "square", "[3, 2]"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { linalg::inv(tensor({{1, 0}, {0, 1}})); }, {"linalg.inv", "int64"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::solve(A, f64({1, 2}, {2})); }, {"linalg.solve", "incompatible"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        linalg::solve(A, f64({1, 2, 3}, {3}), false);
      },
      {"linalg.solve", "left=False"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::solve(A, B, false); }, {"linalg.solve", "XA = B"}));
}

TEST(Linalg, CholeskyQrSvdEighReconstruct) {
  Tensor A = A3();
  Tensor L = linalg::cholesky(A);
  EXPECT_TRUE(tensor_near(matmul(L, L.mT()), A, 1e-12));
  EXPECT_TRUE(tensor_near(L.triu(1), zeros({3, 3}, kFloat64)));
  EXPECT_TRUE(tensor_near(linalg::cholesky(A, true), L.mT()));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { linalg::cholesky(-A); }, {"linalg.cholesky", "not positive-definite", "order 1"}));

  Tensor M = f64({1, 2, 3, 4, 5, 6, 7, 8, 10, 1, 0, 1}, {4, 3});
  auto [Q, R] = linalg::qr(M);
  EXPECT_EQ(shape_of(Q), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(tensor_near(matmul(Q, R), M, 1e-12));
  EXPECT_TRUE(tensor_near(matmul(Q.mT(), Q), eye(3, std::nullopt, kFloat64), 1e-12));
  auto [Qc, Rc] = linalg::qr(M, "complete");
  EXPECT_EQ(shape_of(Qc), (std::vector<int64_t>{4, 4}));
  EXPECT_TRUE(tensor_near(matmul(Qc, Rc), M, 1e-12));
  EXPECT_TRUE(tensor_near(std::get<1>(linalg::qr(M, "r")), R, 1e-12));
  EXPECT_TRUE(throws_with<ValueError>([&] { linalg::qr(M, "full"); }, {"linalg.qr", "'full'"}));

  for (bool full : {false, true}) {
    auto [U, S, Vh] = linalg::svd(M, full);
    EXPECT_EQ(shape_of(U), (std::vector<int64_t>{4, full ? 4 : 3}));
    Tensor Us = U.narrow(-1, 0, 3);
    EXPECT_TRUE(tensor_near(matmul(Us * S.unsqueeze(-2), Vh), M, 1e-12));
    EXPECT_TRUE(tensor_near(linalg::svdvals(M), S, 1e-12));
  }
  auto [U0, S0, V0] = linalg::svd(zeros({0, 3}, kFloat64));
  EXPECT_EQ(shape_of(U0), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(tensor_near(V0, eye(3, std::nullopt, kFloat64)));

  auto [w, V] = linalg::eigh(A);
  EXPECT_TRUE(tensor_near(matmul(V * w.unsqueeze(-2), V.mT()), A, 1e-12));
  EXPECT_TRUE(tensor_near(linalg::eigvalsh(A), w, 1e-12));
  // Only the named triangle is read.
  Tensor lower = A.tril(), upper = A.triu();
  EXPECT_TRUE(tensor_near(linalg::eigvalsh(lower, "L"), w, 1e-12));
  EXPECT_TRUE(tensor_near(linalg::eigvalsh(upper, "U"), w, 1e-12));
  EXPECT_TRUE(tensor_near(linalg::cholesky(lower), L, 1e-12));
  EXPECT_TRUE(throws_with<ValueError>([&] { linalg::eigh(A, "X"); }, {"linalg.eigh", "UPLO"}));
}

TEST(Linalg, LstsqAndNorms) {
  Tensor A = f64({1, 1, 1, 2, 1, 3, 1, 4}, {4, 2});
  Tensor b = f64({6, 5, 7, 10}, {4, 1});
  auto r = linalg::lstsq(A, b);
  EXPECT_TRUE(tensor_is(r.solution, {2, 1}, {3.5, 1.4}, 1e-12));
  EXPECT_TRUE(tensor_is(r.residuals, {1}, {4.2}, 1e-12));
  EXPECT_EQ(r.rank.item<int64_t>(), 2);
  EXPECT_EQ(shape_of(r.singular_values), (std::vector<int64_t>{2}));
  EXPECT_TRUE(tensor_is(linalg::lstsq(A, b, std::nullopt, "gels").solution, {2, 1}, {3.5, 1.4}, 1e-12));
  // A vector B gives a vector solution (PyTorch 1.13's backward fails there; nabla's works).
  Tensor bv = f64({6, 5, 7, 10}, {4});
  EXPECT_TRUE(tensor_is(linalg::lstsq(A, bv).solution, {2}, {3.5, 1.4}, 1e-12));
  // PyTorch 1.13 keeps the residuals' last dim for vectors: lstsq(A (4, 2), b (4)).residuals is (1,) [4.2].
  EXPECT_TRUE(tensor_is(linalg::lstsq(A, bv).residuals, {1}, {4.2}, 1e-12));
  Tensor Ag = A.clone().requires_grad_();
  linalg::lstsq(Ag, bv).solution.sum().backward();
  Tensor Ag2 = A.clone().requires_grad_();
  linalg::lstsq(Ag2, bv.unsqueeze(-1)).solution.sum().backward();
  EXPECT_TRUE(tensor_near(Ag.grad(), Ag2.grad(), 1e-12));
  // Underdetermined: the minimum-norm solution.
  EXPECT_TRUE(tensor_is(linalg::lstsq(f64({1, 1}, {1, 2}), f64({2}, {1, 1})).solution, {2, 1}, {1, 1}, 1e-12));

  Tensor m = f64({1, -2, 3, -4}, {2, 2});
  EXPECT_TRUE(tensor_is(linalg::vector_norm(m, 1), {}, {10}));
  EXPECT_TRUE(tensor_is(linalg::vector_norm(m, kInf), {}, {4}));
  EXPECT_TRUE(tensor_is(linalg::vector_norm(m, 0), {}, {4}));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m), {}, {std::sqrt(30.0)}));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m, 1), {}, {6}));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m, -1), {}, {4}));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m, kInf), {}, {7}));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m, -kInf), {}, {3}));
  Tensor s = linalg::svdvals(m);
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m, 2), {}, {values(s)[0]}, 1e-12));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(m, "nuc"), {}, {values(s)[0] + values(s)[1]}, 1e-12));
  EXPECT_TRUE(tensor_is(linalg::norm(m), {}, {std::sqrt(30.0)}));
  EXPECT_TRUE(tensor_is(linalg::norm(m, 1.0), {}, {6}));
  EXPECT_TRUE(throws_with<ValueError>([&] { linalg::matrix_norm(m, 3); }, {"linalg.matrix_norm", "Order 3"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        linalg::norm(ones({2, 2, 2}, kFloat64), 2.0);
      },
      {"linalg.norm", "1D or 2D"}));
}

TEST(Linalg, GradientsOfInverseAndDeterminant) {
  Tensor A = A3().requires_grad_();
  linalg::det(A).backward();
  // d det / dA = det A^{-T}
  EXPECT_TRUE(tensor_near(A.grad(), linalg::inv(A3()).mT() * 43, 1e-10));
  Tensor B = A3().requires_grad_();
  linalg::inv(B).sum().backward();
  Tensor Bi = linalg::inv(A3());
  EXPECT_TRUE(tensor_near(B.grad(), -matmul(Bi.mT(), matmul(ones({3, 3}, kFloat64), Bi.mT())), 1e-12));
  // The result is saved for backward: modifying it in place is reported.
  Tensor C = A3().requires_grad_();
  Tensor Ci = linalg::inv(C);
  Ci.mul_(2);
  EXPECT_THROW(Ci.sum().backward(), AutogradError);
  // QR with mode 'r' has no gradient.
  Tensor D = A3().requires_grad_();
  EXPECT_TRUE(
      throws_with<ValueError>([&] { std::get<1>(linalg::qr(D, "r")).sum().backward(); }, {"linalg.qr", "mode='r'"}));
}

// B of one dim fewer than A is a batch of vectors, as PyTorch 1.13 reads it:
//   lstsq(A (2, 3, 2), B (2, 3), driver='gelsd'): solution [[5, 0.5], [1.3333, 2.3333]], residuals
//   (2, 1) [[1.5], [0.3333]]; A (2, 3, 3) with B (3, 3): "The size of tensor a (2) must match the
//   size of tensor b (3) at non-singleton dimension 0" (nabla read B as a matrix and broadcast it);
//   A (2, 3, 2) with B (3): "input.dim() must be greater or equal to other.dim() and
//   (input.dim() - other.dim()) <= 1".
TEST(Linalg, LstsqReadsBOfOneDimFewerAsVectors) {
  Tensor A = f64({1, 1, 1, 2, 1, 3, 1, 0, 0, 1, 1, 1}, {2, 3, 2});
  Tensor B = f64({6, 5, 7, 1, 2, 4}, {2, 3});
  auto r = linalg::lstsq(A, B);
  EXPECT_TRUE(tensor_is(r.solution, {2, 2}, {5, 0.5, 4.0 / 3, 7.0 / 3}, 1e-12));
  EXPECT_TRUE(tensor_is(r.residuals, {2, 1}, {1.5, 1.0 / 3}, 1e-12));
  EXPECT_TRUE(tensor_near(r.solution, linalg::lstsq(A, B.unsqueeze(-1)).solution.squeeze(-1), 1e-12));
  Tensor diag3 = f64({2, 0, 0, 0, 3, 0, 0, 0, 4}, {3, 3});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        linalg::lstsq(diag3.expand({2, 3, 3}), ones({3, 3}, kFloat64));
      },
      {"linalg.lstsq"}));
  EXPECT_TRUE(tensor_is(linalg::lstsq(diag3.expand({3, 3, 3}), ones({3, 3}, kFloat64)).solution, {3, 3},
                        {0.5, 1.0 / 3, 0.25, 0.5, 1.0 / 3, 0.25, 0.5, 1.0 / 3, 0.25}, 1e-12));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::lstsq(A, f64({6, 5, 7}, {3})); }, {"linalg.lstsq", "one fewer"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::lstsq(A[0], B.unsqueeze(-1)); }, {"linalg.lstsq", "one fewer"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { linalg::lstsq(A, ones({2, 4}, kFloat64)); }, {"other.size(-1)"}));
}

// The sign of slogdet requires grad and passes none to A, as PyTorch 1.13's: for A = [[2, 1], [1, -3]]
// (sign -1, log 7), (sign * logabsdet).backward() gives sign A^{-T} = -[[3/7, 1/7], [1/7, -2/7]];
// sign.backward() leaves A.grad None (also for a singular A).
TEST(Linalg, SlogdetSignTakesPartInAutogradWithoutAGradient) {
  Tensor A = f64({2, 1, 1, -3}, {2, 2}).requires_grad_();
  auto [s, l] = linalg::slogdet(A);
  EXPECT_TRUE(s.requires_grad());
  ASSERT_NE(s.grad_fn(), nullptr);
  EXPECT_STREQ(s.grad_fn()->name(), "LinalgSlogdetBackward");
  (s * l).backward();
  EXPECT_TRUE(tensor_is(A.grad(), {2, 2}, {-3.0 / 7, -1.0 / 7, -1.0 / 7, 2.0 / 7}, 1e-12));
  A.zero_grad();
  std::get<0>(linalg::slogdet(A)).backward();
  EXPECT_FALSE(A.grad().defined());
  Tensor S = zeros({2, 2}, kFloat64).requires_grad_();
  auto [s0, l0] = linalg::slogdet(S);
  EXPECT_TRUE(tensor_is(s0, {}, {0}));
  EXPECT_NO_THROW(s0.backward());
  EXPECT_FALSE(S.grad().defined());
}

// Empty matrices give what PyTorch gives (checked against PyTorch 1.13).
TEST(Linalg, EmptyMatrices) {
  Tensor z = zeros({0, 0}, kFloat64);
  EXPECT_TRUE(tensor_is(linalg::inv(z), {0, 0}, {}));
  EXPECT_TRUE(tensor_is(linalg::det(z), {}, {1}));
  auto [s, l] = linalg::slogdet(z);
  EXPECT_TRUE(tensor_is(s, {}, {1}));
  EXPECT_TRUE(tensor_is(l, {}, {0}));
  EXPECT_TRUE(tensor_is(linalg::cholesky(z), {0, 0}, {}));
  EXPECT_TRUE(tensor_is(std::get<1>(linalg::eigh(z)), {0, 0}, {}));
  Tensor tall = zeros({3, 0}, kFloat64), wide = zeros({0, 3}, kFloat64);
  auto [Q, R] = linalg::qr(tall);
  EXPECT_EQ(shape_of(Q), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(shape_of(R), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(tensor_near(std::get<0>(linalg::qr(tall, "complete")), eye(3, std::nullopt, kFloat64)));
  EXPECT_EQ(shape_of(std::get<1>(linalg::qr(wide))), (std::vector<int64_t>{0, 3}));
  auto [U, S, Vh] = linalg::svd(tall);
  EXPECT_TRUE(tensor_near(U, eye(3, std::nullopt, kFloat64)));
  EXPECT_EQ(shape_of(S), (std::vector<int64_t>{0}));
  EXPECT_EQ(shape_of(Vh), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(shape_of(std::get<2>(linalg::svd(wide, false))), (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(tensor_is(linalg::matrix_norm(tall, "nuc"), {}, {0}));
  auto r = linalg::lstsq(tall, ones({3, 2}, kFloat64));
  EXPECT_EQ(shape_of(r.solution), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(tensor_is(r.residuals, {2}, {3, 3}));
  EXPECT_EQ(r.rank.item<int64_t>(), 0);
}

// full_matrices=true: the gradient flows through U's first k columns and Vh's first k rows (the
// others are any orthonormal completion), as PyTorch's.
TEST(Linalg, SvdFullMatricesGradients) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 3}, std::vector<int64_t>{3, 4}}) {
    Tensor A = lcg_tensor(shape, 7).requires_grad_();
    auto f = [](const std::vector<Tensor>& x) {
      auto [U, S, Vh] = linalg::svd(x[0], true);
      const int64_t k = S.sizes().back();
      return std::vector<Tensor>{S, abs(U.narrow(-1, 0, k)), abs(Vh.narrow(-2, 0, k))};
    };
    EXPECT_NO_THROW(autograd::gradcheck(f, {A})) << IntArrayRef(shape);
    EXPECT_NO_THROW(autograd::gradgradcheck(f, {A})) << IntArrayRef(shape);
  }
}

}  // namespace
}  // namespace nabla::testing
