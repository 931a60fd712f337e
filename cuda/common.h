// Internal to the CUDA backend (cuda/): error checking, device and stream helpers. Never included
// above core (DESIGN: only cuda/ sees CUDA headers).
//
// Every CUDA runtime call goes through NABLA_CUDA_CHECK, which throws CudaError (CudaOutOfMemory
// for cudaErrorMemoryAllocation) with the runtime's own message, the call and its place. Kernel
// launches are followed by NABLA_KERNEL_CHECK("name"), which turns a launch error into CudaError.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../core/cuda_api.h"
#include "../core/error.h"
#include "../core/tensor.h"

namespace nabla::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);

#define NABLA_CUDA_CHECK(expr)                                                \
  do {                                                                        \
    cudaError_t nabla_err_ = (expr);                                          \
    if (nabla_err_ != cudaSuccess) [[unlikely]]                               \
      ::nabla::cuda::throw_cuda_error(nabla_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: a bad configuration (or a sticky error of an earlier kernel) becomes a
// CudaError naming the kernel.
#define NABLA_KERNEL_CHECK(name)                                                          \
  do {                                                                                    \
    cudaError_t nabla_err_ = cudaGetLastError();                                          \
    if (nabla_err_ != cudaSuccess) [[unlikely]]                                           \
      ::nabla::cuda::throw_cuda_error(nabla_err_, "launch of " name, __FILE__, __LINE__); \
  } while (0)

// The device index of a CUDA tensor.
inline int device_of(const Tensor& t) { return t.device().index; }

// The current device of this thread. Not cached: cudaGetDevice only reads the runtime's per-thread
// state, and a cache would go stale when user code calls cudaSetDevice itself.
int get_device();
void set_device_fast(int device);

// Selects `device` for a scope (no runtime call when it is already current).
class DeviceScope {
 public:
  explicit DeviceScope(int device) : prev_(get_device()) {
    if (device != prev_) set_device_fast(device);
  }
  explicit DeviceScope(const Tensor& t) : DeviceScope(device_of(t)) {}
  // Never throws (see StreamGuard in core/cuda_api.cpp): a failure to switch back is ignored.
  ~DeviceScope() {
    try {
      if (get_device() != prev_) set_device_fast(prev_);
    } catch (...) {}
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int prev_;
};

// The stream ops of this thread run on, for `device`.
inline cudaStream_t stream_for(int device) { return static_cast<cudaStream_t>(current_stream(device).handle()); }
inline cudaStream_t stream_of(const Tensor& t) { return stream_for(device_of(t)); }

// Properties used to size launches (cached per device).
int sm_count(int device);
int max_threads_per_sm(int device);

// Blocks of `threads` needed for `n` items, capped at what the grid allows.
inline unsigned blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 0x7fffffffLL) b = 0x7fffffffLL;
  return static_cast<unsigned>(b);
}

// Launch shape for kernels that walk `outer` x `inner` lines (see internal::lines_of): with inner == 1
// each line is contiguous and a warp takes one (8 lines per 32x8 block); otherwise one thread per
// line, neighbouring threads on neighbouring (strided) lines so their reads coalesce.
inline void line_launch_shape(int64_t outer, int64_t inner, dim3& grid, dim3& block) {
  if (inner == 1) {
    block = dim3(32, 8);
    grid = dim3(blocks_for(outer, 8));
  } else {
    block = dim3(256);
    grid = dim3(blocks_for(outer * inner, 256));
  }
}

}  // namespace nabla::cuda
