// Helpers for op implementations (not part of the public API).
#pragma once

#include <algorithm>

#include "backend.h"
#include "error.h"
#include "graph.h"
#include "ops.h"
#include "tensor.h"

namespace nabla::internal {

// A new contiguous tensor with uninitialized contents.
Tensor make_empty(IntArrayRef shape, DType dtype, Device device, bool pinned = false);
// A view of `base`'s storage with the given layout (no autograd; see views.cpp for that).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
// A stride-0 view of t broadcast to `shape` (no autograd; for kernels to read).
Tensor broadcast_view(const Tensor& t, IntList shape);
// The kernel behind every binary op: broadcasts, converts operands to `compute`, allocates.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha, DType compute);
// "leaky_relu" -> "LeakyReluBackward" (a stable string).
const char* backward_name(const char* op);
// A C++ number as a 0-dim CPU tensor of `dtype`, flagged as a wrapped number for type promotion.
Tensor wrap_scalar(Scalar value, DType dtype);

// Elementwise ops on complex operands (core/complex.cpp): computed on the float pairs with the
// real ops (so differentiable with them); an op without a complex form throws NotImplemented.
Tensor complex_binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha);
Tensor complex_unary(UnaryOp op, const Tensor& x);
// The dtype a scalar takes when combined with a tensor of dtype `t` (PyTorch's rules for Python
// numbers: same category keeps the tensor's dtype, a higher category picks the default for it).
DType promote_with_scalar(DType t, const Scalar& s);
// Result dtype of a binary op between two tensors, where 0-dim tensors and wrapped numbers take
// part only when they are of a higher category.
DType result_type(const Tensor& a, const Tensor& b);

// A contiguous tensor seen along one dim: `outer` lines of `len` elements, `inner` apart (a 0-dim
// tensor is one line of one element). Element j of line (o, i) is at (o * len + j) * inner + i.
struct Lines {
  int64_t outer = 1, len = 1, inner = 1;
};
inline Lines lines_of(IntArrayRef sizes, int64_t dim) {
  Lines l;
  if (sizes.empty()) return l;
  l.len = sizes[dim];
  for (int64_t i = 0; i < dim; ++i) l.outer *= sizes[i];
  for (int64_t i = dim + 1; i < static_cast<int64_t>(sizes.size()); ++i) l.inner *= sizes[i];
  return l;
}
inline Lines lines_of(const Tensor& x, int64_t dim) { return lines_of(x.sizes(), dim); }

// The planes of a 2-D pooling between x (..., H, W) and y (..., Ho, Wo), for pooling kernels on any
// device: how many (H, W) planes there are and their sizes.
struct PoolGeom {
  int64_t planes, H, W, Ho, Wo;
};
inline PoolGeom pool_geom(const Tensor& x, const Tensor& y) {
  const int64_t nd = x.dim();
  PoolGeom g{};
  g.H = x.sizes()[nd - 2];
  g.W = x.sizes()[nd - 1];
  g.Ho = y.sizes()[nd - 2];
  g.Wo = y.sizes()[nd - 1];
  g.planes = g.H * g.W > 0 ? x.numel() / (g.H * g.W) : y.numel() / std::max<int64_t>(g.Ho * g.Wo, 1);
  return g;
}

// Marks an in-place write: bumps the shared version counter (not in inference mode).
void bump_version(const Tensor& t);
// In-place ops may not write into leaves that require grad (with grad mode on), nor into
// tensors whose memory overlaps itself (expanded views).
void check_inplace(const Tensor& self, const char* op);

// True when a and b view overlapping memory of one storage in different ways, so an op writing
// a while reading b would read elements it already overwrote (callers then read a copy of b).
bool partial_overlap(const Tensor& a, const Tensor& b);

// Throws DeviceError unless all defined tensors are on one device (wrapped numbers excepted).
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);

// True when x is float16/bfloat16 and the defined tensors of params are all float32 (at least one):
// the norms then compute in float32 and return x's dtype, as PyTorch's mixed-dtype norms.
bool lowp_with_f32_params(const Tensor& x, std::initializer_list<const Tensor*> params);

// Shape with dims listed as reduced set to 1 (keepdim) or removed.
// Which dims an op reduces (inline storage: no allocation for up to 8 dims).
using DimMask = SmallVector<bool, 8>;
Shape reduced_shape(IntList shape, const DimMask& reduce, bool keepdim);
// Wraps and validates a list of dims (empty list = all dims); returns the mask of reduced dims.
DimMask dims_mask(IntArrayRef dims, int64_t ndim, const char* op);

inline const char* device_kind(const Tensor& t) { return t.is_cuda() ? "cuda" : "cpu"; }

// copy_ into a view of a tensor when autograd is involved: writes the data, then rewrites the
// base's history (its gradient now flows to src inside the view and to the old base elsewhere)
// and makes the view a view of the new base again. (PyTorch's CopySlices.)
Tensor& copy_into_view(Tensor& view, const Tensor& src);

// Rebuilds the history of a view whose base's history changed after the view's was recorded (the
// base, or another view of it, was modified in place): the view becomes an as_strided view of the
// base as it is now, as PyTorch regenerates a view's grad_fn.
void refresh_view_history(const Tensor& view);

// Describes a tensor for error messages: "float32[2, 3] on cpu"
std::string describe(const Tensor& t);

}  // namespace nabla::internal
