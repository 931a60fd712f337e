// View ops: new layouts over the same storage, and their gradients.
//
// Shape-only views (view, permute, expand, ...) send the gradient back through the inverse
// reshaping. Views that select part of a tensor (narrow, slice, select, diagonal, as_strided,
// unfold) send it back with view_scatter: zeros of the input's shape with the gradient written into
// the same view of them (added up where the view reaches an element more than once). view_scatter
// is itself differentiable (its backward applies the view again), so second derivatives flow
// through views too.
#include <algorithm>
#include <functional>
#include <numeric>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/indexing_ops.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;

namespace {

using ViewFn = std::function<Tensor(const Tensor&)>;

// Creates a view of x with a new layout, remembering the base (and the base's history at this
// point) for autograd's in-place handling: writes into views, and views whose base was later
// modified in place with autograd recording it (their history is rebuilt then).
Tensor make_view_of(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  Tensor v = internal::make_view(x, std::move(sizes), std::move(strides), offset);
  TensorImpl* xi = x.impl();
  TensorImpl* vi = v.impl();
  vi->view_base = xi->view_base ? xi->view_base : x.impl_ptr();
  vi->view_base_grad_fn = vi->view_base->grad_fn.get();
  vi->view_tracks_base = autograd::GradMode::is_enabled();  // views made under no_grad stay out of the graph
  return v;
}

// Whether two elements of a layout may share a memory location (a stride 0, unfold's overlapping
// windows, some as_strided views): with the dims of more than one element ordered by stride, each
// stride must exceed the farthest offset the dims of smaller strides reach.
bool may_overlap(IntList sizes, IntList strides) {
  SmallVector<std::pair<int64_t, int64_t>, 6> dims;  // (stride, size)
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return false;
    if (sizes[i] > 1) dims.push_back({strides[i], sizes[i]});
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += (size - 1) * stride;
  }
  return false;
}

// zeros(shape) with `g` written into view_fn(zeros): the gradient of a view that selects elements.
// Where the view reaches an element more than once, the gradients of its copies add up.
Tensor view_scatter(const Tensor& g, const Shape& shape, const ViewFn& view_fn) {
  Tensor out = zeros(shape, dtype(g.dtype()).device(g.device()));
  {
    autograd::NoGradGuard ng;
    Tensor dst = view_fn(out);
    if (may_overlap(dst.sizes(), dst.strides())) {
      // The flat position in `out` of each element of the view, as the same view of 0..n-1.
      Tensor pos = view_fn(arange(out.numel(), dtype(kInt64).device(g.device())).view(shape));
      out.view({-1}).index_add_(0, pos.reshape({-1}), g.reshape({-1}));
    } else {
      backend_for(g.device()).copy(g, dst, false);
    }
  }
  if (autograd::needs_grad(g))
    autograd::record("ViewScatterBackward", {&g}, {&out},
                     [view_fn](Node&, GradList& grads) { return GradList{view_fn(grads[0])}; });
  return out;
}

// Records the backward of a view that selects elements of x.
void record_select_view(const char* name, const Tensor& x, Tensor& out, ViewFn view_fn) {
  if (!autograd::needs_grad(x)) return;
  autograd::record(name, {&x}, {&out}, [shape = x.sizes(), view_fn = std::move(view_fn)](Node&, GradList& grads) {
    return GradList{view_scatter(grads[0], shape, view_fn)};
  });
}

// Records the backward of views that cut x into pieces along one dim (split, unbind): one node for
// all pieces, whose backward joins their gradients with one cat/stack (the engine hands it zeros for
// pieces without a gradient). A node per piece would scatter each gradient into zeros of x's whole
// shape and sum those: work of pieces * x.numel(), quadratic for a loop over the time steps of a
// sequence.
template <class Join>
void record_pieces(const char* name, const Tensor& x, std::vector<Tensor>& pieces, Join join) {
  if (pieces.empty() || !autograd::needs_grad(x)) return;
  autograd::record(name, std::vector<Tensor>{x}, pieces,
                   [join](Node&, GradList& grads) { return GradList{join(grads)}; });
}

// Strides for viewing a tensor of `sizes`/`strides` as `shape` without copying, if possible
// (PyTorch's computeStride): each run of merged input dims must be contiguous in memory.
std::optional<Shape> view_strides(IntList sizes, IntList strides, IntList shape) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0 || sizes.empty()) return contiguous_strides(shape);
  Shape out(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();  // stride of the innermost dim of the current chunk
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    // At the end of a chunk of input dims that are contiguous with each other, lay the view's
    // dims over it; they must cover it exactly.
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// Resolves a single -1 in `shape` against numel; checks the element count.
Shape infer_shape(IntArrayRef shape, int64_t numel, const char* op, IntList from) {
  Shape out(shape.begin(), shape.end());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      NABLA_CHECK(ShapeError, infer < 0, op, ": only one dimension can be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      NABLA_CHECK(ShapeError, out[i] >= 0, op, ": invalid size ", out[i], " in shape ", shape);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    NABLA_CHECK(ShapeError, known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of shape ",
                from, " (", numel, " elements)");
    out[infer] = numel / known;
  } else {
    NABLA_CHECK(ShapeError, known == numel, op, ": shape ", shape, " is invalid for input of shape ", from, " (", numel,
                " elements)");
  }
  return out;
}

}  // namespace

Tensor view(const Tensor& x, IntArrayRef shape_in) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::view>(t, {x}, {.shape = trace::ints(shape_in)}, [&] { return view(x, shape_in); });
  Shape shape = infer_shape(shape_in, x.numel(), "view", x.sizes());
  auto strides = view_strides(x.sizes(), x.strides(), shape);
  NABLA_CHECK(ShapeError, strides.has_value(), "view: cannot view a tensor of shape ", x.sizes(), " and strides ",
              x.strides(), " as ", shape,
              " without copying (its memory is not laid out for it); use reshape() instead");
  Tensor out = make_view_of(x, shape, std::move(*strides), x.storage_offset());
  if (autograd::needs_grad(x))
    autograd::record("ViewBackward", {&x}, {&out},
                     [s = x.sizes()](Node&, GradList& grads) { return GradList{grads[0].reshape(s)}; });
  return out;
}

Tensor reshape(const Tensor& x, IntArrayRef shape_in) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::reshape>(t, {x}, {.shape = trace::ints(shape_in)}, [&] { return reshape(x, shape_in); });
  Shape shape = infer_shape(shape_in, x.numel(), "reshape", x.sizes());
  if (view_strides(x.sizes(), x.strides(), shape)) return view(x, shape);
  return view(x.clone(), shape);
}

Tensor permute(const Tensor& x, IntArrayRef dims) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::permute>(t, {x}, {.dims = trace::ints(dims)}, [&] { return permute(x, dims); });
  int64_t nd = x.dim();
  NABLA_CHECK(ShapeError, static_cast<int64_t>(dims.size()) == nd, "permute: expected ", nd,
              " dims for a tensor of shape ", x.sizes(), ", got ", dims);
  Shape sizes(nd), strides(nd), inverse(nd);
  SmallVector<bool, 8> seen(static_cast<size_t>(nd), false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(dims[i], nd, "permute");
    NABLA_CHECK(ValueError, !seen[d], "permute: dim ", dims[i], " repeats in ", dims);
    seen[d] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
    inverse[d] = i;
  }
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), x.storage_offset());
  if (autograd::needs_grad(x))
    autograd::record("PermuteBackward", {&x}, {&out},
                     [inverse](Node&, GradList& grads) { return GradList{grads[0].permute(inverse)}; });
  return out;
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  int64_t nd = x.dim();
  if (nd == 0) return x.view({});
  d0 = wrap_dim(d0, nd, "transpose");
  d1 = wrap_dim(d1, nd, "transpose");
  Shape perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[d0], perm[d1]);
  return permute(x, perm);
}

Tensor squeeze(const Tensor& x) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::squeeze>(t, {x}, {}, [&] { return squeeze(x); });
  Shape s;
  for (int64_t v : x.sizes())
    if (v != 1) s.push_back(v);
  return x.dim() == static_cast<int64_t>(s.size()) ? x.view(x.sizes()) : x.view(s);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::squeeze>(t, {x}, {.dim = dim}, [&] { return squeeze(x, dim); });
  if (x.dim() == 0) return x.view({});
  int64_t d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.sizes()[d] != 1) return x.view(x.sizes());
  Shape s = x.sizes();
  s.erase(s.begin() + d);
  return x.view(s);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::unsqueeze>(t, {x}, {.dim = dim}, [&] { return unsqueeze(x, dim); });
  int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t st = d < x.dim() ? sizes[d] * strides[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), x.storage_offset());
  if (autograd::needs_grad(x))
    autograd::record("UnsqueezeBackward", {&x}, {&out},
                     [d](Node&, GradList& grads) { return GradList{grads[0].squeeze(d)}; });
  return out;
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::flatten>(t, {x}, {.start = start, .end = end}, [&] { return flatten(x, start, end); });
  if (x.dim() == 0) return x.reshape({1});
  start = wrap_dim(start, x.dim(), "flatten");
  end = wrap_dim(end, x.dim(), "flatten");
  NABLA_CHECK(ValueError, start <= end, "flatten: start_dim (", start, ") must not come after end_dim (", end, ")");
  Shape s;
  for (int64_t i = 0; i < start; ++i) s.push_back(x.sizes()[i]);
  int64_t m = 1;
  for (int64_t i = start; i <= end; ++i) m *= x.sizes()[i];
  s.push_back(m);
  for (int64_t i = end + 1; i < x.dim(); ++i) s.push_back(x.sizes()[i]);
  return x.reshape(s);
}

Tensor unflatten(const Tensor& x, int64_t dim, IntArrayRef sizes) {
  int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  Shape inner = infer_shape(sizes, x.sizes()[d], "unflatten", x.sizes());
  Shape s;
  for (int64_t i = 0; i < d; ++i) s.push_back(x.sizes()[i]);
  for (int64_t v : inner) s.push_back(v);
  for (int64_t i = d + 1; i < x.dim(); ++i) s.push_back(x.sizes()[i]);
  return x.view(s);
}

Tensor expand(const Tensor& x, IntArrayRef shape) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::expand>(t, {x}, {.shape = trace::ints(shape)}, [&] { return expand(x, shape); });
  int64_t nd = static_cast<int64_t>(shape.size()), xd = x.dim();
  NABLA_CHECK(ShapeError, nd >= xd, "expand: the target shape ", shape, " has fewer dims than the tensor's ",
              x.sizes());
  Shape sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t xi = i - (nd - xd);
    int64_t want = shape[i];
    if (xi >= 0) {
      int64_t have = x.sizes()[xi];
      if (want == -1) want = have;
      NABLA_CHECK(ShapeError, have == want || have == 1, "expand: cannot expand a tensor of shape ", x.sizes(), " to ",
                  shape, " (dim ", i, ": ", have, " -> ", want, "; only size-1 dims can grow)");
      sizes[i] = want;
      strides[i] = have == want ? x.strides()[xi] : 0;
    } else {
      NABLA_CHECK(ShapeError, want >= 0, "expand: -1 is not allowed for the new leading dim ", i, " in ", shape);
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), x.storage_offset());
  if (autograd::needs_grad(x))
    autograd::record("ExpandBackward", {&x}, {&out},
                     [s = x.sizes()](Node&, GradList& grads) { return GradList{autograd::sum_to(grads[0], s)}; });
  return out;
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start_o, std::optional<int64_t> end_o, int64_t step) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::slice>(
        t, {x}, {.dim = dim, .start = start_o.value_or(0), .end = end_o.value_or(INT64_MAX), .step = step},
        [&] { return slice(x, dim, start_o, end_o, step); });
  NABLA_CHECK(IndexError, x.dim() > 0, "slice: cannot slice a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  NABLA_CHECK(ValueError, step > 0, "slice: step must be positive, got ", step);
  int64_t n = x.sizes()[d];
  int64_t start = start_o.value_or(0), end = end_o.value_or(n);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), x.storage_offset() + start * x.strides()[d]);
  record_select_view("SliceBackward", x, out,
                     [d, start, end, step](const Tensor& t) { return t.slice(d, start, end, step); });
  return out;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  NABLA_CHECK(IndexError, x.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  int64_t n = x.sizes()[d];
  if (start < 0) start += n;
  NABLA_CHECK(IndexError, start >= 0 && length >= 0 && start + length <= n, "narrow: start ", start, " and length ",
              length, " are out of range for dim ", d, " of size ", n, " (shape ", x.sizes(), ")");
  return slice(x, d, start, start + length, 1);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::select>(t, {x}, {.dim = dim, .index = index}, [&] { return select(x, dim, index); });
  NABLA_CHECK(IndexError, x.dim() > 0, "select: cannot index into a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), "select");
  int64_t n = x.sizes()[d];
  NABLA_CHECK(IndexError, index >= -n && index < n, "select: index ", index, " is out of range for dim ", d,
              " of size ", n, " (shape ", x.sizes(), ")");
  if (index < 0) index += n;
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t offset = x.storage_offset() + index * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), offset);
  record_select_view("SelectBackward", x, out, [d, index](const Tensor& t) { return t.select(d, index); });
  return out;
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::diagonal>(t, {x}, {.offset = offset, .dim1 = dim1, .dim2 = dim2},
                                         [&] { return diagonal(x, offset, dim1, dim2); });
  int64_t nd = x.dim();
  NABLA_CHECK(ShapeError, nd >= 2, "diagonal: needs at least 2 dims, got shape ", x.sizes());
  int64_t d1 = wrap_dim(dim1, nd, "diagonal"), d2 = wrap_dim(dim2, nd, "diagonal");
  NABLA_CHECK(ValueError, d1 != d2, "diagonal: dim1 and dim2 must differ, both are ", d1);
  int64_t n1 = x.sizes()[d1], n2 = x.sizes()[d2];
  int64_t len =
      offset >= 0 ? std::max<int64_t>(0, std::min(n1, n2 - offset)) : std::max<int64_t>(0, std::min(n1 + offset, n2));
  int64_t start = x.storage_offset();
  if (len > 0) start += offset >= 0 ? offset * x.strides()[d2] : -offset * x.strides()[d1];
  Shape sizes, strides;
  for (int64_t i = 0; i < nd; ++i) {
    if (i == d1 || i == d2) continue;
    sizes.push_back(x.sizes()[i]);
    strides.push_back(x.strides()[i]);
  }
  sizes.push_back(len);
  strides.push_back(x.strides()[d1] + x.strides()[d2]);
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), start);
  record_select_view("DiagonalBackward", x, out,
                     [offset, d1, d2](const Tensor& t) { return t.diagonal(offset, d1, d2); });
  return out;
}

Tensor as_strided(const Tensor& x, IntArrayRef sizes, IntArrayRef strides, std::optional<int64_t> storage_offset) {
  NABLA_CHECK(ShapeError, sizes.size() == strides.size(), "as_strided: sizes ", sizes, " and strides ", strides,
              " have different lengths");
  int64_t offset = storage_offset.value_or(x.storage_offset());
  // Every element must lie inside the storage.
  int64_t hi = offset, lo = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    NABLA_CHECK(ShapeError, sizes[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride in ", sizes, " / ",
                strides);
    if (sizes[i] == 0) {
      hi = lo - 1;
      break;
    }
    hi += (sizes[i] - 1) * strides[i];
  }
  int64_t capacity = static_cast<int64_t>(x.impl()->storage->nbytes / x.element_size());
  NABLA_CHECK(IndexError, lo >= 0 && (hi < lo || hi < capacity), "as_strided: sizes ", sizes, " strides ", strides,
              " offset ", offset, " reach outside the storage of ", capacity, " elements");
  Tensor out = make_view_of(x, sizes.vec(), strides.vec(), offset);
  if (autograd::needs_grad(x)) {
    NABLA_CHECK(NotImplemented, x.is_contiguous(), "as_strided: backward is only supported for contiguous inputs");
    int64_t rel = offset - x.storage_offset();
    Shape sz = sizes.vec(), st = strides.vec();
    record_select_view("AsStridedBackward", x, out,
                       [sz, st, rel](const Tensor& t) { return t.as_strided(sz, st, t.storage_offset() + rel); });
  }
  return out;
}

Tensor Tensor::unfold(int64_t dim, int64_t size, int64_t step) const {
  const Tensor& x = *this;
  // A 0-dim tensor unfolds along dim 0 (or -1) as if it were (1), into (size) (PyTorch's rule).
  const int64_t nd = x.dim(), d = wrap_dim(dim, std::max<int64_t>(nd, 1), "unfold");
  const int64_t len = nd == 0 ? 1 : x.sizes()[d];
  NABLA_CHECK(ValueError, size >= 0, "unfold: size must be non-negative, got ", size, " (shape ", x.sizes(), ")");
  NABLA_CHECK(ShapeError, size <= len, "unfold: the maximum size for dimension ", d, " of shape ", x.sizes(), " is ",
              len, ", but size is ", size);
  NABLA_CHECK(ValueError, step > 0, "unfold: step must be positive, got ", step);
  // x (..., L, ...) -> (..., (L - size) / step + 1, ..., size): window w of dim d starts at w * step.
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.push_back(size);
  strides.push_back(nd == 0 ? 1 : strides[d]);
  if (nd > 0) {
    sizes[d] = (len - size) / step + 1;
    strides[d] *= step;
  }
  Tensor out = make_view_of(x, std::move(sizes), std::move(strides), x.storage_offset());
  // Overlapping windows (step < size) send their gradients back summed (view_scatter).
  record_select_view("UnfoldBackward", x, out,
                     [dim, size, step](const Tensor& t) { return t.unfold(dim, size, step); });
  return out;
}

Tensor movedim(const Tensor& x, int64_t src, int64_t dst) {
  int64_t nd = x.dim();
  src = wrap_dim(src, nd, "movedim");
  dst = wrap_dim(dst, nd, "movedim");
  Shape order;
  for (int64_t i = 0; i < nd; ++i)
    if (i != src) order.push_back(i);
  order.insert(order.begin() + dst, src);
  return permute(x, order);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, IntArrayRef sizes, int64_t dim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::split_with_sizes>(t, {x}, {.sizes = trace::ints(sizes), .dim = dim},
                                                 [&] { return split_with_sizes(x, sizes, dim); });
  int64_t d = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    NABLA_CHECK(ValueError, s >= 0, "split_with_sizes: negative size in ", sizes);
    total += s;
  }
  NABLA_CHECK(ShapeError, total == x.sizes()[d], "split_with_sizes: sizes ", sizes, " sum to ", total, " but dim ", d,
              " has size ", x.sizes()[d]);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape sz = x.sizes();
    sz[d] = s;
    out.push_back(make_view_of(x, std::move(sz), x.strides(), x.storage_offset() + start * x.strides()[d]));
    start += s;
  }
  record_pieces("SplitBackward", x, out,
                [d](const GradList& grads) { return cat(std::vector<Tensor>(grads.begin(), grads.end()), d); });
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "split");
  NABLA_CHECK(ValueError, split_size > 0 || x.sizes()[d] == 0, "split: split_size must be positive, got ", split_size);
  int64_t n = x.sizes()[d];
  Shape sizes;
  for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  if (sizes.empty()) sizes.push_back(0);
  return split_with_sizes(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  NABLA_CHECK(ValueError, chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.sizes()[d];
  int64_t size = (n + chunks - 1) / chunks;
  return split(x, std::max<int64_t>(size, 1), d);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::unbind>(t, {x}, {.dim = dim}, [&] { return unbind(x, dim); });
  int64_t d = wrap_dim(dim, x.dim(), "unbind");
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.sizes()[d]; ++i)
    out.push_back(make_view_of(x, sizes, strides, x.storage_offset() + i * x.strides()[d]));
  record_pieces("UnbindBackward", x, out,
                [d](const GradList& grads) { return stack(std::vector<Tensor>(grads.begin(), grads.end()), d); });
  return out;
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors) {
  Shape shape;
  for (const Tensor& t : tensors) shape = broadcast_shapes(shape, t.sizes(), "broadcast_tensors");
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.expand(shape));
  return out;
}

// ---- indexing with x.index({...}) ---------------------------------------------------------------
namespace {

// Index tensors on dims `dims` of a tensor (after its basic indices were applied): PyTorch's
// advanced indexing, shared by x.index({...}) and index_put.
struct AdvancedIndex {
  std::vector<int64_t> dims;  // increasing
  std::vector<Tensor> index;  // int64, one per dim
};

// Records index tensor t at dim d of r: an integer tensor indexes one dim, a k-dim bool mask k dims
// (through its true positions). Returns the number of dims consumed.
int64_t add_index(AdvancedIndex& a, const Tensor& r, int64_t d, const Tensor& t, const char* op) {
  if (t.dtype() == DType::boolean) {
    NABLA_CHECK(IndexError, d + t.dim() <= r.dim(), op, ": mask of shape ", t.sizes(), " at dim ", d,
                " does not fit a tensor of shape ", r.sizes());
    for (int64_t k = 0; k < t.dim(); ++k)
      NABLA_CHECK(ShapeError, t.size(k) == r.size(d + k), op, ": mask of shape ", t.sizes(), " does not match dims ", d,
                  " to ", d + t.dim() - 1, " of shape ", r.sizes());
    Tensor nz = nonzero(t.to(r.device()));  // (n, k)
    for (int64_t k = 0; k < t.dim(); ++k) {
      a.dims.push_back(d + k);
      a.index.push_back(nz.select(1, k));
    }
    return t.dim();
  }
  NABLA_CHECK(IndexError, is_integral(t.dtype()), op, ": tensor indices must be int64 or bool, got ", t.dtype());
  a.dims.push_back(d);
  a.index.push_back(t.to(r.device(), DType::i64));
  return 1;
}

// The row-major position of each broadcast index within the indexed dims taken together, after
// bounds checks (negative indices count from the end); `shape` receives the broadcast shape.
Tensor flat_positions(const Tensor& r, const AdvancedIndex& a, Shape& shape, const char* op) {
  std::vector<Tensor> b = broadcast_tensors(a.index);
  shape = b[0].sizes();
  Tensor lin;
  for (size_t k = 0; k < b.size(); ++k) {
    const int64_t size = r.size(a.dims[k]);
    Tensor t = b[k];
    if (t.numel() > 0) {
      autograd::NoGradGuard ng;
      const int64_t lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
      NABLA_CHECK(IndexError, lo >= -size && hi < size, op, ": index ", hi >= size ? hi : lo,
                  " is out of bounds for dim ", a.dims[k], " of size ", size, " (shape ", r.sizes(), ")");
      if (lo < 0) t = where(t < 0, t + size, t);
    }
    lin = lin.defined() ? lin * size + t : t;
  }
  return lin;
}

// The layout both sides use: the indexed dims first, flattened into one of `count` positions.
struct IndexedLayout {
  std::vector<int64_t> perm;  // r.permute(perm) puts the indexed dims first
  Shape rest;                 // the other dims' sizes, in order
  int64_t count = 1;          // product of the indexed dims' sizes
  bool adjacent = true;       // the indexed dims are next to each other
};

IndexedLayout indexed_layout(const Tensor& r, const AdvancedIndex& a) {
  IndexedLayout l;
  l.perm = a.dims;
  for (int64_t d = 0; d < r.dim(); ++d) {
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) {
      l.perm.push_back(d);
      l.rest.push_back(r.size(d));
    } else {
      l.count *= r.size(d);
    }
  }
  l.adjacent = a.dims.back() - a.dims.front() + 1 == static_cast<int64_t>(a.dims.size());
  return l;
}

// p's inverse: permuting by p, then by inverse_permutation(p), restores the order.
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& p) {
  std::vector<int64_t> inverse(p.size());
  for (size_t k = 0; k < p.size(); ++k) inverse[static_cast<size_t>(p[k])] = static_cast<int64_t>(k);
  return inverse;
}

// The permutation that moves the broadcast dims (the first nb of a (B..., rest...) tensor) to
// where the indexed dims were, when those were adjacent and not leading: PyTorch's placement rule.
std::vector<int64_t> place_broadcast_dims(int64_t nb, int64_t first, int64_t ndim) {
  std::vector<int64_t> p;
  for (int64_t k = 0; k < first; ++k) p.push_back(nb + k);
  for (int64_t k = 0; k < nb; ++k) p.push_back(k);
  for (int64_t k = nb + first; k < ndim; ++k) p.push_back(k);
  return p;
}

Tensor gather_advanced(const Tensor& r, const AdvancedIndex& a) {
  Shape bshape;
  Tensor lin = flat_positions(r, a, bshape, "index");
  IndexedLayout l = indexed_layout(r, a);
  Shape flat_shape{l.count};
  for (int64_t n : l.rest) flat_shape.push_back(n);
  Tensor out = r.permute(l.perm).reshape(flat_shape).index_select(0, lin.reshape({-1}));
  Shape s = bshape;
  for (int64_t n : l.rest) s.push_back(n);
  out = out.reshape(s);
  const int64_t nb = static_cast<int64_t>(bshape.size());
  if (l.adjacent && a.dims.front() > 0) out = out.permute(place_broadcast_dims(nb, a.dims.front(), out.dim()));
  return out;
}

// A copy of r with r[a] = values (or += with accumulate): the indexed positions written through
// scatter / index_add on the (count, rest...) layout, so autograd reaches r and values.
Tensor put_advanced(const Tensor& r, const AdvancedIndex& a, const Tensor& values, bool accumulate, const char* op) {
  Shape bshape;
  Tensor lin = flat_positions(r, a, bshape, op).reshape({-1});
  IndexedLayout l = indexed_layout(r, a);
  const int64_t nb = static_cast<int64_t>(bshape.size());
  // The shape r[a] has, and values broadcast to it, then brought to the (B..., rest...) layout.
  Shape res = bshape;
  for (int64_t n : l.rest) res.push_back(n);
  std::vector<int64_t> place;
  if (l.adjacent && a.dims.front() > 0) {
    place = place_broadcast_dims(nb, a.dims.front(), static_cast<int64_t>(res.size()));
    Shape placed;
    for (int64_t p : place) placed.push_back(res[static_cast<size_t>(p)]);
    res = placed;
  }
  NABLA_CHECK(DeviceError, values.device() == r.device() || values.dim() == 0, op, ": values are on ", values.device(),
              " but the tensor is on ", r.device());
  Shape rshape = broadcast_shapes(values.sizes(), res, op);
  NABLA_CHECK(ShapeError, rshape == res, op, ": values of shape ", values.sizes(),
              " cannot be broadcast to the indexed shape ", res);
  Tensor v = values.to(r.device(), r.dtype()).expand(res);
  if (!place.empty()) v = v.permute(inverse_permutation(place));
  Shape flat_shape{l.count}, vshape{lin.numel()};
  for (int64_t n : l.rest) flat_shape.push_back(n);
  for (int64_t n : l.rest) vshape.push_back(n);
  v = v.reshape(vshape);
  Tensor flat = r.permute(l.perm).reshape(flat_shape);
  Tensor written;
  if (accumulate) {
    written = index_add(flat, 0, lin, v);
  } else {
    Shape ishape(vshape.size(), 1);
    ishape[0] = lin.numel();
    written = scatter(flat, 0, lin.reshape(ishape).expand(vshape), v);
  }
  Shape permuted;
  for (int64_t p : l.perm) permuted.push_back(r.size(p));
  return written.reshape(permuted).permute(inverse_permutation(l.perm)).contiguous();
}

// x.index(idx). With `adv`, tensor indices are recorded there (with the dims they apply to in the
// returned view) instead of applied: the basic indices give a view, the tensors index it after.
Tensor apply_index(const Tensor& x, const std::vector<TensorIndex>& idx, AdvancedIndex* adv = nullptr) {
  // Count dims consumed (everything but None and Ellipsis) to expand the ellipsis.
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : idx) {
    if (i.is_ellipsis()) ++ellipses;
    else if (i.is_tensor() && i.tensor().dtype() == DType::boolean) consumed += i.tensor().dim();
    else if (!i.is_none()) ++consumed;
  }
  NABLA_CHECK(IndexError, ellipses <= 1, "index: at most one Ellipsis is allowed");
  NABLA_CHECK(IndexError, consumed <= x.dim(), "index: too many indices (", consumed, ") for a tensor of shape ",
              x.sizes());
  Tensor r = x;
  int64_t d = 0;  // current dim of r
  bool used_tensor = false;
  for (const TensorIndex& i : idx) {
    if (i.is_integer()) {
      r = r.select(d, i.integer());
    } else if (i.is_slice()) {
      const auto& s = i.slice();
      r = r.slice(d, s.start, s.stop, s.step);
      ++d;
    } else if (i.is_none()) {
      r = r.unsqueeze(d);
      ++d;
    } else if (i.is_ellipsis()) {
      d += x.dim() - consumed;
    } else {
      const Tensor& t = i.tensor();
      if (adv) {
        d += add_index(*adv, r, d, t, "index");
        continue;
      }
      NABLA_CHECK(IndexError, !used_tensor, "index: several tensor indices go through the advanced path");
      used_tensor = true;
      if (t.dtype() == DType::boolean) {
        // A mask over dims [d, d + mask.dim()): the selected elements along one new dim.
        NABLA_CHECK(IndexError, d == 0 || t.dim() == 1, "index: a boolean mask after other indices must be 1-D");
        if (d == 0 && t.dim() == r.dim()) {
          r = r.masked_select(t);
          d += 1;
        } else if (d == 0 && t.dim() > 1 && t.dim() < r.dim()) {
          // A mask over the leading dims: flatten them and keep the rows where it is true.
          NABLA_CHECK(ShapeError, std::equal(t.sizes().begin(), t.sizes().end(), r.sizes().begin()),
                      "index: mask of shape ", t.sizes(), " does not match the leading dims of shape ", r.sizes());
          r = r.flatten(0, t.dim() - 1).index_select(0, nonzero(t.reshape({-1})).view({-1}));
          d += 1;
        } else {
          NABLA_CHECK(ShapeError, t.dim() == 1 && t.sizes()[0] == r.sizes()[d], "index: mask of shape ", t.sizes(),
                      " does not match dim ", d, " of size ", r.sizes()[d]);
          r = r.index_select(d, nonzero(t).view({-1}));
          d += 1;
        }
      } else {
        NABLA_CHECK(IndexError, is_integral(t.dtype()), "index: tensor indices must be int64 or bool, got ", t.dtype());
        Tensor flat = t.reshape({-1}).to(DType::i64);
        Tensor sel = r.index_select(d, flat);
        if (t.dim() != 1) {
          Shape s;
          for (int64_t k = 0; k < d; ++k) s.push_back(sel.sizes()[k]);
          for (int64_t v : t.sizes()) s.push_back(v);
          for (int64_t k = d + 1; k < sel.dim(); ++k) s.push_back(sel.sizes()[k]);
          sel = sel.reshape(s);
        }
        d += t.dim();
        r = sel;
      }
    }
  }
  return r;
}

// Several tensor indices (or one after other indices, in index_put_): PyTorch's advanced indexing.
size_t count_tensors(const std::vector<TensorIndex>& idx) {
  return static_cast<size_t>(std::count_if(idx.begin(), idx.end(), [](const TensorIndex& i) { return i.is_tensor(); }));
}

Tensor index_any(const Tensor& x, const std::vector<TensorIndex>& idx) {
  if (count_tensors(idx) < 2) return apply_index(x, idx);
  AdvancedIndex a;
  Tensor r = apply_index(x, idx, &a);
  return gather_advanced(r, a);
}
}  // namespace

TensorIndex::TensorIndex(const char* s) : v_(indexing::Ellipsis) {
  NABLA_CHECK(ValueError, s != nullptr && std::string_view(s) == "...",
              "index: the only string index is \"...\" (Ellipsis), got ",
              s ? "'" + std::string(s) + "'" : std::string("a null string"),
              "; use an integer, Slice(), None, Ellipsis or a tensor");
}

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return index_any(*this, std::vector<TensorIndex>(indices));
}
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const { return index_any(*this, indices); }

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& value) {
  std::vector<TensorIndex> idx(indices);
  bool has_tensor = std::any_of(idx.begin(), idx.end(), [](const TensorIndex& i) { return i.is_tensor(); });
  if (!has_tensor) {
    Tensor dst = apply_index(*this, idx);
    dst.copy_(value);
    return *this;
  }
  if (!(idx.size() == 1 && idx[0].is_tensor())) {
    // Basic indices give a view of *this; the tensor indices write into it.
    AdvancedIndex a;
    Tensor r = apply_index(*this, idx, &a);
    r.copy_(put_advanced(r, a, value, /*accumulate=*/false, "index_put_"));
    return *this;
  }
  const Tensor& t = idx[0].tensor();
  if (t.dtype() == DType::boolean) {
    NABLA_CHECK(ShapeError, value.numel() == 1,
                "index_put_: with a mask, the value must have one element (use where())");
    // A mask over the leading dims selects whole sub-tensors, as x.index({mask}) does: align it on the
    // left (broadcasting it on the right would fill columns of a square matrix instead of rows).
    Tensor m = t;
    if (t.dim() < dim()) {
      NABLA_CHECK(ShapeError, std::equal(t.sizes().begin(), t.sizes().end(), sizes().begin()),
                  "index_put_: mask of shape ", t.sizes(), " does not match the leading dims of shape ", sizes());
      Shape ms = t.sizes();
      while (static_cast<int64_t>(ms.size()) < dim()) ms.push_back(1);
      m = t.reshape(ms);
    }
    internal::check_inplace(*this, "index_put_");
    return masked_fill_(m, value.reshape({}).to(device()));  // a value that requires grad gets its gradient
  }
  Tensor flat = t.reshape({-1}).to(DType::i64);
  Shape vshape = sizes();
  vshape[0] = flat.numel();
  Tensor src = value.expand(vshape).contiguous();
  Tensor index = flat.view({-1});
  for (int64_t k = 1; k < dim(); ++k) index = index.unsqueeze(-1);
  return scatter_(0, index.expand(vshape).contiguous(), src);
}

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, Scalar value) {
  std::vector<TensorIndex> idx(indices);
  bool has_tensor = std::any_of(idx.begin(), idx.end(), [](const TensorIndex& i) { return i.is_tensor(); });
  if (!has_tensor) {
    Tensor dst = apply_index(*this, idx);
    dst.fill_(value);
    return *this;
  }
  return index_put_(indices, full({}, value, nabla::dtype(this->dtype()).device(device())));
}

Tensor index_put(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                 bool accumulate) {
  if (auto ac = autocast_internal::cast<OpId::index_put>(x, values)) [[unlikely]]
    return index_put(ac[0], indices, ac[1], accumulate);
  NABLA_CHECK(IndexError, static_cast<int64_t>(indices.size()) <= x.dim(), "index_put: ", indices.size(),
              " indices for a tensor of shape ", x.sizes());
  AdvancedIndex a;
  int64_t d = 0;
  for (const auto& i : indices) d += i && i->defined() ? add_index(a, x, d, *i, "index_put") : 1;
  if (a.dims.empty()) {  // no index tensor: every element is indexed once
    Tensor v = values.to(x.device(), x.dtype()).expand(x.sizes());
    return accumulate ? x + v : v.clone();
  }
  return put_advanced(x, a, values, accumulate, "index_put");
}

Tensor& index_put_(Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                   bool accumulate) {
  internal::check_inplace(x, "index_put_");
  x.copy_(index_put(x, indices, values, accumulate));
  return x;
}

}  // namespace nabla

// ---- in-place writes into views under autograd ----------------------------------------------------
namespace nabla::internal {

// The view's place inside any tensor laid out like its base, as a function to apply to the base's
// gradient (or to a mask of the base's shape). Needs a contiguous base, which nearly every base
// is: views are never bases, and ops return contiguous tensors.
ViewFn place_in_base(const Tensor& view, const Tensor& base, const char* op) {
  NABLA_CHECK(NotImplemented, view.dtype() == base.dtype(), op,
              ": in-place writes under autograd into a view of another dtype (view_as_real, view_as_complex, "
              "real, imag) or into its base while the view is used afterwards are not supported; the view is ",
              view.dtype(), ", the base ", base.dtype(), " (clone() the view first)");
  NABLA_CHECK(NotImplemented, base.is_contiguous(), op,
              ": in-place writes into a view, or into the base of a view "
              "used afterwards, need a contiguous base tensor under autograd; the base has shape ",
              base.sizes(), " and strides ", base.strides(), " (clone() it first)");
  Shape vsizes = view.sizes(), vstrides = view.strides();
  int64_t rel = view.storage_offset() - base.storage_offset();
  return [vsizes, vstrides, rel](const Tensor& t) { return t.as_strided(vsizes, vstrides, t.storage_offset() + rel); };
}

Tensor& copy_into_view(Tensor& view, const Tensor& src) {
  Tensor base(view.impl()->view_base);
  NABLA_CHECK(AutogradError,
              !(base.impl()->requires_grad && !base.impl()->grad_fn) || !autograd::GradMode::is_enabled(),
              "copy_: a view of a leaf tensor that requires grad is being used in an in-place operation; "
              "modify the leaf under NoGradGuard, or clone() it first");
  Shape bshape = broadcast_shapes(src.sizes(), view.sizes(), "copy_");
  NABLA_CHECK(ShapeError, bshape == view.sizes(), "copy_: source of shape ", src.sizes(),
              " cannot be broadcast to the destination shape ", view.sizes());
  ViewFn view_fn = place_in_base(view, base, "copy_");
  {
    autograd::NoGradGuard ng;
    Backend& be = (view.is_cuda() || src.is_cuda()) ? backend_for(view.is_cuda() ? view.device() : src.device())
                                                    : backend_for(view.device());
    Tensor s = broadcast_view(src, view.sizes());
    if (partial_overlap(view, s)) s = s.clone();
    be.copy(s, view, false);
  }
  bump_version(view);
  // CopySlices: the new base's gradient goes to src inside the view, to the old base outside it.
  autograd::record("CopySlices", {&base, &src}, {&base},
                   [view_fn, src_shape = src.sizes(), sdt = src.dtype(), sdev = src.device(), bshape = base.sizes()](
                       autograd::Node& n, autograd::GradList& grads) {
                     Tensor gc = grads[0].contiguous();
                     autograd::GradList r(2);
                     if (n.needs_input_grad(0)) {
                       Tensor mask = ones(bshape, dtype(gc.dtype()).device(gc.device()));
                       {
                         autograd::NoGradGuard ng;
                         view_fn(mask).zero_();
                       }
                       r[0] = gc * mask;
                     }
                     if (n.needs_input_grad(1)) r[1] = autograd::sum_to(view_fn(gc), src_shape).to(sdev, sdt);
                     return r;
                   });
  // The view is a view of the new base from now on.
  record_select_view("AsStridedBackward", base, view, view_fn);
  view.impl()->view_base_grad_fn = base.impl()->grad_fn.get();
  view.impl()->view_tracks_base = true;
  return view;
}

void refresh_view_history(const Tensor& view) {
  TensorImpl* vi = view.impl();
  Tensor base(vi->view_base);
  vi->grad_fn.reset();
  vi->output_nr = 0;
  vi->view_base_grad_fn = base.impl()->grad_fn.get();
  if (!base.impl()->grad_fn) return;  // the base left the graph (detach_()), and the view with it
  // Rebuilt wherever the view is first used, which may be inside a no_grad region or a backward.
  autograd::AutoGradMode record(true);
  Tensor v = view;
  record_select_view("AsStridedBackward", base, v, place_in_base(view, base, "autograd"));
}

}  // namespace nabla::internal
