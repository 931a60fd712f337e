// Scalar: a C++ number passed to an op (x + 2, full(shape, 0.5), clamp(x, 0, 6)).
// It remembers whether it was a floating, integral or bool value, which drives type promotion
// the way Python numbers do in PyTorch (int tensor + 2.5 -> float32, int tensor + 2 -> int).
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "dtype.h"

namespace nabla {

class Scalar {
 public:
  enum class Kind : uint8_t { floating, integral, boolean };

  Scalar() : kind_(Kind::integral), i_(0) {}
  template <class T>
  requires std::is_arithmetic_v<T> Scalar(T v) {
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::boolean;
      i_ = v;
    } else if constexpr (std::is_floating_point_v<T>) {
      kind_ = Kind::floating;
      d_ = static_cast<double>(v);
    } else {
      kind_ = Kind::integral;
      i_ = static_cast<int64_t>(v);
    }
  }
  Scalar(Half h) : kind_(Kind::floating), d_(static_cast<float>(h)) {}
  Scalar(BFloat16 h) : kind_(Kind::floating), d_(static_cast<float>(h)) {}

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::floating; }
  bool is_integral() const { return kind_ == Kind::integral; }
  bool is_bool() const { return kind_ == Kind::boolean; }

  double to_double() const { return kind_ == Kind::floating ? d_ : static_cast<double>(i_); }
  // Truncates a floating value toward zero; a NaN, an infinity or a value outside int64 (whose
  // conversion is undefined behaviour) is a ValueError, as PyTorch refuses such conversions.
  int64_t to_int() const {
    if (kind_ != Kind::floating) return i_;
    if (!(d_ >= -9223372036854775808.0 && d_ < 9223372036854775808.0)) [[unlikely]]
      throw_not_an_int64(d_);
    return static_cast<int64_t>(d_);
  }
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return kind_ == Kind::floating ? d_ != 0 : i_ != 0;
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int());
    } else {
      return static_cast<T>(kind_ == Kind::floating ? d_ : static_cast<double>(i_));
    }
  }
  // The dtype a tensor made from this scalar alone would have (float32, int64 or bool).
  DType dtype() const {
    return kind_ == Kind::floating ? DType::f32 : kind_ == Kind::integral ? DType::i64 : DType::boolean;
  }

  [[noreturn]] static void throw_not_an_int64(double v);  // (core/tensor.cpp)

  friend std::ostream& operator<<(std::ostream& os, const Scalar& s) {
    if (s.kind_ == Kind::floating) return os << s.d_;
    if (s.kind_ == Kind::boolean) return os << (s.i_ ? "true" : "false");
    return os << s.i_;
  }

 private:
  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

}  // namespace nabla
