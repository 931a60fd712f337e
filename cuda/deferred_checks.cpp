// The device side of deferred index and value checks (the bookkeeping and its rules are in
// cuda/deferred_checks.h): one record area per device, taken and read back under a lock.
#include "cuda/deferred_checks.h"

#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/impl.h"
#include "cuda/common.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

namespace {

constexpr int kSlots = 1024;
constexpr int kRecord = 4;  // int64 per record
constexpr int kMaxDevices = 64;

struct DeviceChecks {
  std::mutex mu;
  DeferredCheckBook book{kSlots};
  int64_t* records = nullptr;  // kSlots records on the device: cudaMalloc'd once, outside the caching
                               // allocator (empty_cache leaves it), never freed (work may be in flight at exit)
};

DeviceChecks& checks_of(int device) {
  static std::array<std::unique_ptr<DeviceChecks>, kMaxDevices> all;
  static std::mutex create;
  NABLA_CHECK(DeviceError, device >= 0 && device < kMaxDevices, "deferred checks: device ", device, " out of range");
  std::lock_guard<std::mutex> lock(create);
  auto& d = all[static_cast<size_t>(device)];
  if (!d) d = std::make_unique<DeviceChecks>();
  return *d;
}

// Reads back the records of `done` (finished: their streams were synchronized) on `stream`, which
// is idle, and returns the host copy of slots [lo, hi) with lo. Called with d.mu held.
std::pair<std::vector<int64_t>, int> read_records(DeviceChecks& d, const std::vector<PendingCheck>& done,
                                                  cudaStream_t stream) {
  auto [lo, hi] = slot_span(done);
  std::vector<int64_t> host(static_cast<size_t>(hi - lo) * kRecord);
  if (!host.empty()) {
    NABLA_CUDA_CHECK(cudaMemcpyAsync(host.data(), d.records + static_cast<size_t>(lo) * kRecord,
                                     host.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
    NABLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return {std::move(host), lo};
}

// Finishes the checks of `stream` (every stream when all) after it was synchronized and runs their
// reports outside the lock.
void finish(int device, cudaStream_t stream, bool all) {
  DeviceChecks& d = checks_of(device);
  std::vector<PendingCheck> done;
  std::vector<int64_t> host;
  int lo = 0;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (d.book.pending() == 0) return;
    done = d.book.finish(stream, all);
    if (done.empty()) return;
    DeviceScope ds(device);
    std::tie(host, lo) = read_records(d, done, all ? stream_for(device) : stream);
  }
  run_reports(done, [&](int slot) { return host.data() + static_cast<size_t>(slot - lo) * kRecord; });
}

}  // namespace

int64_t* deferred_check_slot(int device, void* stream_handle, int* slot) {
  auto stream = static_cast<cudaStream_t>(stream_handle);
  DeviceChecks& d = checks_of(device);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(d.mu);
      if (!d.records) {
        DeviceScope ds(device);
        NABLA_CUDA_CHECK(cudaMalloc(&d.records, sizeof(int64_t) * kRecord * kSlots));
      }
      int s = d.book.take_slot(stream);
      if (s >= 0) {
        int64_t* rec = d.records + static_cast<size_t>(s) * kRecord;
        NABLA_CUDA_CHECK(cudaMemsetAsync(rec, 0, sizeof(int64_t) * kRecord, stream));
        *slot = s;
        return rec;
      }
    }
    // Every slot is pending: wait for the streams that hold them and report (this may throw).
    std::vector<void*> streams;
    {
      std::lock_guard<std::mutex> lock(d.mu);
      streams = d.book.streams();
    }
    DeviceScope ds(device);
    for (void* s : streams) {
      NABLA_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(s)));
      finish(device, static_cast<cudaStream_t>(s), false);
    }
  }
}

void arm_deferred_check(int device, int slot, CheckReport report) {
  DeviceChecks& d = checks_of(device);
  std::lock_guard<std::mutex> lock(d.mu);
  d.book.arm(slot, std::move(report));
}

void report_deferred_checks(int device, void* stream) { finish(device, static_cast<cudaStream_t>(stream), false); }
void report_all_deferred_checks(int device) { finish(device, nullptr, true); }

void defer_value_check(const Tensor& values_in, std::function<void(const Tensor&)> report) {
  const int device = device_of(values_in);
  DeviceScope ds(device);
  cudaStream_t stream = stream_for(device);
  Tensor values = contiguous(values_in);
  int slot = -1;
  int64_t* rec = deferred_check_slot(device, stream, &slot);
  NABLA_CUDA_CHECK(cudaMemcpyAsync(rec, values.data_ptr(), values.nbytes(), cudaMemcpyDeviceToDevice, stream));
  arm_deferred_check(device, slot,
                     [report = std::move(report), sizes = Shape(values.sizes().begin(), values.sizes().end()),
                      dt = values.dtype()](const int64_t* record) {
                       Tensor host = internal::make_empty(sizes, dt, kCPU);
                       std::memcpy(host.data_ptr(), record, host.nbytes());
                       report(host);
                     });
}

}  // namespace nabla::cuda
