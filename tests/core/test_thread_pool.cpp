// The thread pool behind parallel_for: every index is visited exactly once, however the workers'
// wake-ups fall between jobs; exceptions reach the caller; nested calls run serially.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/sanitizer.h"
#include "nabla.h"
#include "tests/common/run_self.h"

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
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(visits[i], 1) << "job " << job << " index " << i << " threads " << threads;
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

// The back-off under contention (jobs on the caller's thread for 50 ms after late jobs) ends when the
// thread count is set: a fresh pool is tried at once. (Earlier tests that left the pool backing off
// made the tests above and below run serially on a 16-core machine.)
TEST(Parallel, SettingTheThreadCountEndsTheBackOff) {
  ThreadCount tc(3);
  auto chunks_of_a_large_job = [] {
    std::atomic<int> chunks{0};
    parallel_for(0, 30000, 1000, [&](int64_t, int64_t) { ++chunks; });
    return chunks.load();
  };
  const auto t0 = std::chrono::steady_clock::now();
  internal::thread_pool_back_off_for_testing();
  const int backing_off = chunks_of_a_large_job();
  if (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(40))  // (a stalled machine outlasts it)
    EXPECT_EQ(backing_off, 1);                                                // one call on the caller's thread
  set_num_threads(3);
  EXPECT_EQ(chunks_of_a_large_job(), 3);
}

TEST(Parallel, ExceptionsReachTheCallerAndThePoolKeepsWorking) {
  ThreadCount tc(2);
  EXPECT_THROW(parallel_for(0, 1000, 1,
                            [](int64_t b, int64_t) {
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

TEST(Parallel, MoreThanTheLimitIsRefused) {
  const int before = get_num_threads();
  try {
    set_num_threads(kMaxThreads + 1);
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("set_num_threads: 1025 threads is more than the limit of 1024"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(get_num_threads(), before);
}

using testing::run_self;

// Run by RefusedThreadsAreAnErrorNotAHang: an address-space limit leaves room for a few 8 MB
// thread stacks, then 500 threads are asked for.
TEST(Parallel, DISABLED_RefuseThreads) {
  set_num_threads(2);
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  statm >> pages;
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (64 << 20);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &lim), 0);
  try {
    set_num_threads(500);
    std::printf("no error\n");
  } catch (const Error& e) { std::printf("error: %s\n", e.what()); }
  std::atomic<int64_t> sum{0};
  parallel_for(0, 100000, 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  std::printf("threads=%d sum=%lld\n", get_num_threads(), static_cast<long long>(sum.load()));
}

// When the system refuses threads partway, set_num_threads joins the workers it started, keeps the
// previous count and throws; it used to leave a half-built pool whose destruction waited forever
// (`mnist train --threads 1000` under a process limit once hung silently).
TEST(Parallel, RefusedThreadsAreAnErrorNotAHang) {
#ifdef NABLA_ASAN
  GTEST_SKIP() << "an address-space limit cannot be set under AddressSanitizer (its shadow memory is larger)";
#else
  std::string out = run_self("", "Parallel.DISABLED_RefuseThreads");
  EXPECT_NE(out.find("error: set_num_threads(500): the system refused to start more than"), std::string::npos) << out;
  EXPECT_NE(out.find("kept 2 threads"), std::string::npos) << out;
  EXPECT_NE(out.find("threads=2 sum=4999950000"), std::string::npos) << out;
#endif
}

// Run by NablaNumThreadsIsCheckedAndCapped in a child process with NABLA_NUM_THREADS set.
TEST(Parallel, DISABLED_PrintThreadCount) { std::printf("threads=%d\n", get_num_threads()); }

TEST(Parallel, NablaNumThreadsIsCheckedAndCapped) {
  auto run = [](const std::string& value) {
    return run_self("NABLA_NUM_THREADS='" + value + "'", "Parallel.DISABLED_PrintThreadCount");
  };
  EXPECT_NE(run("3").find("threads=3"), std::string::npos);
  std::string bad = run("abc");
  EXPECT_NE(bad.find("nabla: ignoring NABLA_NUM_THREADS='abc': expected a whole number from 1 to 1024"),
            std::string::npos)
      << bad;
  std::string huge = run("99999999999999999999");
  EXPECT_NE(huge.find("is more than the limit of 1024 threads; using 1024"), std::string::npos) << huge;
  EXPECT_NE(huge.find("threads=1024"), std::string::npos) << huge;
}

}  // namespace
}  // namespace nabla
