// Memory for tensor data. Each device type has an Allocator; the CPU one caches freed blocks in
// size-bucketed free lists so a training step in steady state does not call malloc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device.h"

namespace nabla {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `nbytes` (64-byte aligned on the CPU); throws on failure. nbytes may be 0.
  virtual void* allocate(size_t nbytes) = 0;
  // Gives back memory from allocate(); `nbytes` must be the size it was allocated with.
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

// The CPU caching allocator.
Allocator& cpu_allocator();

struct CpuMemoryStats {
  size_t allocated_bytes;  // bytes in live tensors (rounded to bucket sizes)
  size_t reserved_bytes;   // allocated_bytes plus cached free blocks
  uint64_t system_allocs;  // calls that reached the system allocator (aligned_alloc) so far
};
CpuMemoryStats cpu_memory_stats();
// Returns every cached free block to the system.
void cpu_empty_cache();

// A fixed-size-class pool for small bookkeeping objects (TensorImpl, Storage, autograd nodes):
// per-thread free lists, so creating a tensor in steady state does not reach malloc either.
void* pool_allocate(size_t nbytes);
void pool_deallocate(void* ptr, size_t nbytes);

// Objects that derive from Pooled<T> are allocated from the pool.
struct Pooled {
  static void* operator new(size_t n) { return pool_allocate(n); }
  static void operator delete(void* p, size_t n) { pool_deallocate(p, n); }
};

}  // namespace nabla
