// The thread pool behind parallel_for: every index is visited exactly once, however the workers'
// wake-ups fall between jobs; exceptions reach the caller; nested calls run serially.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "nabla.h"

namespace nabla {
namespace {

// Restores the thread count a test changed.
struct ThreadCount {
  int saved = get_num_threads();
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved); }
};

// Many tiny jobs back to back, with pauses long enough for the workers to fall asleep, so that
// wake-ups arrive late, often after the caller finished a job alone and while it writes the next
// one (a worker slipping into a half-written job used to lose a chunk's completion: a hang).
TEST(Parallel, TinyJobsBackToBackVisitEveryIndexOnce) {
  for (int threads : {2, 4}) {
    ThreadCount tc(threads);
    for (int job = 0; job < 20000; ++job) {
      if (job % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers sleep
      const int64_t n = 2 + job % 7;
      int visits[8] = {};
      parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++visits[i];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[i], 1) << "job " << job << " index " << i << " threads " << threads;
    }
  }
}

TEST(Parallel, LargeRangeSplitsIntoChunksThatCoverItOnce) {
  ThreadCount tc(4);
  std::vector<std::atomic<int>> visits(100003);
  std::atomic<int> chunks{0};
  parallel_for(0, 100003, 1000, [&](int64_t b, int64_t e) {
    ++chunks;
    for (int64_t i = b; i < e; ++i) ++visits[static_cast<size_t>(i)];
  });
  for (size_t i = 0; i < visits.size(); ++i) ASSERT_EQ(visits[i].load(), 1) << i;
  EXPECT_GE(chunks.load(), 2);  // really split
  EXPECT_LE(chunks.load(), 4);  // one chunk per thread at most
}

TEST(Parallel, ExceptionsReachTheCallerAndThePoolKeepsWorking) {
  ThreadCount tc(2);
  EXPECT_THROW(parallel_for(0, 1000, 1, [](int64_t b, int64_t) {
                 if (b > 0) throw std::runtime_error("chunk failed");
               }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(Parallel, NestedCallsRunSeriallyInsideAChunk) {
  ThreadCount tc(2);
  std::atomic<int> inner_chunks{0};
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    EXPECT_TRUE(in_parallel_region());
    parallel_for(0, 100, 1, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 100);
      ++inner_chunks;
    });
  });
  EXPECT_EQ(inner_chunks.load(), 2);
  EXPECT_FALSE(in_parallel_region());
}

}  // namespace
}  // namespace nabla
