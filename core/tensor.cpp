// Tensor basics: allocation, layout queries, conversion, copies, detach, and autograd accessors.
#include "core/tensor.h"

#include <cmath>
#include <limits>

#include "core/impl.h"
#include "core/trace.h"

namespace nabla {

void Scalar::throw_not_an_int64(double v) {
  throw ValueError(internal::str("the value ", v, " cannot be converted to an integer: ",
                                 std::isnan(v) ? "it is NaN" : "it is outside the range of int64"));
}

// ---- TensorImpl ---------------------------------------------------------------------------------

TensorImpl::~TensorImpl() = default;

void TensorImpl::refresh() {
  numel = shape_numel(sizes, "tensor");
  bool contig = true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) {
      contig = false;
      break;
    }
    expected *= sizes[i];
  }
  is_contiguous = contig || numel == 0;
}

namespace internal {

Tensor make_empty(IntArrayRef shape, DType dtype, Device device, bool pinned) {
  auto impl = make_intrusive<TensorImpl>();
  impl->sizes.assign(shape.begin(), shape.end());
  impl->strides = contiguous_strides(shape);
  impl->numel = shape_numel(shape, "empty");
  impl->dtype = dtype;
  impl->is_contiguous = true;
  NABLA_CHECK(ShapeError,
              impl->numel <= std::numeric_limits<int64_t>::max() / static_cast<int64_t>(element_size(dtype)),
              "empty: shape ", shape, " of ", dtype, " has too many bytes");
  size_t nbytes = static_cast<size_t>(impl->numel) * element_size(dtype);
  if (pinned && device.is_cpu() && cuda::is_available()) {
    // Page-locked host memory comes from the CUDA backend's host allocator.
    impl->storage = make_intrusive<StorageImpl>(nbytes, device, &backend_for(Device::cuda()).allocator(kCPU));
    impl->storage->pinned = true;
  } else {
    impl->storage = make_intrusive<StorageImpl>(nbytes, device, &backend_for(device).allocator(device));
  }
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = make_intrusive<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->refresh();
  return Tensor(std::move(impl));
}

Tensor wrap_scalar(Scalar value, DType dtype) {
  Tensor t = make_empty({}, dtype, kCPU);
  visit_dtype_with_complex(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_std_complex_v<T>) {
      *static_cast<T*>(t.data_ptr()) = T(static_cast<typename T::value_type>(value.to_double()), 0);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      *static_cast<T*>(t.data_ptr()) = T(static_cast<float>(value.to_double()));
    } else {
      *static_cast<T*>(t.data_ptr()) = value.to<T>();
    }
  });
  t.impl()->is_wrapped_number = true;
  return t;
}

namespace {
int category(DType d) { return d == DType::boolean ? 0 : is_integral(d) ? 1 : is_complex(d) ? 3 : 2; }
}  // namespace

DType promote_with_scalar(DType t, const Scalar& s) {
  int cs = s.is_bool() ? 0 : s.is_integral() ? 1 : 2;
  if (cs <= category(t)) return t;
  return cs == 1 ? DType::i64 : DType::f32;
}

DType result_type(const Tensor& a, const Tensor& b) {
  // Three tiers as in PyTorch: dimensioned tensors, then 0-dim tensors, then wrapped numbers.
  auto tier = [](const Tensor& t) { return t.impl()->is_wrapped_number ? 2 : t.dim() == 0 ? 1 : 0; };
  int ta = tier(a), tb = tier(b);
  DType da = a.dtype(), db = b.dtype();
  if (ta == tb) return promote_types(da, db);
  const DType& hi = ta < tb ? da : db;  // the dominant operand's dtype
  const DType& lo = ta < tb ? db : da;
  if (category(lo) <= category(hi)) return hi;
  // A complex 0-dim tensor or number with floating dimensioned tensors keeps their precision
  // (PyTorch's combine_categories: float32 with a complex128 scalar is complex64).
  if (is_complex(lo) && is_floating(hi)) return to_complex_dtype(hi);
  // The lower tier has a higher category: a wrapped number picks the default dtype of its
  // category; a 0-dim tensor keeps its own dtype.
  if ((ta < tb ? tb : ta) == 2) return category(lo) == 2 ? DType::f32 : DType::i64;
  return lo;
}

void bump_version(const Tensor& t) { ++t.impl()->storage->version; }

void check_inplace(const Tensor& self, const char* op) {
  TensorImpl* s = self.impl();
  if (autograd::GradMode::is_enabled() && s->requires_grad && !s->grad_fn)
    throw AutogradError(internal::str(op,
                                      ": a leaf tensor that requires grad is being used in an in-place operation; "
                                      "modify it under NoGradGuard (as optimizers do) or use the out-of-place op"));
  const TensorImpl* base = s->view_base.get();
  if (autograd::GradMode::is_enabled() && base && base->requires_grad && !base->grad_fn)
    throw AutogradError(
        internal::str(op,
                      ": a view of a leaf tensor that requires grad is being used in an in-place operation; "
                      "modify it under NoGradGuard (as optimizers do) or use the out-of-place op"));
  for (size_t i = 0; i < s->sizes.size(); ++i) {
    if (s->strides[i] == 0 && s->sizes[i] > 1)
      throw ValueError(internal::str(op,
                                     ": cannot write in place into a tensor whose elements share "
                                     "memory (an expanded view of shape ",
                                     s->sizes, " with strides ", s->strides, "); call .clone() first"));
  }
}

bool partial_overlap(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.numel() == 0 || b.numel() == 0) return false;
  if (a.impl()->storage.get() != b.impl()->storage.get()) return false;
  if (a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides())
    return false;  // every element read is the one written at the same position
  auto last = [](const Tensor& t) {
    int64_t hi = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) hi += (t.sizes()[d] - 1) * t.strides()[d];
    return hi;
  };
  return a.storage_offset() <= last(b) && b.storage_offset() <= last(a);
}

bool lowp_with_f32_params(const Tensor& x, std::initializer_list<const Tensor*> params) {
  if (x.dtype() != DType::f16 && x.dtype() != DType::bf16) return false;
  bool any = false;
  for (const Tensor* p : params) {
    if (!p->defined()) continue;
    if (p->dtype() != DType::f32) return false;
    any = true;
  }
  return any;
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined() || t->impl()->is_wrapped_number) continue;
    if (!first) {
      first = t;
    } else if (t->device() != first->device()) {
      throw DeviceError(internal::str(op, ": expected all tensors on the same device, got ", first->device(), " and ",
                                      t->device(), " (move one with .to(device))"));
    }
  }
}

Shape reduced_shape(IntList shape, const DimMask& reduce, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!reduce[i]) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

DimMask dims_mask(IntArrayRef dims, int64_t ndim, const char* op) {
  DimMask mask(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    if (ndim == 0) continue;
    NABLA_CHECK(ValueError, !mask[w], op, ": dim ", d, " appears more than once in ", dims);
    mask[w] = true;
  }
  return mask;
}

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  return internal::str(dtype_name(t.dtype()), t.sizes(), " on ", t.device());
}

}  // namespace internal

// ---- Tensor -------------------------------------------------------------------------------------

void Tensor::throw_undefined() {
  throw Error("operation on an undefined tensor (a default-constructed Tensor holds no data)");
}

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

Scalar Tensor::item() const {
  NABLA_CHECK(ValueError, numel() == 1, "item: a tensor with ", numel(), " elements (shape ", sizes(),
              ") cannot be converted to a scalar; it needs exactly one element");
  if (trace::Tracer* t = trace::tl_current) [[unlikely]]
    t->on_host_read(*this, "item");
  Tensor c = is_cpu() ? *this : to(kCPU);
  return visit_dtype(dtype(), [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    return Scalar(*static_cast<const T*>(c.data_ptr()));
  });
}

namespace {
// The copy behind .to(): a new tensor on `device` with `dtype` and the same values.
Tensor to_copy(const Tensor& self, DType dtype, Device device, bool non_blocking) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::to>(t, {self}, {}, [&] { return to_copy(self, dtype, device, non_blocking); });
  // A non_blocking copy from a GPU lands in pinned memory, as in PyTorch, so that it really is
  // asynchronous (the caller synchronizes before reading it).
  bool pinned = non_blocking && self.is_cuda() && device.is_cpu();
  Tensor out = internal::make_empty(self.sizes(), dtype, device, pinned);
  Backend& be =
      (self.is_cuda() || device.is_cuda()) ? backend_for(self.is_cuda() ? self.device() : device) : backend_for(device);
  be.copy(self, out, non_blocking);
  if (autograd::needs_grad(self)) {
    NABLA_CHECK(AutogradError, is_floating(dtype) || is_complex(dtype),
                "to: cannot convert a tensor that requires grad to ", dtype,
                " (gradients need a floating dtype); detach() it first");
    autograd::record("ToCopyBackward", {&self}, {&out},
                     [dt = self.dtype(), dev = self.device()](autograd::Node&, autograd::GradList& grads) {
                       return autograd::GradList{grads[0].to(dev, dt)};
                     });
  }
  return out;
}
}  // namespace

Tensor Tensor::to(DType d, bool copy) const {
  if (d == dtype() && !copy) return *this;
  return to_copy(*this, d, device(), false);
}
Tensor Tensor::to(Device dev, bool non_blocking, bool copy) const {
  if (dev == device() && !copy) return *this;
  return to_copy(*this, dtype(), dev, non_blocking);
}
Tensor Tensor::to(Device dev, DType d) const {
  if (dev == device() && d == dtype()) return *this;
  return to_copy(*this, d, dev, false);
}
Tensor Tensor::to(const TensorOptions& o) const {
  Tensor r = to(o.device(), o.dtype_or(dtype()));
  if (o.requires_grad()) r.requires_grad_(true);
  return r;
}

Tensor Tensor::pin_memory() const {
  NABLA_CHECK(DeviceError, is_cpu(), "pin_memory: only CPU tensors can be pinned, got a tensor on ", device());
  if (is_pinned()) return *this;
  if (!cuda::is_available()) return clone();  // without a GPU, pinning has no meaning
  Tensor out = internal::make_empty(sizes(), dtype(), kCPU, /*pinned=*/true);
  backend_for(kCPU).copy(*this, out, false);
  return out;
}

Tensor Tensor::clone() const {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::clone>(t, {*this}, {}, [&] { return clone(); });
  Tensor out = internal::make_empty(sizes(), dtype(), device());
  backend_for(device()).copy(*this, out, false);
  if (autograd::needs_grad(*this))
    autograd::record("CloneBackward", {this}, {&out},
                     [](autograd::Node&, autograd::GradList& grads) { return autograd::GradList{grads[0]}; });
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor& Tensor::copy_(const Tensor& src) {
  NABLA_CHECK(ShapeError, src.defined(), "copy_: source tensor is undefined");
  internal::check_inplace(*this, "copy_");
  Shape bshape = broadcast_shapes(src.sizes(), sizes(), "copy_");
  NABLA_CHECK(ShapeError, bshape == sizes(), "copy_: source of shape ", src.sizes(),
              " cannot be broadcast to the destination shape ", sizes());
  if (impl()->view_base) {
    Tensor base(impl()->view_base);
    if (autograd::needs_grad(*this, src, base)) return internal::copy_into_view(*this, src);
  }
  Tensor s = internal::broadcast_view(src, sizes());
  Backend& be = (is_cuda() || src.is_cuda()) ? backend_for(is_cuda() ? device() : src.device()) : backend_for(device());
  {
    autograd::NoGradGuard ng;
    if (internal::partial_overlap(*this, s)) s = s.clone();  // e.g. x[1:].copy_(x[:-1]), x.copy_(x.t())
    be.copy(s, *this, false);
  }
  internal::bump_version(*this);
  if (autograd::needs_grad(*this, src)) {
    Tensor self = *this;
    autograd::record(
        "CopyBackwards", {this, &src}, {&self},
        [src_shape = src.sizes(), dt = src.dtype(), dev = src.device()](autograd::Node&, autograd::GradList& grads) {
          // The old value of self was overwritten: it gets no gradient.
          return autograd::GradList{Tensor(), autograd::sum_to(grads[0], src_shape).to(dev, dt)};
        });
  }
  return *this;
}

Tensor Tensor::detach() const {
  auto impl = make_intrusive<TensorImpl>();
  TensorImpl* s = checked();
  impl->storage = s->storage;
  impl->sizes = s->sizes;
  impl->strides = s->strides;
  impl->offset = s->offset;
  impl->numel = s->numel;
  impl->dtype = s->dtype;
  impl->is_contiguous = s->is_contiguous;
  return Tensor(std::move(impl));
}

Tensor& Tensor::detach_() {
  TensorImpl* s = checked();
  s->grad_fn.reset();
  s->requires_grad = false;
  s->view_base.reset();
  s->view_tracks_base = false;
  return *this;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace nabla
