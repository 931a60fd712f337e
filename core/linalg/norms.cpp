// torch.linalg's norms: vector_norm, matrix_norm, norm (core/linalg.h). Composites: the vector norms
// of nabla::norm, the matrix norms of sums and extremes, or of the singular values (svdvals: the
// nuclear and 2-norms, whose device path is svd's).
#include "core/linalg/common.h"

#include <cmath>
#include <utility>

namespace nabla {

using namespace linalg_internal;

namespace {

// Puts back the two reduced dims (sorted d0 < d1) of a matrix reduction when keepdim.
Tensor keep_dims(Tensor r, int64_t d0, int64_t d1, bool keepdim) {
  if (!keepdim) return r;
  return r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
}

// A with dims d0, d1 moved to the end (in that order).
Tensor to_last_two(const Tensor& A, int64_t d0, int64_t d1) {
  Shape perm;
  for (int64_t i = 0; i < A.dim(); ++i)
    if (i != d0 && i != d1) perm.push_back(i);
  perm.push_back(d0);
  perm.push_back(d1);
  return A.permute(perm);
}

std::pair<int64_t, int64_t> matrix_dims(const char* op, const Tensor& A, IntArrayRef dims) {
  NABLA_CHECK(ShapeError, dims.size() == 2, op, ": dim must be a 2-tuple, got ", dims.size(), " dims");
  NABLA_CHECK(ShapeError, A.dim() >= 2, op, ": the input must have at least 2 dimensions, got ", internal::describe(A));
  int64_t d0 = wrap_dim(dims[0], A.dim(), op), d1 = wrap_dim(dims[1], A.dim(), op);
  NABLA_CHECK(ShapeError, d0 != d1, op, ": dims must be different, got (", dims[0], ", ", dims[1], ")");
  return {d0, d1};
}

}  // namespace

namespace linalg {

Tensor vector_norm(const Tensor& x, double ord, IntArrayRef dims, bool keepdim) {
  if (auto ac = autocast_internal::cast<OpId::linalg_vector_norm>(x)) [[unlikely]]
    return vector_norm(ac[0], ord, dims, keepdim);
  NABLA_CHECK(ValueError, x.defined(), "linalg.vector_norm: input tensor is undefined");
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "linalg.vector_norm: expected a floating point input, got ",
              internal::describe(x));
  return nabla::norm(x, ord, dims, keepdim);
}

// The norms take float16/bfloat16 as PyTorch's: 'fro', 1 and inf reduce in float32 and round once;
// 'nuc' and 2 go through svdvals, which is on CPU autocast's float32 list (a float32 result inside a
// region) and refuses 16-bit inputs outside one, as PyTorch's CPU has no 16-bit SVD.

Tensor matrix_norm(const Tensor& A, std::string_view ord, IntArrayRef dims, bool keepdim) {
  if (auto ac = autocast_internal::cast<OpId::linalg_matrix_norm>(A)) [[unlikely]]
    return matrix_norm(ac[0], ord, dims, keepdim);
  check_float("linalg.matrix_norm", A, "A", true);
  auto [d0, d1] = matrix_dims("linalg.matrix_norm", A, dims);
  if (ord == "fro") return nabla::norm(A, 2, {d0, d1}, keepdim);
  NABLA_CHECK(ValueError, ord == "nuc", "linalg.matrix_norm: Order ", ord, " not supported.");
  return keep_dims(svdvals(to_last_two(A, d0, d1)).sum({-1}), d0, d1, keepdim);
}

Tensor matrix_norm(const Tensor& A, double ord, IntArrayRef dims, bool keepdim) {
  if (auto ac = autocast_internal::cast<OpId::linalg_matrix_norm>(A)) [[unlikely]]
    return matrix_norm(ac[0], ord, dims, keepdim);
  check_float("linalg.matrix_norm", A, "A", true);
  auto [d0, d1] = matrix_dims("linalg.matrix_norm", A, dims);
  const double a = std::abs(ord);
  NABLA_CHECK(ValueError, a == 1 || a == 2 || std::isinf(a), "linalg.matrix_norm: Order ", ord, " not supported.");
  if (a == 2) {
    Tensor s = svdvals(to_last_two(A, d0, d1));
    return keep_dims(ord > 0 ? amax(s, {-1}) : amin(s, {-1}), d0, d1, keepdim);
  }
  // 1: max over columns (d1) of the sums over rows (d0); inf: the other way round.
  int64_t sum_dim = a == 1 ? d0 : d1, max_dim = a == 1 ? d1 : d0;
  Tensor s = abs(A).sum({sum_dim}, true);
  Tensor r = ord > 0 ? amax(s, {max_dim}, true) : amin(s, {max_dim}, true);
  if (keepdim) return r;
  return r.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
}

Tensor norm(const Tensor& x, std::optional<double> ord, IntArrayRef dims, bool keepdim) {
  check_float("linalg.norm", x, "input", true);
  if (!ord) {
    NABLA_CHECK(ShapeError, dims.size() <= 2, "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ",
                dims.size());
    return nabla::norm(x, 2, dims, keepdim);
  }
  if (dims.empty()) {
    NABLA_CHECK(ShapeError, x.dim() == 1 || x.dim() == 2,
                "linalg.norm: If dim is not specified but ord is, the input must be "
                "1D or 2D. Got ",
                x.dim(), "D.");
    if (x.dim() == 1) return vector_norm(x, *ord, {}, keepdim);
    return matrix_norm(x, *ord, {0, 1}, keepdim);
  }
  NABLA_CHECK(ShapeError, dims.size() <= 2, "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ",
              dims.size());
  if (dims.size() == 1) return vector_norm(x, *ord, dims, keepdim);
  return matrix_norm(x, *ord, dims, keepdim);
}

Tensor norm(const Tensor& x, std::string_view ord, IntArrayRef dims, bool keepdim) {
  check_float("linalg.norm", x, "input", true);
  if (dims.empty()) {
    NABLA_CHECK(ShapeError, x.dim() == 2,
                "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ", x.dim(), "D.");
    return matrix_norm(x, ord, {0, 1}, keepdim);
  }
  return matrix_norm(x, ord, dims, keepdim);
}

}  // namespace linalg
}  // namespace nabla
