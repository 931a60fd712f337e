// TORCH_ARG(T, name): libtorch's builder field, as its options classes and users' own options use
// it. It declares a private member name_ and the accessors name() (read) and name(value) (set,
// returning *this for chaining): LinearOptions(784, 64).bias(false).
#pragma once

#include <utility>

#define TORCH_ARG(T, name)                                        \
 public:                                                          \
  inline auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                                   \
    return *this;                                                 \
  }                                                               \
  inline auto name(T&& new_##name)->decltype(*this) {             \
    this->name##_ = std::move(new_##name);                        \
    return *this;                                                 \
  }                                                               \
  inline const T& name() const noexcept { return this->name##_; } \
  inline T& name() noexcept { return this->name##_; }             \
                                                                  \
 private:                                                         \
  T name##_
