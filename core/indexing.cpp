// Copying shape ops (cat, stack, repeat, flip, roll, tril/triu, pad) and indexing ops
// (index_select, gather, scatter, masked_fill, masked_select, one_hot, embedding), with gradients.
#include <algorithm>
#include <numeric>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/indexing_ops.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;
using autograd::save;

namespace {

Tensor as_index(const Tensor& index, const char* op) {
  NABLA_CHECK(DTypeError, is_integral(index.dtype()), op, ": index tensor must be int64 (or int32), got ",
              index.dtype());
  return index.dtype() == DType::i64 ? index : index.to(DType::i64);
}

}  // namespace

// ---- cat / stack --------------------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::cat>(tensors)) [[unlikely]]
    return cat(ac.list(), dim);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::cat>(t, tensors, {.dim = dim}, [&] { return cat(tensors, dim); });
  NABLA_CHECK(ValueError, !tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor* ref = nullptr;
  DType dt = tensors[0].dtype();
  for (const Tensor& t : tensors) {
    NABLA_CHECK(ValueError, t.defined(), "cat: a tensor in the list is undefined");
    dt = promote_types(dt, t.dtype());
    // Legacy PyTorch behaviour: 1-D empty tensors are skipped.
    if (!ref && !(t.dim() == 1 && t.numel() == 0)) ref = &t;
  }
  if (!ref) ref = &tensors[0];
  NABLA_CHECK(ShapeError, ref->dim() > 0, "cat: zero-dimensional tensors cannot be concatenated (use stack)");
  int64_t d = wrap_dim(dim, ref->dim(), "cat");
  Shape shape = ref->sizes();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.numel() == 0 && ref->dim() != 1) continue;
    NABLA_CHECK(DeviceError, t.device() == ref->device(), "cat: tensor ", i, " is on ", t.device(),
                " but tensor 0 is on ", ref->device());
    bool ok = t.dim() == ref->dim();
    for (int64_t k = 0; ok && k < t.dim(); ++k) ok = k == d || t.sizes()[k] == shape[k];
    NABLA_CHECK(ShapeError, ok, "cat: tensor ", i, " has shape ", t.sizes(), " but tensor 0 has shape ", ref->sizes(),
                "; all dims except dim ", d, " must match");
    total += t.sizes()[d];
  }
  shape[d] = total;
  Tensor out = internal::make_empty(shape, dt, ref->device());
  std::vector<int64_t> offsets;
  int64_t off = 0;
  Backend& be = backend_for(out.device());
  for (const Tensor& t : tensors) {
    offsets.push_back(off);
    if (t.dim() == 1 && t.numel() == 0 && ref->dim() != 1) continue;
    int64_t n = t.sizes()[d];
    if (n > 0) {
      Shape strides = out.strides();
      Shape sizes = out.sizes();
      sizes[d] = n;
      be.copy(t, internal::make_view(out, sizes, strides, off * out.strides()[d]), false);
    }
    off += n;
  }
  bool grad = false;
  for (const Tensor& t : tensors) grad = grad || autograd::needs_grad(t);
  if (grad) {
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (const Tensor& t : tensors) {
      shapes.push_back(t.sizes());
      dtypes.push_back(t.dtype());
    }
    std::vector<Tensor> outs{out};
    autograd::record("CatBackward", tensors, outs, [shapes, dtypes, offsets, d](Node& n, GradList& grads) {
      GradList r(shapes.size());
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (!n.needs_input_grad(i)) continue;
        if (shapes[i].size() == 1 && shapes[i][0] == 0 && grads[0].dim() != 1) {
          r[i] = zeros(shapes[i], dtype(dtypes[i]).device(grads[0].device()));
          continue;
        }
        Tensor gi = grads[0].narrow(d, offsets[i], shapes[i][d]);
        r[i] = gi.dtype() == dtypes[i] ? gi : gi.to(dtypes[i]);
      }
      return r;
    });
    out = outs[0];
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (auto ac = autocast_internal::cast<OpId::stack>(tensors)) [[unlikely]]
    return stack(ac.list(), dim);
  NABLA_CHECK(ValueError, !tensors.empty(), "stack: expected a non-empty list of tensors");
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    NABLA_CHECK(ShapeError, tensors[i].sizes() == tensors[0].sizes(), "stack: tensor ", i, " has shape ",
                tensors[i].sizes(), " but tensor 0 has shape ", tensors[0].sizes(), "; all must match");
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

// ---- repeat, flip, roll, tril/triu, pad ---------------------------------------------------------
Tensor repeat(const Tensor& x, IntArrayRef reps) {
  NABLA_CHECK(ShapeError, static_cast<int64_t>(reps.size()) >= x.dim(), "repeat: got ", reps.size(),
              " repeat counts for a tensor with ", x.dim(), " dims; need at least as many");
  int64_t lead = static_cast<int64_t>(reps.size()) - x.dim();
  Shape xs(lead, 1);
  for (int64_t s : x.sizes()) xs.push_back(s);
  // (s0, s1, ...) -> view (1, s0, 1, s1, ...) -> expand (r0, s0, r1, s1, ...) -> (r0*s0, r1*s1, ...)
  Shape inter, expanded, final_shape;
  for (size_t i = 0; i < reps.size(); ++i) {
    NABLA_CHECK(ValueError, reps[i] >= 0, "repeat: repeat counts must be non-negative, got ", reps);
    inter.push_back(1);
    inter.push_back(xs[i]);
    expanded.push_back(reps[i]);
    expanded.push_back(xs[i]);
    final_shape.push_back(reps[i] * xs[i]);
  }
  return x.reshape(inter).expand(expanded).contiguous().view(final_shape);
}

Tensor flip(const Tensor& x, IntArrayRef dims) {
  Tensor r = x;
  internal::DimMask mask = internal::dims_mask(dims, x.dim(), "flip");
  if (dims.empty()) return x.clone();
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[d]) continue;
    int64_t n = x.sizes()[d];
    Tensor idx = arange(n - 1, -1, -1, dtype(DType::i64).device(x.device()));
    r = r.index_select(d, idx);
  }
  return x.dim() == 0 ? x.clone() : r;
}

Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  if (dims.empty()) {
    NABLA_CHECK(ValueError, shifts.size() == 1, "roll: without dims, give exactly one shift");
    return roll(x.reshape({-1}), shifts, {0}).view(x.sizes());
  }
  NABLA_CHECK(ValueError, shifts.size() == dims.size(), "roll: shifts ", shifts, " and dims ", dims,
              " must have the same length");
  Tensor r = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    int64_t n = x.sizes()[d];
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    r = cat({r.narrow(d, n - s, s), r.narrow(d, 0, n - s)}, d);
  }
  return r.is_same(x) ? x.clone() : r;
}

namespace {
Tensor tri_mask(const Tensor& x, int64_t k, bool lower) {
  int64_t r = x.sizes()[x.dim() - 2], c = x.sizes()[x.dim() - 1];
  Tensor rows = arange(r, dtype(DType::i64).device(x.device())).unsqueeze(1);
  Tensor cols = arange(c, dtype(DType::i64).device(x.device())).unsqueeze(0);
  Tensor diff = cols - rows;
  return lower ? le(diff, k) : ge(diff, k);
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) {
  NABLA_CHECK(ShapeError, x.dim() >= 2, "tril: needs a tensor with at least 2 dims, got shape ", x.sizes());
  return where(tri_mask(x, k, true), x, zeros({}, dtype(x.dtype()).device(x.device())));
}
Tensor triu(const Tensor& x, int64_t k) {
  NABLA_CHECK(ShapeError, x.dim() >= 2, "triu: needs a tensor with at least 2 dims, got shape ", x.sizes());
  return where(tri_mask(x, k, false), x, zeros({}, dtype(x.dtype()).device(x.device())));
}

Tensor pad(const Tensor& x, IntArrayRef padding, Scalar value) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::pad>(t, {x}, {.padding = trace::ints(padding), .value = value.to_double()},
                                    [&] { return pad(x, padding, value); });
  NABLA_CHECK(ValueError, padding.size() % 2 == 0 && static_cast<int64_t>(padding.size()) <= 2 * x.dim(),
              "pad: padding ", padding, " must have an even length of at most 2 * ", x.dim());
  // Negative padding crops first.
  Tensor src = x;
  Shape out_shape = x.sizes();
  std::vector<std::pair<int64_t, int64_t>> pads;  // (dim, left) for positive pads
  for (size_t i = 0; i < padding.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(i);
    int64_t lo = padding[2 * i], hi = padding[2 * i + 1];
    int64_t n = src.sizes()[d];
    int64_t crop_lo = lo < 0 ? -lo : 0, crop_hi = hi < 0 ? -hi : 0;
    NABLA_CHECK(ShapeError, crop_lo + crop_hi <= n, "pad: negative padding ", padding, " removes more than dim ", d,
                " holds (", n, ")");
    if (crop_lo || crop_hi) src = src.narrow(d, crop_lo, n - crop_lo - crop_hi);
    out_shape[d] = src.sizes()[d] + std::max<int64_t>(lo, 0) + std::max<int64_t>(hi, 0);
    pads.emplace_back(d, std::max<int64_t>(lo, 0));
  }
  Tensor out = full(out_shape, value, dtype(x.dtype()).device(x.device()));
  Shape sizes = src.sizes();
  int64_t offset = 0;
  for (auto [d, left] : pads) offset += left * out.strides()[d];
  backend_for(out.device()).copy(src, internal::make_view(out, sizes, out.strides(), offset), false);
  if (autograd::needs_grad(src))
    autograd::record("PadBackward", {&src}, {&out}, [pads, sizes](Node&, GradList& grads) {
      Tensor r = grads[0];
      for (auto [d, left] : pads) r = r.narrow(d, left, sizes[d]);
      return GradList{r};
    });
  return out;
}

// ---- index_select / index_add -------------------------------------------------------------------
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index_in) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::index_select>(t, {x, index_in}, {.dim = dim},
                                             [&] { return index_select(x, dim, index_in); });
  Tensor index = as_index(index_in, "index_select");
  NABLA_CHECK(ShapeError, index.dim() <= 1, "index_select: index must be 0-D or 1-D, got shape ", index.sizes());
  internal::check_same_device("index_select", {&x, &index});
  int64_t d = wrap_dim(dim, x.dim(), "index_select");
  Tensor idx = index.dim() == 0 ? index.reshape({1}) : index;
  Shape s = x.sizes();
  if (x.dim() > 0) s[d] = idx.numel();
  else NABLA_CHECK(ShapeError, idx.numel() <= 1, "index_select: a 0-dim tensor takes at most one index");
  Tensor out = internal::make_empty(s, x.dtype(), x.device());
  backend_for(x.device()).index_select(x, d, idx, out);
  if (autograd::needs_grad(x))
    autograd::record("IndexSelectBackward", {&x}, {&out}, [idx, d, xs = x.sizes()](Node&, GradList& grads) {
      Tensor z = zeros(xs, dtype(grads[0].dtype()).device(grads[0].device()));
      return GradList{index_add(z, d, idx, grads[0])};
    });
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::index_add>(t, {x, index_in, src}, {.dim = dim},
                                          [&] { return index_add(x, dim, index_in, src); });
  Tensor index = as_index(index_in, "index_add");
  int64_t d = wrap_dim(dim, x.dim(), "index_add");
  NABLA_CHECK(ShapeError, index.dim() <= 1, "index_add: index must be 1-D, got shape ", index.sizes());
  Shape expect = x.sizes();
  if (x.dim() > 0) expect[d] = index.numel();
  NABLA_CHECK(ShapeError, src.sizes() == expect || (x.dim() == 0 && src.numel() == index.numel()),
              "index_add: source of shape ", src.sizes(), " does not match ", expect, " (x ", x.sizes(), " with dim ",
              d, " of length ", index.numel(), ")");
  NABLA_CHECK(DTypeError, src.dtype() == x.dtype(), "index_add: source dtype ", src.dtype(), " differs from ",
              x.dtype());
  Tensor out = internal::make_empty(x.sizes(), x.dtype(), x.device());
  Backend& be = backend_for(x.device());
  be.copy(x, out, false);
  be.index_add(out, d, index.reshape({-1}), src);
  if (autograd::needs_grad(x, src))
    autograd::record("IndexAddBackward", {&x, &src}, {&out}, [index, d](Node& n, GradList& grads) {
      GradList r(2);
      if (n.needs_input_grad(0)) r[0] = grads[0];
      if (n.needs_input_grad(1))
        r[1] = grads[0].dim() == 0 ? grads[0].expand({index.numel()}) : grads[0].index_select(d, index.reshape({-1}));
      return r;
    });
  return out;
}

Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  internal::check_inplace(*this, "index_add_");
  if (!autograd::needs_grad(*this, src) && is_contiguous() && src.dtype() == dtype()) {
    int64_t d = wrap_dim(dim, this->dim(), "index_add_");
    Tensor idx = as_index(index, "index_add_");
    Shape expect = sizes();
    if (this->dim() > 0) expect[d] = idx.numel();
    NABLA_CHECK(ShapeError, src.sizes() == expect, "index_add_: source of shape ", src.sizes(), " does not match ",
                expect);
    // Rows are read and written at different positions: a source sharing our memory is read from a copy.
    bool shared = src.impl()->storage.get() == impl()->storage.get();
    backend_for(device()).index_add(*this, d, idx.reshape({-1}), shared ? src.clone() : src);
    internal::bump_version(*this);
    return *this;
  }
  return copy_(nabla::index_add(*this, dim, index, src));
}

// ---- gather / scatter ---------------------------------------------------------------------------
namespace {
void check_gather_shapes(const char* op, const Tensor& x, int64_t d, const Tensor& index, const Tensor* src) {
  NABLA_CHECK(ShapeError, index.dim() == x.dim(), op, ": index must have as many dims as the tensor (", x.dim(),
              "), got shape ", index.sizes());
  for (int64_t k = 0; k < x.dim(); ++k) {
    NABLA_CHECK(ShapeError, k == d || index.sizes()[k] <= x.sizes()[k], op, ": index of shape ", index.sizes(),
                " is larger than the tensor's shape ", x.sizes(), " at dim ", k);
    if (src)
      NABLA_CHECK(ShapeError, index.sizes()[k] <= src->sizes()[k], op, ": index of shape ", index.sizes(),
                  " is larger than the source's shape ", src->sizes(), " at dim ", k);
  }
}
}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index_in) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::gather>(t, {x, index_in}, {.dim = dim}, [&] { return gather(x, dim, index_in); });
  Tensor index = as_index(index_in, "gather");
  int64_t d = wrap_dim(dim, x.dim(), "gather");
  check_gather_shapes("gather", x, d, index, nullptr);
  internal::check_same_device("gather", {&x, &index});
  Tensor out = internal::make_empty(index.sizes(), x.dtype(), x.device());
  backend_for(x.device()).gather(x, d, index, out);
  if (autograd::needs_grad(x))
    autograd::record("GatherBackward", {&x}, {&out}, [index, d, xs = x.sizes()](Node&, GradList& grads) {
      return GradList{zeros(xs, dtype(grads[0].dtype()).device(grads[0].device())).scatter_add(d, index, grads[0])};
    });
  return out;
}

namespace {
// src restricted to index's shape (scatter reads only that corner of src).
Tensor src_window(const Tensor& src, const Tensor& index) {
  if (src.sizes() == index.sizes()) return src;
  Tensor r = src;
  for (int64_t k = 0; k < index.dim(); ++k) r = r.narrow(k, 0, index.sizes()[k]);
  return r;
}

Tensor scatter_impl(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in, bool accumulate) {
  const char* name = accumulate ? "scatter_add" : "scatter";
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, accumulate ? OpId::scatter_add : OpId::scatter, {x, index_in, src_in}, DimAttrs{dim},
                         [&] { return scatter_impl(x, dim, index_in, src_in, accumulate); });
  Tensor index = as_index(index_in, name);
  int64_t d = wrap_dim(dim, x.dim(), name);
  check_gather_shapes(name, x, d, index, &src_in);
  Tensor src = src_window(src_in, index);
  NABLA_CHECK(DTypeError, src.dtype() == x.dtype(), name, ": source dtype ", src.dtype(), " differs from the tensor's ",
              x.dtype());
  internal::check_same_device(name, {&x, &index, &src});
  Tensor out = internal::make_empty(x.sizes(), x.dtype(), x.device());
  Backend& be = backend_for(x.device());
  be.copy(x, out, false);
  be.scatter(out, d, index, src, accumulate);
  if (autograd::needs_grad(x, src))
    autograd::record(accumulate ? "ScatterAddBackward" : "ScatterBackward", {&x, &src}, {&out},
                     [index, d, accumulate](Node& n, GradList& grads) {
                       GradList r(2);
                       if (n.needs_input_grad(0))
                         r[0] = accumulate ? grads[0] : grads[0].scatter(d, index, 0);  // overwritten places get none
                       if (n.needs_input_grad(1)) r[1] = grads[0].gather(d, index);
                       return r;
                     });
  return out;
}
}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(x, dim, index, src, false);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  Tensor src = full({}, value, dtype(x.dtype()).device(x.device())).expand(index.sizes());
  return scatter_impl(x, dim, index, src, false);
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (auto ac = autocast_internal::cast<OpId::scatter_add>(x, index, src)) [[unlikely]]
    return scatter_add(ac[0], dim, ac[1], ac[2]);
  return scatter_impl(x, dim, index, src, true);
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  internal::check_inplace(*this, "scatter_");
  return copy_(scatter_impl(*this, dim, index, src, false));
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  internal::check_inplace(*this, "scatter_add_");
  if (!autograd::needs_grad(*this, src) && is_contiguous()) {
    Tensor idx = as_index(index, "scatter_add_");
    int64_t d = wrap_dim(dim, this->dim(), "scatter_add_");
    check_gather_shapes("scatter_add_", *this, d, idx, &src);
    NABLA_CHECK(DTypeError, src.dtype() == dtype(), "scatter_add_: source dtype ", src.dtype(), " differs from ",
                dtype());
    Tensor s = src_window(src, idx);
    bool shared = s.impl()->storage.get() == impl()->storage.get();  // read from a copy, as in index_add_
    backend_for(device()).scatter(*this, d, idx, shared ? s.clone() : s, true);
    internal::bump_version(*this);
    return *this;
  }
  return copy_(scatter_impl(*this, dim, index, src, true));
}

// ---- masks --------------------------------------------------------------------------------------
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  NABLA_CHECK(DTypeError, mask.dtype() == DType::boolean, "masked_fill: mask must be a bool tensor, got ",
              mask.dtype());
  Tensor out = where(mask, full({}, value, dtype(x.dtype()).device(x.device())), x);
  NABLA_CHECK(ShapeError, out.sizes() == x.sizes(), "masked_fill: mask of shape ", mask.sizes(),
              " does not broadcast to the tensor's shape ", x.sizes());
  return out;
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  NABLA_CHECK(ShapeError, value.dim() == 0, "masked_fill: value must be a 0-dim tensor, got shape ", value.sizes());
  NABLA_CHECK(DTypeError, mask.dtype() == DType::boolean, "masked_fill: mask must be a bool tensor, got ",
              mask.dtype());
  Tensor out = where(mask, value.to(x.dtype()), x);
  NABLA_CHECK(ShapeError, out.sizes() == x.sizes(), "masked_fill: mask of shape ", mask.sizes(),
              " does not broadcast to the tensor's shape ", x.sizes());
  return out;
}
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  internal::check_inplace(*this, "masked_fill_");
  return copy_(nabla::masked_fill(autograd::needs_grad(*this) ? clone() : *this, mask, value));
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Tensor& value) {
  internal::check_inplace(*this, "masked_fill_");
  return copy_(nabla::masked_fill(autograd::needs_grad(*this) ? clone() : *this, mask, value));
}

Tensor nonzero(const Tensor& x) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::nonzero>(t, {x}, {}, [&] { return nonzero(x); });
  if (x.is_cpu()) return backend_for(kCPU).nonzero(x);
  return backend_for(x.device()).nonzero(x);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  NABLA_CHECK(DTypeError, mask.dtype() == DType::boolean, "masked_select: mask must be a bool tensor, got ",
              mask.dtype());
  Shape s = broadcast_shapes(x.sizes(), mask.sizes(), "masked_select");
  Tensor xb = x.expand(s).reshape({-1});
  Tensor mb = mask.expand(s).reshape({-1});
  Tensor idx = nonzero(mb).view({-1});
  return xb.index_select(0, idx);
}

Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  NABLA_CHECK(DTypeError, labels.dtype() == DType::i64, "one_hot: labels must be int64 class indices, got ",
              labels.dtype());
  autograd::NoGradGuard ng;
  if (num_classes < 0) {
    NABLA_CHECK(ValueError, labels.numel() > 0, "one_hot: cannot infer num_classes from an empty tensor; pass it");
    num_classes = labels.max().item<int64_t>() + 1;
  }
  if (labels.numel() > 0) {
    int64_t lo = labels.min().item<int64_t>(), hi = labels.max().item<int64_t>();
    NABLA_CHECK(IndexError, lo >= 0 && hi < num_classes, "one_hot: class values must be in [0, ", num_classes,
                "), got [", lo, ", ", hi, "]");
  }
  Shape s = labels.sizes();
  s.push_back(num_classes);
  return zeros(s, dtype(DType::i64).device(labels.device())).scatter(-1, labels.unsqueeze(-1), 1);
}

Tensor embedding(const Tensor& weight, const Tensor& indices_in, std::optional<int64_t> padding_idx) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::embedding>(t, {weight, indices_in}, {},
                                          [&] { return embedding(weight, indices_in, padding_idx); });
  NABLA_CHECK(ShapeError, weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, dim), got shape ",
              weight.sizes());
  Tensor indices = as_index(indices_in, "embedding");
  int64_t n = weight.sizes()[0];
  Tensor flat = indices.reshape({-1});
  Tensor rows;
  {
    autograd::NoGradGuard ng;
    rows = weight.index_select(0, flat);
  }
  Shape s = indices.sizes();
  s.push_back(weight.sizes()[1]);
  Tensor out = rows.view(s);
  if (autograd::needs_grad(weight)) {
    int64_t pad = padding_idx ? (*padding_idx < 0 ? *padding_idx + n : *padding_idx) : -1;
    autograd::record("EmbeddingBackward", {&weight}, {&out}, [flat, pad, ws = weight.sizes()](Node&, GradList& grads) {
      Tensor g2 = grads[0].reshape({flat.numel(), ws[1]});
      if (pad >= 0) g2 = g2 * ne(flat, pad).unsqueeze(1).to(g2.dtype());  // the padding row learns nothing
      return GradList{index_add(zeros(ws, dtype(g2.dtype()).device(g2.device())), 0, flat, g2)};
    });
  }
  return out;
}

// ---- scatter_reduce -------------------------------------------------------------------------------
namespace {

enum class Reduce { sum, prod, mean, amax, amin };

// out[..., index[p], ...] = op(out[..., index[p], ...], src[p]) for every position p of index (dim d),
// on the host, in index order. out is a contiguous CPU tensor; index and src are read through their
// strides on CPU copies.
void combine_on_host(Tensor& out, int64_t d, const Tensor& index, const Tensor& src, Reduce r) {
  Tensor idx = index.to(kCPU).contiguous(), s = src.to(kCPU).contiguous();
  const int64_t n = idx.numel(), nd = idx.dim();
  const int64_t* ip = idx.data_ptr<int64_t>();
  Shape is = idx.sizes(), ss = s.sizes(), os = out.sizes();
  visit_compute_dtype(out.dtype(), "scatter_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* op = out.data_ptr<T>();
    const T* sp = s.data_ptr<T>();
    std::vector<int64_t> coord(static_cast<size_t>(nd), 0);
    for (int64_t p = 0; p < n; ++p) {
      int64_t o = 0, q = 0;
      for (int64_t k = 0; k < nd; ++k) {
        const int64_t c = k == d ? ip[p] : coord[static_cast<size_t>(k)];
        o = o * os[static_cast<size_t>(k)] + c;
        q = q * ss[static_cast<size_t>(k)] + coord[static_cast<size_t>(k)];
      }
      T& dst = op[o];
      const T v = sp[q];
      if (r == Reduce::prod) {
        dst = static_cast<T>(dst * v);
      } else if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v) || std::isnan(dst)) dst = std::numeric_limits<T>::quiet_NaN();  // NaN wins, as max()
        else dst = r == Reduce::amax ? std::max(dst, v) : std::min(dst, v);
      } else {
        dst = r == Reduce::amax ? std::max(dst, v) : std::min(dst, v);
      }
      for (int64_t k = nd - 1; k >= 0; --k) {  // next coordinate of index, row-major
        if (++coord[static_cast<size_t>(k)] < is[static_cast<size_t>(k)]) break;
        coord[static_cast<size_t>(k)] = 0;
      }
    }
  });
}

// The forward value of scatter_reduce for prod/amax/amin, without autograd.
Tensor reduce_value(const Tensor& x, int64_t d, const Tensor& index, const Tensor& src, Reduce r, bool include_self) {
  autograd::NoGradGuard ng;
  if (x.dtype() == kBFloat16 || x.dtype() == kFloat16)  // in float32, rounded once (amax/amin: exact)
    return reduce_value(x.to(kFloat32), d, index, src.to(kFloat32), r, include_self).to(x.dtype());
  Tensor out = x.to(kCPU).contiguous().clone();
  if (!include_self) {  // scattered-to positions start from the reduction's identity
    Scalar init = 1;
    if (r != Reduce::prod)
      init = is_floating(x.dtype())
                 ? Scalar(r == Reduce::amax ? -std::numeric_limits<double>::infinity()
                                            : std::numeric_limits<double>::infinity())
                 : visit_compute_dtype(x.dtype(), "scatter_reduce", [&](auto tag) {
                     using T = typename decltype(tag)::type;
                     return Scalar(static_cast<int64_t>(r == Reduce::amax ? std::numeric_limits<T>::lowest()
                                                                          : std::numeric_limits<T>::max()));
                   });
    out = out.scatter(d, index.to(kCPU), init).contiguous();
  }
  combine_on_host(out, d, index, src, r);
  return out.to(x.device());
}

}  // namespace

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in,
                      std::string_view reduce, bool include_self) {
  const char* op = "scatter_reduce";
  Reduce r;
  if (reduce == "sum") r = Reduce::sum;
  else if (reduce == "prod") r = Reduce::prod;
  else if (reduce == "mean") r = Reduce::mean;
  else if (reduce == "amax") r = Reduce::amax;
  else if (reduce == "amin") r = Reduce::amin;
  else
    throw ValueError(internal::str(op, ": reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got '", reduce, "'"));
  Tensor index = as_index(index_in, op);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  check_gather_shapes(op, x, d, index, &src_in);
  NABLA_CHECK(DTypeError, src_in.dtype() == x.dtype(), op, ": source dtype ", src_in.dtype(),
              " differs from the tensor's ", x.dtype());
  internal::check_same_device(op, {&x, &index, &src_in});
  if (index.numel() > 0) {
    autograd::NoGradGuard ng;
    const int64_t lo = index.min().item<int64_t>(), hi = index.max().item<int64_t>();
    NABLA_CHECK(IndexError, lo >= 0 && hi < x.size(d), op, ": index ", lo < 0 ? lo : hi, " is out of range for dim ", d,
                " of size ", x.size(d));
  }
  Tensor src = src_window(src_in, index);
  // Positions nothing is scattered to keep x; without include_self the others start empty.
  Tensor base = include_self ? x : x.scatter(d, index, 0);
  if (r == Reduce::sum) return scatter_add(base, d, index, src);
  if (r == Reduce::mean) {
    Tensor ones_src = ones_like(src, dtype(x.dtype()));
    Tensor count = scatter_add(include_self ? ones_like(x) : ones_like(x).scatter(d, index, 0), d, index, ones_src);
    count = where(count == 0, ones_like(count), count);  // untouched positions without include_self: x / 1
    Tensor total = scatter_add(base, d, index, src);
    return is_floating(x.dtype()) ? total / count : floor_divide(total, count);
  }
  Tensor out = reduce_value(x, d, index, src, r, include_self);
  if (!autograd::needs_grad(x, src)) return out;
  autograd::record(
      "ScatterReduceBackward", {&x, &src}, {&out},
      [sx = save(x), ssrc = save(src), sout = autograd::save_output(out), index, d, r, include_self](Node& n,
                                                                                                     GradList& grads) {
        const Tensor& g = grads[0];
        Tensor xs = sx.unpack(n), ss = ssrc.unpack(n), res = sout.unpack(n);
        GradList out_grads(2);
        if (r == Reduce::prod) {
          // PyTorch's: exclusive products through copies with the zeros masked to one.
          Tensor masked_self = xs.masked_fill(xs == 0, 1);
          Tensor masked_self_result = scatter_reduce(masked_self, d, index, ss, "prod", include_self);
          Tensor gs = g * masked_self_result / masked_self;
          out_grads[0] = include_self ? gs : gs.scatter(d, index, 0);
          Tensor src_zero = ss == 0;
          Tensor zeros_per = zeros_like(xs).scatter_add(d, index, src_zero.to(xs.dtype())).gather(d, index);
          Tensor single_zero = logical_and(src_zero, zeros_per == 1);
          Tensor masked_src_result = scatter_reduce(xs, d, index, ss.masked_fill(single_zero, 1), "prod", include_self);
          out_grads[1] = where(single_zero, (g * masked_src_result).gather(d, index),
                               (g * res).gather(d, index) / ss.masked_fill(src_zero, 1));
        } else {
          // amax / amin: shared evenly among the elements equal to the result.
          Tensor self_hit = xs == res;
          if (!include_self)
            self_hit = logical_and(self_hit, ones_like(xs, dtype(DType::boolean)).scatter(d, index, false));
          Tensor src_hit = ss == res.gather(d, index);
          Tensor count = self_hit.to(g.dtype()).scatter_add(d, index, src_hit.to(g.dtype()));
          Tensor share = g / where(count == 0, ones_like(count), count);
          out_grads[0] = where(self_hit, share, zeros_like(share));
          out_grads[1] = where(src_hit, share.gather(d, index), zeros_like(ss));
        }
        if (!n.needs_input_grad(0)) out_grads[0] = Tensor{};
        if (!n.needs_input_grad(1)) out_grads[1] = Tensor{};
        return out_grads;
      });
  return out;
}

// ---- take_along_dim / repeat_interleave ----------------------------------------------------------

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  Tensor idx = as_index(indices, "take_along_dim");
  if (!dim) return gather(x.reshape({-1}), 0, idx.reshape({-1}));
  NABLA_CHECK(ShapeError, x.dim() == idx.dim(), "take_along_dim: input of shape ", x.sizes(), " and indices of shape ",
              idx.sizes(), " must have the same number of dims");
  const int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  // Broadcast every dim but d; along d, x keeps its size and indices theirs.
  Shape xs = x.sizes(), is = idx.sizes();
  xs[static_cast<size_t>(d)] = 1;
  is[static_cast<size_t>(d)] = 1;
  Shape b = broadcast_shapes(xs, is, "take_along_dim");
  Shape bx = b, bi = b;
  bx[static_cast<size_t>(d)] = x.size(d);
  bi[static_cast<size_t>(d)] = idx.size(d);
  return gather(x.expand(bx), d, idx.expand(bi));
}

namespace {

// The index that repeats slice i of a dim counts[i] times.
Tensor repeat_index(const std::vector<int64_t>& counts, std::optional<int64_t> output_size, const Device& device) {
  std::vector<int64_t> idx;
  int64_t total = 0;
  for (int64_t c : counts) {
    NABLA_CHECK(ValueError, c >= 0, "repeat_interleave: repeats must be non-negative, got ", c);
    total += c;
  }
  NABLA_CHECK(ValueError, !output_size || *output_size == total, "repeat_interleave: output_size ",
              output_size.value_or(0), " differs from the sum of repeats ", total);
  idx.reserve(static_cast<size_t>(total));
  for (size_t i = 0; i < counts.size(); ++i)
    idx.insert(idx.end(), static_cast<size_t>(counts[i]), static_cast<int64_t>(i));
  return tensor(idx, dtype(DType::i64).device(device));
}

std::vector<int64_t> repeat_counts(const Tensor& repeats, int64_t n) {
  NABLA_CHECK(DTypeError, is_integral(repeats.dtype()) && repeats.dtype() != DType::boolean,
              "repeat_interleave: repeats must be an integer tensor, got ", repeats.dtype());
  NABLA_CHECK(ShapeError, repeats.dim() <= 1 && (repeats.numel() == n || repeats.numel() == 1),
              "repeat_interleave: repeats of shape ", repeats.sizes(), " must hold one count, or one per slice (", n,
              ")");
  Tensor r = repeats.to(kCPU, DType::i64).contiguous();
  const int64_t* p = r.data_ptr<int64_t>();
  if (r.numel() == 1) return std::vector<int64_t>(static_cast<size_t>(n), p[0]);
  return std::vector<int64_t>(p, p + n);
}

// x (flattened without dim) with slice i along the dim repeated counts(n)[i] times, n the dim's size.
template <class Counts>
Tensor repeat_slices(const Tensor& x, std::optional<int64_t> dim, std::optional<int64_t> output_size, Counts counts) {
  Tensor in = dim ? x : x.reshape({-1});
  const int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  NABLA_CHECK(ShapeError, in.dim() > 0,
              "repeat_interleave: expected a tensor with at least one dim along which to repeat");
  return in.index_select(d, repeat_index(counts(in.size(d)), output_size, x.device()));
}

}  // namespace

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  return repeat_slices(x, dim, output_size, [&](int64_t n) { return repeat_counts(repeats, n); });
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  return repeat_slices(x, dim, output_size,
                       [&](int64_t n) { return std::vector<int64_t>(static_cast<size_t>(n), repeats); });
}

Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size) {
  NABLA_CHECK(ShapeError, repeats.dim() == 1, "repeat_interleave: repeats must be 1-D, got shape ", repeats.sizes());
  return repeat_index(repeat_counts(repeats, repeats.numel()), output_size, repeats.device());
}

}  // namespace nabla
