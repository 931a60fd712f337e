// Shapes and strides: small inline vectors of int64 (no heap for up to 6 dims), printed as [2, 3],
// and IntArrayRef, the non-owning list type that shape and dim arguments take.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <span>
#include <vector>

#include "small_vector.h"

namespace nabla {

using Shape = SmallVector<int64_t, 6>;

// IntArrayRef: a non-owning list of int64 for shape and dim arguments, so callers can write
// zeros({2, 3}), x.sum({0, 1}), x.sum(1), x.view(other.sizes()) or pass a std::vector.
// Like std::span it must not outlive what it points to; use it for parameters only.
class IntArrayRef {
 public:
  constexpr IntArrayRef() = default;
  constexpr IntArrayRef(const int64_t& one) : data_(&one), size_(1) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  // The list lives until the end of the full expression of the call, which is all a parameter needs.
  constexpr IntArrayRef(std::initializer_list<int64_t> il) : data_(il.begin()), size_(il.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  IntArrayRef(const SmallVector<int64_t, 6>& s) : data_(s.data()), size_(s.size()) {}
  constexpr IntArrayRef(std::span<const int64_t> s) : data_(s.data()), size_(s.size()) {}
  constexpr IntArrayRef(const int64_t* p, size_t n) : data_(p), size_(n) {}

  constexpr const int64_t* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const int64_t* begin() const { return data_; }
  constexpr const int64_t* end() const { return data_ + size_; }
  constexpr int64_t operator[](size_t i) const { return data_[i]; }
  constexpr int64_t back() const { return data_[size_ - 1]; }
  constexpr operator std::span<const int64_t>() const { return {data_, size_}; }
  SmallVector<int64_t, 6> vec() const { return SmallVector<int64_t, 6>(begin(), end()); }
  friend bool operator==(IntArrayRef a, IntArrayRef b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  const int64_t* data_ = nullptr;
  size_t size_ = 0;
};

using IntList = IntArrayRef;

inline std::ostream& operator<<(std::ostream& os, IntArrayRef s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os << ']';
}
inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << IntArrayRef(s); }

inline bool operator==(const Shape& a, const std::vector<int64_t>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// Number of elements of a shape (1 for a scalar). Throws on overflow or a negative size.
int64_t shape_numel(IntList shape, const char* op = "shape");

// Contiguous (row-major) strides in elements.
Shape contiguous_strides(IntList shape);

// Wraps a possibly negative dim into [0, ndim); throws IndexError naming `op` otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// Broadcasts two shapes with NumPy rules; throws ShapeError naming `op` when they do not match.
Shape broadcast_shapes(IntList a, IntList b, const char* op);
// The same without throwing: nullopt when they do not match (and the first mismatched dim of the
// broadcast shape in *mismatch, if given), for callers that report the error in their own terms.
std::optional<Shape> try_broadcast_shapes(IntList a, IntList b, size_t* mismatch = nullptr);

}  // namespace nabla
