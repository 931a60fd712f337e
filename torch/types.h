// torch::Tensor, dtypes, devices, guards, seeds and the check macros, as libtorch spells them.
//
//   torch::DeviceType t = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
//   torch::Device device(t);
//   torch::Tensor x = torch::randn({2, 3}, torch::dtype(torch::kFloat).requires_grad(true));
//   TORCH_CHECK(x.dim() == 2, "expected a matrix, got ", x.sizes());
//
// torch::Tensor is nabla::Tensor itself (not a wrapper), so a tensor passes between torch:: code
// and nabla:: code unchanged. torch::kCPU and torch::kCUDA are Devices that convert to their
// DeviceType (libtorch's are DeviceTypes that convert to a Device): both spellings compile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/device.h"
#include "../core/dtype.h"
#include "../core/error.h"
#include "../core/generator.h"
#include "../core/graph.h"
#include "../core/ops.h"
#include "../core/tensor.h"
#include "../nn/module.h"

// The libtorch API the layer follows (2.x; where 1.13 and 2.x differ, 2.x), for a program's
// #if TORCH_VERSION_MAJOR >= 2 checks.
#define TORCH_VERSION_MAJOR 2
#define TORCH_VERSION_MINOR 0
#define TORCH_VERSION_PATCH 0
#define TORCH_VERSION "2.0.0"

namespace torch {

using nabla::IntArrayRef;
using nabla::Scalar;
using nabla::Tensor;
using nabla::TensorOptions;
using IntList = nabla::IntArrayRef;
using nabla::dtype;
using nabla::requires_grad;
template <size_t D>
using ExpandingArray = nabla::nn::ExpandingArray<D>;
template <class T>
using optional = std::optional<T>;
inline constexpr std::nullopt_t nullopt = std::nullopt;
// libtorch's tensor_list / variable_list.
using TensorList = std::vector<Tensor>;

// A non-owning list of T (c10::ArrayRef): from a std::vector, a braced list or one value. Like
// std::span it must not outlive what it points to; use it for parameters.
template <class T>
class ArrayRef {
 public:
  ArrayRef() = default;
  ArrayRef(const T& one) : data_(&one), size_(1) {}                        // NOLINT(google-explicit-constructor)
  ArrayRef(const std::vector<T>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT(google-explicit-constructor)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  ArrayRef(std::initializer_list<T> list) : data_(list.begin()), size_(list.size()) {}  // NOLINT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  ArrayRef(const T* data, size_t size) : data_(data), size_(size) {}
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

// ---- dtypes -------------------------------------------------------------------------------------
using ScalarType = nabla::DType;
using Dtype = nabla::DType;
using nabla::kBFloat16;
using nabla::kBool;
using nabla::kByte;
using nabla::kDouble;
using nabla::kFloat;
using nabla::kFloat16;
using nabla::kFloat32;
using nabla::kFloat64;
using nabla::kHalf;
using nabla::kInt;
using nabla::kInt32;
using nabla::kInt64;
using nabla::kLong;
using nabla::kUInt8;

// ---- devices ------------------------------------------------------------------------------------
using nabla::Device;
using DeviceType = nabla::DeviceType;
// torch::kCPU and torch::kCUDA: the Device (cpu, cuda:0) that also converts to its DeviceType, so
// that both of libtorch's uses compile: `torch::DeviceType t = torch::kCUDA;` (and `case
// torch::kCUDA:`, `t == torch::kCUDA`) and `x.to(torch::kCUDA)`, `model->to(torch::kCPU)`.
struct DeviceTypeConstant : Device {
  constexpr explicit DeviceTypeConstant(DeviceType t) : Device(t) {}
  constexpr operator DeviceType() const { return type; }  // NOLINT(google-explicit-constructor)
  friend constexpr bool operator==(DeviceTypeConstant a, DeviceType b) { return a.type == b; }
};
inline constexpr DeviceTypeConstant kCPU{DeviceType::cpu};
inline constexpr DeviceTypeConstant kCUDA{DeviceType::cuda};
inline TensorOptions device(Device d) { return TensorOptions(d); }

namespace cuda {
using nabla::cuda::device_count;
using nabla::cuda::is_available;
// The CUDA generator's seed (libtorch's torch::cuda::manual_seed and manual_seed_all: nabla has one
// generator for all GPUs).
inline void manual_seed(uint64_t seed) { nabla::default_generator(nabla::Device::cuda()).manual_seed(seed); }
inline void manual_seed_all(uint64_t seed) { manual_seed(seed); }
}  // namespace cuda

// torch::indexing::Slice, None, Ellipsis for x.index({...}): nabla's.
namespace indexing {
using namespace nabla::indexing;  // NOLINT(google-build-using-namespace)
}  // namespace indexing

// ---- gradient mode and seeds --------------------------------------------------------------------
using nabla::AutoGradMode;
using nabla::InferenceMode;
using nabla::is_grad_enabled;
using nabla::manual_seed;
using nabla::NoGradGuard;
using nabla::set_grad_enabled;

namespace detail {
// TORCH_CHECK's failing branch: libtorch's message ("Expected cond to be true, but got false.")
// when no message was given, else the message parts streamed together.
template <class... Args>
[[noreturn, gnu::cold, gnu::noinline]] void check_failed(const char* kind, const char* cond, const Args&... args) {
  if constexpr (sizeof...(Args) == 0) {
    throw nabla::Error(nabla::internal::str(kind, "Expected ", cond, " to be true, but got false."));
  } else {
    throw nabla::Error(nabla::internal::str(kind, args...));
  }
}
}  // namespace detail

}  // namespace torch

// libtorch's c10:: spellings of the same, for code that names them (c10::optional<size_t> in a
// dataset's size(), c10::ArrayRef in get_batch, c10::Error in a catch).
namespace c10 {
using Error = nabla::Error;
using torch::ArrayRef;
using torch::Device;
using torch::DeviceType;
using torch::IntArrayRef;
using torch::kCPU;
using torch::kCUDA;
using torch::nullopt;
using torch::optional;
using torch::ScalarType;
}  // namespace c10

// TORCH_CHECK(cond, msg...): throws an nabla::Error (c10::Error here) with the message when cond is
// false; the message parts are evaluated only then. AT_ASSERT / TORCH_INTERNAL_ASSERT: the same,
// for conditions that a bug broke, with libtorch's "INTERNAL ASSERT FAILED" prefix.
#define TORCH_CHECK(cond, ...)                                             \
  do {                                                                     \
    if (!(cond)) [[unlikely]]                                              \
      ::torch::detail::check_failed("", #cond __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#define TORCH_INTERNAL_ASSERT(cond, ...)                                                                      \
  do {                                                                                                        \
    if (!(cond)) [[unlikely]]                                                                                 \
      ::torch::detail::check_failed("INTERNAL ASSERT FAILED: " #cond ". ", #cond __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#define AT_ASSERT(cond, ...) TORCH_INTERNAL_ASSERT(cond __VA_OPT__(, ) __VA_ARGS__)
