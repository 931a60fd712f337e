// The CUDA device API of core/cuda_api.h: state that belongs to core (current streams, math-mode
// switches) and forwarding to the CUDA backend's Hooks for everything that needs the runtime.
// Without a CUDA backend, statistics are 0 and calls that need a GPU throw DeviceError.
#include "core/cuda_api.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/backend.h"
#include "core/cuda_env.h"
#include "core/error.h"
#include "core/impl.h"

namespace nabla::cuda {

namespace {

std::atomic<Hooks*> g_hooks{nullptr};

constexpr int kMaxDevices = 64;
// The current stream of each device, per thread (nullptr: the default stream).
thread_local std::array<void*, kMaxDevices> tl_current_stream{};

std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_cudnn_benchmark{false};
std::atomic<bool> g_cudnn_deterministic{false};
std::atomic<bool> g_cudnn_allow_tf32{false};
std::atomic<IndexChecks> g_index_checks{[] {
  const char* e = std::getenv("NABLA_CUDA_INDEX_CHECKS");
  if (e && std::strcmp(e, "0") == 0) return IndexChecks::off;
  if (e && std::strcmp(e, "sync") == 0) return IndexChecks::immediate;
  return IndexChecks::deferred;
}()};

// The hooks, or DeviceError when no GPU can be used.
Hooks& require(const char* what) {
  Hooks* h = g_hooks.load();
  if (!h && nabla::internal::load_cuda_backend()) h = g_hooks.load();
  if (!h) throw DeviceError(internal::str("cuda::", what, ": ", nabla::internal::cuda_backend_missing_reason()));
  if (device_count() == 0)
    throw DeviceError(internal::str("cuda::", what, ": no CUDA GPU is available (", unavailable_reason(), ")"));
  return *h;
}

int resolve(Hooks& h, int device, const char* what) {
  if (device < 0) return h.current_device();
  int n = device_count();
  NABLA_CHECK(DeviceError, device < n, "cuda::", what, ": device ", device, " does not exist (", n, " CUDA device",
              n == 1 ? "" : "s", " available)");
  return device;
}

}  // namespace

void register_hooks(Hooks* h) { g_hooks.store(h); }
Hooks* hooks() { return g_hooks.load(); }

std::string unavailable_reason() {
  if (nabla::internal::cuda_disabled_by_env()) return "NABLA_DISABLE_CUDA=1 is set";
  Hooks* h = g_hooks.load();
  if (!h && nabla::internal::load_cuda_backend()) h = g_hooks.load();
  if (!h) return nabla::internal::cuda_backend_missing_reason();
  return h->unavailable_reason();
}

// ---- devices ------------------------------------------------------------------------------------
int current_device() { return require("current_device").current_device(); }
void set_device(int device) {
  Hooks& h = require("set_device");
  NABLA_CHECK(DeviceError, device >= 0, "cuda::set_device: device index must be non-negative, got ", device);
  h.set_device(resolve(h, device, "set_device"));
}
void synchronize(int device) {
  Hooks& h = require("synchronize");
  h.synchronize(resolve(h, device, "synchronize"));
}
DeviceProperties get_device_properties(int device) {
  Hooks& h = require("get_device_properties");
  return h.properties(resolve(h, device, "get_device_properties"));
}
std::string get_device_name(int device) { return get_device_properties(device).name; }
MemInfo mem_get_info(int device) {
  Hooks& h = require("mem_get_info");
  return h.mem_info(resolve(h, device, "mem_get_info"));
}
int runtime_version() {
  Hooks* h = g_hooks.load();
  return h ? h->runtime_version() : 0;
}
int driver_version() {
  Hooks* h = g_hooks.load();
  return h ? h->driver_version() : 0;
}

// ---- allocator statistics -----------------------------------------------------------------------
MemoryStats memory_stats(int device) {
  Hooks* h = g_hooks.load();
  if (!h || device_count() == 0) return {};
  return h->memory_stats(resolve(*h, device, "memory_stats"));
}
size_t memory_allocated(int device) { return memory_stats(device).allocated_bytes; }
size_t memory_reserved(int device) { return memory_stats(device).reserved_bytes; }
size_t max_memory_allocated(int device) { return memory_stats(device).peak_allocated_bytes; }
void reset_peak_memory_stats(int device) {
  Hooks* h = g_hooks.load();
  if (h && device_count() > 0) h->reset_peak_memory_stats(resolve(*h, device, "reset_peak_memory_stats"));
}
void empty_cache() {
  Hooks* h = g_hooks.load();
  if (h && device_count() > 0) h->empty_cache();
}

// ---- streams ------------------------------------------------------------------------------------
bool Stream::query() const { return require("Stream::query").stream_query(device_.index, handle_); }
void Stream::synchronize() const { require("Stream::synchronize").stream_synchronize(device_.index, handle_); }
void Stream::wait(const Event& e) const { e.block(*this); }

Stream default_stream(int device) {
  Hooks& h = require("default_stream");
  return Stream(Device::cuda(static_cast<int16_t>(resolve(h, device, "default_stream"))), nullptr);
}

Stream current_stream(int device) {
  if (device < 0) device = current_device();
  NABLA_CHECK(DeviceError, device < kMaxDevices, "cuda::current_stream: device index ", device, " is out of range");
  return Stream(Device::cuda(static_cast<int16_t>(device)), tl_current_stream[device]);
}

Stream new_stream(int device, bool high_priority) {
  Hooks& h = require("new_stream");
  int d = resolve(h, device, "new_stream");
  return Stream(Device::cuda(static_cast<int16_t>(d)), h.pool_stream(d, high_priority));
}

void set_current_stream(const Stream& s) {
  Hooks& h = require("set_current_stream");
  int d = resolve(h, s.device().index, "set_current_stream");
  tl_current_stream[d] = s.handle();
}

StreamGuard::StreamGuard(const Stream& s) : prev_device_(current_device()) {
  prev_stream_ = current_stream(s.device().index);
  if (s.device().index != prev_device_) set_device(s.device().index);
  set_current_stream(s);
}
// The guards' destructors never throw: after a sticky CUDA error (an illegal address in a kernel
// run inside the guard), even selecting a device can fail, and a throw while that error unwinds
// would terminate the program.
namespace {
void restore_device(int prev) noexcept {
  Hooks* h = g_hooks.load();
  if (!h) return;
  try {
    if (h->current_device() != prev) h->set_device(prev);
  } catch (...) {}
}
}  // namespace

StreamGuard::~StreamGuard() {
  tl_current_stream[prev_stream_.device().index] = prev_stream_.handle();
  restore_device(prev_device_);
}

DeviceGuard::DeviceGuard(int device) : prev_(current_device()) {
  if (device != prev_) set_device(device);
}
DeviceGuard::~DeviceGuard() { restore_device(prev_); }

// ---- events -------------------------------------------------------------------------------------
struct Event::Impl {
  bool timing = false;
  int device = -1;  // set by the first record
  void* event = nullptr;
  ~Impl() {
    if (event)
      if (Hooks* h = g_hooks.load()) h->event_destroy(device, event);
  }
};

Event::Event(bool enable_timing) : impl_(std::make_shared<Impl>()) { impl_->timing = enable_timing; }

void Event::record() { record(current_stream()); }
void Event::record(const Stream& s) {
  Hooks& h = require("Event::record");
  int d = s.device().index;
  if (!impl_->event) {
    impl_->event = h.event_create(d, impl_->timing);
    impl_->device = d;
  }
  NABLA_CHECK(DeviceError, impl_->device == d, "cuda::Event::record: the event belongs to cuda:", impl_->device,
              " but the stream to cuda:", d);
  h.event_record(d, impl_->event, s.handle());
}
bool Event::recorded() const { return impl_->event != nullptr; }
bool Event::query() const {
  if (!impl_->event) return true;
  return require("Event::query").event_query(impl_->device, impl_->event);
}
void Event::synchronize() const {
  if (!impl_->event) return;
  require("Event::synchronize").event_synchronize(impl_->device, impl_->event);
}
float Event::elapsed_time(const Event& end) const {
  NABLA_CHECK(ValueError, impl_->timing && end.impl_->timing,
              "cuda::Event::elapsed_time: both events need enable_timing=true");
  NABLA_CHECK(ValueError, impl_->event && end.impl_->event,
              "cuda::Event::elapsed_time: both events must be recorded first");
  return require("Event::elapsed_time").event_elapsed_ms(impl_->device, impl_->event, end.impl_->event);
}
void Event::block(const Stream& s) const {
  if (!impl_->event) return;  // nothing recorded: nothing to wait for
  require("Event::block").stream_wait_event(s.device().index, s.handle(), impl_->event);
}

void record_stream(const Tensor& t, const Stream& s) {
  require("record_stream").record_stream(t, s.device().index, s.handle());
}

// ---- math modes ---------------------------------------------------------------------------------
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }
void set_index_checks(IndexChecks mode) { g_index_checks.store(mode); }
void set_index_checks(bool enabled) { g_index_checks.store(enabled ? IndexChecks::deferred : IndexChecks::off); }
IndexChecks index_checks_mode() { return g_index_checks.load(); }
bool index_checks() { return g_index_checks.load() != IndexChecks::off; }
void check_later(const Tensor& values, std::function<void(const Tensor&)> report) {
  if (!values.is_cuda() || g_index_checks.load() != IndexChecks::deferred) {
    report(values.to(kCPU));
    return;
  }
  NABLA_CHECK(ValueError, values.numel() <= 4 && values.element_size() == 8,
              "cuda::check_later: expected at most 4 values of "
              "8 bytes, got ",
              internal::describe(values));
  require("check_later").check_later(values, std::move(report));
}

namespace cudnn {
bool is_available() { return g_hooks.load() != nullptr && cuda::is_available(); }
int version() {
  Hooks* h = g_hooks.load();
  return h ? h->cudnn_version() : 0;
}
void set_benchmark(bool on) { g_cudnn_benchmark.store(on); }
bool benchmark() { return g_cudnn_benchmark.load(); }
void set_deterministic(bool on) { g_cudnn_deterministic.store(on); }
bool deterministic() { return g_cudnn_deterministic.load(); }
void set_allow_tf32(bool allow) { g_cudnn_allow_tf32.store(allow); }
bool allow_tf32() { return g_cudnn_allow_tf32.load(); }
}  // namespace cudnn

}  // namespace nabla::cuda
