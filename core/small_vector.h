// A vector that keeps up to N elements inline (no heap allocation) and spills to the heap beyond.
// Shapes, strides and autograd edge lists live in these so the op path does not call malloc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <new>
#include <span>
#include <type_traits>
#include <vector>

namespace nabla {

template <class T, size_t N>
class SmallVector {
  static_assert(std::is_nothrow_move_constructible_v<T>);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() = default;
  explicit SmallVector(size_t n, const T& v = T()) { assign(n, v); }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It>
  requires(!std::is_integral_v<It>) SmallVector(It first, It last) { assign(first, last); }
  explicit SmallVector(std::span<const T> s) { assign(s.begin(), s.end()); }

  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { take(std::move(o)); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      destroy();
      take(std::move(o));
    }
    return *this;
  }
  ~SmallVector() { destroy(); }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return ptr_; }
  T* end() { return ptr_ + size_; }
  const T* begin() const { return ptr_; }
  const T* end() const { return ptr_ + size_; }
  T& operator[](size_t i) { return ptr_[i]; }
  const T& operator[](size_t i) const { return ptr_[i]; }
  T& back() { return ptr_[size_ - 1]; }
  const T& back() const { return ptr_[size_ - 1]; }
  T& front() { return ptr_[0]; }
  const T& front() const { return ptr_[0]; }
  // A std::vector copy (libtorch's x.sizes().vec()).
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  void clear() {
    std::destroy(ptr_, ptr_ + size_);
    size_ = 0;
  }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void resize(size_t n, const T& v = T()) {
    if (n < size_) {
      std::destroy(ptr_ + n, ptr_ + size_);
    } else {
      reserve(n);
      std::uninitialized_fill(ptr_ + size_, ptr_ + n, v);
    }
    size_ = n;
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      T copy = v;  // v may alias our storage
      grow(cap_ * 2);
      new (ptr_ + size_++) T(std::move(copy));
    } else {
      new (ptr_ + size_++) T(v);
    }
  }
  void push_back(T&& v) {
    if (size_ == cap_) grow(cap_ * 2);
    new (ptr_ + size_++) T(std::move(v));
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    if (size_ == cap_) grow(cap_ * 2);
    return *new (ptr_ + size_++) T(std::forward<A>(a)...);
  }
  void pop_back() { ptr_[--size_].~T(); }
  T* insert(T* pos, const T& v) {
    size_t idx = pos - ptr_;
    push_back(v);
    std::rotate(ptr_ + idx, ptr_ + size_ - 1, ptr_ + size_);
    return ptr_ + idx;
  }
  T* erase(T* pos) {
    std::move(pos + 1, end(), pos);
    pop_back();
    return pos;
  }

  operator std::span<const T>() const { return {ptr_, size_}; }

  template <class It>
  requires(!std::is_integral_v<It>) void assign(It first, It last) {
    clear();
    size_t n = static_cast<size_t>(std::distance(first, last));
    reserve(n);
    std::uninitialized_copy(first, last, ptr_);
    size_ = n;
  }
  void assign(size_t n, const T& v) {
    clear();
    reserve(n);
    std::uninitialized_fill(ptr_, ptr_ + n, v);
    size_ = n;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool is_inline() const { return ptr_ == reinterpret_cast<const T*>(inline_); }
  void grow(size_t n) {
    n = std::max<size_t>(n, N + 1);
    T* mem = static_cast<T*>(::operator new(n * sizeof(T)));
    std::uninitialized_move(ptr_, ptr_ + size_, mem);
    std::destroy(ptr_, ptr_ + size_);
    if (!is_inline()) ::operator delete(ptr_);
    ptr_ = mem;
    cap_ = n;
  }
  void destroy() {
    std::destroy(ptr_, ptr_ + size_);
    if (!is_inline()) ::operator delete(ptr_);
    ptr_ = reinterpret_cast<T*>(inline_);
    size_ = 0;
    cap_ = N;
  }
  void take(SmallVector&& o) {
    if (o.is_inline()) {
      ptr_ = reinterpret_cast<T*>(inline_);
      cap_ = N;
      std::uninitialized_move(o.ptr_, o.ptr_ + o.size_, ptr_);
      size_ = o.size_;
      o.clear();
    } else {
      ptr_ = o.ptr_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.ptr_ = reinterpret_cast<T*>(o.inline_);
      o.size_ = 0;
      o.cap_ = N;
    }
  }

  T* ptr_ = reinterpret_cast<T*>(inline_);
  size_t size_ = 0;
  size_t cap_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace nabla
