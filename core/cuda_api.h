// The CUDA device API: devices, synchronization, memory statistics of the caching allocator,
// streams and events, and the math-mode switches (TF32, cuDNN benchmark/deterministic).
//
// Declared here, in core, without any CUDA header, so programs and the layers above core can use
// it in every build. core/cuda_api.cpp defines it: when the CUDA backend (cuda/) is compiled in and
// loaded it forwards to it; otherwise it answers as a machine without GPUs would: counts and byte
// statistics are 0, and calls that need a GPU throw DeviceError("... no CUDA backend ...").
//
//   if (cuda::is_available()) {
//     cuda::Stream s = cuda::new_stream();
//     {
//       cuda::StreamGuard g(s);            // ops on this thread now run on s
//       y = model.forward(x.to(kCUDA, /*non_blocking=*/true));
//     }
//     s.synchronize();
//     std::printf("%zu bytes in tensors\n", cuda::memory_allocated());
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "device.h"

namespace nabla {

class Tensor;

namespace cuda {

// is_available() and device_count() are declared in core/device.h.
// Why is_available() is false, in words ("this build of nabla has no CUDA backend", "no NVIDIA driver
// is installed (...)", "NABLA_DISABLE_CUDA=1 is set", "the CUDA backend .../libnabla_cuda.so could not
// be loaded: libcublasLt.so.13: cannot open shared object file ...", "cudaGetDeviceCount: CUDA driver
// version is insufficient for CUDA runtime version", ...); empty when a GPU is available.
std::string unavailable_reason();

// ---- devices ------------------------------------------------------------------------------------
// The device that new CUDA work of this thread goes to when an op does not name one (0 by default).
int current_device();
// Selects the current device of this thread; throws DeviceError for an index out of range.
void set_device(int device);
// Blocks until all work queued on `device` (-1: the current device) has finished.
void synchronize(int device = -1);

struct DeviceProperties {
  std::string name;          // "NVIDIA H100 80GB HBM3"
  size_t total_memory = 0;   // bytes
  int major = 0, minor = 0;  // compute capability
  int multiprocessor_count = 0;
};
DeviceProperties get_device_properties(int device = -1);
std::string get_device_name(int device = -1);

struct MemInfo {
  size_t free_bytes = 0;  // free on the device, as the driver sees it
  size_t total_bytes = 0;
};
MemInfo mem_get_info(int device = -1);

// Versions as integers (e.g. CUDA 13.0 runtime -> 13000, cuDNN 9.19.0 -> 91900); 0 without CUDA.
int runtime_version();
int driver_version();

// ---- the caching allocator ----------------------------------------------------------------------
// Freed device memory is kept in size-bucketed free lists (per device and stream) for reuse, so a
// training loop in steady state does not call cudaMalloc. These report and control it.
struct MemoryStats {
  size_t allocated_bytes = 0;        // in live tensors (rounded up to allocator buckets)
  size_t reserved_bytes = 0;         // allocated plus cached free blocks
  size_t peak_allocated_bytes = 0;   // high-water mark of allocated_bytes since the last reset
  uint64_t device_allocs = 0;        // calls that reached cudaMalloc
  uint64_t device_frees = 0;         // blocks returned with cudaFree
  uint64_t num_ooms = 0;             // allocations that failed even after emptying the cache
  size_t pinned_reserved_bytes = 0;  // page-locked host memory held by the pinned allocator
};
MemoryStats memory_stats(int device = -1);
size_t memory_allocated(int device = -1);
size_t memory_reserved(int device = -1);
size_t max_memory_allocated(int device = -1);
void reset_peak_memory_stats(int device = -1);
// Returns every cached, unused block (device and pinned host) to the driver.
void empty_cache();

// ---- streams and events -------------------------------------------------------------------------
class Event;

// A CUDA stream: a queue of GPU work that runs in order. Streams are cheap handles; the ones from
// new_stream() come from a per-device pool and live as long as the process (as in PyTorch).
class Stream {
 public:
  Stream() = default;  // the default stream of cuda:0
  Stream(Device device, void* handle) : device_(device), handle_(handle) {}

  Device device() const { return device_; }
  // The cudaStream_t, as void* so this header needs no CUDA include; nullptr is the default stream.
  void* handle() const { return handle_; }
  // True when all work queued on the stream so far has finished.
  bool query() const;
  // Blocks the calling thread until all work queued on the stream so far has finished.
  void synchronize() const;
  // Makes work queued on this stream after this call wait until `event` has completed.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) { return a.device_ == b.device_ && a.handle_ == b.handle_; }

 private:
  Device device_ = Device::cuda(0);
  void* handle_ = nullptr;
};

// The default (legacy, synchronizing) stream of a device.
Stream default_stream(int device = -1);
// The stream ops of this thread run on for `device` (-1: the current device).
Stream current_stream(int device = -1);
// A non-blocking stream from the device's pool (round robin over 32 streams per priority).
Stream new_stream(int device = -1, bool high_priority = false);
// Makes `s` the current stream of its device for this thread.
void set_current_stream(const Stream& s);

// RAII: makes a stream current (and its device the current device) for a scope, then restores both.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_stream_;
  int prev_device_;
};

// RAII: selects a device for a scope, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_;
};

// A CUDA event: a marker in a stream, to wait on or to time with. Copies share one event.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  // Records the event on `s` (default: the current stream of the current device).
  void record();
  void record(const Stream& s);
  // True when the recorded work has completed (or the event was never recorded).
  bool query() const;
  // Blocks the calling thread until the recorded work has completed.
  void synchronize() const;
  // Milliseconds between this event and `end` (both recorded, with timing enabled).
  float elapsed_time(const Event& end) const;
  // Makes future work on `s` wait for this event.
  void block(const Stream& s) const;
  bool recorded() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Tells the allocator that `t`'s memory is used by work queued on `s` (other than the stream it was
// allocated on), so the memory is not reused before that work has finished (PyTorch's record_stream).
void record_stream(const Tensor& t, const Stream& s);

// ---- math modes ---------------------------------------------------------------------------------
// TF32 tensor cores for float32 matmuls (cuBLAS). Off by default: float32 matmuls then match the
// CPU to float32 rounding. Turning it on trades about 3 decimal digits for speed.
void set_allow_tf32(bool allow);
bool allow_tf32();

// Checks of index tensors in CUDA kernels (index_select, gather, scatter, ...) and the range checks
// that layers and losses make on CUDA tensors (class targets of nll_loss and cross_entropy,
// Embedding's indices, binary_cross_entropy's input, gaussian_nll_loss's var):
enum class IndexChecks {
  // The default. The kernels record the first bad index on the device and the op goes on without
  // waiting; the IndexError (or ValueError) naming the op is thrown at the next synchronization of
  // the op's stream: a copy to the host, item(), cuda::synchronize(), Stream::synchronize(). As
  // PyTorch's device-side asserts, which also surface at a later synchronization (PyTorch's leave
  // the CUDA context unusable; nabla's do not). Results computed from a bad index are unspecified.
  deferred,
  // The op waits for its kernel (one host synchronization per indexing op) and throws itself: for
  // finding the op that went wrong, as CUDA_LAUNCH_BLOCKING=1 is with PyTorch.
  immediate,
  // Out-of-range indices are skipped silently (unspecified results); nothing is checked.
  off,
};
// Also NABLA_CUDA_INDEX_CHECKS in the environment: 0 (off), sync (immediate), else deferred.
void set_index_checks(IndexChecks mode);
void set_index_checks(bool enabled);  // true: deferred, false: off
IndexChecks index_checks_mode();
bool index_checks();  // the mode is not off

// A check of values computed on the device, made without waiting for them: `values` (a CUDA tensor
// of at most 4 elements of 8 bytes, e.g. int64 or float64 minimum and maximum) is copied aside on
// its device's current stream, and at the next synchronization of that stream `report` runs with
// their host copy; what it throws is thrown there. In immediate mode report runs at once (one
// synchronization); for CPU values always at once. nn/value_checks.h uses it.
void check_later(const Tensor& values, std::function<void(const Tensor& host_values)> report);

namespace cudnn {
bool is_available();  // the CUDA backend is loaded with cuDNN (always together in nabla)
int version();        // e.g. 91900; 0 without CUDA
// Benchmark mode (as torch.backends.cudnn.benchmark): the first convolution of each shape times
// every algorithm and caches the fastest; otherwise cuDNN's heuristics choose (also cached).
void set_benchmark(bool on);
bool benchmark();
// Deterministic mode: only algorithms that give bitwise-reproducible results.
void set_deterministic(bool on);
bool deterministic();
// TF32 tensor cores for float32 convolutions. Off by default, as for matmuls.
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace cudnn

// ---- the backend's side -------------------------------------------------------------------------
// The CUDA backend implements this interface and registers it at load time; users do not call it.
class Hooks {
 public:
  virtual ~Hooks() = default;
  virtual int device_count() = 0;
  virtual std::string unavailable_reason() = 0;  // why device_count() is 0
  virtual int current_device() = 0;
  virtual void set_device(int device) = 0;
  virtual void synchronize(int device) = 0;
  virtual DeviceProperties properties(int device) = 0;
  virtual MemInfo mem_info(int device) = 0;
  virtual int runtime_version() = 0;
  virtual int driver_version() = 0;
  virtual int cudnn_version() = 0;
  virtual MemoryStats memory_stats(int device) = 0;
  virtual void reset_peak_memory_stats(int device) = 0;
  virtual void empty_cache() = 0;
  virtual void* pool_stream(int device, bool high_priority) = 0;
  virtual bool stream_query(int device, void* stream) = 0;
  virtual void stream_synchronize(int device, void* stream) = 0;
  virtual void stream_wait_event(int device, void* stream, void* event) = 0;
  virtual void* event_create(int device, bool timing) = 0;
  virtual void event_destroy(int device, void* event) = 0;
  virtual void event_record(int device, void* event, void* stream) = 0;
  virtual bool event_query(int device, void* event) = 0;
  virtual void event_synchronize(int device, void* event) = 0;
  virtual float event_elapsed_ms(int device, void* start, void* end) = 0;
  virtual void record_stream(const Tensor& t, int device, void* stream) = 0;
  // check_later on a CUDA tensor in deferred mode.
  virtual void check_later(const Tensor& values, std::function<void(const Tensor&)> report) = 0;
};
void register_hooks(Hooks* hooks);
Hooks* hooks();  // null without a CUDA backend

}  // namespace cuda
}  // namespace nabla
