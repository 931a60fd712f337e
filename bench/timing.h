// A tiny timing harness for the benchmark programs: warm up, then time batches of calls until
// enough wall time has passed, and report the median seconds per call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds per call of f over `batches` batches, each of at least `min_batch_seconds`.
template <class F>
double time_per_call(F&& f, double min_batch_seconds = 0.05, int batches = 7) {
  f();  // warm up (caches, allocator, lazy initialisation)
  int64_t n = 1;
  for (;;) {  // calibrate the batch size
    double t0 = now();
    for (int64_t i = 0; i < n; ++i) f();
    double dt = now() - t0;
    if (dt >= min_batch_seconds) break;
    n = dt <= 0 ? n * 10 : std::max<int64_t>(n + 1, static_cast<int64_t>(n * min_batch_seconds * 1.2 / dt));
  }
  std::vector<double> per;
  for (int b = 0; b < batches; ++b) {
    double t0 = now();
    for (int64_t i = 0; i < n; ++i) f();
    per.push_back((now() - t0) / static_cast<double>(n));
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

inline std::string fmt_time(double s) {
  char buf[64];
  if (s < 1e-6) std::snprintf(buf, sizeof(buf), "%.0f ns", s * 1e9);
  else if (s < 1e-3) std::snprintf(buf, sizeof(buf), "%.2f us", s * 1e6);
  else if (s < 1) std::snprintf(buf, sizeof(buf), "%.2f ms", s * 1e3);
  else std::snprintf(buf, sizeof(buf), "%.2f s", s);
  return buf;
}

}  // namespace bench
