// Registry entries for torch.linalg and friends (core/linalg.h; see opinfo.h).
//
// Decompositions are differentiated on well-conditioned inputs built inside `fn` (and the same way
// in the PyTorch twins, tests/ops/twins.py): wc(x) = x + n I for inverses and solves,
// spd(x) = x x^T + n I for cholesky, sym(x) = x + x^T for eigh. svd and eigh return only what does
// not depend on the sign of the singular/eigen vectors (PyTorch's OpInfo does the same): S, |U|,
// |V|, U f(S) V^T.
#include <cmath>
#include <limits>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor eye_as(const Tensor& x) {
  int64_t n = x.sizes().back();
  return eye(n, std::nullopt, dtype(x.dtype()).device(x.device()));
}
Tensor wc(const Tensor& x) { return x + eye_as(x) * static_cast<double>(x.sizes().back()); }
Tensor spd(const Tensor& x) { return matmul(x, x.mT()) + eye_as(x) * static_cast<double>(x.sizes().back()); }
Tensor sym(const Tensor& x) { return x + x.mT(); }

std::vector<Sample> square_samples() {
  return {{{arg({3, 3})}, "3x3"}, {{arg({2, 3, 3})}, "batched"},     {{arg_t({3, 3})}, "noncontiguous"},
          {{arg({2, 2})}, "2x2"}, {{arg({0, 3, 3})}, "empty_batch"}, {{arg({2, 1, 4, 4})}, "batched_4d"}};
}

std::vector<OpInfo> linalg_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "diag",
                 .torch = "[torch.diag(x[0], 0), torch.diag(x[0], 1), torch.diag(x[0], -1)]",
                 .fn =
                     [](I x) {
                       return Outputs{diag(x[0], 0), diag(x[0], 1), diag(x[0], -1)};
                     },
                 .samples = {{{arg({4})}, "vector"},
                             {{arg({3, 4})}, "matrix"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({0})}, "empty"},
                             {{arg({2})}, "small"}}});
  ops.push_back({.name = "baddbmm",
                 .torch = "torch.baddbmm(x[0], x[1], x[2], beta=0.5, alpha=2)",
                 .fn = [](I x) { return Outputs{baddbmm(x[0], x[1], x[2], 0.5, 2)}; },
                 .samples = {{{arg({2, 3, 4}), arg({2, 3, 5}), arg({2, 5, 4})}, "full"},
                             {{arg({4}), arg({2, 3, 5}), arg({2, 5, 4})}, "broadcast_input"},
                             {{arg({2, 3, 4}), arg_t({2, 3, 5}), arg({2, 5, 4})}, "noncontiguous"},
                             {{arg({1, 2, 2}), arg({1, 2, 3}), arg({1, 3, 2})}, "small"},
                             {{arg({0, 3, 4}), arg({0, 3, 5}), arg({0, 5, 4})}, "empty"}}});
  ops.push_back({.name = "tensordot",
                 .torch = "[torch.tensordot(x[0], x[1], 1), torch.tensordot(x[0], x[1], ([0], [2])), "
                          "torch.tensordot(x[0], x[1], ([1, 2], [1, 0]))]",
                 .fn =
                     [](I x) {
                       return Outputs{tensordot(x[0], x[1], 1), tensordot(x[0], x[1], {0}, {-1}),
                                      tensordot(x[0], x[1], {1, 2}, {1, 0})};
                     },
                 .samples = {{{arg({2, 3, 4}), arg({4, 3, 2})}, "3d"},
                             {{arg_t({2, 3, 4}), arg({4, 3, 2})}, "noncontiguous"},
                             {{arg({2, 1, 2}), arg({2, 1, 2})}, "small"},
                             {{arg({0, 3, 4}), arg({4, 3, 0})}, "empty"}}});
  ops.push_back({.name = "linalg.trace",
                 .torch = "torch.trace(x[0])",
                 .fn = [](I x) { return Outputs{linalg::trace(x[0])}; },
                 .samples = {{{arg({3, 4})}, "3x4"}, {{arg_t({4, 3})}, "noncontiguous"}, {{arg({0, 3})}, "empty"}}});
  ops.push_back({.name = "linalg.cross",
                 .torch = "torch.linalg.cross(x[0], x[1])",
                 .fn = [](I x) { return Outputs{linalg::cross(x[0], x[1])}; },
                 .samples = {{{arg({4, 3}), arg({4, 3})}, "4x3"},
                             {{arg({1, 3}), arg({4, 3})}, "broadcast"},
                             {{arg_t({3, 3}), arg({3, 3})}, "noncontiguous"},
                             {{arg({3}), arg({3})}, "vectors"},
                             {{arg({0, 3}), arg({0, 3})}, "empty"}}});
  ops.push_back({.name = "linalg.inv",
                 .torch = "torch.linalg.inv(T.wc(x[0]))",
                 .fn = [](I x) { return Outputs{linalg::inv(wc(x[0]))}; },
                 .samples = square_samples()});
  ops.push_back({.name = "linalg.solve",
                 .torch = "T.solve(x)",
                 .fn =
                     [](I x) {
                       Tensor A = wc(x[0]);
                       Outputs out{linalg::solve(A, x[1])};
                       if (x[1].dim() == x[0].dim()) out.push_back(linalg::solve(A, x[1].mT(), /*left=*/false));
                       return out;
                     },
                 .samples = {{{arg({3, 3}), arg({3, 2})}, "matrix"},
                             {{arg({3, 3}), arg({3})}, "vector"},
                             {{arg({2, 3, 3}), arg({3, 2})}, "broadcast_A"},
                             {{arg({2, 3, 3}), arg({2, 3})}, "batched_vector"},
                             {{arg_t({3, 3}), arg_t({3, 2})}, "noncontiguous"},
                             {{arg({2, 2}), arg({2, 1})}, "small"},
                             {{arg({0, 3, 3}), arg({0, 3, 2})}, "empty_batch"}}});
  ops.push_back({.name = "linalg.det",
                 .torch = "torch.linalg.det(T.wc(x[0]))",
                 .fn = [](I x) { return Outputs{linalg::det(wc(x[0]))}; },
                 .samples = square_samples()});
  ops.push_back({.name = "linalg.slogdet",
                 .torch = "torch.linalg.slogdet(-T.wc(x[0]))",
                 .fn =
                     [](I x) {
                       auto [s, l] = linalg::slogdet(-wc(x[0]));
                       return Outputs{s, l};
                     },
                 .samples = square_samples()});
  ops.push_back({.name = "linalg.cholesky",
                 .torch = "[torch.linalg.cholesky(T.spd(x[0])), torch.linalg.cholesky(T.spd(x[0]), upper=True)]",
                 .fn =
                     [](I x) {
                       return Outputs{linalg::cholesky(spd(x[0])), linalg::cholesky(spd(x[0]), true)};
                     },
                 .samples = square_samples()});
  ops.push_back({.name = "linalg.qr",
                 .torch = "T.qr(x[0])",
                 .fn =
                     [](I x) {
                       auto [Q, R] = linalg::qr(x[0]);
                       Outputs out{Q, R};
                       if (x[0].sizes()[x[0].dim() - 2] <= x[0].sizes().back()) {
                         auto [Qc, Rc] = linalg::qr(x[0], "complete");
                         out.push_back(Qc);
                         out.push_back(Rc);
                       }
                       return out;
                     },
                 .samples = {{{arg({4, 3})}, "tall"},
                             {{arg({3, 3})}, "square"},
                             {{arg({3, 4})}, "wide"},
                             {{arg({2, 4, 3})}, "batched"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({3, 2})}, "small"},
                             {{arg({2, 3})}, "small_wide"},
                             {{arg({0, 3, 2})}, "empty_batch"}}});
  ops.push_back({.name = "linalg.svd",
                 .torch = "T.svd(x[0])",
                 .fn =
                     [](I x) {
                       auto [U, S, Vh] = linalg::svd(x[0], false);
                       return Outputs{S, abs(U), abs(Vh), matmul(U * (S * S).unsqueeze(-2), Vh)};
                     },
                 .samples = {{{arg({4, 3})}, "tall"},
                             {{arg({3, 3})}, "square"},
                             {{arg({3, 4})}, "wide"},
                             {{arg({2, 4, 3})}, "batched"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({3, 2})}, "small"},
                             {{arg({2, 3})}, "small_wide"},
                             {{arg({0, 3, 2})}, "empty_batch"}}});
  ops.push_back({.name = "linalg.svdvals",
                 .torch = "torch.linalg.svdvals(x[0])",
                 .fn = [](I x) { return Outputs{linalg::svdvals(x[0])}; },
                 .samples = {{{arg({4, 3})}, "tall"},
                             {{arg({3, 4})}, "wide"},
                             {{arg({2, 3, 3})}, "batched"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({3, 2})}, "small"},
                             {{arg({0, 3, 2})}, "empty_batch"}}});
  ops.push_back({.name = "linalg.eigh",
                 .torch = "T.eigh(T.sym(x[0]))",
                 .fn =
                     [](I x) {
                       auto [L, V] = linalg::eigh(sym(x[0]));
                       return Outputs{L, abs(V), matmul(V * (L * L).unsqueeze(-2), V.mT())};
                     },
                 .samples = square_samples()});
  ops.push_back({.name = "linalg.eigvalsh",
                 .torch = "[torch.linalg.eigvalsh(T.sym(x[0])), torch.linalg.eigvalsh(T.sym(x[0]), 'U')]",
                 .fn =
                     [](I x) {
                       return Outputs{linalg::eigvalsh(sym(x[0])), linalg::eigvalsh(sym(x[0]), "U")};
                     },
                 .samples = square_samples()});
  ops.push_back({.name = "linalg.lstsq",
                 .torch = "torch.linalg.lstsq(x[0], x[1], driver='gelsd').solution",
                 .fn = [](I x) { return Outputs{linalg::lstsq(x[0], x[1]).solution}; },
                 .samples = {{{arg({5, 3}), arg({5, 2})}, "tall"},
                             {{arg({3, 5}), arg({3, 2})}, "wide"},
                             {{arg({2, 4, 3}), arg({1, 4, 2})}, "broadcast"},
                             {{arg_t({4, 3}), arg({4, 2})}, "noncontiguous"},
                             {{arg({3, 2}), arg({3, 2})}, "small"},
                             {{arg({0, 3, 2}), arg({0, 3, 1})}, "empty_batch"}}});
  ops.push_back({.name = "linalg.vector_norm",
                 .torch =
                     "[torch.linalg.vector_norm(x[0]), torch.linalg.vector_norm(x[0], 1, -1), "
                     "torch.linalg.vector_norm(x[0], 3, -1, True), torch.linalg.vector_norm(x[0], float('inf'), -1), "
                     "torch.linalg.vector_norm(x[0], float('-inf'), -1), torch.linalg.vector_norm(x[0], 0, -1)]",
                 .fn =
                     [](I x) {
                       return Outputs{linalg::vector_norm(x[0]),
                                      linalg::vector_norm(x[0], 1, {-1}),
                                      linalg::vector_norm(x[0], 3, {-1}, true),
                                      linalg::vector_norm(x[0], kInf, {-1}),
                                      linalg::vector_norm(x[0], -kInf, {-1}),
                                      linalg::vector_norm(x[0], 0, {-1})};
                     },
                 .samples = {{{arg({3, 4})}, "2d"},
                             {{arg({2, 3, 4})}, "3d"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({5})}, "vector"},
                             {{arg({0, 3})}, "empty"}}});
  ops.push_back({.name = "linalg.matrix_norm",
                 .torch = "T.matrix_norms(x[0])",
                 .fn =
                     [](I x) {
                       Outputs out{linalg::matrix_norm(x[0]), linalg::matrix_norm(x[0], "nuc")};
                       for (double o : {1.0, -1.0, kInf, -kInf, 2.0, -2.0}) out.push_back(linalg::matrix_norm(x[0], o));
                       out.push_back(linalg::matrix_norm(x[0], "fro", {0, -1}, true));
                       out.push_back(linalg::matrix_norm(x[0], 1.0, {-1, 0}, true));
                       return out;
                     },
                 .samples = {{{arg({3, 4})}, "3x4"},
                             {{arg({2, 3, 4})}, "batched"},
                             {{arg_t({4, 3})}, "noncontiguous"},
                             {{arg({2, 3})}, "small"}}});
  // The norms a graph can hold (no singular values): what the exported forms of matrix_norm and
  // norm are checked on.
  ops.push_back({.name = "linalg.matrix_norm_elementwise",
                 .ops = {OpId::linalg_matrix_norm, OpId::linalg_norm},
                 .torch = "[torch.linalg.matrix_norm(x[0]), torch.linalg.matrix_norm(x[0], 1), "
                          "torch.linalg.matrix_norm(x[0], float('-inf')), torch.linalg.norm(x[0], 'fro'), "
                          "torch.linalg.norm(x[0], float('inf'))]",
                 .fn =
                     [](I x) {
                       return Outputs{linalg::matrix_norm(x[0]), linalg::matrix_norm(x[0], 1.0),
                                      linalg::matrix_norm(x[0], -kInf), linalg::norm(x[0], "fro"),
                                      linalg::norm(x[0], kInf)};
                     },
                 .samples = {{{arg({3, 4})}, "3x4"}, {{arg_t({4, 3})}, "noncontiguous"}}});
  ops.push_back({.name = "linalg.norm",
                 .torch = "[torch.linalg.norm(x[0]), torch.linalg.norm(x[0], 'fro'), torch.linalg.norm(x[0], 1), "
                          "torch.linalg.norm(x[0], float('inf'), -1), torch.linalg.norm(x[0], dim=(0, 1)), "
                          "torch.linalg.norm(x[0], 2, (1, 0), True)]",
                 .fn =
                     [](I x) {
                       return Outputs{linalg::norm(x[0]),
                                      linalg::norm(x[0], "fro"),
                                      linalg::norm(x[0], 1.0),
                                      linalg::norm(x[0], kInf, {-1}),
                                      linalg::norm(x[0], std::nullopt, {0, 1}),
                                      linalg::norm(x[0], 2.0, {1, 0}, true)};
                     },
                 .samples = {{{arg({3, 4})}, "3x4"}, {{arg_t({4, 3})}, "noncontiguous"}, {{arg({2, 3})}, "small"}}});
  // Tolerances: float32 decompositions agree with float64 to about 1e-5 relative on these sizes.
  for (OpInfo& o : ops) o.f32_tol = std::max(o.f32_tol, 1e-3);
  return ops;
}

Registrar linalg_registrar(linalg_ops());

}  // namespace
}  // namespace nabla::testing
