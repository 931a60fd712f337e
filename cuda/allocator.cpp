// The CUDA caching allocators: device memory per (device, stream) and pinned host memory.
// See cuda/allocator.h for the policy.
#include "cuda/allocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/impl.h"
#include "cuda/caching_allocator.h"
#include "cuda/common.h"

namespace nabla::cuda {

namespace {

constexpr int kMaxDevices = CachingPolicy::kMaxDevices;
constexpr size_t kMiB = size_t(1) << 20;

// Rounded size of a pinned host request (see the header).
size_t pinned_round_size(size_t n) {
  if (n <= 512) return 512;
  if (n > kMiB) return (n + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
  int k = 63 - __builtin_clzll(n - 1);  // 2^k < n <= 2^(k+1)
  size_t step = size_t(1) << (k - 2);
  return (n + step - 1) & ~(step - 1);
}

// May a cached block of `size` serve a request rounded to `want`?
bool fits(size_t size, size_t want) { return size >= want && size - want <= want / 4; }

std::string bytes_str(size_t b) {
  char buf[64];
  if (b >= (size_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(size_t(1) << 30));
  else if (b >= kMiB) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(kMiB));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", double(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%zu bytes", b);
  return buf;
}

// A block of pinned host memory.
struct Block {
  void* ptr = nullptr;
  size_t size = 0;  // rounded size
};

// Free pinned blocks by size.
using FreeList = std::map<size_t, std::vector<Block*>>;

Block* take(FreeList& list, size_t want) {
  auto it = list.lower_bound(want);
  if (it == list.end() || !fits(it->first, want)) return nullptr;
  Block* b = it->second.back();
  it->second.pop_back();
  if (it->second.empty()) list.erase(it);
  return b;
}

// ---- event pool ---------------------------------------------------------------------------------
class EventPool {
 public:
  cudaEvent_t get(int device) {
    {
      std::lock_guard lock(mu_);
      auto& v = free_[device];
      if (!v.empty()) {
        cudaEvent_t e = v.back();
        v.pop_back();
        return e;
      }
    }
    DeviceScope ds(device);
    cudaEvent_t e;
    NABLA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void put(int device, cudaEvent_t e) {
    std::lock_guard lock(mu_);
    free_[device].push_back(e);
  }

 private:
  std::mutex mu_;
  std::array<std::vector<cudaEvent_t>, kMaxDevices> free_;
};

EventPool& event_pool() {
  static auto* p = new EventPool();  // never destroyed: used by frees during exit
  return *p;
}

// ---- device memory ------------------------------------------------------------------------------
// The CUDA runtime under the caching policy (cuda/caching_allocator.h).
class CudaRuntime final : public AllocRuntime {
 public:
  void* malloc(int device, size_t bytes) override {
    DeviceScope ds(device);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: this error must not surface in a later check
      return nullptr;
    }
    NABLA_CUDA_CHECK(err);
    return p;
  }
  void free(int device, void* p) override {
    DeviceScope ds(device);
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }
  void* record_event(int device, void* stream) override {
    cudaEvent_t e = event_pool().get(device);
    DeviceScope ds(device);
    if (cudaEventRecord(e, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      (void)cudaGetLastError();
      event_pool().put(device, e);
      return nullptr;
    }
    return e;
  }
  bool event_done(void* event) override {
    cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (r == cudaSuccess) return true;
    (void)cudaGetLastError();
    return r != cudaErrorNotReady;  // a failed event will never complete: do not wait on it forever
  }
  void event_wait(void* event) override {
    if (cudaEventSynchronize(static_cast<cudaEvent_t>(event)) != cudaSuccess) (void)cudaGetLastError();
  }
  void release_event(int device, void* event) override { event_pool().put(device, static_cast<cudaEvent_t>(event)); }
  void synchronize_device(int device) override {
    DeviceScope ds(device);
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  }
};

CachingPolicy& caching() {
  static auto* rt = new CudaRuntime();
  static auto* a = new CachingPolicy(*rt);  // never destroyed: tensors may outlive main()
  return *a;
}

// `nbytes` on `device` for the current stream; throws CudaOutOfMemory when even releasing the
// cache does not make room (try_only: returns nullptr instead, releasing nothing).
void* device_malloc(int device, size_t nbytes, bool try_only) {
  if (nbytes == 0) return nullptr;
  DeviceScope ds(device);
  size_t rounded = 0;
  void* p = caching().allocate(device, nbytes, stream_for(device), try_only, &rounded);
  if (p || try_only) return p;
  size_t free_b = 0, total_b = 0;
  (void)cudaMemGetInfo(&free_b, &total_b);
  (void)cudaGetLastError();
  CachingStats st = caching().stats(device);
  throw CudaOutOfMemory(detail::str(
      "CUDA out of memory: tried to allocate ", bytes_str(rounded), " (", nbytes, " bytes requested) on cuda:", device,
      "; the device has ", bytes_str(free_b), " free of ", bytes_str(total_b), " total; nabla holds ",
      bytes_str(st.allocated), " in tensors and ", bytes_str(st.reserved), " reserved (cached blocks were released "
      "before this error). Free tensors you no longer need or use smaller batches."));
}

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t n) override { return device_malloc(device_, n, /*try_only=*/false); }
  void deallocate(void* p, size_t) override { caching().deallocate(p); }

 private:
  int device_;
};

// ---- pinned host memory -------------------------------------------------------------------------
// An asynchronous copy that uses a pinned block: the event after it and the event's device.
struct HostUse {
  cudaEvent_t event;
  int device;
};

class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t want = pinned_round_size(nbytes);
    {
      std::lock_guard lock(mu_);
      process_pending();
      if (Block* b = take(free_, want)) {
        cached_ -= b->size;
        live_[b->ptr] = b;
        return b->ptr;
      }
    }
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, want, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached();
      err = cudaHostAlloc(&p, want, cudaHostAllocPortable);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw CudaOutOfMemory(detail::str("pinned host memory: out of page-locked memory allocating ",
                                        bytes_str(want), " (", nbytes, " bytes requested)"));
    }
    NABLA_CUDA_CHECK(err);
    std::lock_guard lock(mu_);
    live_[p] = new Block{p, want};
    reserved_ += want;
    return p;
  }

  void deallocate(void* p, size_t) noexcept override {
    if (!p) return;
    try {
      std::lock_guard lock(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return;
      Block* b = it->second;
      live_.erase(it);
      auto ev = uses_.find(p);
      if (ev != uses_.end()) {
        pending_.push_back({b, std::move(ev->second)});
        uses_.erase(ev);
        return;
      }
      free_[b->size].push_back(b);
      cached_ += b->size;
    } catch (...) {
    }
  }

  // The copy just queued on `stream` (of `device`) reads or writes the block at `base`.
  void record_use(void* base, int device, cudaStream_t stream) {
    if (!base) return;
    {
      std::lock_guard lock(mu_);
      if (!live_.count(base)) return;  // from_blob or unpinned memory: nothing to track
    }
    cudaEvent_t e = event_pool().get(device);
    NABLA_CUDA_CHECK(cudaEventRecord(e, stream));
    std::lock_guard lock(mu_);
    auto& v = uses_[base];
    // Keep the list short: drop uses that have completed.
    for (size_t i = 0; i < v.size();) {
      if (cudaEventQuery(v[i].event) == cudaSuccess) {
        event_pool().put(v[i].device, v[i].event);
        v[i] = v.back();
        v.pop_back();
      } else {
        (void)cudaGetLastError();
        ++i;
      }
    }
    v.push_back({e, device});
  }

  size_t reserved() {
    std::lock_guard lock(mu_);
    return reserved_;
  }

  void release_cached() {
    std::vector<Block*> to_free;
    std::vector<HostPending> pending;
    {
      std::lock_guard lock(mu_);
      for (auto& [size, blocks] : free_) to_free.insert(to_free.end(), blocks.begin(), blocks.end());
      free_.clear();
      cached_ = 0;
      pending.swap(pending_);
    }
    for (HostPending& pd : pending) {
      for (HostUse u : pd.uses) {
        if (cudaEventSynchronize(u.event) != cudaSuccess) (void)cudaGetLastError();
        event_pool().put(u.device, u.event);
      }
      to_free.push_back(pd.block);
    }
    for (Block* b : to_free) {
      if (cudaFreeHost(b->ptr) != cudaSuccess) (void)cudaGetLastError();
      std::lock_guard lock(mu_);
      reserved_ -= b->size;
      delete b;
    }
  }

 private:
  struct HostPending {
    Block* block;
    std::vector<HostUse> uses;
  };

  void process_pending() {  // mu_ held
    for (size_t i = 0; i < pending_.size();) {
      bool done = true;
      for (HostUse u : pending_[i].uses) {
        if (cudaEventQuery(u.event) != cudaSuccess) {
          (void)cudaGetLastError();
          done = false;
          break;
        }
      }
      if (!done) {
        ++i;
        continue;
      }
      for (HostUse u : pending_[i].uses) event_pool().put(u.device, u.event);
      Block* b = pending_[i].block;
      free_[b->size].push_back(b);
      cached_ += b->size;
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
  }

  std::mutex mu_;
  FreeList free_;
  std::unordered_map<void*, Block*> live_;
  std::unordered_map<void*, std::vector<HostUse>> uses_;
  std::vector<HostPending> pending_;
  size_t cached_ = 0, reserved_ = 0;
};

PinnedAllocator& pinned() {
  static auto* a = new PinnedAllocator();
  return *a;
}

}  // namespace

Allocator& device_allocator(int device) {
  static std::array<DeviceAllocator*, kMaxDevices> allocs = [] {
    std::array<DeviceAllocator*, kMaxDevices> a{};
    for (int i = 0; i < kMaxDevices; ++i) a[i] = new DeviceAllocator(i);
    return a;
  }();
  check<DeviceError>(device >= 0 && device < kMaxDevices, "CUDA allocator: device index ", device, " out of range");
  return *allocs[device];
}

Allocator& pinned_allocator() { return pinned(); }

MemoryStats allocator_stats(int device) {
  CachingStats c = caching().stats(device);
  MemoryStats s;
  s.allocated_bytes = c.allocated;
  s.reserved_bytes = c.reserved;
  s.peak_allocated_bytes = c.peak;
  s.device_allocs = c.segment_mallocs;
  s.device_frees = c.segment_frees;
  s.num_ooms = c.ooms;
  s.pinned_reserved_bytes = pinned().reserved();
  return s;
}
void allocator_reset_peak(int device) { caching().reset_peak(device); }
void allocator_empty_cache() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  for (int d = 0; d < n && d < kMaxDevices; ++d)
    if (caching().holds_memory(d)) {  // not on a device never used: selecting it would create a context
      DeviceScope ds(d);
      caching().release_cached(d);
    }
  pinned().release_cached();
}

void allocator_record_stream(const Tensor& t, cudaStream_t stream) {
  check<DeviceError>(t.is_cuda(), "record_stream: expected a CUDA tensor, got one on ", t.device());
  void* base = t.impl()->storage->data;
  if (!base) return;
  check<ValueError>(caching().record_stream(base, stream), "record_stream: the tensor's memory was not allocated by "
                                                           "nabla's CUDA allocator (from_blob memory is not tracked)");
}

void pinned_record_use(const Tensor& t, cudaStream_t stream) {
  if (!t.is_pinned()) return;
  pinned().record_use(t.impl()->storage->data, get_device(), stream);
}

Tensor scratch(size_t nbytes, int device) {
  return detail::make_empty({static_cast<int64_t>(nbytes)}, DType::u8, Device::cuda(static_cast<int16_t>(device)));
}

Tensor try_scratch(size_t nbytes, int device) {
  if (nbytes == 0) return scratch(0, device);
  void* p = device_malloc(device, nbytes, /*try_only=*/true);
  if (!p) return Tensor();
  return from_blob(p, {static_cast<int64_t>(nbytes)}, [](void* q) { caching().deallocate(q); },
                   TensorOptions().dtype(DType::u8).device(Device::cuda(static_cast<int16_t>(device))));
}

size_t available_bytes(int device) {
  DeviceScope ds(device);
  size_t free_b = 0, total_b = 0;
  NABLA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b + caching().cached_bytes(device);
}

}  // namespace nabla::cuda
