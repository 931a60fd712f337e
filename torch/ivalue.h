// torch::IValue (c10::IValue): the value AutogradContext::saved_data holds, as libtorch's: a
// tensor, a double, an int, a bool, a string or a list of ints, read back with toTensor(),
// toDouble(), toInt(), ... (each throws an nabla::Error naming both kinds when the value is another).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "types.h"

namespace torch {

class IValue {
 public:
  IValue() = default;
  IValue(Tensor t) : v_(std::move(t)) {}  // NOLINT(google-explicit-constructor): saved_data["w"] = w
  IValue(double d) : v_(d) {}             // NOLINT(google-explicit-constructor)
  IValue(bool b) : v_(b) {}               // NOLINT(google-explicit-constructor)
  template <class I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) IValue(I i)  // NOLINT(google-explicit-constructor)
      : v_(static_cast<int64_t>(i)) {}
  IValue(std::string s) : v_(std::move(s)) {}                 // NOLINT(google-explicit-constructor)
  IValue(const char* s) : v_(std::string(s)) {}               // NOLINT(google-explicit-constructor)
  IValue(std::vector<int64_t> list) : v_(std::move(list)) {}  // NOLINT(google-explicit-constructor)

  bool isNone() const { return v_.index() == 0; }
  bool isTensor() const { return std::holds_alternative<Tensor>(v_); }
  bool isDouble() const { return std::holds_alternative<double>(v_); }
  bool isInt() const { return std::holds_alternative<int64_t>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(v_); }

  const Tensor& toTensor() const { return get<Tensor>("Tensor"); }
  double toDouble() const { return get<double>("Double"); }
  int64_t toInt() const { return get<int64_t>("Int"); }
  bool toBool() const { return get<bool>("Bool"); }
  const std::string& toStringRef() const { return get<std::string>("String"); }
  const std::vector<int64_t>& toIntVector() const { return get<std::vector<int64_t>>("IntList"); }
  // "None", "Tensor", "Double", "Int", "Bool", "String" or "IntList".
  const char* tagKind() const;

 private:
  template <class T>
  const T& get(const char* kind) const {
    const T* p = std::get_if<T>(&v_);
    NABLA_CHECK(nabla::ValueError, p != nullptr, "IValue: expected ", kind, " but got ", tagKind());
    return *p;
  }
  std::variant<std::monostate, Tensor, double, int64_t, bool, std::string, std::vector<int64_t>> v_;
};

}  // namespace torch

namespace c10 {
using torch::IValue;
}  // namespace c10
