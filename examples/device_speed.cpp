// device_speed: where does the GPU start to win?
//
// Times a float32 matmul (n x n @ n x n) and an elementwise op (a * b + c over n elements) from tiny
// to large sizes on the CPU and on the GPU, the GPU both without the host<->device copies (inputs
// already on the device, result left there) and with them (inputs uploaded, result downloaded),
// and prints, for each, the smallest size from which the GPU is faster at every larger size.
//
//   device_speed [--max-matmul N] [--max-elementwise N] [--min-time-ms T]
//
// Each measurement repeats the operation until at least --min-time-ms (default 200) have passed and
// reports the mean per call; GPU timings synchronize the device before reading the clock, so they
// include launch overhead, as a training step sees it. Without a GPU, the CPU column is printed
// and the GPU columns say why they are missing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nabla.h"

using namespace nabla;

namespace {

using Clock = std::chrono::steady_clock;

// Mean milliseconds per call of f, after one warm-up call.
double time_ms(const std::function<void()>& f, bool gpu, double min_ms) {
  f();
  if (gpu) cuda::synchronize();
  int reps = 0;
  auto start = Clock::now();
  double elapsed = 0;
  do {
    f();
    ++reps;
    if (gpu) cuda::synchronize();
    elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  } while (elapsed < min_ms && reps < 100000);
  return elapsed / reps;
}

struct Row {
  int64_t size;
  double cpu, gpu, gpu_copies;
};

// The smallest size from which `faster(row)` holds for every larger size too (-1: never).
int64_t crossover(const std::vector<Row>& rows, const std::function<bool(const Row&)>& faster) {
  int64_t best = -1;
  for (size_t i = rows.size(); i-- > 0;) {
    if (!faster(rows[i])) break;
    best = rows[i].size;
  }
  return best;
}

void print_table(const char* title, const char* unit, const std::vector<Row>& rows, bool gpu) {
  std::printf("\n%s\n", title);
  std::printf("%14s %12s %12s %16s %10s %12s\n", unit, "cpu ms", "gpu ms", "gpu+copies ms", "gpu x", "gpu+cp x");
  for (const Row& r : rows) {
    if (gpu)
      std::printf("%14lld %12.4f %12.4f %16.4f %10.2f %12.2f\n", static_cast<long long>(r.size), r.cpu, r.gpu,
                  r.gpu_copies, r.cpu / r.gpu, r.cpu / r.gpu_copies);
    else std::printf("%14lld %12.4f %12s %16s %10s %12s\n", static_cast<long long>(r.size), r.cpu, "-", "-", "-", "-");
  }
  if (!gpu) return;
  int64_t c1 = crossover(rows, [](const Row& r) { return r.gpu < r.cpu; });
  int64_t c2 = crossover(rows, [](const Row& r) { return r.gpu_copies < r.cpu; });
  auto say = [&](const char* what, int64_t c) {
    if (c < 0) std::printf("  %s: the GPU does not win up to the largest size tried\n", what);
    else std::printf("  %s: the GPU wins from %s = %lld on\n", what, unit, static_cast<long long>(c));
  };
  say("data on the GPU      ", c1);
  say("with host<->GPU copies", c2);
}

int64_t arg_int(int argc, char** argv, const char* name, int64_t def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: %s [--max-matmul N] [--max-elementwise N] [--min-time-ms T]\n", argv[0]);
      return 0;
    }
  const int64_t max_mm = arg_int(argc, argv, "--max-matmul", 4096);
  const int64_t max_ew = arg_int(argc, argv, "--max-elementwise", int64_t(1) << 26);
  const double min_ms = static_cast<double>(arg_int(argc, argv, "--min-time-ms", 200));
  const bool gpu = cuda::is_available();

  std::printf("nabla device_speed: CPU with %d threads", get_num_threads());
  if (gpu) {
    cuda::DeviceProperties p = cuda::get_device_properties();
    std::printf(" vs %s (%d SMs, CUDA runtime %d, TF32 %s)\n", p.name.c_str(), p.multiprocessor_count,
                cuda::runtime_version(), cuda::allow_tf32() ? "on" : "off");
  } else {
    std::printf("; no GPU: %s\n", cuda::unavailable_reason().c_str());
  }

  try {
    std::vector<Row> mm_rows;
    for (int64_t n = 16; n <= max_mm; n *= 2) {
      manual_seed(1);
      Tensor a = randn({n, n}), b = randn({n, n});
      Row r{n, 0, 0, 0};
      r.cpu = time_ms([&] { Tensor c = mm(a, b); }, false, min_ms);
      if (gpu) {
        Tensor ga = a.cuda(), gb = b.cuda();
        r.gpu = time_ms([&] { Tensor c = mm(ga, gb); }, true, min_ms);
        r.gpu_copies = time_ms([&] { Tensor c = mm(a.cuda(), b.cuda()).cpu(); }, true, min_ms);
      }
      mm_rows.push_back(r);
    }
    print_table("matmul float32, (n x n) @ (n x n)", "n", mm_rows, gpu);

    std::vector<Row> ew_rows;
    for (int64_t n = 1 << 10; n <= max_ew; n *= 4) {
      manual_seed(2);
      Tensor a = randn({n}), b = randn({n}), c = randn({n});
      Row r{n, 0, 0, 0};
      r.cpu = time_ms([&] { Tensor y = a * b + c; }, false, min_ms);
      if (gpu) {
        Tensor ga = a.cuda(), gb = b.cuda(), gc = c.cuda();
        r.gpu = time_ms([&] { Tensor y = ga * gb + gc; }, true, min_ms);
        r.gpu_copies = time_ms([&] { Tensor y = (a.cuda() * b.cuda() + c.cuda()).cpu(); }, true, min_ms);
      }
      ew_rows.push_back(r);
    }
    print_table("elementwise float32, a * b + c over n elements", "n", ew_rows, gpu);
  } catch (const Error& e) {
    std::fprintf(stderr, "device_speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
