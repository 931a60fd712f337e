// The CUDA caching allocators (internal to cuda/).
//
// Device memory: the policy of cuda/caching_allocator.h (PyTorch's): blocks cut from cudaMalloc'd
// segments, kept per (device, stream) for the next request on that stream, merged when freed; a
// tensor used on another stream is announced with record_stream() and its block comes back only
// after events recorded on those streams have completed. When cudaMalloc fails, cached segments are
// released (other streams' and the largest first, then all) and the allocation retried; a last
// failure throws CudaOutOfMemory with the requested and free sizes (the error is cleared, so later,
// smaller allocations work).
//
// Pinned (page-locked) host memory for pin_memory() and non_blocking copies is cached by size (up
// to 1 MiB four buckets per power of two, at least 512 bytes, above that multiples of 2 MiB; a
// request may take a cached block up to 25% larger). A block used by an asynchronous copy is
// reused only after the copy has completed. The policy is cuda/pinned_policy.h (plain C++, tested
// on a fake runtime), as cuda/caching_allocator.h is for device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "../core/allocator.h"
#include "../core/cuda_api.h"
#include "../core/tensor.h"

namespace nabla::cuda {

Allocator& device_allocator(int device);
Allocator& pinned_allocator();

MemoryStats allocator_stats(int device);
void allocator_reset_peak(int device);
void allocator_empty_cache();

// `t` (on a CUDA device) is used by work on `stream`; its memory is not reused before that work ends.
void allocator_record_stream(const Tensor& t, cudaStream_t stream);
// `t` (pinned host memory) is read or written by an asynchronous copy queued on `stream`.
void pinned_record_use(const Tensor& t, cudaStream_t stream);

// A scratch buffer of `nbytes` on `device` from the caching allocator (a uint8 tensor; keep it
// alive while queued work uses it, then let it go: the memory returns to the current stream's cache).
Tensor scratch(size_t nbytes, int device);
// The same, or an undefined tensor when the memory is not there: no cache release, no retry, no OOM
// counted (for optional workspaces and probes, which then ask for less).
Tensor try_scratch(size_t nbytes, int device);
// What an allocation on `device` can get at most: the driver's free memory plus the cached blocks.
size_t available_bytes(int device);

}  // namespace nabla::cuda
