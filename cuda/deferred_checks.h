// The bookkeeping of deferred index and value checks (core/cuda_api.h, IndexChecks::deferred), in
// plain C++ so that tests/cuda/test_plan.cpp checks it on any machine; cuda/deferred_checks.cpp
// holds the device side.
//
// Each device has an area of records (4 int64 each) in device memory. A check takes a free slot on
// the stream its kernel runs on, and the kernel (or a copy of the checked values) writes the slot's
// record: for an index check [0] = 1 once an index was out of range, [1] that index, [2] the size of
// its dim. The op does not wait. When a stream is synchronized anyway (a copy to the host, item(),
// synchronize()), its checks are finished: their records are read back in one copy, their reports
// run in the order the checks were made (the first that throws is the error; the others are
// dropped) and their slots are free again. When every slot is pending, the streams holding them are
// synchronized first, so a loop that never synchronizes waits once every `slots` checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace nabla::cuda {

using CheckReport = std::function<void(const int64_t* record)>;

struct PendingCheck {
  int slot = -1;
  void* stream = nullptr;
  uint64_t order = 0;
  CheckReport report;  // empty while the check is not armed (its op failed before its kernel ran)
};

class DeferredCheckBook {
 public:
  explicit DeferredCheckBook(int slots) : by_slot_(static_cast<size_t>(slots)), pending_(static_cast<size_t>(slots)) {
    for (int s = slots - 1; s >= 0; --s) free_.push_back(s);  // slot 0 is taken first
  }
  int slots() const { return static_cast<int>(by_slot_.size()); }
  size_t pending() const { return by_slot_.size() - free_.size(); }

  // A free slot for a check on `stream`, or -1 when every slot is pending.
  int take_slot(void* stream) {
    if (free_.empty()) return -1;
    int s = free_.back();
    free_.pop_back();
    by_slot_[static_cast<size_t>(s)] = PendingCheck{s, stream, next_order_++, {}};
    pending_[static_cast<size_t>(s)] = true;
    return s;
  }

  // Gives the pending check in `slot` the report to run on its record.
  void arm(int slot, CheckReport report) { by_slot_.at(static_cast<size_t>(slot)).report = std::move(report); }

  // The streams that hold pending checks, each once.
  std::vector<void*> streams() const {
    std::vector<void*> out;
    for (size_t s = 0; s < by_slot_.size(); ++s)
      if (pending_[s] && std::find(out.begin(), out.end(), by_slot_[s].stream) == out.end())
        out.push_back(by_slot_[s].stream);
    return out;
  }

  // The pending checks of `stream` (of every stream when all_streams), in the order they were made;
  // their slots are free again. Runs at synchronizations only: a scan of the slots is cheap there.
  std::vector<PendingCheck> finish(void* stream, bool all_streams = false) {
    std::vector<PendingCheck> done;
    if (free_.size() == by_slot_.size()) return done;
    for (size_t s = 0; s < by_slot_.size(); ++s) {
      if (!pending_[s] || (!all_streams && by_slot_[s].stream != stream)) continue;
      done.push_back(std::move(by_slot_[s]));
      pending_[s] = false;
      free_.push_back(static_cast<int>(s));
    }
    std::sort(done.begin(), done.end(), [](const PendingCheck& a, const PendingCheck& b) { return a.order < b.order; });
    return done;
  }

 private:
  std::vector<PendingCheck> by_slot_;
  std::vector<bool> pending_;
  std::vector<int> free_;
  uint64_t next_order_ = 0;
};

// [lo, hi): the slots spanned by `checks` (one read back covers them all); {0, 0} when empty.
inline std::pair<int, int> slot_span(const std::vector<PendingCheck>& checks) {
  if (checks.empty()) return {0, 0};
  int lo = checks.front().slot, hi = lo + 1;
  for (const PendingCheck& c : checks) {
    lo = std::min(lo, c.slot);
    hi = std::max(hi, c.slot + 1);
  }
  return {lo, hi};
}

// Runs the reports of finished checks on their records (record(slot) -> const int64_t*), in order;
// the first exception propagates and the remaining reports are dropped.
template <class Record>
void run_reports(const std::vector<PendingCheck>& done, Record record) {
  for (const PendingCheck& c : done)
    if (c.report) c.report(record(c.slot));
}

}  // namespace nabla::cuda
