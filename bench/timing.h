// A tiny timing harness for the benchmark programs: warm up, then time batches of calls until
// enough wall time has passed, and report the median seconds per call.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// The CPU's model name from /proc/cpuinfo (benchmarks state the machine they ran on).
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// The process's resident memory now (/proc/self/statm) and its peak so far (getrusage), in MB.
inline double rss_mb() {
  std::ifstream f("/proc/self/statm");
  long long size = 0, resident = 0;
  f >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6;
}
inline double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1e3;  // KiB on Linux
}
inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Warms f up (caches, allocator, lazy initialisation) and returns how many calls make a batch of at
// least `min_batch_seconds`.
template <class F>
int64_t calibrate(F&& f, double min_batch_seconds) {
  f();
  int64_t n = 1;
  for (;;) {
    double t0 = now();
    for (int64_t i = 0; i < n; ++i) f();
    double dt = now() - t0;
    if (dt >= min_batch_seconds) return n;
    n = dt <= 0 ? n * 10 : std::max<int64_t>(n + 1, static_cast<int64_t>(n * min_batch_seconds * 1.2 / dt));
  }
}

// Seconds per call of one batch of n calls.
template <class F>
double time_batch(F&& f, int64_t n) {
  double t0 = now();
  for (int64_t i = 0; i < n; ++i) f();
  return (now() - t0) / static_cast<double>(n);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds per call of f over `batches` batches, each of at least `min_batch_seconds`.
template <class F>
double time_per_call(F&& f, double min_batch_seconds = 0.05, int batches = 7) {
  int64_t n = calibrate(f, min_batch_seconds);
  std::vector<double> per;
  for (int b = 0; b < batches; ++b) per.push_back(time_batch(f, n));
  return median(per);
}

// Lets the previous contender's idle worker threads stop spinning so they do not take a core from
// the next one: OpenBLAS's spin for about 2^28 cycles (~0.1 s) after a call, OpenMP's for a few ms
// after each parallel region, nabla's pool for under one.
inline void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }

// Seconds per call of each of several contenders, timed side by side: `rounds` rounds, each running
// one batch of every contender in turn (setup(i) first, e.g. to set a thread count), and each
// contender's best batch. Noise that comes and goes on a shared machine (other tenants) only ever
// adds time, and interleaving gives every contender the same chances at a quiet moment, so the
// best batches compare the code, not the moment it happened to run in.
template <class Setup, class F>
std::vector<double> interleaved(int contenders, Setup&& setup, F&& run, double min_batch_seconds, int rounds) {
  std::vector<int64_t> n(contenders);
  for (int c = 0; c < contenders; ++c) {
    setup(c);
    settle();
    n[c] = calibrate([&] { run(c); }, min_batch_seconds);
  }
  std::vector<std::vector<double>> per(contenders);
  for (int r = 0; r < rounds; ++r)
    for (int c = 0; c < contenders; ++c) {
      setup(c);
      settle();
      per[c].push_back(time_batch([&] { run(c); }, n[c]));
    }
  std::vector<double> best;
  for (auto& p : per) best.push_back(*std::min_element(p.begin(), p.end()));
  return best;
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
