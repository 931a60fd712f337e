// nabla's own speed figures: per-op host overhead on tiny tensors and throughput on large ones.
// Later work shows its progress against these numbers (bench/RESULTS.md); for figures side by side
// with libtorch and OpenBLAS, see bench/compare.cpp.
#include <cstdio>
#include <cstring>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;
using bench::fmt_time;
using bench::time_per_call;

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf(
          "usage: overhead [--threads N]\n\nPrints nabla's per-op host overhead and large-tensor throughput.\n");
      return 0;
    }
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) set_num_threads(std::atoi(argv[++i]));
  }
  std::printf("nabla overhead and throughput (%d threads)\n\n", get_num_threads());
  manual_seed(0);

  std::printf("per-op host overhead\n");
  Tensor a = ones({1}), b = ones({1});
  double t = time_per_call([&] { Tensor c = a + b; });
  std::printf("  add, 1 element                         %10s\n", fmt_time(t).c_str());
  Tensor ag = ones({1}, requires_grad()), bg = ones({1}, requires_grad());
  t = time_per_call([&] { Tensor c = ag + bg; });
  std::printf("  add, 1 element, requires_grad          %10s\n", fmt_time(t).c_str());
  t = time_per_call([&] {
        Tensor y = ag;
        for (int i = 0; i < 10; ++i) y = y * bg + 1e-3;  // 20 ops
        y.backward();
      }) /
      20;
  std::printf("  forward+backward chain, per op         %10s\n", fmt_time(t).c_str());
  Tensor m1 = randn({64, 64}), m2 = randn({64, 64});
  t = time_per_call([&] { Tensor c = mm(m1, m2); });
  std::printf("  matmul 64x64                           %10s\n", fmt_time(t).c_str());

  std::printf("\nthroughput\n");
  const int64_t n = int64_t(1) << 24;  // 16M floats = 64 MB per tensor
  Tensor x = randn({n}), y = randn({n});
  t = time_per_call([&] { Tensor z = x + y; }, 0.2, 5);
  std::printf("  add, 16M floats                        %10s  %7.1f GB/s\n", fmt_time(t).c_str(),
              3.0 * 4 * n / t / 1e9);
  t = time_per_call([&] { Tensor s = x.sum(); }, 0.2, 5);
  std::printf("  sum, 16M floats                        %10s  %7.1f GB/s\n", fmt_time(t).c_str(), 4.0 * n / t / 1e9);
  Tensor p = randn({1024, 1024}), q = randn({1024, 1024});
  t = time_per_call([&] { Tensor r = mm(p, q); }, 0.2, 5);
  std::printf("  matmul 1024x1024 (float32)             %10s  %7.1f GFLOP/s\n", fmt_time(t).c_str(),
              2.0 * 1024 * 1024 * 1024 / t / 1e9);
  return 0;
}
