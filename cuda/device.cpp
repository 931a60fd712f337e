// Device management for the CUDA backend: the device count (a missing driver means 0 GPUs, never
// an error), errors, device properties, the stream pool, and the Hooks that core/cuda_api.cpp
// forwards to.
#include <cudnn.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/driver_reason.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

extern std::atomic<int (*)()> g_device_count_hook;  // core/backend.cpp

namespace {
constexpr int kMaxDevices = 64;
constexpr int kStreamsPerPool = 32;

struct CountInfo {
  int count = 0;
  std::string reason;
};

const CountInfo& count_info() {
  static const CountInfo info = [] {
    CountInfo c;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      int driver = 0, runtime = 0;
      if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
      if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = CUDART_VERSION;
      (void)cudaGetLastError();
      c.reason = device_count_failure(cudaGetErrorName(err), cudaGetErrorString(err), driver, runtime);
      c.count = 0;
    } else if (n == 0) {
      c.reason = "the CUDA driver reports no GPU";
    } else {
      c.count = n < kMaxDevices ? n : kMaxDevices;
    }
    return c;
  }();
  return info;
}

int count_hook() { return count_info().count; }

struct DeviceInfo {
  std::once_flag once;
  DeviceProperties props;
  int max_threads_per_sm = 2048;
};
std::array<DeviceInfo, kMaxDevices>& device_infos() {
  static auto* a = new std::array<DeviceInfo, kMaxDevices>();
  return *a;
}

const DeviceInfo& info(int device) {
  DeviceInfo& d = device_infos().at(static_cast<size_t>(device));
  std::call_once(d.once, [&] {
    cudaDeviceProp p{};
    NABLA_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    d.props.name = p.name;
    d.props.total_memory = p.totalGlobalMem;
    d.props.major = p.major;
    d.props.minor = p.minor;
    d.props.multiprocessor_count = p.multiProcessorCount;
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  });
  return d;
}

// Pools of non-blocking streams per device and priority, created on first use.
struct StreamPool {
  std::once_flag once;
  std::array<cudaStream_t, kStreamsPerPool> low{}, high{};
  std::atomic<uint32_t> next_low{0}, next_high{0};
};
std::array<StreamPool, kMaxDevices>& stream_pools() {
  static auto* a = new std::array<StreamPool, kMaxDevices>();
  return *a;
}

cudaStream_t pool_stream(int device, bool high) {
  StreamPool& p = stream_pools().at(static_cast<size_t>(device));
  std::call_once(p.once, [&] {
    DeviceScope ds(device);
    int least = 0, greatest = 0;
    NABLA_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int i = 0; i < kStreamsPerPool; ++i) {
      NABLA_CUDA_CHECK(cudaStreamCreateWithPriority(&p.low[i], cudaStreamNonBlocking, least));
      NABLA_CUDA_CHECK(cudaStreamCreateWithPriority(&p.high[i], cudaStreamNonBlocking, greatest));
    }
  });
  if (high) return p.high[p.next_high.fetch_add(1) % kStreamsPerPool];
  return p.low[p.next_low.fetch_add(1) % kStreamsPerPool];
}

class CudaHooks final : public Hooks {
 public:
  int device_count() override { return count_info().count; }
  std::string unavailable_reason() override { return count_info().count > 0 ? "" : count_info().reason; }
  int current_device() override { return get_device(); }
  void set_device(int device) override { set_device_fast(device); }
  void synchronize(int device) override {
    DeviceScope ds(device);
    NABLA_CUDA_CHECK(cudaDeviceSynchronize());
    report_all_deferred_checks(device);
  }
  DeviceProperties properties(int device) override { return info(device).props; }
  MemInfo mem_info(int device) override {
    DeviceScope ds(device);
    MemInfo m;
    NABLA_CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
    return m;
  }
  int runtime_version() override {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) (void)cudaGetLastError();
    return v;
  }
  int driver_version() override {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) (void)cudaGetLastError();
    return v;
  }
  int cudnn_version() override { return static_cast<int>(cudnnGetVersion()); }
  MemoryStats memory_stats(int device) override { return allocator_stats(device); }
  void reset_peak_memory_stats(int device) override { allocator_reset_peak(device); }
  void empty_cache() override { allocator_empty_cache(); }
  void* pool_stream(int device, bool high) override { return cuda::pool_stream(device, high); }
  bool stream_query(int device, void* s) override {
    DeviceScope ds(device);
    cudaError_t r = cudaStreamQuery(static_cast<cudaStream_t>(s));
    if (r == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    NABLA_CUDA_CHECK(r);
    return true;
  }
  void stream_synchronize(int device, void* s) override {
    DeviceScope ds(device);
    NABLA_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(s)));
    report_deferred_checks(device, s);
  }
  void stream_wait_event(int device, void* s, void* e) override {
    DeviceScope ds(device);
    NABLA_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0));
  }
  void* event_create(int device, bool timing) override {
    DeviceScope ds(device);
    cudaEvent_t e;
    NABLA_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  void event_destroy(int device, void* e) override {
    // Runs from destructors: errors (e.g. during process exit) are ignored.
    // A failed call's error is cleared, so that no later launch check reports it as its own.
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = device;
    if (prev != device && cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
    if (cudaEventDestroy(static_cast<cudaEvent_t>(e)) != cudaSuccess) (void)cudaGetLastError();
    if (prev != device && cudaSetDevice(prev) != cudaSuccess) (void)cudaGetLastError();
  }
  void event_record(int device, void* e, void* s) override {
    DeviceScope ds(device);
    NABLA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)));
  }
  bool event_query(int device, void* e) override {
    DeviceScope ds(device);
    cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    NABLA_CUDA_CHECK(r);
    return true;
  }
  void event_synchronize(int device, void* e) override {
    DeviceScope ds(device);
    NABLA_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e)));
  }
  float event_elapsed_ms(int device, void* a, void* b) override {
    DeviceScope ds(device);
    float ms = 0;
    NABLA_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b)));
    return ms;
  }
  void record_stream(const Tensor& t, int device, void* s) override {
    NABLA_CHECK(DeviceError, t.is_cuda() && device_of(t) == device, "record_stream: the tensor is on ", t.device(),
                " but the stream belongs to cuda:", device);
    allocator_record_stream(t, static_cast<cudaStream_t>(s));
  }
  void check_later(const Tensor& values, std::function<void(const Tensor&)> report) override {
    defer_value_check(values, std::move(report));
  }
};

}  // namespace

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  // Clear a non-sticky error so that later calls do not report it again.
  (void)cudaGetLastError();
  std::string msg = internal::str("CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ") in ", what,
                                  " at ", file, ":", line);
  if (err == cudaErrorMemoryAllocation) throw CudaOutOfMemory(msg);
  throw CudaError(msg);
}

int get_device() {
  int d = 0;
  NABLA_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device_fast(int device) { NABLA_CUDA_CHECK(cudaSetDevice(device)); }

int sm_count(int device) { return info(device).props.multiprocessor_count; }
int max_threads_per_sm(int device) { return info(device).max_threads_per_sm; }

// Called once at load time by the backend's registration (cuda/backend.cpp).
void install_hooks() {
  static auto* hooks = new CudaHooks();  // never destroyed: events may be freed during exit
  g_device_count_hook.store(&count_hook);
  register_hooks(hooks);
}

}  // namespace nabla::cuda
