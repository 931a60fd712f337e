// Products composed of matmul (products.cpp): baddbmm and tensordot; and the small matrix ops
// composed of views and elementwise ops: diag, linalg.trace, linalg.cross.
#include "core/autocast.h"
#include "core/impl.h"
#include "core/linalg.h"
#include "core/linalg/common.h"
#include "core/trace.h"

namespace nabla {

namespace {
TensorOptions like(const Tensor& t) { return dtype(t.dtype()).device(t.device()); }
}  // namespace

Tensor diag(const Tensor& x, int64_t d) {
  NABLA_CHECK(ValueError, x.defined(), "diag: input tensor is undefined");
  NABLA_CHECK(ShapeError, x.dim() == 1 || x.dim() == 2, "diag: expected a 1-D or 2-D tensor, got ",
              internal::describe(x));
  if (x.dim() == 2) return x.diagonal(d, 0, 1).clone();
  const int64_t n = x.sizes()[0], a = std::abs(d);
  // x on the main diagonal of an (n, n) matrix, padded by |d| to put it on diagonal d.
  Tensor m = is_floating(x.dtype()) ? x.unsqueeze(1) * eye(n, std::nullopt, like(x))
                                    : where(eye(n, std::nullopt, like(x)) != 0, x.unsqueeze(1), zeros({1}, like(x)));
  if (a == 0) return m;
  return d > 0 ? pad(m, {a, 0, 0, a}) : pad(m, {0, a, a, 0});
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha) {
  if (auto ac = autocast_internal::cast<OpId::baddbmm>(input, b1, b2)) [[unlikely]]
    return baddbmm(ac[0], ac[1], ac[2], beta, alpha);
  NABLA_CHECK(ValueError, input.defined(), "baddbmm: input tensor is undefined");
  NABLA_CHECK(ShapeError, b1.defined() && b2.defined() && b1.dim() == 3 && b2.dim() == 3,
              "baddbmm: batch1 and batch2 must be 3-D tensors, got ", internal::describe(b1), " and ",
              internal::describe(b2));
  NABLA_CHECK(DTypeError, input.dtype() == b1.dtype(), "baddbmm: input dtype ", input.dtype(),
              " differs from batch1 dtype ", b1.dtype());
  // float16 / bfloat16 on the CPU: one GEMM call (CUDA and a tracer keep the composite).
  if (is_reduced_float(b1.dtype()) && b1.device().is_cpu() && !trace::active())
    return linalg_internal::add_product_lowp("baddbmm", input, b1, b2, beta.to_double(), alpha.to_double());
  Tensor p = bmm(b1, b2);
  Shape bs = broadcast_shapes(input.sizes(), p.sizes(), "baddbmm");
  NABLA_CHECK(ShapeError, bs == p.sizes(), "baddbmm: input of shape ", input.sizes(),
              " cannot be broadcast to the product's shape ", p.sizes());
  if (alpha.to_double() != 1) p = p * alpha;
  if (beta.to_double() == 0) return p;
  return beta.to_double() == 1 ? p + input : p + input * beta;
}

Tensor tensordot(const Tensor& a, const Tensor& b, IntArrayRef dims_a, IntArrayRef dims_b) {
  if (auto ac = autocast_internal::cast<OpId::tensordot>(a, b)) [[unlikely]]
    return tensordot(ac[0], ac[1], dims_a, dims_b);
  NABLA_CHECK(ValueError, a.defined() && b.defined(), "tensordot: input tensor is undefined");
  NABLA_CHECK(ShapeError, dims_a.size() == dims_b.size(), "tensordot: both dim lists must have the same length, got ",
              dims_a.size(), " and ", dims_b.size());
  std::vector<bool> ca(a.dim(), false), cb(b.dim(), false);
  Shape pa, pb, out_shape;
  int64_t contracted = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    int64_t da = wrap_dim(dims_a[i], a.dim(), "tensordot"), db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    NABLA_CHECK(ShapeError, !ca[da] && !cb[db], "tensordot: a dim appears twice in the dim lists");
    NABLA_CHECK(ShapeError, a.sizes()[da] == b.sizes()[db], "tensordot: contracted dimensions differ: a ", a.sizes(),
                " dim ", da, " vs b ", b.sizes(), " dim ", db);
    ca[da] = cb[db] = true;
    contracted *= a.sizes()[da];
  }
  Shape perm_a, perm_b;
  int64_t free_a = 1, free_b = 1;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (!ca[i]) {
      perm_a.push_back(i);
      out_shape.push_back(a.sizes()[i]);
      free_a *= a.sizes()[i];
    }
  for (int64_t d : dims_a) perm_a.push_back(wrap_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) perm_b.push_back(wrap_dim(d, b.dim(), "tensordot"));
  for (int64_t i = 0; i < b.dim(); ++i)
    if (!cb[i]) {
      perm_b.push_back(i);
      out_shape.push_back(b.sizes()[i]);
      free_b *= b.sizes()[i];
    }
  Tensor r = matmul(a.permute(perm_a).reshape({free_a, contracted}), b.permute(perm_b).reshape({contracted, free_b}));
  return r.reshape(out_shape);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  NABLA_CHECK(ValueError, a.defined() && b.defined(), "tensordot: input tensor is undefined");
  NABLA_CHECK(ShapeError, dims >= 0 && dims <= a.dim() && dims <= b.dim(), "tensordot: cannot contract ", dims,
              " dims of tensors of shapes ", a.sizes(), " and ", b.sizes());
  Shape da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

namespace linalg {

Tensor trace(const Tensor& x) {
  if (auto ac = autocast_internal::cast<OpId::linalg_trace>(x)) [[unlikely]]
    return trace(ac[0]);
  NABLA_CHECK(ValueError, x.defined(), "trace: input tensor is undefined");
  NABLA_CHECK(ShapeError, x.dim() == 2, "trace: expected a matrix, got ", internal::describe(x));
  return x.diagonal(0, 0, 1).sum();
}

Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::linalg_cross>(a, b)) [[unlikely]]
    return cross(ac[0], ac[1], dim);
  NABLA_CHECK(ValueError, a.defined() && b.defined(), "linalg.cross: input tensor is undefined");
  NABLA_CHECK(DTypeError, a.dtype() == b.dtype(), "linalg.cross: both inputs must have the same dtype, got ", a.dtype(),
              " and ", b.dtype());
  NABLA_CHECK(ShapeError, a.dim() == b.dim(), "linalg.cross: inputs must have the same number of dimensions, got ",
              a.sizes(), " and ", b.sizes());
  Shape s = broadcast_shapes(a.sizes(), b.sizes(), "linalg.cross");
  int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()), "linalg.cross");
  NABLA_CHECK(ShapeError,
              a.dim() > 0 && b.dim() > 0 && a.sizes()[wrap_dim(dim, a.dim(), "linalg.cross")] == 3 &&
                  b.sizes()[wrap_dim(dim, b.dim(), "linalg.cross")] == 3,
              "linalg.cross: inputs dimension ", dim, " must have length 3. Got ", a.sizes(), " and ", b.sizes());
  Tensor x = a.expand(s), y = b.expand(s);
  Tensor x0 = x.select(d, 0), x1 = x.select(d, 1), x2 = x.select(d, 2);
  Tensor y0 = y.select(d, 0), y1 = y.select(d, 1), y2 = y.select(d, 2);
  return stack({x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0}, d);
}

}  // namespace linalg

}  // namespace nabla
