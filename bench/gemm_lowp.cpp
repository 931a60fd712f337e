// gemm_lowp: the bfloat16 GEMM (core/cpu/gemm_lowp.h) next to nabla's float32 GEMM (mm), in one run,
// interleaved call by call, best of N, on 512/1024/2048 squares with 1 and 2 threads. Also the other
// low-precision kernels the CPU runs (VDPBF16PS, the convert path, float16), and the measured peak of
// the instructions: independent float32 FMAs (zmm), VDPBF16PS (zmm) and TDPBF16PS (AMX) in registers.
//
//   ./build/bench/gemm_lowp [reps]      (default 5)
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "core/cpu/gemm_lowp.h"
#include "core/cpu/isa.h"
#include "nabla.h"

using namespace nabla;
using cpu::LowpKernel;

namespace {

#if defined(__x86_64__)
// GFLOP/s of one core when it does nothing but the instruction, on 24 (8 for AMX) independent
// accumulators.
__attribute__((target("avx512f,fma"))) double peak_fma(double seconds) {
  __m512 r[24];
  for (int i = 0; i < 24; ++i) r[i] = _mm512_set1_ps(1e-9f * i);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-9f);
  int64_t iters = 0;
  double t0 = bench::now();
  while (bench::now() - t0 < seconds) {
    for (int it = 0; it < 100000; ++it) {
#pragma GCC unroll 24
      for (int i = 0; i < 24; ++i) r[i] = _mm512_fmadd_ps(a, r[i], b);
      __asm__ volatile("" ::"v"(r[0]), "v"(r[12]));
    }
    iters += 100000;
  }
  double dt = bench::now() - t0;
  float s = 0;
  for (int i = 0; i < 24; ++i) s += _mm512_reduce_add_ps(r[i]);
  if (s == 1.25f) std::puts("");
  return iters * 24.0 * 32 / dt / 1e9;
}

__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"))) double peak_dpbf16(double seconds) {
  __m512 r[24];
  for (int i = 0; i < 24; ++i) r[i] = _mm512_set1_ps(1e-9f * i);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x2000);
  int64_t iters = 0;
  double t0 = bench::now();
  while (bench::now() - t0 < seconds) {
    for (int it = 0; it < 100000; ++it) {
#pragma GCC unroll 24
      for (int i = 0; i < 24; ++i) r[i] = _mm512_dpbf16_ps(r[i], a, b);
      __asm__ volatile("" ::"v"(r[0]), "v"(r[12]));
    }
    iters += 100000;
  }
  double dt = bench::now() - t0;
  float s = 0;
  for (int i = 0; i < 24; ++i) s += _mm512_reduce_add_ps(r[i]);
  if (s == 1.25f) std::puts("");
  return iters * 24.0 * 64 / dt / 1e9;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
__attribute__((target("amx-tile,amx-bf16"))) double peak_amx(double seconds) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&cfg);
  alignas(64) static uint16_t ab[4][512];
  for (auto& t : ab) std::fill(t, t + 512, uint16_t(0x2000));
  __asm__ volatile("" ::: "memory");
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab[0], 64);
  _tile_loadd(5, ab[1], 64);
  _tile_loadd(6, ab[2], 64);
  _tile_loadd(7, ab[3], 64);
  int64_t iters = 0;
  double t0 = bench::now();
  while (bench::now() - t0 < seconds) {
    for (int it = 0; it < 10000; ++it) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    iters += 10000;
  }
  double dt = bench::now() - t0;
  _tile_release();
  return iters * 4.0 * 16 * 16 * 32 * 2 / dt / 1e9;
}
#endif

template <class T>
std::vector<T> random_matrix(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<T> v(n * n);
  for (T& x : v) x = T(d(rng));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const LowpKernel chosen = cpu::lowp_kernel();  // (asks the OS for AMX where the CPU has it)
  std::printf("CPU: %s, %d threads available; float32 GEMM kernel: %s; bfloat16 kernel: %s\n",
              bench::cpu_model().c_str(), get_num_threads(), cpu::isa_name(cpu::gemm_isa()),
              cpu::lowp_kernel_name(chosen));
  double pf = 0, pd = 0, pa = 0;
#if defined(__x86_64__)
  if (cpu::gemm_isa() == cpu::Isa::avx512) pf = peak_fma(0.3);
  if (cpu::lowp_kernel_available(LowpKernel::avx512_bf16)) pd = peak_dpbf16(0.3);
  if (cpu::lowp_kernel_available(LowpKernel::amx_bf16)) pa = peak_amx(0.3);
#endif
  std::printf("measured peak of one core: float32 FMA (zmm) %.0f GFLOP/s, VDPBF16PS %.0f, AMX TDPBF16PS %.0f\n\n", pf,
              pd, pa);
  const double peak_bf16 = chosen == LowpKernel::amx_bf16 ? pa : chosen == LowpKernel::avx512_bf16 ? pd : pf;

  std::vector<LowpKernel> others;
  for (LowpKernel k : {LowpKernel::avx512_bf16, LowpKernel::convert})
    if (k != chosen && cpu::lowp_kernel_available(k)) others.push_back(k);

  std::printf("| size | threads | f32 GFLOP/s (%% of FMA peak) | bf16 %s GFLOP/s (%% of its peak) | bf16/f32 |",
              cpu::lowp_kernel_name(chosen));
  for (LowpKernel k : others) std::printf(" bf16 %s |", cpu::lowp_kernel_name(k));
  std::printf(" bf16 -> f32 C | f16 convert |\n|---|---|---|---|---|");
  for (size_t i = 0; i < others.size() + 2; ++i) std::printf("---|");
  std::printf("\n");

  const int max_threads = std::min(2, get_num_threads());
  for (int64_t n : {512, 1024, 2048}) {
    Tensor a32 = randn({n, n}), b32 = randn({n, n});
    std::vector<BFloat16> a16 = random_matrix<BFloat16>(n, 1), b16 = random_matrix<BFloat16>(n, 2);
    std::vector<Half> ah = random_matrix<Half>(n, 3), bh = random_matrix<Half>(n, 4);
    std::vector<BFloat16> c16(n * n);
    std::vector<Half> ch(n * n);
    std::vector<float> c32(n * n);
    for (int threads = 1; threads <= max_threads; ++threads) {
      set_num_threads(threads);
      // The contenders, timed in turn within each repetition; best of `reps`.
      std::vector<std::function<void()>> runs;
      runs.push_back([&] { Tensor c = mm(a32, b32); });
      auto bf16 = [&](LowpKernel k) {
        return [&, k] {
          cpu::gemm_lowp<BFloat16, BFloat16>(k, n, n, n, 1.0f, a16.data(), n, 1, b16.data(), n, 1, 0.0f, c16.data(), n);
        };
      };
      runs.push_back(bf16(chosen));
      for (LowpKernel k : others) runs.push_back(bf16(k));
      runs.push_back([&] {
        cpu::gemm_lowp<BFloat16, float>(chosen, n, n, n, 1.0f, a16.data(), n, 1, b16.data(), n, 1, 0.0f, c32.data(), n);
      });
      runs.push_back(
          [&] { cpu::gemm_lowp<Half, Half>(n, n, n, 1.0f, ah.data(), n, 1, bh.data(), n, 1, 0.0f, ch.data(), n); });
      std::vector<int64_t> batch(runs.size());
      for (size_t r = 0; r < runs.size(); ++r) batch[r] = bench::calibrate(runs[r], 0.05);
      std::vector<double> best(runs.size(), 1e30);
      for (int rep = 0; rep < reps; ++rep)
        for (size_t r = 0; r < runs.size(); ++r) best[r] = std::min(best[r], bench::time_batch(runs[r], batch[r]));
      const double flops = 2.0 * n * n * n;
      auto gf = [&](size_t r) { return flops / best[r] / 1e9; };
      std::printf("| %lld^3 | %d | %.1f (%.0f%%) | %.1f (%.0f%%) | %.2fx |", static_cast<long long>(n), threads, gf(0),
                  pf > 0 ? 100 * gf(0) / (pf * threads) : 0.0, gf(1),
                  peak_bf16 > 0 ? 100 * gf(1) / (peak_bf16 * threads) : 0.0, gf(1) / gf(0));
      for (size_t i = 0; i < others.size(); ++i) std::printf(" %.1f |", gf(2 + i));
      std::printf(" %.1f | %.1f |\n", gf(2 + others.size()), gf(3 + others.size()));
      std::fflush(stdout);
    }
  }
  return 0;
}
