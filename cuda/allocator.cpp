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
#include "cuda/common.h"

namespace nabla::cuda {

namespace {

constexpr int kMaxDevices = 64;
constexpr size_t kMiB = size_t(1) << 20;

// Rounded size of a request (see the header).
size_t round_size(size_t n) {
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

struct Block {
  void* ptr = nullptr;
  size_t size = 0;               // rounded size
  int device = 0;
  cudaStream_t stream = nullptr;  // the stream it was allocated on (device blocks)
  std::vector<cudaStream_t> used_on;  // other streams it was used on (record_stream)
};

// Events still to complete before a freed block may be reused.
struct Pending {
  Block* block;
  std::vector<cudaEvent_t> events;
};

// Free blocks by size for one (device, stream); for pinned memory, stream is null.
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
struct DeviceState {
  std::unordered_map<cudaStream_t, FreeList> free;
  std::vector<Pending> pending;
  size_t allocated = 0, cached = 0, pending_bytes = 0, peak = 0;
  uint64_t allocs = 0, frees = 0, ooms = 0;
};

class CachingAllocator {
 public:
  // try_only: on out-of-memory return nullptr at once, without releasing the cache, retrying or
  // counting an OOM (probes for optional workspaces).
  void* allocate(int device, size_t nbytes, bool try_only = false) {
    if (nbytes == 0) return nullptr;
    DeviceScope ds(device);
    cudaStream_t stream = stream_for(device);
    size_t want = round_size(nbytes);
    {
      std::lock_guard lock(mu_);
      DeviceState& st = dev_[device];
      process_pending(st);
      auto it = st.free.find(stream);
      if (it != st.free.end()) {
        if (Block* b = take(it->second, want)) {
          st.cached -= b->size;
          on_alloc(st, b);
          return b->ptr;
        }
      }
    }
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, want);
    if (err == cudaErrorMemoryAllocation && try_only) {
      (void)cudaGetLastError();
      return nullptr;
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: this error must not surface in a later check
      release_cached(device);
      err = cudaMalloc(&p, want);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      size_t allocated, reserved;
      {
        std::lock_guard lock(mu_);
        DeviceState& st = dev_[device];
        ++st.ooms;
        allocated = st.allocated;
        reserved = st.allocated + st.cached + st.pending_bytes;
      }
      throw CudaOutOfMemory(detail::str(
          "CUDA out of memory: tried to allocate ", bytes_str(want), " (", nbytes, " bytes requested) on cuda:", device,
          "; the device has ", bytes_str(free_b), " free of ", bytes_str(total_b), " total; nabla holds ",
          bytes_str(allocated), " in tensors and ", bytes_str(reserved), " reserved (cached blocks were released "
          "before this error). Free tensors you no longer need or use smaller batches."));
    }
    NABLA_CUDA_CHECK(err);
    auto* b = new Block{p, want, device, stream, {}};
    std::lock_guard lock(mu_);
    DeviceState& st = dev_[device];
    ++st.allocs;
    on_alloc(st, b);
    return p;
  }

  // Never throws: runs from tensor destructors.
  void deallocate(void* p) noexcept {
    if (!p) return;
    try {
      std::lock_guard lock(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return;  // not ours (cannot happen for tensors made by nabla)
      Block* b = it->second;
      live_.erase(it);
      DeviceState& st = dev_[b->device];
      st.allocated -= b->size;
      if (!b->used_on.empty()) {
        Pending pd{b, {}};
        DeviceScope ds(b->device);
        for (cudaStream_t s : b->used_on) {
          cudaEvent_t e = event_pool().get(b->device);
          if (cudaEventRecord(e, s) != cudaSuccess) {
            (void)cudaGetLastError();
            // Cannot track the use: wait for everything instead.
            if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
            event_pool().put(b->device, e);
            continue;
          }
          pd.events.push_back(e);
        }
        b->used_on.clear();
        if (!pd.events.empty()) {
          st.pending_bytes += b->size;
          st.pending.push_back(std::move(pd));
          return;
        }
      }
      st.free[b->stream][b->size].push_back(b);
      st.cached += b->size;
    } catch (...) {
      // A failure while freeing must not terminate the program; the block is leaked.
    }
  }

  void record_stream(const Tensor& t, cudaStream_t stream) {
    void* base = t.impl()->storage->data;
    if (!base) return;
    std::lock_guard lock(mu_);
    auto it = live_.find(base);
    check<ValueError>(it != live_.end(), "record_stream: the tensor's memory was not allocated by nabla's CUDA "
                                         "allocator (from_blob memory is not tracked)");
    Block* b = it->second;
    if (stream == b->stream) return;
    if (std::find(b->used_on.begin(), b->used_on.end(), stream) == b->used_on.end()) b->used_on.push_back(stream);
  }

  MemoryStats stats(int device) {
    std::lock_guard lock(mu_);
    DeviceState& st = dev_[device];
    MemoryStats s;
    s.allocated_bytes = st.allocated;
    s.reserved_bytes = st.allocated + st.cached + st.pending_bytes;
    s.peak_allocated_bytes = st.peak;
    s.device_allocs = st.allocs;
    s.device_frees = st.frees;
    s.num_ooms = st.ooms;
    return s;
  }

  void reset_peak(int device) {
    std::lock_guard lock(mu_);
    dev_[device].peak = dev_[device].allocated;
  }

  // Frees every cached block of `device` (waiting for pending ones first).
  void release_cached(int device) {
    std::vector<Block*> to_free;
    std::vector<Pending> pending;
    {
      std::lock_guard lock(mu_);
      DeviceState& st = dev_[device];
      // Nothing cached: return before selecting the device, which would create a context there.
      if (st.free.empty() && st.pending.empty()) return;
      for (auto& [stream, list] : st.free)
        for (auto& [size, blocks] : list) to_free.insert(to_free.end(), blocks.begin(), blocks.end());
      st.free.clear();
      st.cached = 0;
      pending.swap(st.pending);
      st.pending_bytes = 0;
    }
    DeviceScope ds(device);
    for (Pending& pd : pending) {
      for (cudaEvent_t e : pd.events) {
        if (cudaEventSynchronize(e) != cudaSuccess) (void)cudaGetLastError();
        event_pool().put(device, e);
      }
      to_free.push_back(pd.block);
    }
    uint64_t n = 0;
    for (Block* b : to_free) {
      if (cudaFree(b->ptr) != cudaSuccess) (void)cudaGetLastError();
      delete b;
      ++n;
    }
    std::lock_guard lock(mu_);
    dev_[device].frees += n;
  }

 private:
  void on_alloc(DeviceState& st, Block* b) {
    st.allocated += b->size;
    st.peak = std::max(st.peak, st.allocated);
    live_[b->ptr] = b;
  }

  // Moves blocks whose events have all completed to their free lists (mu_ held).
  void process_pending(DeviceState& st) {
    if (st.pending.empty()) return;
    for (size_t i = 0; i < st.pending.size();) {
      Pending& pd = st.pending[i];
      bool done = true;
      for (cudaEvent_t e : pd.events) {
        cudaError_t r = cudaEventQuery(e);
        if (r == cudaErrorNotReady) {
          (void)cudaGetLastError();
          done = false;
          break;
        }
      }
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : pd.events) event_pool().put(pd.block->device, e);
      st.pending_bytes -= pd.block->size;
      st.cached += pd.block->size;
      st.free[pd.block->stream][pd.block->size].push_back(pd.block);
      st.pending[i] = std::move(st.pending.back());
      st.pending.pop_back();
    }
  }

  std::mutex mu_;
  std::unordered_map<void*, Block*> live_;
  std::array<DeviceState, kMaxDevices> dev_;
};

CachingAllocator& caching() {
  static auto* a = new CachingAllocator();  // never destroyed: tensors may outlive main()
  return *a;
}

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t n) override { return caching().allocate(device_, n); }
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
    size_t want = round_size(nbytes);
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
    live_[p] = new Block{p, want, -1, nullptr, {}};
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
  MemoryStats s = caching().stats(device);
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
  for (int d = 0; d < n && d < kMaxDevices; ++d) caching().release_cached(d);
  pinned().release_cached();
}

void allocator_record_stream(const Tensor& t, cudaStream_t stream) {
  check<DeviceError>(t.is_cuda(), "record_stream: expected a CUDA tensor, got one on ", t.device());
  caching().record_stream(t, stream);
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
  void* p = caching().allocate(device, nbytes, /*try_only=*/true);
  if (!p) return Tensor();
  return from_blob(p, {static_cast<int64_t>(nbytes)}, [](void* q) { caching().deallocate(q); },
                   TensorOptions().dtype(DType::u8).device(Device::cuda(static_cast<int16_t>(device))));
}

size_t available_bytes(int device) {
  DeviceScope ds(device);
  size_t free_b = 0, total_b = 0;
  NABLA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  MemoryStats st = allocator_stats(device);
  return free_b + (st.reserved_bytes - st.allocated_bytes);
}

}  // namespace nabla::cuda
