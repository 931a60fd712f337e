// The CPU caching allocator and the small-object pool.
//
// Tensor memory: sizes are rounded up to buckets (multiples of 64 bytes up to 256, then four
// buckets per power of two) and freed blocks wait in per-bucket free lists for the next request of
// that bucket, so a training loop that allocates the same shapes every step stops calling the
// system allocator after its first step. Under AddressSanitizer, caching is off so ASan sees every
// allocation exactly.
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/sanitizer.h"

namespace nabla {
namespace {

constexpr size_t kAlign = 64;
constexpr int kNumBuckets = 4 * 48;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;  // beyond this, frees go back to the system

bool caching_enabled() {
#ifdef NABLA_ASAN
  return false;
#else
  static const bool enabled = [] {
    const char* e = std::getenv("NABLA_CPU_CACHE");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return enabled;
#endif
}

// Bucket index and rounded size for a request.
inline int bucket_of(size_t n, size_t* rounded) {
  if (n <= 256) {
    size_t r = n <= 64 ? 64 : (n + 63) & ~size_t(63);
    *rounded = r;
    return static_cast<int>(r / 64) - 1;  // 0..3
  }
  int k = 63 - std::countl_zero(n - 1);  // 2^k < n <= 2^(k+1)
  size_t step = size_t(1) << (k - 2);    // four buckets per power of two
  size_t r = (n + step - 1) & ~(step - 1);
  *rounded = r;
  int sub = static_cast<int>((r >> (k - 2)) - 5);  // 0..3 within (2^k, 2^(k+1)]
  return 4 + (k - 8) * 4 + sub;
}

class CpuCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded;
    int b = bucket_of(nbytes, &rounded);
    if (caching_enabled() && b < kNumBuckets) {
      std::lock_guard lock(mu_);
      auto& list = free_[b];
      if (!list.empty()) {
        void* p = list.back();
        list.pop_back();
        cached_ -= rounded;
        allocated_ += rounded;
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p) {
      cpu_empty_cache();
      p = std::aligned_alloc(kAlign, rounded);
    }
    if (!p) throw Error(internal::str("CPU allocator: out of memory allocating ", nbytes, " bytes"));
    system_allocs_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    allocated_ += rounded;
    // Room in the bucket's free list for every block it owns, so that freeing never grows the list
    // (a steady state makes no system calls however the frees interleave).
    if (caching_enabled() && b < kNumBuckets) free_[b].reserve(++owned_[b]);
    return p;
  }

  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    size_t rounded;
    int b = bucket_of(nbytes, &rounded);
    {
      std::lock_guard lock(mu_);
      allocated_ -= rounded;
      if (caching_enabled() && b < kNumBuckets && cached_ + rounded <= kMaxCachedBytes &&
          free_[b].size() < free_[b].capacity()) {
        free_[b].push_back(p);
        cached_ += rounded;
        return;
      }
      if (caching_enabled() && b < kNumBuckets && owned_[b] > 0) --owned_[b];
    }
    std::free(p);
  }

  void empty_cache() {
    std::vector<void*> all;
    {
      std::lock_guard lock(mu_);
      for (int b = 0; b < kNumBuckets; ++b) {
        all.insert(all.end(), free_[b].begin(), free_[b].end());
        owned_[b] -= static_cast<int64_t>(free_[b].size());
        free_[b].clear();  // keeps its capacity: blocks still live are cached again when freed
      }
      cached_ = 0;
    }
    for (void* p : all) std::free(p);
  }

  CpuMemoryStats stats() {
    std::lock_guard lock(mu_);
    return {allocated_, allocated_ + cached_, system_allocs_.load()};
  }

 private:
  std::mutex mu_;
  std::array<std::vector<void*>, kNumBuckets> free_;
  std::array<int64_t, kNumBuckets> owned_{};  // blocks of each bucket from the system, live or cached
  size_t allocated_ = 0, cached_ = 0;
  std::atomic<uint64_t> system_allocs_{0};
};

CpuCachingAllocator& the_cpu_allocator() {
  static auto* a = new CpuCachingAllocator();  // never destroyed: tensors may outlive main()
  return *a;
}

// ---- small-object pool --------------------------------------------------------------------------
constexpr size_t kPoolGranule = 16;
constexpr size_t kPoolMax = 2048;  // autograd nodes with their saved state fit
constexpr size_t kPoolClasses = kPoolMax / kPoolGranule;
constexpr int kPoolMaxPerClass = 1024;

struct FreeBlock {
  FreeBlock* next;
};

// One trivially destructible thread-local (constinit: no guard, no wrapper call), so that each
// allocation and free reads the thread's cache through a single TLS address lookup. Its blocks are
// freed at thread exit by PoolCleanup, registered on the first cached free (the slow path);
// afterwards `dead` sends the thread's late frees (destructors of other thread-locals) to delete.
struct PoolCache {
  std::array<FreeBlock*, kPoolClasses> head;
  std::array<int, kPoolClasses> count;
  bool dead;
  bool cleanup_registered;
};
constinit thread_local PoolCache tl_pool{};

struct PoolCleanup {
  ~PoolCleanup() {
    PoolCache& c = tl_pool;
    c.dead = true;
    for (auto*& h : c.head) {
      while (h) {
        FreeBlock* n = h->next;
        ::operator delete(h);
        h = n;
      }
    }
  }
};

void register_pool_cleanup(PoolCache& c) {
  static thread_local PoolCleanup cleanup;
  (void)&cleanup;  // odr-use: constructs it (and registers its destructor) in this thread
  c.cleanup_registered = true;
}

bool pool_enabled() {
#ifdef NABLA_ASAN
  return false;
#else
  return caching_enabled();
#endif
}

}  // namespace

Allocator& cpu_allocator() { return the_cpu_allocator(); }
CpuMemoryStats cpu_memory_stats() { return the_cpu_allocator().stats(); }
void cpu_empty_cache() { the_cpu_allocator().empty_cache(); }

void* pool_allocate(size_t n) {
  PoolCache& pool = tl_pool;
  if (n > kPoolMax || pool.dead || !pool_enabled()) return ::operator new(n);
  size_t c = (n - 1) / kPoolGranule;
  FreeBlock* b = pool.head[c];
  if (b) {
    pool.head[c] = b->next;
    --pool.count[c];
    return b;
  }
  return ::operator new((c + 1) * kPoolGranule);
}

void pool_deallocate(void* p, size_t n) {
  if (!p) return;
  PoolCache& pool = tl_pool;
  if (n > kPoolMax || pool.dead || !pool_enabled()) {
    ::operator delete(p);
    return;
  }
  size_t c = (n - 1) / kPoolGranule;
  if (pool.count[c] >= kPoolMaxPerClass) {
    ::operator delete(p);
    return;
  }
  if (!pool.cleanup_registered) [[unlikely]]
    register_pool_cleanup(pool);
  auto* b = static_cast<FreeBlock*>(p);
  b->next = pool.head[c];
  pool.head[c] = b;
  ++pool.count[c];
}

}  // namespace nabla
