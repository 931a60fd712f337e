// The pinned (page-locked) host memory cache's policy, apart from the CUDA runtime, as
// caching_allocator.h is for device memory: plain C++, so tests/cuda/test_caching.cpp drives it
// through the same fake runtime (also under ThreadSanitizer). cuda/allocator.cpp runs it on the
// real runtime (cudaHostAlloc, events from its pool).
//
// - Requests are rounded: to 512 bytes at least; above 1 MiB to a multiple of 2 MiB; in between to
//   a quarter of the power of two below the size (four sizes per octave).
// - A freed block is cached by size and serves a later request whose rounded size it fits with at
//   most a quarter to spare (a 1 MiB block does not serve a 512-byte request).
// - A block that an asynchronous copy used (record_use: an event recorded on the copy's stream) is
//   not reused before that event has completed: freed, it waits in a pending list, which each
//   allocation checks. (PyTorch's CachingHostAllocator works the same way.)
// - When the runtime has no page-locked memory left, the cache is released (waiting for the pending
//   blocks' events) and the allocation tried once more; then allocate returns nullptr.
// - reserved() = bytes of every block held (live, cached and pending); cached() = bytes in the cache.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "caching_allocator.h"

namespace nabla::cuda {

class PinnedPolicy {
 public:
  static constexpr size_t kMiB = size_t(1) << 20;

  static size_t round_size(size_t n) {
    if (n <= 512) return 512;
    if (n > kMiB) return (n + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
    int k = 63 - __builtin_clzll(n - 1);  // 2^k < n <= 2^(k+1)
    size_t step = size_t(1) << (k - 2);
    return (n + step - 1) & ~(step - 1);
  }
  // May a cached block of `size` serve a request rounded to `want`?
  static bool fits(size_t size, size_t want) { return size >= want && size - want <= want / 4; }

  explicit PinnedPolicy(AllocRuntime& rt) : rt_(rt) {}
  PinnedPolicy(const PinnedPolicy&) = delete;
  PinnedPolicy& operator=(const PinnedPolicy&) = delete;

  // `nbytes` of pinned memory, or nullptr when there is none even after releasing the cache (the
  // rounded size in *rounded). nbytes 0: nullptr.
  void* allocate(size_t nbytes, size_t* rounded = nullptr) {
    if (nbytes == 0) return nullptr;
    const size_t want = round_size(nbytes);
    if (rounded) *rounded = want;
    {
      std::lock_guard lock(mu_);
      process_pending();
      auto it = free_.lower_bound(want);
      if (it != free_.end() && fits(it->first, want)) {
        void* p = it->second.back();
        cached_ -= it->first;
        it->second.pop_back();
        if (it->second.empty()) free_.erase(it);
        live_.insert(p);
        return p;
      }
    }
    void* p = rt_.host_malloc(want);
    if (!p) {
      release_cached();
      p = rt_.host_malloc(want);
    }
    if (!p) return nullptr;
    std::lock_guard lock(mu_);
    sizes_[p] = want;
    live_.insert(p);
    reserved_ += want;
    return p;
  }

  // Returns a block to the cache: at once, or once the copies that used it have completed.
  // Memory this policy did not allocate is ignored.
  void deallocate(void* p) {
    if (!p) return;
    std::lock_guard lock(mu_);
    if (!live_.erase(p)) return;
    auto u = uses_.find(p);
    if (u != uses_.end()) {
      pending_.push_back({p, std::move(u->second)});
      uses_.erase(u);
      return;
    }
    free_[size_of(p)].push_back(p);
    cached_ += size_of(p);
  }

  // An asynchronous copy just queued on `stream` of `device` reads or writes the block at `p`.
  // False for memory this policy does not hold (from_blob, unpinned): nothing to track.
  bool record_use(void* p, int device, void* stream) {
    if (!p) return false;
    {
      std::lock_guard lock(mu_);
      if (!live_.count(p)) return false;
    }
    void* e = rt_.record_event(device, stream);
    if (!e) {  // cannot be tracked: wait for the copy instead
      rt_.synchronize_device(device);
      return true;
    }
    std::lock_guard lock(mu_);
    std::vector<Use>& v = uses_[p];
    for (size_t i = 0; i < v.size();) {  // keep the list short: drop completed uses
      if (rt_.event_done(v[i].event)) {
        rt_.release_event(v[i].device, v[i].event);
        v[i] = v.back();
        v.pop_back();
      } else {
        ++i;
      }
    }
    v.push_back({e, device});
    return true;
  }

  // Gives every cached block back to the runtime, and the pending ones after their copies.
  void release_cached() {
    std::vector<void*> to_free;
    std::vector<Pending> pending;
    {
      std::lock_guard lock(mu_);
      for (auto& [size, blocks] : free_) to_free.insert(to_free.end(), blocks.begin(), blocks.end());
      free_.clear();
      cached_ = 0;
      pending.swap(pending_);
    }
    for (Pending& pd : pending) {
      for (Use u : pd.uses) {
        rt_.event_wait(u.event);
        rt_.release_event(u.device, u.event);
      }
      to_free.push_back(pd.block);
    }
    for (void* p : to_free) {
      rt_.host_free(p);
      std::lock_guard lock(mu_);
      reserved_ -= size_of(p);
      sizes_.erase(p);
    }
  }

  size_t reserved() {
    std::lock_guard lock(mu_);
    return reserved_;
  }
  size_t cached() {
    std::lock_guard lock(mu_);
    return cached_;
  }
  size_t pending_blocks() {
    std::lock_guard lock(mu_);
    return pending_.size();
  }

 private:
  struct Use {
    void* event;
    int device;
  };
  struct Pending {
    void* block;
    std::vector<Use> uses;
  };

  size_t size_of(void* p) const { return sizes_.at(p); }

  void process_pending() {  // mu_ held
    for (size_t i = 0; i < pending_.size();) {
      bool done = true;
      for (Use u : pending_[i].uses)
        if (!rt_.event_done(u.event)) {
          done = false;
          break;
        }
      if (!done) {
        ++i;
        continue;
      }
      for (Use u : pending_[i].uses) rt_.release_event(u.device, u.event);
      void* p = pending_[i].block;
      free_[size_of(p)].push_back(p);
      cached_ += size_of(p);
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
  }

  AllocRuntime& rt_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // cached blocks by size
  std::unordered_map<void*, size_t> sizes_;    // every block held: its rounded size
  std::unordered_map<void*, std::vector<Use>> uses_;
  std::unordered_set<void*> live_;
  std::vector<Pending> pending_;
  size_t cached_ = 0, reserved_ = 0;
};

}  // namespace nabla::cuda
