// The CUDA caching allocators: device memory per (device, stream) and pinned host memory.
// See cuda/allocator.h for the policy.
#include "cuda/allocator.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/impl.h"
#include "cuda/caching_allocator.h"
#include "cuda/common.h"
#include "cuda/pinned_policy.h"

namespace nabla::cuda {

namespace {

constexpr int kMaxDevices = CachingPolicy::kMaxDevices;
constexpr size_t kMiB = size_t(1) << 20;

std::string bytes_str(size_t b) {
  char buf[64];
  if (b >= (size_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(size_t(1) << 30));
  else if (b >= kMiB) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(kMiB));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", double(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%zu bytes", b);
  return buf;
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
  void* host_malloc(size_t bytes) override {
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    NABLA_CUDA_CHECK(err);
    return p;
  }
  void host_free(void* p) override {
    if (cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
  }
};

CudaRuntime& runtime() {
  static auto* rt = new CudaRuntime();  // never destroyed: tensors may outlive main()
  return *rt;
}

CachingPolicy& caching() {
  static auto* a = new CachingPolicy(runtime());  // never destroyed: tensors may outlive main()
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
  throw CudaOutOfMemory(internal::str("CUDA out of memory: tried to allocate ", bytes_str(rounded), " (", nbytes,
                                      " bytes requested) on cuda:", device, "; the device has ", bytes_str(free_b),
                                      " free of ", bytes_str(total_b), " total; nabla holds ", bytes_str(st.allocated),
                                      " in tensors and ", bytes_str(st.reserved),
                                      " reserved (cached blocks were released "
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
// The policy (cuda/pinned_policy.h) on the CUDA runtime, as an nabla Allocator.
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t want = 0;
    void* p = policy_.allocate(nbytes, &want);
    if (!p && nbytes > 0)
      throw CudaOutOfMemory(internal::str("pinned host memory: out of page-locked memory allocating ", bytes_str(want),
                                          " (", nbytes, " bytes requested)"));
    return p;
  }
  void deallocate(void* p, size_t) noexcept override {
    try {
      policy_.deallocate(p);
    } catch (...) {}
  }
  // The copy just queued on `stream` (of `device`) reads or writes the block at `base`.
  void record_use(void* base, int device, cudaStream_t stream) { (void)policy_.record_use(base, device, stream); }
  size_t reserved() { return policy_.reserved(); }
  void release_cached() { policy_.release_cached(); }

 private:
  PinnedPolicy policy_{runtime()};
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
  NABLA_CHECK(DeviceError, device >= 0 && device < kMaxDevices, "CUDA allocator: device index ", device,
              " out of range");
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
  NABLA_CHECK(DeviceError, t.is_cuda(), "record_stream: expected a CUDA tensor, got one on ", t.device());
  void* base = t.impl()->storage->data;
  if (!base) return;
  NABLA_CHECK(ValueError, caching().record_stream(base, stream),
              "record_stream: the tensor's memory was not allocated by "
              "nabla's CUDA allocator (from_blob memory is not tracked)");
}

void pinned_record_use(const Tensor& t, cudaStream_t stream) {
  if (!t.is_pinned()) return;
  pinned().record_use(t.impl()->storage->data, get_device(), stream);
}

Tensor scratch(size_t nbytes, int device) {
  return internal::make_empty({static_cast<int64_t>(nbytes)}, DType::u8, Device::cuda(static_cast<int16_t>(device)));
}

Tensor try_scratch(size_t nbytes, int device) {
  if (nbytes == 0) return scratch(0, device);
  void* p = device_malloc(device, nbytes, /*try_only=*/true);
  if (!p) return Tensor();
  return from_blob(
      p, {static_cast<int64_t>(nbytes)}, [](void* q) { caching().deallocate(q); },
      TensorOptions().dtype(DType::u8).device(Device::cuda(static_cast<int16_t>(device))));
}

size_t available_bytes(int device) {
  DeviceScope ds(device);
  size_t free_b = 0, total_b = 0;
  NABLA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b + caching().cached_bytes(device);
}

}  // namespace nabla::cuda
