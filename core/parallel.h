// Threading: a persistent pool and parallel_for with a grain size, so small tensors stay on the
// calling thread and large ones use every core. Nested calls run serially.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace nabla {

// The most threads nabla runs (NABLA_NUM_THREADS is capped at it, set_num_threads refuses more).
inline constexpr int kMaxThreads = 1024;

// Number of threads kernels may use (the caller included). Defaults to the core count, or
// NABLA_NUM_THREADS when set (a whole number from 1 to kMaxThreads).
int get_num_threads();
// n < 1 means 1; n > kMaxThreads is a ValueError. When the system cannot start that many threads
// (a limit on processes), throws nabla::Error and keeps the previous thread count.
void set_num_threads(int n);
bool in_parallel_region();

namespace internal {
// A non-owning reference to a callable, without allocation.
class RangeFn {
 public:
  template <class F>
  RangeFn(const F& f)
      : obj_(&f), call_([](const void* o, int64_t b, int64_t e) { (*static_cast<const F*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t, int64_t);
};
void parallel_run(int64_t begin, int64_t end, int64_t grain, RangeFn fn);
// Puts the pool in its back-off under contention (jobs on the caller's thread alone for a while), as
// a run of late jobs does; set_num_threads ends it. For tests.
void thread_pool_back_off_for_testing();
}  // namespace internal

// Calls f(chunk_begin, chunk_end) over [begin, end), splitting it across threads in chunks of at
// least `grain` iterations. Exceptions thrown by f reach the caller.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
  if (end - begin <= grain || in_parallel_region() || get_num_threads() == 1) {
    f(begin, end);
    return;
  }
  internal::parallel_run(begin, end, grain, internal::RangeFn(f));
}

}  // namespace nabla
