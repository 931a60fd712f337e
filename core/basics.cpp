// dtype names and promotion, device parsing, shape helpers.
#include <cstdlib>
#include <limits>
#include <optional>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace nabla {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::i32: return "int32";
    case DType::u8: return "uint8";
    case DType::boolean: return "bool";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::c64: return "complex64";
    case DType::c128: return "complex128";
  }
  return "unknown";
}

namespace {
// Rank in the promotion lattice; f16 and bf16 share a rank and promote to f32 together.
int promotion_rank(DType d) {
  switch (d) {
    case DType::boolean: return 0;
    case DType::u8: return 1;
    case DType::i32: return 2;
    case DType::i64: return 3;
    case DType::f16:
    case DType::bf16: return 4;
    case DType::f32: return 5;
    case DType::f64: return 6;
    case DType::c64:
    case DType::c128: return 7;  // handled by promote_types before the ranks
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // A complex operand makes the result complex, its parts promoted as real dtypes (PyTorch's rule:
  // complex64 with float64 is complex128).
  if (is_complex(a) || is_complex(b)) return to_complex_dtype(promote_types(to_real_dtype(a), to_real_dtype(b)));
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
  return promotion_rank(a) >= promotion_rank(b) ? a : b;
}

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    *this = Device::cpu();
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    if (spec.size() == 4) {
      *this = Device::cuda(0);
      return;
    }
    if (spec[4] == ':' && spec.size() > 5) {
      char* end = nullptr;
      long idx = std::strtol(spec.c_str() + 5, &end, 10);
      if (*end == '\0' && idx >= 0 && idx < 32768) {
        *this = Device::cuda(static_cast<int16_t>(idx));
        return;
      }
    }
  }
  throw ValueError(internal::str("Device: cannot parse '", spec, "' (expected 'cpu', 'cuda' or 'cuda:N')"));
}

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

int64_t shape_numel(IntList shape, const char* op) {
  int64_t n = 1;
  for (int64_t s : shape) {
    NABLA_CHECK(ShapeError, s >= 0, op, ": negative size in shape ", shape);
    if (s != 0 && n > std::numeric_limits<int64_t>::max() / s)
      throw ShapeError(internal::str(op, ": shape ", shape, " has too many elements"));
    n *= s;
  }
  return n;
}

Shape contiguous_strides(IntList shape) {
  Shape strides(shape.size());
  // Unsigned: for shapes too large to allocate (rejected by the caller) or empty ones (never
  // dereferenced) the product may exceed int64; it must not be undefined behaviour meanwhile.
  uint64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = static_cast<int64_t>(s);
    s *= static_cast<uint64_t>(shape[i] > 0 ? shape[i] : 1);
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim > 0 ? ndim : 1;  // a 0-dim tensor accepts dim 0 and -1, as PyTorch
  if (dim < -n || dim >= n)
    throw IndexError(internal::str(op, ": dim ", dim, " is out of range for a tensor with ", ndim, " dims (expected ",
                                   -n, " to ", n - 1, ")"));
  return dim < 0 ? dim + n : dim;
}

std::optional<Shape> try_broadcast_shapes(IntList a, IntList b, size_t* mismatch) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      if (mismatch) *mismatch = i;
      return std::nullopt;
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_shapes(IntList a, IntList b, const char* op) {
  size_t i = 0;
  std::optional<Shape> out = try_broadcast_shapes(a, b, &i);
  if (!out) {
    size_t n = std::max(a.size(), b.size());
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    throw ShapeError(
        internal::str(op, ": shapes ", a, " and ", b, " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")"));
  }
  return std::move(*out);
}

}  // namespace nabla
