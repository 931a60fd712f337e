// The device caching allocator's policy, apart from the CUDA runtime: plain C++ (no CUDA header),
// so the host tests drive it through a fake runtime (tests/cuda/test_caching.cpp), with or without
// a GPU or a CUDA build. cuda/allocator.cpp runs it on the real runtime.
//
// The policy follows PyTorch's CUDACachingAllocator:
// - Requests are rounded up to multiples of 512 bytes. Those of at most 1 MiB come from 2 MiB
//   segments (the small pool); larger ones from 20 MiB segments when under 10 MiB, else from a
//   segment of their size rounded up to 2 MiB (the large pool). A cudaMalloc'd segment is split
//   into blocks: a block is cut when the rest is at least 512 bytes (small pool) or over 1 MiB
//   (large pool), and a freed block merges with free neighbours of its segment.
// - Free blocks are kept per (device, stream): work on one stream runs in order, so a block freed
//   there can serve the next request on that stream at once. A block used on other streams
//   (record_stream) returns only after events recorded on those streams have completed.
// - A request takes the smallest free block of its pool and stream that fits.
// - When cudaMalloc fails: cached blocks are released, other streams' first and the largest first,
//   until enough is freed, and the allocation retried; then every cached block (waiting for the
//   pending ones) and retried once more; then the request fails and is counted as an out-of-memory.
//   Only whole segments go back to the driver: a segment with a live block stays.
// - Statistics are exact: allocated = bytes of live blocks (rounded sizes; a freed block waiting on
//   other streams' events is no longer counted), reserved = bytes of segments held, peak = the
//   highest allocated since the last reset, segment mallocs and frees, out-of-memory count.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace nabla::cuda {

// What the policy needs from the runtime. Streams and events are opaque handles.
class AllocRuntime {
 public:
  virtual ~AllocRuntime() = default;
  // `bytes` of device memory on `device`, or nullptr when the device is out of memory (the
  // runtime's error cleared); any other failure throws.
  virtual void* malloc(int device, size_t bytes) = 0;
  virtual void free(int device, void* p) = 0;
  // An event recorded on `stream` now, or nullptr when recording failed (the caller then waits
  // for the device instead).
  virtual void* record_event(int device, void* stream) = 0;
  virtual bool event_done(void* event) = 0;
  virtual void event_wait(void* event) = 0;
  virtual void release_event(int device, void* event) = 0;
  virtual void synchronize_device(int device) = 0;
  // `bytes` of page-locked host memory (cuda/pinned_policy.h), or nullptr when there is none left.
  virtual void* host_malloc(size_t bytes) = 0;
  virtual void host_free(void* p) = 0;
};

struct CachingStats {
  size_t allocated = 0, reserved = 0, peak = 0;
  uint64_t segment_mallocs = 0, segment_frees = 0, ooms = 0;
};

class CachingPolicy {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallSize = size_t(1) << 20;      // requests up to this use the small pool
  static constexpr size_t kSmallSegment = size_t(2) << 20;   // the small pool's segments
  static constexpr size_t kLargeSegment = size_t(20) << 20;  // segments for requests under kMinLargeAlloc
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;
  static constexpr size_t kRoundLarge = size_t(2) << 20;
  static constexpr int kMaxDevices = 64;

  static size_t round_size(size_t n) { return n < kMinBlock ? kMinBlock : (n + kMinBlock - 1) / kMinBlock * kMinBlock; }
  static size_t segment_size(size_t rounded) {
    if (rounded <= kSmallSize) return kSmallSegment;
    if (rounded < kMinLargeAlloc) return kLargeSegment;
    return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
  }

  explicit CachingPolicy(AllocRuntime& rt) : rt_(rt) {}
  CachingPolicy(const CachingPolicy&) = delete;
  CachingPolicy& operator=(const CachingPolicy&) = delete;
  ~CachingPolicy() {
    // Each block is live, pending or in a pool; the memory itself stays the runtime's.
    for (auto& [p, b] : live_) delete b;
    for (Device& d : dev_) {
      for (auto* pool : {&d.small, &d.large})
        for (Block* b : *pool) delete b;
      for (Pending& pd : d.pending) delete pd.block;
    }
  }

  // `nbytes` on `device` for work on `stream`; nullptr when the device is out of memory. try_only:
  // fail at once instead, releasing nothing and counting nothing (probes for optional workspaces).
  // On a real failure `*oom` (if given) receives the rounded size.
  void* allocate(int device, size_t nbytes, void* stream, bool try_only = false, size_t* oom = nullptr) {
    if (nbytes == 0) return nullptr;
    check_device(device);
    const size_t size = round_size(nbytes);
    std::lock_guard lock(mu_);
    Device& d = dev_[device];
    process_pending(d);
    Pool& pool = size <= kSmallSize ? d.small : d.large;
    Block* b = take_free(pool, stream, size);
    if (!b) {
      const size_t seg = segment_size(size);
      void* p = rt_.malloc(device, seg);
      if (!p && !try_only) {
        release_for(d, device, stream, seg);
        p = rt_.malloc(device, seg);
      }
      if (!p && !try_only) {
        release_all(d, device);
        p = rt_.malloc(device, seg);
      }
      if (!p) {
        if (!try_only) {
          ++d.stats.ooms;
          if (oom) *oom = size;
        }
        return nullptr;
      }
      ++d.stats.segment_mallocs;
      d.stats.reserved += seg;
      b = new Block(device, stream, seg, static_cast<char*>(p), size <= kSmallSize);
    }
    // Cut the rest off as a free block of the same segment.
    const size_t rest = b->size - size;
    if (b->small ? rest >= kMinBlock : rest > kSmallSize) {
      auto* r = new Block(device, stream, rest, b->ptr + size, b->small);
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      pool.insert(r);
    }
    b->allocated = true;
    live_[b->ptr] = b;
    d.stats.allocated += b->size;
    d.stats.peak = std::max(d.stats.peak, d.stats.allocated);
    return b->ptr;
  }

  // Never throws (runs from tensor destructors); memory not from this allocator is ignored.
  void deallocate(void* p) noexcept {
    if (!p) return;
    try {
      std::lock_guard lock(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return;
      Block* b = it->second;
      live_.erase(it);
      Device& d = dev_[b->device];
      d.stats.allocated -= b->size;
      if (!b->used_on.empty()) {
        Pending pd{b, {}};
        for (void* s : b->used_on) {
          void* e = rt_.record_event(b->device, s);
          if (e) {
            pd.events.push_back(e);
          } else {
            rt_.synchronize_device(b->device);  // the use cannot be tracked: wait for everything
          }
        }
        b->used_on.clear();
        if (!pd.events.empty()) {
          d.pending.push_back(std::move(pd));
          return;
        }
      }
      free_block(d, b);
    } catch (...) {
      // A failure while freeing must not end the program; the block is leaked.
    }
  }

  // The block at `p` is used by work on `stream`. False when `p` is not a live block's start.
  bool record_stream(void* p, void* stream) {
    std::lock_guard lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return false;
    Block* b = it->second;
    if (stream != b->stream && std::find(b->used_on.begin(), b->used_on.end(), stream) == b->used_on.end())
      b->used_on.push_back(stream);
    return true;
  }

  CachingStats stats(int device) {
    check_device(device);
    std::lock_guard lock(mu_);
    return dev_[device].stats;
  }
  void reset_peak(int device) {
    check_device(device);
    std::lock_guard lock(mu_);
    dev_[device].stats.peak = dev_[device].stats.allocated;
  }
  // Bytes in free blocks (reserved but not allocated, pending ones included).
  size_t cached_bytes(int device) {
    check_device(device);
    std::lock_guard lock(mu_);
    return dev_[device].stats.reserved - dev_[device].stats.allocated;
  }
  // Whether `device` holds any memory (empty_cache skips devices it never used).
  bool holds_memory(int device) {
    check_device(device);
    std::lock_guard lock(mu_);
    return dev_[device].stats.reserved > 0;
  }

  // Returns every whole free segment of `device` to the runtime, after waiting for pending blocks.
  void release_cached(int device) {
    check_device(device);
    std::lock_guard lock(mu_);
    release_all(dev_[device], device);
  }

  // Throws std::logic_error naming the first broken invariant: the blocks of each segment tile it,
  // no two neighbours are both free, the pools hold exactly the free blocks, the statistics match.
  void check_invariants(int device) {
    check_device(device);
    std::lock_guard lock(mu_);
    Device& d = dev_[device];
    std::set<Block*> all;
    size_t in_pools = 0, allocated = 0;
    for (auto* pool : {&d.small, &d.large})
      for (Block* b : *pool) {
        if (b->allocated) fail("an allocated block is in a free pool");
        all.insert(b);
        ++in_pools;
      }
    for (auto& [p, b] : live_)
      if (b->device == device) {
        if (!b->allocated || p != b->ptr) fail("a live block is marked free or keyed wrongly");
        allocated += b->size;
        all.insert(b);
      }
    for (Pending& pd : d.pending) all.insert(pd.block);
    size_t reserved = 0, free_blocks = 0;
    for (Block* b : all) {
      reserved += b->size;
      if (!b->allocated) ++free_blocks;
      if (b->device != device) fail("a block of another device");
      if (b->next) {
        if (b->next->prev != b) fail("prev/next links disagree");
        if (b->ptr + b->size != b->next->ptr) fail("the blocks of a segment do not tile it");
        if (!all.count(b->next)) fail("a block of a segment is neither live, pending nor free");
        if (!b->allocated && !b->next->allocated) fail("two free neighbours were not merged");
      }
      if (b->prev && (b->prev->next != b || !all.count(b->prev))) fail("prev/next links disagree");
    }
    if (free_blocks != in_pools) fail("a free block is missing from the pools");
    if (reserved != d.stats.reserved) fail("reserved bytes differ from the segments held");
    if (allocated != d.stats.allocated) fail("allocated bytes differ from the live blocks");
  }

 private:
  struct Block {
    Block(int device_, void* stream_, size_t size_, char* ptr_, bool small_)
        : device(device_), stream(stream_), size(size_), ptr(ptr_), small(small_) {}
    int device;
    void* stream;
    size_t size;
    char* ptr;
    bool small;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    std::vector<void*> used_on;  // other streams it was used on (record_stream)
  };
  struct Order {  // by stream, then size, then address
    bool operator()(const Block* a, const Block* b) const {
      if (a->stream != b->stream) return std::less<void*>()(a->stream, b->stream);
      if (a->size != b->size) return a->size < b->size;
      return std::less<char*>()(a->ptr, b->ptr);
    }
  };
  using Pool = std::set<Block*, Order>;
  struct Pending {
    Block* block;  // freed by its owner; `allocated` stays true until the events complete
    std::vector<void*> events;
  };
  struct Device {
    Pool small, large;
    std::vector<Pending> pending;
    CachingStats stats;
  };

  [[noreturn]] static void fail(const char* what) { throw std::logic_error(std::string("CachingPolicy: ") + what); }
  static void check_device(int device) {
    if (device < 0 || device >= kMaxDevices)
      throw std::out_of_range("CUDA allocator: device index " + std::to_string(device) + " out of range");
  }

  Block* take_free(Pool& pool, void* stream, size_t size) {
    Block key(0, stream, size, nullptr, false);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
  }

  // `b` is free: merge it with free neighbours of its segment and put it in its pool.
  void free_block(Device& d, Block* b) {
    b->allocated = false;
    Pool& pool = b->small ? d.small : d.large;
    if (Block* p = b->prev; p && !p->allocated) {
      pool.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (b->next) b->next->prev = p;
      delete b;
      b = p;
    }
    if (Block* n = b->next; n && !n->allocated) {
      pool.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (n->next) n->next->prev = b;
      delete n;
    }
    pool.insert(b);
  }

  // Moves pending blocks whose events have all completed to the pools.
  void process_pending(Device& d) {
    for (size_t i = 0; i < d.pending.size();) {
      Pending& pd = d.pending[i];
      bool done = std::all_of(pd.events.begin(), pd.events.end(), [&](void* e) { return rt_.event_done(e); });
      if (!done) {
        ++i;
        continue;
      }
      Block* b = pd.block;
      for (void* e : pd.events) rt_.release_event(b->device, e);
      d.pending[i] = std::move(d.pending.back());
      d.pending.pop_back();
      free_block(d, b);
    }
  }

  void free_segment(Device& d, int device, Block* b) {
    (b->small ? d.small : d.large).erase(b);
    rt_.free(device, b->ptr);
    d.stats.reserved -= b->size;
    ++d.stats.segment_frees;
    delete b;
  }

  // After a failed cudaMalloc of `need` bytes for `stream`: free whole free segments, other
  // streams' first and the largest first, until `need` bytes went back.
  void release_for(Device& d, int device, void* stream, size_t need) {
    process_pending(d);
    std::vector<Block*> cand;
    for (auto* pool : {&d.small, &d.large})
      for (Block* b : *pool)
        if (!b->prev && !b->next) cand.push_back(b);
    std::sort(cand.begin(), cand.end(), [&](const Block* a, const Block* b) {
      bool ao = a->stream != stream, bo = b->stream != stream;
      if (ao != bo) return ao;
      return a->size > b->size;
    });
    size_t freed = 0;
    for (Block* b : cand) {
      if (freed >= need) break;
      freed += b->size;
      free_segment(d, device, b);
    }
  }

  // Waits for pending blocks, then frees every whole free segment.
  void release_all(Device& d, int device) {
    for (Pending& pd : d.pending) {
      for (void* e : pd.events) {
        rt_.event_wait(e);
        rt_.release_event(device, e);
      }
      free_block(d, pd.block);
    }
    d.pending.clear();
    std::vector<Block*> whole;
    for (auto* pool : {&d.small, &d.large})
      for (Block* b : *pool)
        if (!b->prev && !b->next) whole.push_back(b);
    for (Block* b : whole) free_segment(d, device, b);
  }

  AllocRuntime& rt_;
  std::mutex mu_;
  std::unordered_map<void*, Block*> live_;
  std::array<Device, kMaxDevices> dev_;
};

}  // namespace nabla::cuda
