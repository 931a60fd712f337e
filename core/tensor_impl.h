// TensorImpl: what a Tensor handle points to. A layout (sizes, strides in elements, offset) over a
// shared Storage, a dtype, and the fields autograd needs. Users work with Tensor, not this.
#pragma once

#include <cstdint>

#include "dtype.h"
#include "intrusive_ptr.h"
#include "shape.h"
#include "storage.h"

namespace nabla {

namespace autograd {
class Node;
struct AutogradMeta;
}  // namespace autograd

struct TensorImpl final : RefCounted, Pooled {
  Storage storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements, into storage
  int64_t numel = 1;
  DType dtype = DType::f32;
  bool is_contiguous = true;
  bool requires_grad = false;      // only ever true on leaves; non-leaves have grad_fn instead
  bool is_wrapped_number = false;  // a C++ scalar wrapped into a 0-dim tensor (type promotion)
  bool view_tracks_base = false;   // views made with grad mode on: their history follows the base's
  uint32_t output_nr = 0;          // which output of grad_fn this tensor is

  intrusive_ptr<autograd::Node> grad_fn;              // the node that produced this tensor
  intrusive_ptr<autograd::Node> grad_accumulator;     // leaves: the node that accumulates .grad
  intrusive_ptr<autograd::AutogradMeta> meta;         // .grad, hooks, retain_grad; created on demand
  intrusive_ptr<TensorImpl> view_base;                // views: the tensor whose storage they view
  const autograd::Node* view_base_grad_fn = nullptr;  // views: the base's grad_fn when grad_fn was set

  // A view whose base's history changed since the view's own was recorded (the base, or another
  // view of it, was modified in place with autograd recording): its grad_fn must be rebuilt from
  // the base's before use (internal::refresh_view_history in core/views.cpp).
  bool view_history_is_stale() const { return view_tracks_base && view_base->grad_fn.get() != view_base_grad_fn; }

  TensorImpl() = default;
  ~TensorImpl() override;

  Device device() const { return storage->device; }
  void* data() const { return static_cast<char*>(storage->data) + offset * static_cast<int64_t>(element_size(dtype)); }
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  // Recomputes numel and is_contiguous after sizes/strides change.
  void refresh();
};

}  // namespace nabla
