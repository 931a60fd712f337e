// A persistent thread pool for parallel_for. Workers spin briefly after each job (training loops
// issue parallel ops back to back) and then sleep. One job runs at a time; a parallel_for issued
// while another is running (e.g. from a DataLoader worker) runs on its own thread.
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
    stop();
    if (auto err = start(nthreads)) {
      const int started = num_threads();
      stop();
      start(previous);  // they ran before; if the system now refuses some, fewer is still correct
      throw Error(detail::str("set_num_threads(", nthreads, "): the system refused to start more than ", started,
                              " threads (", *err, "; a limit such as ulimit -u was reached); kept ", num_threads(),
                              " threads"));
    }
  }

  // Returns false (and does nothing) when another job is running.
  bool run(int64_t begin, int64_t end, int64_t grain, detail::RangeFn fn) {
    std::unique_lock run(run_mu_, std::try_to_lock);
    if (!run.owns_lock()) return false;
    const uint64_t g = gen_.load(std::memory_order_relaxed);  // even: no job is being written
    gen_.store(g + 1, std::memory_order_seq_cst);             // keeps late workers out
    while (active_.load(std::memory_order_seq_cst) != 0) NABLA_PAUSE();

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

    tl_in_parallel = true;
    run_chunks();
    tl_in_parallel = false;
    while (done_.load(std::memory_order_acquire) < nchunks_) NABLA_PAUSE();
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  // Starts workers until there are nthreads threads (the caller's included); on failure returns
  // the system's reason, with the workers that did start running (stop() joins them).
  std::optional<std::string> start(int nthreads) {
    stop_.store(false);
    threads_.reserve(static_cast<size_t>(std::max(nthreads - 1, 0)));
    for (int i = 1; i < nthreads; ++i) {
      try {
        threads_.emplace_back([this] { worker(); });
      } catch (const std::system_error& e) {
        return std::string(e.what());
      }
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

  void run_chunks() {
    for (;;) {
      int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= nchunks_) return;
      int64_t b = begin_ + c * chunk_, e = std::min(end_, b + chunk_);
      if (b < e) {
        try {
          (*fn_)(b, e);
        } catch (...) {
          std::lock_guard lk(err_mu_);
          if (!error_) error_ = std::current_exception();
        }
      }
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  void worker() {
    tl_in_parallel = true;
    uint64_t seen = gen_.load();  // even: threads start while no job runs (ctor, resize under run_mu_)
    auto is_new = [&](uint64_t g) { return g != seen && (g & 1) == 0; };
    for (;;) {
      for (int spin = 0; spin < (1 << 15) && !is_new(gen_.load(std::memory_order_acquire)) && !stop_.load(); ++spin)
        NABLA_PAUSE();
      if (!is_new(gen_.load(std::memory_order_acquire)) && !stop_.load()) {
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
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int> active_{0}, sleepers_{0};
  std::atomic<bool> stop_{false};
  const detail::RangeFn* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, nchunks_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_{0}, done_{0};
  std::exception_ptr error_;
};

// The core count, or NABLA_NUM_THREADS when it is a whole number from 1 to kMaxThreads (larger
// values are capped, anything else ignored, with a warning: a library cannot refuse to start).
int default_num_threads() {
  const int cores = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
  const char* e = std::getenv("NABLA_NUM_THREADS");
  if (!e || !*e) return cores;
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(e, &end, 10);
  static std::once_flag warned;
  if (*end != '\0' || n < 1) {
    std::call_once(warned, [&] {
      std::fprintf(stderr, "nabla: ignoring NABLA_NUM_THREADS='%s': expected a whole number from 1 to %d; using %d threads\n",
                   e, kMaxThreads, cores);
    });
    return cores;
  }
  if (errno == ERANGE || n > kMaxThreads) {
    std::call_once(warned, [&] {
      std::fprintf(stderr, "nabla: NABLA_NUM_THREADS=%s is more than the limit of %d threads; using %d\n", e, kMaxThreads,
                   kMaxThreads);
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
  check<ValueError>(n <= kMaxThreads, "set_num_threads: ", n, " threads is more than the limit of ", kMaxThreads,
                    " (this machine has ", std::thread::hardware_concurrency(), " cores)");
  n = std::max(1, n);
  pool().resize(n);  // throws, leaving the threads as they were, when the system refuses threads
  g_num_threads.store(n);
}

bool in_parallel_region() { return tl_in_parallel; }

namespace detail {
void parallel_run(int64_t begin, int64_t end, int64_t grain, RangeFn fn) {
  if (!pool().run(begin, end, grain, fn)) fn(begin, end);
}
}  // namespace detail

}  // namespace nabla
