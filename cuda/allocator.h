// The CUDA caching allocators (internal to cuda/).
//
// Device memory: freed blocks wait in free lists keyed by (device, stream, size) for the next
// request of about that size on the same stream, as in PyTorch: work on one stream runs in order,
// so a block freed by a kernel's owner can be handed to the next kernel on that stream at once.
// A tensor used on another stream is announced with record_stream(); its block then comes back only
// after events recorded on those streams have completed.
//
// Sizes are rounded: up to 1 MiB to four buckets per power of two (at least 512 bytes), above
// that to multiples of 2 MiB; a request may take a cached block up to 25% larger. When cudaMalloc
// fails, every cached block of the device is released and the allocation retried; a second failure
// throws CudaOutOfMemory with the requested and free sizes (the error is cleared, so later,
// smaller allocations work).
//
// Pinned (page-locked) host memory for pin_memory() and non_blocking copies is cached the same way;
// a block used by an asynchronous copy is reused only after the copy has completed.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/allocator.h"
#include "core/cuda_api.h"
#include "core/tensor.h"

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
