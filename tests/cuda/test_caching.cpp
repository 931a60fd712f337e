// The CUDA caching allocators' policies (cuda/caching_allocator.h for device memory,
// cuda/pinned_policy.h for pinned host memory) on a fake runtime: an address space without memory
// behind it, a capacity that makes cudaMalloc fail, events completed when a
// test says so. Plain C++ (no nabla library, no CUDA): these run on every machine, and the same
// file is built alone under ThreadSanitizer (tests/CMakeLists.txt, nabla_cuda_caching_tsan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cuda/caching_allocator.h"
#include "cuda/pinned_policy.h"

namespace nabla::cuda {
namespace {

constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;

class FakeRuntime final : public AllocRuntime {
 public:
  explicit FakeRuntime(size_t capacity) : capacity_(capacity) {}

  void* malloc(int, size_t bytes) override {
    std::lock_guard lock(mu_);
    ++mallocs;
    if (used_ + bytes > capacity_) return nullptr;
    void* p = reinterpret_cast<void*>(next_);
    next_ += bytes + 64 * KiB;  // a gap: neighbouring segments are never contiguous
    segments_[p] = bytes;
    used_ += bytes;
    return p;
  }
  void free(int, void* p) override {
    std::lock_guard lock(mu_);
    auto it = segments_.find(p);
    ASSERT_NE(it, segments_.end()) << "freed an address that is not a segment's start";
    freed_sizes.push_back(it->second);
    used_ -= it->second;
    segments_.erase(it);
  }
  void* record_event(int, void* stream) override {
    std::lock_guard lock(mu_);
    events_.push_back({stream, false, false});
    return reinterpret_cast<void*>(events_.size());  // 1-based: never null
  }
  bool event_done(void* e) override {
    std::lock_guard lock(mu_);
    return ev(e).done;
  }
  void event_wait(void* e) override {
    std::lock_guard lock(mu_);
    ev(e).done = true;
    ++waits;
  }
  void release_event(int, void* e) override {
    std::lock_guard lock(mu_);
    EXPECT_FALSE(ev(e).released) << "an event released twice";
    ev(e).released = true;
  }
  void synchronize_device(int) override {
    std::lock_guard lock(mu_);
    for (Event& e : events_) e.done = true;
    ++device_syncs;
  }
  void* host_malloc(size_t bytes) override {
    std::lock_guard lock(mu_);
    if (host_used_ + bytes > host_capacity) return nullptr;
    void* p = reinterpret_cast<void*>(host_next_);
    host_next_ += bytes + 4 * KiB;
    host_blocks_[p] = bytes;
    host_used_ += bytes;
    ++host_mallocs;
    return p;
  }
  void host_free(void* p) override {
    std::lock_guard lock(mu_);
    auto it = host_blocks_.find(p);
    ASSERT_NE(it, host_blocks_.end()) << "freed host memory that is not a block's start";
    host_used_ -= it->second;
    host_freed.push_back(it->second);
    host_blocks_.erase(it);
  }
  size_t host_used() {
    std::lock_guard lock(mu_);
    return host_used_;
  }
  size_t host_capacity = size_t(1) << 40;
  uint64_t host_mallocs = 0, device_syncs = 0;
  std::vector<size_t> host_freed;

  // The work queued on `stream` so far has completed.
  void complete(void* stream) {
    std::lock_guard lock(mu_);
    for (Event& e : events_)
      if (e.stream == stream) e.done = true;
  }
  size_t used() {
    std::lock_guard lock(mu_);
    return used_;
  }
  size_t segments() {
    std::lock_guard lock(mu_);
    return segments_.size();
  }
  size_t unreleased_events() {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (Event& e : events_) n += !e.released;
    return n;
  }

  uint64_t mallocs = 0, waits = 0;
  std::vector<size_t> freed_sizes;

 private:
  struct Event {
    void* stream;
    bool done, released;
  };
  Event& ev(void* e) { return events_.at(reinterpret_cast<size_t>(e) - 1); }

  std::mutex mu_;
  size_t capacity_, used_ = 0;
  uintptr_t next_ = uintptr_t(1) << 40;
  std::map<void*, size_t> segments_;
  std::vector<Event> events_;
  uintptr_t host_next_ = uintptr_t(1) << 44;
  size_t host_used_ = 0;
  std::map<void*, size_t> host_blocks_;
};

void* const s1 = reinterpret_cast<void*>(0x100);
void* const s2 = reinterpret_cast<void*>(0x200);
void* const s3 = reinterpret_cast<void*>(0x300);

TEST(CudaCaching, RoundingAndSegmentSizesArePytorchs) {
  using P = CachingPolicy;
  EXPECT_EQ(P::round_size(1), 512u);
  EXPECT_EQ(P::round_size(512), 512u);
  EXPECT_EQ(P::round_size(513), 1024u);
  EXPECT_EQ(P::round_size(2 * MiB + 1), 2 * MiB + 512);  // the old policy took 4 MiB: 2x
  EXPECT_EQ(P::segment_size(512), 2 * MiB);
  EXPECT_EQ(P::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(P::segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(P::segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(P::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(P::segment_size(11 * MiB), 12 * MiB);
}

TEST(CudaCaching, SmallRequestsAreCutFromOneSegment) {
  FakeRuntime rt(1 << 30);
  CachingPolicy a(rt);
  std::vector<void*> ptrs;
  for (int i = 0; i < 4096; ++i) ptrs.push_back(a.allocate(0, 500, s1));  // 4096 x 512 bytes = 2 MiB
  EXPECT_EQ(rt.mallocs, 1u);
  std::sort(ptrs.begin(), ptrs.end());
  for (size_t i = 1; i < ptrs.size(); ++i)
    EXPECT_EQ(static_cast<char*>(ptrs[i]) - static_cast<char*>(ptrs[i - 1]), 512);
  ptrs.push_back(a.allocate(0, 1, s1));
  EXPECT_EQ(rt.mallocs, 2u);
  CachingStats st = a.stats(0);
  EXPECT_EQ(st.allocated, 4097 * 512u);
  EXPECT_EQ(st.reserved, 4 * MiB);
  EXPECT_EQ(st.segment_mallocs, 2u);
  a.check_invariants(0);
  for (void* p : ptrs) a.deallocate(p);
  a.check_invariants(0);
  EXPECT_EQ(a.stats(0).allocated, 0u);
  a.release_cached(0);
  EXPECT_EQ(a.stats(0).reserved, 0u);
  EXPECT_EQ(rt.used(), 0u);
}

TEST(CudaCaching, LargeBlocksSplitAndMerge) {
  FakeRuntime rt(1 << 30);
  CachingPolicy a(rt);
  void* x = a.allocate(0, 3 * MiB, s1);   // a 20 MiB segment
  void* y = a.allocate(0, 5 * MiB, s1);   // cut from it
  void* z = a.allocate(0, 13 * MiB, s1);  // 12 MiB are left there: its own 14 MiB segment
  EXPECT_EQ(rt.mallocs, 2u);
  EXPECT_EQ(static_cast<char*>(y) - static_cast<char*>(x), std::ptrdiff_t(3 * MiB));
  EXPECT_EQ(a.stats(0).reserved, 34 * MiB);
  EXPECT_EQ(a.stats(0).allocated, 22 * MiB);  // z keeps its segment's last 1 MiB: not more than 1 MiB was left
  a.deallocate(x);
  a.deallocate(y);  // merges with x's block and the rest: the 20 MiB segment is one free block again
  a.check_invariants(0);
  void* w = a.allocate(0, 18 * MiB, s1);  // fits the merged block: no cudaMalloc
  EXPECT_EQ(rt.mallocs, 2u);
  EXPECT_EQ(w, x);
  void* v = a.allocate(0, 1536 * KiB, s1);  // the 2 MiB cut off after w (more than 1 MiB was left)
  EXPECT_EQ(rt.mallocs, 2u);
  EXPECT_EQ(static_cast<char*>(v) - static_cast<char*>(w), std::ptrdiff_t(18 * MiB));
  a.check_invariants(0);
  // What is left after v (512 KiB) is not cut off in the large pool: v holds the whole 2 MiB.
  EXPECT_EQ(a.stats(0).allocated, (18 + 2 + 14) * MiB);
  for (void* p : {w, v, z}) a.deallocate(p);
  a.release_cached(0);
  EXPECT_EQ(rt.freed_sizes.size(), 2u);
  EXPECT_EQ(rt.used(), 0u);
}

TEST(CudaCaching, AFreedBlockServesItsOwnStreamOnly) {
  FakeRuntime rt(1 << 30);
  CachingPolicy a(rt);
  void* p = a.allocate(0, 12 * MiB, s1);
  a.deallocate(p);
  void* q = a.allocate(0, 12 * MiB, s2);  // another stream: new memory
  EXPECT_NE(q, p);
  EXPECT_EQ(rt.mallocs, 2u);
  void* r = a.allocate(0, 12 * MiB, s1);  // the same stream: the cached block, at once
  EXPECT_EQ(r, p);
  EXPECT_EQ(rt.mallocs, 2u);
  a.deallocate(q);
  a.deallocate(r);
  a.check_invariants(0);
}

TEST(CudaCaching, RecordStreamDelaysReuseUntilTheEventsComplete) {
  FakeRuntime rt(1 << 30);
  CachingPolicy a(rt);
  void* p = a.allocate(0, 12 * MiB, s1);
  EXPECT_TRUE(a.record_stream(p, s2));
  EXPECT_TRUE(a.record_stream(p, s1));  // its own stream: nothing to wait for
  EXPECT_FALSE(a.record_stream(reinterpret_cast<void*>(0x1234), s2));
  a.deallocate(p);
  EXPECT_EQ(a.stats(0).allocated, 0u);       // no longer a tensor's
  EXPECT_EQ(a.stats(0).reserved, 12 * MiB);  // but still held
  EXPECT_EQ(rt.unreleased_events(), 1u);     // one event, on s2
  a.check_invariants(0);
  void* q = a.allocate(0, 12 * MiB, s1);  // s2 may still read p: not handed out
  EXPECT_NE(q, p);
  a.deallocate(q);
  rt.complete(s2);
  void* r = a.allocate(0, 12 * MiB, s1);
  void* t = a.allocate(0, 12 * MiB, s1);
  EXPECT_TRUE((r == p && t == q) || (r == q && t == p));  // both blocks are free again
  EXPECT_EQ(rt.unreleased_events(), 0u);
  a.deallocate(r);
  a.deallocate(t);
  a.check_invariants(0);
}

TEST(CudaCaching, OutOfMemoryReleasesOtherStreamsAndTheLargestBlocksFirst) {
  FakeRuntime rt(100 * MiB);
  CachingPolicy a(rt);
  std::vector<void*> cached = {a.allocate(0, 12 * MiB, s1), a.allocate(0, 14 * MiB, s1), a.allocate(0, 16 * MiB, s2),
                               a.allocate(0, 30 * MiB, s2)};
  for (void* p : cached) a.deallocate(p);
  ASSERT_EQ(rt.used(), 72 * MiB);
  void* big = a.allocate(0, 40 * MiB, s1);  // 28 MiB free: s2's 30 and 16 MiB segments go, s1's stay
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(rt.freed_sizes, (std::vector<size_t>{30 * MiB, 16 * MiB}));
  CachingStats st = a.stats(0);
  EXPECT_EQ(st.reserved, (12 + 14 + 40) * MiB);
  EXPECT_EQ(st.ooms, 0u);
  EXPECT_EQ(st.segment_frees, 2u);
  // s1's cached blocks still serve s1 without cudaMalloc.
  uint64_t before = rt.mallocs;
  void* c = a.allocate(0, 14 * MiB, s1);
  EXPECT_EQ(rt.mallocs, before);
  a.deallocate(c);
  a.deallocate(big);
  a.check_invariants(0);
}

TEST(CudaCaching, OutOfMemoryAfterReleasingEverythingIsCounted) {
  FakeRuntime rt(50 * MiB);
  CachingPolicy a(rt);
  void* live = a.allocate(0, 30 * MiB, s1);
  void* cached = a.allocate(0, 12 * MiB, s1);
  a.deallocate(cached);
  // A probe neither releases the cache nor counts.
  EXPECT_EQ(a.allocate(0, 30 * MiB, s1, /*try_only=*/true), nullptr);
  EXPECT_TRUE(rt.freed_sizes.empty());
  EXPECT_EQ(a.stats(0).ooms, 0u);
  size_t rounded = 0;
  EXPECT_EQ(a.allocate(0, 30 * MiB - 100, s1, false, &rounded), nullptr);
  EXPECT_EQ(rounded, 30 * MiB);
  EXPECT_EQ(rt.freed_sizes, (std::vector<size_t>{12 * MiB}));  // released trying
  EXPECT_EQ(a.stats(0).ooms, 1u);
  EXPECT_EQ(a.stats(0).reserved, 30 * MiB);
  // Smaller requests still work.
  void* small = a.allocate(0, 10 * MiB, s1);
  EXPECT_NE(small, nullptr);
  a.deallocate(small);
  a.deallocate(live);
  a.check_invariants(0);
}

TEST(CudaCaching, OutOfMemoryWaitsForPendingBlocks) {
  FakeRuntime rt(40 * MiB);
  CachingPolicy a(rt);
  void* p = a.allocate(0, 30 * MiB, s1);
  a.record_stream(p, s2);
  a.deallocate(p);                        // pending on s2's event, which the fake never completes by itself
  void* q = a.allocate(0, 30 * MiB, s3);  // another stream: needs p's memory back
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(rt.waits, 1u);
  EXPECT_EQ(rt.freed_sizes, (std::vector<size_t>{30 * MiB}));
  EXPECT_EQ(rt.unreleased_events(), 0u);
  a.deallocate(q);
  a.check_invariants(0);
}

TEST(CudaCaching, EmptyCacheKeepsSegmentsWithLiveBlocks) {
  FakeRuntime rt(1 << 30);
  CachingPolicy a(rt);
  void* x = a.allocate(0, 1000, s1);
  void* y = a.allocate(0, 1000, s1);
  a.deallocate(x);
  a.release_cached(0);
  EXPECT_EQ(a.stats(0).reserved, 2 * MiB);  // y lives in the segment
  EXPECT_EQ(rt.segments(), 1u);
  a.deallocate(y);
  a.release_cached(0);
  EXPECT_EQ(a.stats(0).reserved, 0u);
  EXPECT_EQ(a.stats(0).segment_frees, 1u);
  EXPECT_EQ(rt.segments(), 0u);
}

TEST(CudaCaching, PeakAndReset) {
  FakeRuntime rt(1 << 30);
  CachingPolicy a(rt);
  void* x = a.allocate(0, 12 * MiB, s1);
  void* y = a.allocate(0, 4 * MiB, s1);
  a.deallocate(y);
  EXPECT_EQ(a.stats(0).peak, 16 * MiB);
  a.reset_peak(0);
  EXPECT_EQ(a.stats(0).peak, 12 * MiB);
  a.deallocate(x);
  EXPECT_EQ(a.stats(0).peak, 12 * MiB);
  EXPECT_EQ(a.stats(1).reserved, 0u);  // devices are separate
  EXPECT_THROW(a.stats(64), std::out_of_range);
}

// Random requests, frees, stream uses and event completions: after every step the segments are
// tiled by their blocks, no two free neighbours are left apart, the statistics equal what the
// blocks say, and no two live blocks overlap.
TEST(CudaCaching, RandomOperationsKeepEveryInvariant) {
  FakeRuntime rt(size_t(4) << 30);
  CachingPolicy a(rt);
  std::mt19937_64 rng(11);
  void* streams[] = {s1, s2, s3};
  std::map<char*, size_t> live;  // ptr -> requested bytes
  for (int step = 0; step < 4000; ++step) {
    int op = int(rng() % 10);
    if (op < 4 || live.empty()) {
      // Log-uniform sizes from 1 byte to 64 MiB.
      size_t n = size_t(std::exp2(double(rng() % 2600) / 100.0));
      char* p = static_cast<char*>(a.allocate(0, n, streams[rng() % 3]));
      ASSERT_NE(p, nullptr);
      auto next = live.lower_bound(p);
      if (next != live.end()) ASSERT_LE(p + n, next->first) << "overlaps a live block";
      if (next != live.begin())
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second, p) << "overlaps a live block";
      live[p] = n;
    } else if (op < 8) {
      auto it = std::next(live.begin(), long(rng() % live.size()));
      a.deallocate(it->first);
      live.erase(it);
    } else if (op < 9) {
      auto it = std::next(live.begin(), long(rng() % live.size()));
      a.record_stream(it->first, streams[rng() % 3]);
    } else {
      rt.complete(streams[rng() % 3]);
    }
    ASSERT_NO_THROW(a.check_invariants(0)) << "step " << step;
  }
  CachingStats st = a.stats(0);
  size_t want = 0;
  for (auto& [p, n] : live) want += CachingPolicy::round_size(n);
  EXPECT_LE(st.allocated, want + live.size() * CachingPolicy::kSmallSize);  // a block may keep a <= 1 MiB tail
  EXPECT_GE(st.allocated, want);
  for (auto& [p, n] : live) a.deallocate(p);
  for (void* s : streams) rt.complete(s);
  a.release_cached(0);
  EXPECT_EQ(a.stats(0).reserved, 0u);
  EXPECT_EQ(rt.used(), 0u);
  EXPECT_EQ(a.stats(0).segment_mallocs, a.stats(0).segment_frees);
  EXPECT_EQ(rt.unreleased_events(), 0u);
}

// Threads allocating and freeing at once, each on its own stream, with cross-stream uses
// (ThreadSanitizer checks the locking in the nabla_cuda_caching_tsan build).
TEST(CudaCaching, ThreadsAllocateAndFreeAtOnce) {
  FakeRuntime rt(size_t(8) << 30);
  CachingPolicy a(rt);
  void* streams[] = {s1, s2, s3};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng{static_cast<unsigned>(t)};
      std::vector<void*> mine;
      for (int i = 0; i < 3000; ++i) {
        if (mine.size() < 20 && rng() % 3) {
          mine.push_back(a.allocate(0, 256 + rng() % (4 * MiB), streams[t]));
          if (rng() % 8 == 0) a.record_stream(mine.back(), streams[(t + 1) % 3]);
        } else if (!mine.empty()) {
          a.deallocate(mine.back());
          mine.pop_back();
        }
        if (i % 100 == 0) rt.complete(streams[(t + 2) % 3]);
        if (i % 500 == 0) (void)a.stats(0);
      }
      for (void* p : mine) a.deallocate(p);
    });
  for (auto& th : threads) th.join();
  a.check_invariants(0);
  EXPECT_EQ(a.stats(0).allocated, 0u);
  a.release_cached(0);
  EXPECT_EQ(a.stats(0).reserved, 0u);
  EXPECT_EQ(rt.used(), 0u);
}

// ---- pinned host memory (cuda/pinned_policy.h) ---------------------------------------------------
TEST(CudaPinned, SizesRoundToFourStepsPerOctaveAnd2MibAbove1Mib) {
  using P = PinnedPolicy;
  EXPECT_EQ(P::round_size(1), 512u);
  EXPECT_EQ(P::round_size(512), 512u);
  EXPECT_EQ(P::round_size(513), 640u);  // 512 < n <= 1024: steps of 128
  EXPECT_EQ(P::round_size(1000), 1024u);
  EXPECT_EQ(P::round_size(100 * KiB), 112 * KiB);  // 64 KiB < n <= 128 KiB: steps of 16 KiB
  EXPECT_EQ(P::round_size(MiB), MiB);
  EXPECT_EQ(P::round_size(MiB + 1), 2 * MiB);
  EXPECT_EQ(P::round_size(5 * MiB), 6 * MiB);
  EXPECT_TRUE(P::fits(640, 512));
  EXPECT_FALSE(P::fits(1024, 512));  // more than a quarter to spare
  EXPECT_FALSE(P::fits(448, 512));
}

TEST(CudaPinned, AFreedBlockIsReusedByARequestItFits) {
  FakeRuntime rt(0);
  PinnedPolicy p(rt);
  void* a = p.allocate(100 * KiB);
  EXPECT_EQ(p.reserved(), 112 * KiB);
  p.deallocate(a);
  EXPECT_EQ(p.cached(), 112 * KiB);
  EXPECT_EQ(p.allocate(110 * KiB), a);  // the same rounded size
  EXPECT_EQ(p.cached(), 0u);
  void* b = p.allocate(20 * KiB);  // 112 KiB would be too big for it: a block of its own
  EXPECT_NE(b, a);
  EXPECT_EQ(rt.host_mallocs, 2u);
  EXPECT_EQ(p.reserved(), 112 * KiB + 20 * KiB);
  EXPECT_EQ(p.allocate(0), nullptr);
  p.deallocate(nullptr);
  p.deallocate(reinterpret_cast<void*>(0x1234));  // not ours: ignored
  EXPECT_FALSE(p.record_use(reinterpret_cast<void*>(0x1234), 0, s1));
  p.deallocate(a);
  p.deallocate(b);
  p.release_cached();
  EXPECT_EQ(p.reserved(), 0u);
  EXPECT_EQ(rt.host_used(), 0u);
}

TEST(CudaPinned, ABlockInUseByACopyWaitsForItsEvents) {
  FakeRuntime rt(0);
  PinnedPolicy p(rt);
  void* a = p.allocate(4 * KiB);
  ASSERT_TRUE(p.record_use(a, 0, s1));  // a non_blocking copy on s1, then one on s2
  ASSERT_TRUE(p.record_use(a, 0, s2));
  p.deallocate(a);
  EXPECT_EQ(p.pending_blocks(), 1u);
  EXPECT_EQ(p.cached(), 0u);
  void* b = p.allocate(4 * KiB);  // the copies may still read a: a new block
  EXPECT_NE(b, a);
  rt.complete(s1);
  void* c = p.allocate(4 * KiB);  // s2's copy still runs
  EXPECT_NE(c, a);
  rt.complete(s2);
  EXPECT_EQ(p.allocate(4 * KiB), a);  // both done: reused, and its events returned
  EXPECT_EQ(rt.unreleased_events(), 0u);
  EXPECT_EQ(p.pending_blocks(), 0u);
  // Completed uses are dropped as new ones are recorded, so a block copied often keeps a short list.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(p.record_use(a, 0, s1));
    rt.complete(s1);
  }
  EXPECT_LE(rt.unreleased_events(), 1u);
  for (void* q : {a, b, c}) p.deallocate(q);
  p.release_cached();
  EXPECT_EQ(rt.unreleased_events(), 0u);
  EXPECT_EQ(rt.host_used(), 0u);
}

TEST(CudaPinned, OutOfPageLockedMemoryReleasesTheCacheThenFails) {
  FakeRuntime rt(0);
  rt.host_capacity = 10 * MiB;
  PinnedPolicy p(rt);
  void* a = p.allocate(4 * MiB);
  void* b = p.allocate(4 * MiB);
  ASSERT_TRUE(p.record_use(b, 0, s1));
  p.deallocate(a);
  p.deallocate(b);  // pending on s1's copy
  // 6 MiB does not fit next to 8 MiB held: the cache goes back (waiting for s1's copy), then it fits.
  void* c = p.allocate(5 * MiB + 1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(rt.host_freed, (std::vector<size_t>{4 * MiB, 4 * MiB}));
  EXPECT_EQ(rt.waits, 1u);
  EXPECT_EQ(p.reserved(), 6 * MiB);
  // More than there is, even with nothing cached: nullptr and the rounded size.
  size_t rounded = 0;
  EXPECT_EQ(p.allocate(9 * MiB, &rounded), nullptr);
  EXPECT_EQ(rounded, 10 * MiB);
  EXPECT_EQ(p.reserved(), 6 * MiB);
  p.deallocate(c);
  p.release_cached();
  EXPECT_EQ(rt.host_used(), 0u);
}

TEST(CudaPinned, ThreadsAllocateUseAndFreeAtOnce) {
  FakeRuntime rt(0);
  PinnedPolicy p(rt);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<void*> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.empty() || rng() % 3) {
          void* q = p.allocate(1 + rng() % (256 * KiB));
          ASSERT_NE(q, nullptr);
          if (rng() % 2) (void)p.record_use(q, 0, t == 0 ? s1 : s2);
          mine.push_back(q);
        } else {
          p.deallocate(mine.back());
          mine.pop_back();
        }
        if (i % 50 == 0) rt.complete(t == 0 ? s1 : s2);
      }
      for (void* q : mine) p.deallocate(q);
    });
  for (auto& th : threads) th.join();
  rt.complete(s1);
  rt.complete(s2);
  p.release_cached();
  EXPECT_EQ(p.reserved(), 0u);
  EXPECT_EQ(rt.host_used(), 0u);
  EXPECT_EQ(rt.unreleased_events(), 0u);
}

}  // namespace
}  // namespace nabla::cuda
