// A persistent thread pool for parallel_for. Workers spin briefly after each job (training loops
// issue parallel ops back to back) and then sleep; the caller, once its own chunks are done, waits
// for the workers' the same way. The spin is bounded in time (kSpin), not in iterations: when
// another process keeps the cores busy, a thread that spins for long takes the time slice a
// worker holding a chunk needs, and the whole job waits for it; and when workers keep arriving
// late all the same, the pool backs off to the caller's thread for a while (note_late_job).
// bench/contention measures both.
// One job runs at a time; a parallel_for issued while another is running (e.g. from a DataLoader
// worker) runs on its own thread.
//
// The job is published through gen_: odd while the caller rewrites the job's fields, even once
// they are set. A worker takes chunks only of an even generation it has not run yet, and only
// after counting itself in active_, which the caller waits to drain before rewriting. (Without the
// odd phase, a worker that woke late for a job the caller had already finished alone could slip
// in between that wait and the next job's publication, take a chunk of the half-written job and
// have its completion count reset under it: the caller then waited forever.)
#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define NABLA_PAUSE() _mm_pause()
#else
#define NABLA_PAUSE() std::this_thread::yield()
#endif

namespace nabla {
namespace {

thread_local bool tl_in_parallel = false;

// How long an idle thread spins before it blocks: longer than most gaps between the parallel ops of
// a training step (a worker that must be woken arrives tens of microseconds late, and the caller
// has then often run the whole job alone), shorter than a scheduler time slice.
constexpr auto kSpin = std::chrono::microseconds(1000);

// Spins (pausing) until done() or kSpin has passed; returns done().
template <class Done>
bool spin_until(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      NABLA_PAUSE();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

class ThreadPool {
 public:
  // Starts nthreads - 1 workers; when the system refuses some, keeps those that started (with a
  // warning), so that the default pool works on a machine short of threads.
  explicit ThreadPool(int nthreads) {
    if (auto err = start(nthreads))
      std::fprintf(stderr, "nabla: could start only %d of the %d threads asked for (%s); running with %d\n",
                   num_threads(), nthreads, err->c_str(), num_threads());
  }
  ~ThreadPool() { stop(); }

  int num_threads() const { return static_cast<int>(threads_.size()) + 1; }

  // All or nothing: when the system refuses a thread, the pool goes back to its previous size and
  // the error says how many could be started.
  void resize(int nthreads) {
    std::lock_guard run(run_mu_);
    const int previous = num_threads();
    // New workers: what earlier jobs said about contention no longer holds.
    late_jobs_ = 0;
    backoff_until_ = {};
    stop();
    if (auto err = start(nthreads)) {
      const int started = num_threads();
      stop();
      start(previous);  // they ran before; if the system now refuses some, fewer is still correct
      throw Error(internal::str("set_num_threads(", nthreads, "): the system refused to start more than ", started,
                                " threads (", *err, "; a limit such as ulimit -u was reached); kept ", num_threads(),
                                " threads"));
    }
  }

  // Returns false (and does nothing) when another job is running.
  bool run(int64_t begin, int64_t end, int64_t grain, internal::RangeFn fn) {
    std::unique_lock run(run_mu_, std::try_to_lock);
    if (!run.owns_lock()) return false;
    using Clock = std::chrono::steady_clock;
    if (backoff_until_ != Clock::time_point{}) {
      if (Clock::now() < backoff_until_) {
        run_inline(begin, end, fn);
        return true;
      }
      backoff_until_ = {};  // try the workers again
    }
    const uint64_t g = gen_.load(std::memory_order_relaxed);  // even: no job is being written
    gen_.store(g + 1, std::memory_order_seq_cst);             // keeps late workers out
    // (A worker counted in active_ leaves within a few instructions, unless it lost its core: then
    // give the core away instead of spinning through a time slice.)
    while (!spin_until([&] { return active_.load(std::memory_order_seq_cst) == 0; })) std::this_thread::yield();

    int64_t n = end - begin;
    int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
    int64_t nchunks = std::min<int64_t>(num_threads(), max_chunks);
    fn_ = &fn;
    begin_ = begin;
    end_ = end;
    nchunks_ = nchunks;
    chunk_ = (n + nchunks - 1) / nchunks;
    next_.store(0, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    gen_.store(g + 2, std::memory_order_seq_cst);  // published
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard lk(mu_); }
      cv_.notify_all();
    }

    const auto t0 = Clock::now();
    tl_in_parallel = true;
    const int64_t ran_here = run_chunks();
    tl_in_parallel = false;
    const auto t1 = Clock::now();
    auto all_done = [&] { return done_.load(std::memory_order_acquire) >= nchunks_; };
    const bool waited = !spin_until(all_done);
    if (waited) {
      // A worker still holds a chunk (under contention it may be waiting for a core): block, and
      // let the worker that finishes the last chunk wake this thread.
      std::unique_lock lk(mu_);
      caller_waiting_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lk, all_done);
      caller_waiting_.store(false, std::memory_order_relaxed);
    }
    // Late: the workers took no chunk (the caller ran them all), or the caller waited for them
    // longer than it worked.
    if ((nchunks_ > 1 && ran_here == nchunks_) || (waited && Clock::now() - t1 > t1 - t0)) {
      note_late_job();
    } else if (late_jobs_ > 0) {
      --late_jobs_;
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  // Backing off under contention. A job is late when its workers were: they took none of its chunks
  // (they were waiting for a core another process holds, and the caller ran every chunk), or the
  // caller, its own chunks done, waited for theirs longer than it worked. Then their spinning only
  // takes time from the caller. After kLateJobs late jobs (each on-time job forgives one), the pool
  // runs jobs on the caller's thread alone for kBackoff (the workers go to sleep), then tries them
  // again: on a machine kept busy by others, one thread is faster than several waiting for cores.
  static constexpr int kLateJobs = 4;
  static constexpr auto kBackoff = std::chrono::milliseconds(50);

 public:
  // As if the last kLateJobs jobs had been late (tests).
  void back_off_now() {
    std::lock_guard run(run_mu_);
    for (int i = 0; i < kLateJobs; ++i) note_late_job();
  }

 private:
  void note_late_job() {
    if (++late_jobs_ >= kLateJobs) {
      late_jobs_ = 0;
      backoff_until_ = std::chrono::steady_clock::now() + kBackoff;
    }
  }
  static void run_inline(int64_t begin, int64_t end, const internal::RangeFn& fn) {
    struct InRegion {
      InRegion() { tl_in_parallel = true; }
      ~InRegion() { tl_in_parallel = false; }
    } in_region;
    fn(begin, end);
  }

  // Starts workers until there are nthreads threads (the caller's included); on failure returns
  // the system's reason, with the workers that did start running (stop() joins them).
  std::optional<std::string> start(int nthreads) {
    stop_.store(false);
    threads_.reserve(static_cast<size_t>(std::max(nthreads - 1, 0)));
    for (int i = 1; i < nthreads; ++i) {
      try {
        threads_.emplace_back([this] { worker(); });
      } catch (const std::system_error& e) { return std::string(e.what()); }
    }
    return std::nullopt;
  }
  void stop() {
    {
      std::lock_guard lk(mu_);
      stop_.store(true);
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  // Runs chunks until none is left; returns how many this thread ran.
  int64_t run_chunks() {
    for (int64_t ran = 0;; ++ran) {
      int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= nchunks_) return ran;
      int64_t b = begin_ + c * chunk_, e = std::min(end_, b + chunk_);
      if (b < e) {
        try {
          (*fn_)(b, e);
        } catch (...) {
          std::lock_guard lk(err_mu_);
          if (!error_) error_ = std::current_exception();
        }
      }
      if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == nchunks_ &&
          caller_waiting_.load(std::memory_order_seq_cst)) {
        { std::lock_guard lk(mu_); }
        done_cv_.notify_one();
      }
    }
  }

  void worker() {
    tl_in_parallel = true;
    uint64_t seen = gen_.load();  // even: threads start while no job runs (ctor, resize under run_mu_)
    auto is_new = [&](uint64_t g) { return g != seen && (g & 1) == 0; };
    for (;;) {
      if (!spin_until([&] { return is_new(gen_.load(std::memory_order_acquire)) || stop_.load(); })) {
        std::unique_lock lk(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lk, [&] { return is_new(gen_.load(std::memory_order_seq_cst)) || stop_.load(); });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      if (stop_.load()) return;
      active_.fetch_add(1, std::memory_order_seq_cst);
      // Read after counting in: if the caller has begun rewriting the job since, this is odd.
      uint64_t g = gen_.load(std::memory_order_seq_cst);
      if (is_new(g)) {
        seen = g;
        run_chunks();
      }
      active_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex run_mu_, mu_, err_mu_;
  std::condition_variable cv_;       // workers wait here for a job
  std::condition_variable done_cv_;  // the caller waits here for the workers' last chunk
  std::atomic<bool> caller_waiting_{false};
  // Under run_mu_: the late jobs counted, and until when jobs run on the caller's thread alone.
  int late_jobs_ = 0;
  std::chrono::steady_clock::time_point backoff_until_{};
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> active_{0}, sleepers_{0};
  std::atomic<bool> stop_{false};
  const internal::RangeFn* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, nchunks_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_{0}, done_{0};
  std::exception_ptr error_;
};

// The core count, or NABLA_NUM_THREADS when it is a whole number from 1 to kMaxThreads (larger
// values are capped, anything else ignored, with a warning: a library cannot refuse to start).
int default_num_threads() {
  const int cores =
      static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
  const char* e = std::getenv("NABLA_NUM_THREADS");
  if (!e || !*e) return cores;
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(e, &end, 10);
  static std::once_flag warned;
  if (*end != '\0' || n < 1) {
    std::call_once(warned, [&] {
      std::fprintf(stderr,
                   "nabla: ignoring NABLA_NUM_THREADS='%s': expected a whole number from 1 to %d; using %d threads\n",
                   e, kMaxThreads, cores);
    });
    return cores;
  }
  if (errno == ERANGE || n > kMaxThreads) {
    std::call_once(warned, [&] {
      std::fprintf(stderr, "nabla: NABLA_NUM_THREADS=%s is more than the limit of %d threads; using %d\n", e,
                   kMaxThreads, kMaxThreads);
    });
    return kMaxThreads;
  }
  return static_cast<int>(n);
}

std::atomic<int> g_num_threads{0};

ThreadPool& pool() {
  static auto* p = new ThreadPool(g_num_threads.load() > 0 ? g_num_threads.load() : default_num_threads());
  return *p;
}

}  // namespace

int get_num_threads() {
  int n = g_num_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_num_threads();
    g_num_threads.store(n);
  }
  return n;
}

void set_num_threads(int n) {
  NABLA_CHECK(ValueError, n <= kMaxThreads, "set_num_threads: ", n, " threads is more than the limit of ", kMaxThreads,
              " (this machine has ", std::thread::hardware_concurrency(), " cores)");
  n = std::max(1, n);
  pool().resize(n);  // throws, leaving the threads as they were, when the system refuses threads
  g_num_threads.store(n);
}

bool in_parallel_region() { return tl_in_parallel; }

namespace internal {
void parallel_run(int64_t begin, int64_t end, int64_t grain, RangeFn fn) {
  if (!pool().run(begin, end, grain, fn)) fn(begin, end);
}
void thread_pool_back_off_for_testing() { pool().back_off_now(); }
}  // namespace internal

}  // namespace nabla
