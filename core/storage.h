// Storage: one block of memory on one device, shared by a tensor and all of its views.
// The version counter lives here too, so an in-place write through any view bumps it for all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "allocator.h"
#include "device.h"
#include "intrusive_ptr.h"

namespace nabla {

struct StorageImpl final : RefCounted, Pooled {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;      // owner of `data`; null for caller-owned memory
  std::function<void(void*)> deleter;  // for from_blob with a deleter
  uint32_t version = 0;                // bumped by every in-place op on any view
  bool pinned = false;                 // page-locked host memory (CUDA pinned buffers)

  StorageImpl(size_t n, Device dev, Allocator* alloc)
      : data(alloc->allocate(n)), nbytes(n), device(dev), allocator(alloc) {}
  StorageImpl(void* ptr, size_t n, Device dev, std::function<void(void*)> del)
      : data(ptr), nbytes(n), device(dev), deleter(std::move(del)) {}
  ~StorageImpl() override {
    if (allocator) {
      allocator->deallocate(data, nbytes);
    } else if (deleter) {
      deleter(data);
    }
  }
};

using Storage = intrusive_ptr<StorageImpl>;

}  // namespace nabla
