// Reduction front-ends (sum, mean, max, var, norm, softmax, sort, ...) and their gradients.
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/spectral.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;
using autograd::save;
using autograd::save_output;

namespace {

struct Reduction {
  internal::DimMask mask;
  Shape keep_shape;   // keepdim shape
  Shape out_shape;    // requested shape
  int64_t count = 1;  // elements reduced into each output
};

Reduction plan(const Tensor& x, IntArrayRef dims, bool keepdim, const char* op) {
  Reduction r;
  r.mask = internal::dims_mask(dims, x.dim(), op);
  r.keep_shape = internal::reduced_shape(x.sizes(), r.mask, true);
  r.out_shape = internal::reduced_shape(x.sizes(), r.mask, keepdim);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (r.mask[d]) r.count *= x.sizes()[d];
  return r;
}

Shape mask_dims(const internal::DimMask& mask) {
  Shape d;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) d.push_back(static_cast<int64_t>(i));
  return d;
}

// Runs a reduce kernel into a keepdim-shaped output, then views it as requested (no autograd).
Tensor run_reduce(ReduceOp op, const Tensor& x, const Reduction& r, DType out_dtype) {
  Tensor out = internal::make_empty(r.keep_shape, out_dtype, x.device());
  Shape dims = mask_dims(r.mask);
  if (x.dim() == 0) dims.clear();
  backend_for(x.device()).reduce(op, x, dims, out);
  if (r.out_shape == r.keep_shape) return out;
  return internal::make_view(out, r.out_shape, contiguous_strides(r.out_shape), 0);
}

// Broadcasts a reduced gradient back over x's shape.
Tensor expand_grad(const Tensor& g, const Shape& keep_shape, const Shape& x_shape) {
  return g.reshape(keep_shape).expand(x_shape);
}

}  // namespace

Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype_opt) {
  if (auto ac = autocast_internal::cast<OpId::sum>(x)) [[unlikely]]
    return sum(ac[0], dims, keepdim, dtype_opt);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::sum>(t, {x}, {.dims = trace::ints(dims), .keepdim = keepdim},
                                    [&] { return sum(x, dims, keepdim, dtype_opt); });
  if (x.defined() && x.is_complex()) [[unlikely]] {
    // On the float pairs, over the same dims (wrapped against x's rank: the pairs add one).
    NABLA_CHECK(DTypeError, !dtype_opt || is_complex(*dtype_opt), "sum: cannot sum a ", x.dtype(),
                " tensor into dtype ", *dtype_opt);
    Shape d;
    if (dims.empty())
      for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
    for (int64_t v : dims) d.push_back(wrap_dim(v, x.dim(), "sum"));
    Tensor r = view_as_real(dtype_opt ? x.to(*dtype_opt) : x);
    return view_as_complex(d.empty() ? r.clone() : sum(r, d, keepdim).contiguous());
  }
  DType dt = dtype_opt.value_or(is_floating(x.dtype()) ? x.dtype() : DType::i64);
  Tensor xin = x.dtype() == dt ? x : x.to(dt);
  Reduction r = plan(xin, dims, keepdim, "sum");
  Tensor out = run_reduce(ReduceOp::sum, xin, r, dt);
  if (autograd::needs_grad(xin))
    autograd::record("SumBackward", {&xin}, {&out}, [keep = r.keep_shape, xs = xin.sizes()](Node&, GradList& grads) {
      return GradList{expand_grad(grads[0], keep, xs)};
    });
  return out;
}
Tensor sum(const Tensor& x, std::optional<DType> dtype) { return sum(x, IntArrayRef{}, false, dtype); }

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::mean>(t, {x}, {.dims = trace::ints(dims), .keepdim = keepdim},
                                     [&] { return mean(x, dims, keepdim); });
  NABLA_CHECK(DTypeError, is_floating(x.dtype()) || is_complex(x.dtype()),
              "mean: input dtype must be floating or complex, got ", x.dtype(), " (convert with .to(kFloat32) first)");
  // float16/bfloat16: summed and divided in float32, rounded once, as PyTorch 2.x (1.13 rounds the
  // sum and the count to the dtype first).
  if (is_reduced_float(x.dtype())) return mean(x.to(DType::f32), dims, keepdim).to(x.dtype());
  Reduction r = plan(x, dims, keepdim, "mean");
  Tensor s = sum(x, dims, keepdim);
  return r.count == 0 ? s / 0.0 : s / static_cast<double>(r.count);
}
Tensor mean(const Tensor& x) { return mean(x, IntArrayRef{}, false); }

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  if (auto ac = autocast_internal::cast<OpId::prod>(x)) [[unlikely]]
    return prod(ac[0], dim, keepdim);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::prod>(
        t, {x}, {.dims = x.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{dim}, .keepdim = keepdim},
        [&] { return prod(x, dim, keepdim); });
  DType dt = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  Tensor xin = x.dtype() == dt ? x : x.to(dt);
  int64_t d = wrap_dim(dim, xin.dim(), "prod");
  Reduction r = plan(xin, xin.dim() == 0 ? IntArrayRef{} : IntArrayRef(d), keepdim, "prod");
  Tensor out = run_reduce(ReduceOp::prod, xin, r, dt);
  if (autograd::needs_grad(xin)) {
    autograd::record("ProdBackward", {&xin}, {&out},
                     [sx = save(xin), keep = r.keep_shape, d](Node& n, GradList& grads) {
                       Tensor xv = sx.unpack(n);
                       if (xv.dim() == 0) return GradList{grads[0]};
                       if (xv.numel() == 0) return GradList{zeros_like(xv)};
                       // d prod / d x_i = product of the other elements, from exclusive cumulative products on both
                       // sides (exact with zeros, no division).
                       int64_t len = xv.sizes()[d];
                       Tensor one = ones_like(xv.narrow(d, 0, 1));
                       Tensor left = cat({one, cumprod(xv, d).narrow(d, 0, len - 1)}, d);
                       Tensor rx = xv.flip(d);
                       Tensor right = cat({one, cumprod(rx, d).narrow(d, 0, len - 1)}, d).flip(d);
                       return GradList{grads[0].reshape(keep) * left * right};
                     });
  }
  return out;
}
Tensor prod(const Tensor& x) {
  if (auto ac = autocast_internal::cast<OpId::prod>(x)) [[unlikely]]
    return prod(ac[0]);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::prod>(t, {x}, {}, [&] { return prod(x); });
  return prod(x.reshape({-1}), 0, false);
}

// ---- max / min ----------------------------------------------------------------------------------
namespace {
// Gradient of a full or multi-dim max/min: shared evenly among the tied maxima, as PyTorch.
Tensor extreme_all(ReduceOp op, const Tensor& x, IntArrayRef dims, bool keepdim, const char* name) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, op == ReduceOp::max ? OpId::amax : OpId::amin, {x}, ReduceAttrs{trace::ints(dims), keepdim},
                         [&] { return extreme_all(op, x, dims, keepdim, name); });
  // Reducing every dim of an empty tensor has no identity; reducing only non-empty dims of one is
  // fine (and gives an empty result), as in PyTorch.
  NABLA_CHECK(ValueError, x.numel() > 0 || !dims.empty(), name, ": cannot reduce an empty tensor of shape ", x.sizes(),
              " (the result has no identity)");
  Reduction r = plan(x, dims, keepdim, name);
  for (int64_t d = 0; d < x.dim(); ++d)
    NABLA_CHECK(IndexError, !r.mask[d] || x.sizes()[d] > 0, name, ": cannot reduce over the empty dim ", d,
                " of shape ", x.sizes());
  Tensor out = run_reduce(op, x, r, x.dtype());
  if (autograd::needs_grad(x)) {
    autograd::record(
        op == ReduceOp::max ? "MaxBackward" : "MinBackward", {&x}, {&out},
        [sx = save(x), sy = save_output(out), keep = r.keep_shape, mask = r.mask](Node& n, GradList& grads) {
          Tensor xv = sx.unpack(n);
          Tensor y = sy.unpack(n).reshape(keep);
          Tensor hit = eq(xv, y).to(grads[0].dtype());
          Shape dims = mask_dims(mask);
          Tensor count = xv.dim() == 0 ? hit : hit.sum(dims, true);
          return GradList{grads[0].reshape(keep) * hit / count};
        });
  }
  return out;
}

// Gradient of values picked at `indices` along dim: scattered back into zeros.
Tensor select_backward(const Tensor& g, int64_t dim, const Tensor& indices, const Shape& x_shape, bool keepdim) {
  Tensor gk = keepdim ? g : g.unsqueeze(dim);
  Tensor ik = keepdim ? indices : indices.unsqueeze(dim);
  return zeros(x_shape, dtype(g.dtype()).device(g.device())).scatter(dim, ik, gk);
}

std::tuple<Tensor, Tensor> extreme_dim(ReduceOp op, const Tensor& x, int64_t dim, bool keepdim, const char* name) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, op == ReduceOp::max ? OpId::max_dim : OpId::min_dim, {x}, DimKeepAttrs{dim, keepdim},
                         [&] { return extreme_dim(op, x, dim, keepdim, name); });
  int64_t d = wrap_dim(dim, x.dim(), name);
  Reduction r = plan(x, x.dim() == 0 ? IntArrayRef{} : IntArrayRef(d), true, name);
  NABLA_CHECK(IndexError, x.dim() == 0 || x.sizes()[d] > 0, name, ": cannot reduce over the empty dim ", d,
              " of shape ", x.sizes());
  Tensor values = internal::make_empty(r.keep_shape, x.dtype(), x.device());
  Tensor indices = internal::make_empty(r.keep_shape, DType::i64, x.device());
  backend_for(x.device()).arg_reduce(op, x, x.dim() == 0 ? 0 : d, values, indices);
  if (!keepdim && x.dim() > 0) {
    Shape s = internal::reduced_shape(x.sizes(), r.mask, false);
    values = internal::make_view(values, s, contiguous_strides(s), 0);
    indices = internal::make_view(indices, s, contiguous_strides(s), 0);
  }
  if (autograd::needs_grad(x)) {
    autograd::record(op == ReduceOp::max ? "MaxBackward" : "MinBackward", {&x}, {&values},
                     [idx = indices, d, xs = x.sizes(), keepdim](Node&, GradList& grads) {
                       if (xs.empty()) return GradList{grads[0]};
                       return GradList{select_backward(grads[0], d, idx, xs, keepdim)};
                     });
  }
  return {values, indices};
}
}  // namespace

Tensor max(const Tensor& x) { return extreme_all(ReduceOp::max, x, {}, false, "max"); }
Tensor min(const Tensor& x) { return extreme_all(ReduceOp::min, x, {}, false, "min"); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(ReduceOp::max, x, dim, keepdim, "max");
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(ReduceOp::min, x, dim, keepdim, "min");
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_all(ReduceOp::max, x, dims, keepdim, "amax");
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_all(ReduceOp::min, x, dims, keepdim, "amin");
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  autograd::NoGradGuard ng;
  if (!dim) {
    Tensor r = std::get<1>(max(x.reshape({-1}), 0, false));
    return keepdim ? r.reshape(Shape(x.dim(), 1)) : r;
  }
  return std::get<1>(max(x, *dim, keepdim));
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  autograd::NoGradGuard ng;
  if (!dim) {
    Tensor r = std::get<1>(min(x.reshape({-1}), 0, false));
    return keepdim ? r.reshape(Shape(x.dim(), 1)) : r;
  }
  return std::get<1>(min(x, *dim, keepdim));
}

// ---- statistics ---------------------------------------------------------------------------------
Tensor var(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "var: input dtype must be floating, got ", x.dtype());
  // float16/bfloat16: every step in float32, rounded once (as PyTorch's float32 accumulation).
  if (is_reduced_float(x.dtype())) return var(x.to(DType::f32), dims, correction, keepdim).to(x.dtype());
  Reduction r = plan(x, dims, keepdim, "var");
  Tensor m = mean(x, dims, true);
  Tensor d = x - m;
  Tensor s = sum(d * d, dims, keepdim);
  double denom = static_cast<double>(r.count - correction);
  return s / (denom > 0 ? denom : 0.0);
}
Tensor std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  Tensor v = var(x, dims, correction, keepdim);
  Tensor out;
  {
    autograd::NoGradGuard ng;
    out = sqrt(v);
  }
  // sqrt's gradient g / (2 std), but 0 where std is 0 (all values equal), as PyTorch: there the
  // variance's own gradient is 0 and the product would be 0 * inf = NaN.
  if (autograd::needs_grad(v))
    autograd::record("StdBackward", {&v}, {&out}, [sy = save_output(out)](Node& n, GradList& grads) {
      Tensor y = sy.unpack(n);
      return GradList{where(eq(y, 0), zeros_like(grads[0]), grads[0] / (y * 2))};
    });
  return out;
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

Tensor norm(const Tensor& x, double p, IntArrayRef dims, bool keepdim) {
  if (auto ac = autocast_internal::cast<OpId::norm>(x)) [[unlikely]]
    return norm(ac[0], p, dims, keepdim);
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "norm: input dtype must be floating, got ", x.dtype());
  // float16/bfloat16: every step in float32, rounded once (as PyTorch's float32 accumulation).
  if (is_reduced_float(x.dtype())) return norm(x.to(DType::f32), p, dims, keepdim).to(x.dtype());
  if (std::isinf(p)) return p > 0 ? amax(abs(x), dims, keepdim) : amin(abs(x), dims, keepdim);
  if (p == 1) return sum(abs(x), dims, keepdim);
  if (p == 0) return sum(ne(x, 0).to(x.dtype()), dims, keepdim);
  Reduction r = plan(x, dims, keepdim, "norm");
  Tensor out;
  {
    autograd::NoGradGuard ng;
    out = p == 2 ? sqrt(sum(x * x, dims, keepdim)) : pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
  }
  if (autograd::needs_grad(x)) {
    // d||x||_p / dx = x |x|^(p-2) / ||x||^(p-1); zero where the norm is zero (as PyTorch).
    autograd::record("NormBackward", {&x}, {&out},
                     [sx = save(x), sy = save_output(out), keep = r.keep_shape, p](Node& n, GradList& grads) {
                       Tensor xv = sx.unpack(n);
                       Tensor y = sy.unpack(n).reshape(keep);
                       Tensor gk = grads[0].reshape(keep);
                       Tensor scaled = p == 2 ? xv / y : xv * pow(abs(xv), p - 2) / pow(y, p - 1);
                       Tensor gx = gk * scaled;
                       return GradList{where(eq(y, 0), zeros_like(gx), gx)};
                     });
  }
  return out;
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  if (auto ac = autocast_internal::cast<OpId::logsumexp>(x)) [[unlikely]]
    return logsumexp(ac[0], dims, keepdim);
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "logsumexp: input dtype must be floating, got ", x.dtype());
  // float16/bfloat16: every step in float32, rounded once (as PyTorch's float32 accumulation).
  if (is_reduced_float(x.dtype())) return logsumexp(x.to(DType::f32), dims, keepdim).to(x.dtype());
  Reduction r = plan(x, dims, keepdim, "logsumexp");
  if (x.numel() == 0) return log(sum(exp(x), dims, keepdim));
  Tensor m;
  {
    autograd::NoGradGuard ng;
    m = amax(x, dims, true);
    m = where(isinf(m), zeros_like(m), m);  // all -inf (or +inf) slices: keep exp finite
  }
  Tensor s = log(sum(exp(x - m), dims, true)) + m;
  return keepdim ? s : s.reshape(r.out_shape);
}

Tensor any(const Tensor& x) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::any>(t, {x}, {}, [&] { return any(x); });
  return run_reduce(ReduceOp::any, x, plan(x, {}, false, "any"), DType::boolean);
}
Tensor all(const Tensor& x) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::all>(t, {x}, {}, [&] { return all(x); });
  return run_reduce(ReduceOp::all, x, plan(x, {}, false, "all"), DType::boolean);
}
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::any>(t, {x}, {.dims = {dim}, .keepdim = keepdim}, [&] { return any(x, dim, keepdim); });
  return run_reduce(ReduceOp::any, x, plan(x, dim, keepdim, "any"), DType::boolean);
}
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::all>(t, {x}, {.dims = {dim}, .keepdim = keepdim}, [&] { return all(x, dim, keepdim); });
  return run_reduce(ReduceOp::all, x, plan(x, dim, keepdim, "all"), DType::boolean);
}
Tensor count_nonzero(const Tensor& x, IntArrayRef dims) {
  autograd::NoGradGuard ng;
  return sum(ne(x, 0), dims, false, DType::i64);
}

// ---- scans --------------------------------------------------------------------------------------
Tensor cumsum(const Tensor& x, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::cumsum>(x)) [[unlikely]]
    return cumsum(ac[0], dim);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::cumsum>(t, {x}, {.dim = dim}, [&] { return cumsum(x, dim); });
  int64_t d = wrap_dim(dim, x.dim(), "cumsum");
  DType dt = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  Tensor xin = x.dtype() == dt ? x : x.to(dt);
  Tensor out = internal::make_empty(xin.sizes(), dt, xin.device());
  backend_for(xin.device()).scan(ScanOp::cumsum, xin, d, out);
  if (autograd::needs_grad(xin))
    autograd::record("CumsumBackward", {&xin}, {&out}, [d](Node&, GradList& grads) {
      if (grads[0].dim() == 0) return GradList{grads[0]};
      return GradList{grads[0].flip(d).cumsum(d).flip(d)};
    });
  return out;
}

Tensor cumprod(const Tensor& x, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::cumprod>(x)) [[unlikely]]
    return cumprod(ac[0], dim);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::cumprod>(t, {x}, {.dim = dim}, [&] { return cumprod(x, dim); });
  int64_t d = wrap_dim(dim, x.dim(), "cumprod");
  DType dt = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  Tensor xin = x.dtype() == dt ? x : x.to(dt);
  Tensor out = internal::make_empty(xin.sizes(), dt, xin.device());
  backend_for(xin.device()).scan(ScanOp::cumprod, xin, d, out);
  if (autograd::needs_grad(xin))
    autograd::record("CumprodBackward", {&xin}, {&out},
                     [sx = save(xin), sy = save_output(out), d](Node& n, GradList& grads) {
                       Tensor xv = sx.unpack(n), y = sy.unpack(n);
                       if (grads[0].dim() == 0) return GradList{grads[0]};
                       bool has_zero;
                       {
                         autograd::NoGradGuard ng;
                         has_zero = any(eq(xv, 0)).item<bool>();
                       }
                       if (!has_zero) {
                         // dx_j = sum_{i >= j} g_i y_i / x_j
                         Tensor gy = grads[0] * y;
                         return GradList{gy.flip(d).cumsum(d).flip(d) / xv};
                       }
                       // Exact with zeros: dx_j = L_j * S_j, where L_j = prod_{k<j} x_k and
                       // S_j = g_j + x_{j+1} S_{j+1} (a reverse scan, done slice by slice).
                       int64_t len = xv.sizes()[d];
                       std::vector<Tensor> s(static_cast<size_t>(len));
                       s[len - 1] = grads[0].narrow(d, len - 1, 1);
                       for (int64_t j = len - 2; j >= 0; --j)
                         s[j] = grads[0].narrow(d, j, 1) + xv.narrow(d, j + 1, 1) * s[j + 1];
                       Tensor left = cat({ones_like(xv.narrow(d, 0, 1)), cumprod(xv, d).narrow(d, 0, len - 1)}, d);
                       return GradList{left * cat(s, d)};
                     });
  return out;
}

// ---- sort / topk --------------------------------------------------------------------------------
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::sort>(t, {x}, {.dim = dim, .descending = descending},
                                     [&] { return sort(x, dim, descending); });
  int64_t d = wrap_dim(dim, x.dim(), "sort");
  Tensor values = internal::make_empty(x.sizes(), x.dtype(), x.device());
  Tensor indices = internal::make_empty(x.sizes(), DType::i64, x.device());
  backend_for(x.device()).sort(x, d, descending, values, indices);
  if (autograd::needs_grad(x))
    autograd::record("SortBackward", {&x}, {&values}, [idx = indices, d, xs = x.sizes()](Node&, GradList& grads) {
      if (xs.empty()) return GradList{grads[0]};
      return GradList{select_backward(grads[0], d, idx, xs, true)};
    });
  return {values, indices};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  autograd::NoGradGuard ng;
  return std::get<1>(sort(x, dim, descending));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::topk>(t, {x}, {.k = k, .dim = dim, .largest = largest, .sorted = sorted},
                                     [&] { return topk(x, k, dim, largest, sorted); });
  (void)sorted;  // results are always sorted
  int64_t d = wrap_dim(dim, x.dim(), "topk");
  int64_t n = x.dim() == 0 ? 1 : x.sizes()[d];
  NABLA_CHECK(IndexError, k >= 0 && k <= n, "topk: k (", k, ") is out of range for dim ", d, " of size ", n);
  Shape s = x.sizes();
  if (x.dim() > 0) s[d] = k;
  Tensor values = internal::make_empty(s, x.dtype(), x.device());
  Tensor indices = internal::make_empty(s, DType::i64, x.device());
  backend_for(x.device()).topk(x, k, d, largest, values, indices);
  if (autograd::needs_grad(x))
    autograd::record("TopkBackward", {&x}, {&values}, [idx = indices, d, xs = x.sizes()](Node&, GradList& grads) {
      if (xs.empty()) return GradList{grads[0]};
      return GradList{select_backward(grads[0], d, idx, xs, true)};
    });
  return {values, indices};
}

// ---- softmax ------------------------------------------------------------------------------------
namespace {
Tensor softmax_impl(const Tensor& x_in, int64_t dim, bool log) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, log ? OpId::log_softmax : OpId::softmax, {x_in}, DimAttrs{dim},
                         [&] { return softmax_impl(x_in, dim, log); });
  const char* name = log ? "log_softmax" : "softmax";
  Tensor x = is_floating(x_in.dtype()) ? x_in : x_in.to(DType::f32);
  int64_t d = wrap_dim(dim, x.dim(), name);
  Tensor out = internal::make_empty(x.sizes(), x.dtype(), x.device());
  backend_for(x.device()).softmax(x, d, log, out);
  if (autograd::needs_grad(x)) {
    autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {&x}, {&out},
                     [sy = save_output(out), d, log](Node& n, GradList& grads) {
                       Tensor y = sy.unpack(n);
                       const Tensor& gy = grads[0];
                       if (autograd::GradMode::is_enabled()) {
                         // Building a graph (create_graph): differentiable formulas.
                         if (y.dim() == 0) return GradList{zeros_like(gy)};
                         if (log) return GradList{gy - exp(y) * gy.sum(d, true)};
                         return GradList{y * (gy - (gy * y).sum(d, true))};
                       }
                       Tensor gx = internal::make_empty(y.sizes(), y.dtype(), y.device());
                       backend_for(y.device()).softmax_backward(gy, y, y.dim() == 0 ? 0 : d, log, gx);
                       return GradList{gx};
                     });
  }
  return out;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::softmax>(x)) [[unlikely]]
    return softmax(ac[0], dim);
  return softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::log_softmax>(x)) [[unlikely]]
    return log_softmax(ac[0], dim);
  return softmax_impl(x, dim, true);
}

}  // namespace nabla
