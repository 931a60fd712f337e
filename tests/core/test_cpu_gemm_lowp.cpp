// The low-precision GEMM (core/cpu/gemm_lowp.h) on every kernel this CPU runs: bfloat16 and float16
// products against a float64 product of the same (rounded) inputs, with transposed and strided
// operands, alpha and beta, odd sizes and k longer than one block; the 16-bit result rounded once
// (bit for bit nabla's own float conversion of the float32 sums); BLAS's edge cases; the same bits
// on any thread count; and which kernel the CPU and the environment choose.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/gemm_lowp.h"
#include "core/cpu/isa.h"
#include "nabla.h"
#include "tests/common/run_self.h"

using namespace nabla;
using cpu::LowpKernel;

namespace {

// A (rows x cols) operand in one of three layouts: row-major, transposed (column-major) or strided
// (every other column of a wider row-major buffer).
enum class Layout { rows, transposed, strided };

template <class T>
struct Operand {
  std::vector<T> data;
  int64_t rs = 0, cs = 0;
  T at(int64_t i, int64_t j) const { return data[i * rs + j * cs]; }
};

template <class T>
Operand<T> make_operand(int64_t rows, int64_t cols, Layout layout, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f,
                        bool integers = false) {
  Operand<T> o;
  if (layout == Layout::rows) {
    o.rs = cols;
    o.cs = 1;
  } else if (layout == Layout::transposed) {
    o.rs = 1;
    o.cs = rows;
  } else {
    o.rs = 2 * cols + 3;
    o.cs = 2;
  }
  o.data.resize(std::max<int64_t>(1, (rows - 1) * o.rs + (cols - 1) * o.cs + 1 + (layout == Layout::strided ? 3 : 0)));
  std::uniform_real_distribution<float> u(lo, hi);
  std::uniform_int_distribution<int> ui(static_cast<int>(lo), static_cast<int>(hi));
  for (T& v : o.data) v = T(integers ? static_cast<float>(ui(rng)) : u(rng));
  return o;
}

template <class T>
uint16_t bits_of(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return 0;
  } else {
    return v.bits;
  }
}

template <class In>
constexpr double unit_roundoff() {
  return std::is_same_v<In, BFloat16> ? 0x1p-8 : 0x1p-11;
}

struct GemmShape {
  int64_t m, n, k;
};

// Computes C = alpha * A @ B + beta * C with `kernel` (or the chosen one) and checks every element
// against float64 within float32 accumulation error (scaled by k) plus one rounding of the output.
template <class In, class Out>
void check_against_float64(const char* what, const LowpKernel* kernel, GemmShape s, Layout la, Layout lb, float alpha,
                           float beta, uint32_t seed) {
  std::mt19937 rng(seed);
  Operand<In> a = make_operand<In>(s.m, s.k, la, rng), b = make_operand<In>(s.k, s.n, lb, rng);
  const int64_t ldc = s.n + 5;
  std::vector<Out> c(std::max<int64_t>(1, s.m * ldc));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (Out& v : c) v = Out(u(rng));
  const std::vector<Out> c0 = c;
  if (kernel) {
    cpu::gemm_lowp<In, Out>(*kernel, s.m, s.n, s.k, alpha, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, beta,
                            c.data(), ldc);
  } else {
    cpu::gemm_lowp<In, Out>(s.m, s.n, s.k, alpha, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, beta, c.data(),
                            ldc);
  }
  const double out_u = std::is_same_v<Out, float> ? 0x1p-24 : unit_roundoff<In>();
  int bad = 0;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        double x = static_cast<float>(a.at(i, p)) * static_cast<double>(static_cast<float>(b.at(p, j)));
        sum += x;
        mag += std::abs(x);
      }
      const double cij = static_cast<float>(c0[i * ldc + j]);
      const double want = alpha * sum + (beta == 0 ? 0.0 : beta * cij);
      const double got = static_cast<float>(c[i * ldc + j]);
      const double tol =
          (s.k + 4) * 0x1p-23 * (std::abs(alpha) * mag + std::abs(beta * cij)) + out_u * std::abs(want) + 1e-30;
      if (!(std::abs(got - want) <= tol) && ++bad <= 3)
        ADD_FAILURE() << what << " " << s.m << "x" << s.n << "x" << s.k << " layouts " << int(la) << "," << int(lb)
                      << " alpha " << alpha << " beta " << beta << ": C(" << i << ", " << j << ") = " << got
                      << ", float64 " << want << " (tolerance " << tol << ")";
    }
  }
  // Outside the m x n block (the ldc padding) C is untouched.
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = s.n; j < ldc; ++j)
      ASSERT_EQ(static_cast<float>(c[i * ldc + j]), static_cast<float>(c0[i * ldc + j])) << what;
}

const std::vector<GemmShape> kShapes = {{1, 1, 1},      {3, 5, 7},      {4, 8, 2},       {17, 33, 9},
                                        {13, 31, 64},   {64, 64, 64},   {37, 70, 515},   {130, 97, 1030},
                                        {100, 300, 33}, {257, 65, 600}, {25, 1100, 530}, {1000, 40, 520}};

template <class In, class Out>
void sweep(const char* what, const LowpKernel* kernel) {
  uint32_t seed = 1;
  const Layout layouts[] = {Layout::rows, Layout::transposed, Layout::strided};
  for (const GemmShape& s : kShapes) {
    const bool big = s.m * s.n * s.k > 4'000'000;
    for (Layout la : layouts)
      for (Layout lb : layouts) {
        if (big && (la != Layout::rows || lb == Layout::strided)) continue;  // the big shapes: 2 layouts
        check_against_float64<In, Out>(what, kernel, s, la, lb, 1.0f, 0.0f, seed++);
      }
    check_against_float64<In, Out>(what, kernel, s, Layout::rows, Layout::rows, 0.5f, 2.0f, seed++);
    check_against_float64<In, Out>(what, kernel, s, Layout::transposed, Layout::transposed, -1.5f, 1.0f, seed++);
  }
}

template <class In>
void sweep_outputs(const char* what, const LowpKernel* kernel) {
  sweep<In, In>(what, kernel);
  sweep<In, float>(what, kernel);
}

std::vector<LowpKernel> available_bf16_kernels() {
  std::vector<LowpKernel> ks;
  for (LowpKernel k : {LowpKernel::convert, LowpKernel::avx512_bf16, LowpKernel::amx_bf16})
    if (cpu::lowp_kernel_available(k)) ks.push_back(k);
  return ks;
}

// 16-bit C against the rounding of the float32 C of the same kernel: the float32 sums are the same,
// so with alpha = 1, beta = 0 each element must be In(float sum), bit for bit.
template <class In>
void check_rounds_once(LowpKernel kernel, GemmShape s, Layout la, Layout lb, bool integers, uint32_t seed) {
  std::mt19937 rng(seed);
  Operand<In> a = integers ? make_operand<In>(s.m, s.k, la, rng, 0, 15, true) : make_operand<In>(s.m, s.k, la, rng);
  Operand<In> b = integers ? make_operand<In>(s.k, s.n, lb, rng, 0, 15, true) : make_operand<In>(s.k, s.n, lb, rng);
  if (!integers && s.k >= 2) {  // overflow, infinity and NaN reach the rounding too
    a.data[0] = In(std::is_same_v<In, BFloat16> ? 3e38f : 60000.0f);
    b.data[0] = In(std::is_same_v<In, BFloat16> ? 3e38f : 60000.0f);
    a.data[a.rs] = In(std::numeric_limits<float>::infinity());
    if (s.m > 2) a.data[2 * a.rs] = In(std::numeric_limits<float>::quiet_NaN());
  }
  std::vector<In> c16(s.m * s.n);
  std::vector<float> c32(s.m * s.n);
  cpu::gemm_lowp<In, In>(kernel, s.m, s.n, s.k, 1.0f, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, 0.0f,
                         c16.data(), s.n);
  cpu::gemm_lowp<In, float>(kernel, s.m, s.n, s.k, 1.0f, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, 0.0f,
                            c32.data(), s.n);
  int bad = 0;
  for (int64_t i = 0; i < s.m * s.n; ++i) {
    if (integers) {  // products exact, sums below 2^24: float32 holds the exact sum
      int64_t r = i / s.n, col = i % s.n;
      double exact = 0;
      for (int64_t p = 0; p < s.k; ++p) exact += static_cast<float>(a.at(r, p)) * static_cast<float>(b.at(p, col));
      ASSERT_EQ(c32[i], exact) << cpu::lowp_kernel_name(kernel) << " element " << i;
    }
    const uint16_t want = In(c32[i]).bits;
    if (c16[i].bits != want && ++bad <= 3)
      ADD_FAILURE() << cpu::lowp_kernel_name(kernel) << " " << s.m << "x" << s.n << "x" << s.k << ": element " << i
                    << " float32 sum " << c32[i] << " rounds to 0x" << std::hex << want << ", stored 0x" << c16[i].bits
                    << std::dec;
  }
}

template <class In, class Out>
std::vector<uint16_t> result_bits(const std::vector<Out>& c) {
  std::vector<uint16_t> r(c.size() * (std::is_same_v<Out, float> ? 2 : 1));
  std::memcpy(r.data(), c.data(), c.size() * sizeof(Out));
  return r;
}

template <class In, class Out>
std::vector<Out> run_with_threads(LowpKernel kernel, int threads, GemmShape s, float beta) {
  set_num_threads(threads);
  std::mt19937 rng(99);
  Operand<In> a = make_operand<In>(s.m, s.k, Layout::rows, rng),
              b = make_operand<In>(s.k, s.n, Layout::transposed, rng);
  std::vector<Out> c(s.m * s.n, Out(0.25f));
  cpu::gemm_lowp<In, Out>(kernel, s.m, s.n, s.k, 0.75f, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, beta,
                          c.data(), s.n);
  return c;
}

struct ThreadsRestore {
  int saved = get_num_threads();
  ~ThreadsRestore() { set_num_threads(saved); }
};

}  // namespace

TEST(CpuGemmLowp, Bf16MatchesFloat64) { sweep_outputs<BFloat16>("bf16 (chosen kernel)", nullptr); }

TEST(CpuGemmLowp, F16MatchesFloat64) { sweep_outputs<Half>("f16", nullptr); }

TEST(CpuGemmLowp, RoundsOnStoreBitExactly) {
  const std::vector<GemmShape> shapes = {{5, 7, 9}, {40, 70, 200}, {33, 65, 515}, {70, 40, 1100}};
  uint32_t seed = 10;
  for (LowpKernel kernel : available_bf16_kernels())
    for (const GemmShape& s : shapes)
      for (bool integers : {true, false}) {
        check_rounds_once<BFloat16>(kernel, s, Layout::rows, Layout::rows, integers, seed++);
        check_rounds_once<BFloat16>(kernel, s, Layout::transposed, Layout::transposed, integers, seed++);
      }
  for (const GemmShape& s : shapes)
    for (bool integers : {true, false}) {
      check_rounds_once<Half>(LowpKernel::convert, s, Layout::rows, Layout::transposed, integers, seed++);
      check_rounds_once<Half>(LowpKernel::convert, s, Layout::strided, Layout::rows, integers, seed++);
    }
  // A tie: 257 lies halfway between bfloat16's 256 and 258 and rounds to the even 256.
  std::vector<BFloat16> a(16 * 16, BFloat16(0.0f)), b(16 * 16, BFloat16(0.0f)), c(16 * 16);
  a[0] = BFloat16(256.0f);
  a[1] = BFloat16(1.0f);
  b[0] = BFloat16(1.0f);
  b[16] = BFloat16(1.0f);
  for (LowpKernel kernel : available_bf16_kernels()) {
    cpu::gemm_lowp<BFloat16, BFloat16>(kernel, 16, 16, 16, 1.0f, a.data(), 16, 1, b.data(), 16, 1, 0.0f, c.data(), 16);
    EXPECT_EQ(static_cast<float>(c[0]), 256.0f) << cpu::lowp_kernel_name(kernel);
  }
}

TEST(CpuGemmLowp, EdgeCases) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (LowpKernel kernel : available_bf16_kernels()) {
    const char* name = cpu::lowp_kernel_name(kernel);
    for (GemmShape s : std::vector<GemmShape>{{0, 5, 5}, {5, 0, 5}, {0, 0, 0}}) {
      std::vector<BFloat16> a(25, BFloat16(1.0f)), b(25, BFloat16(1.0f)), c(25, BFloat16(7.0f));
      cpu::gemm_lowp<BFloat16, BFloat16>(kernel, s.m, s.n, s.k, 1.0f, a.data(), 5, 1, b.data(), 5, 1, 0.0f, c.data(),
                                         5);
      for (BFloat16 v : c) EXPECT_EQ(static_cast<float>(v), 7.0f) << name;  // nothing written
    }
    for (int64_t m : {1, 2, 37})
      for (int64_t n : {1, 3, 41})
        for (int64_t k : {0, 1, 2, 3, 511, 513}) {
          // k = 0: C = beta * C; beta = 0 ignores NaN in C (as BLAS); alpha = 0 leaves A and B unread.
          std::mt19937 rng(static_cast<uint32_t>(m * 1000 + n * 10 + k));
          Operand<BFloat16> a = make_operand<BFloat16>(m, std::max<int64_t>(k, 1), Layout::rows, rng);
          Operand<BFloat16> b = make_operand<BFloat16>(std::max<int64_t>(k, 1), n, Layout::rows, rng);
          std::vector<BFloat16> c(m * n, BFloat16(nan));
          cpu::gemm_lowp<BFloat16, BFloat16>(kernel, m, n, k, 1.0f, a.data.data(), a.rs, a.cs, b.data.data(), b.rs,
                                             b.cs, 0.0f, c.data(), n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0;
              for (int64_t p = 0; p < k; ++p)
                want += static_cast<float>(a.at(i, p)) * static_cast<double>(static_cast<float>(b.at(p, j)));
              const float got = static_cast<float>(c[i * n + j]);
              ASSERT_FALSE(std::isnan(got)) << name << " " << m << "x" << n << "x" << k << " beta 0 read C";
              ASSERT_NEAR(got, want, 0x1p-7 * std::sqrt(double(k) + 1) + 1e-6)
                  << name << " " << m << "x" << n << "x" << k;
            }
          std::vector<float> c2(m * n, 3.0f);
          std::vector<BFloat16> a_nan(a.data.size(), BFloat16(nan));
          cpu::gemm_lowp<BFloat16, float>(kernel, m, n, k, 0.0f, a_nan.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs,
                                          0.5f, c2.data(), n);
          for (float v : c2) ASSERT_EQ(v, 1.5f) << name << " alpha 0 read A";
        }
  }
  // float16 the same way, on its one path.
  std::vector<Half> a(7 * 3, Half(1.0f)), b(3 * 5, Half(2.0f)), c(7 * 5, Half(nan));
  cpu::gemm_lowp<Half, Half>(7, 5, 3, 1.0f, a.data(), 3, 1, b.data(), 5, 1, 0.0f, c.data(), 5);
  for (Half v : c) EXPECT_EQ(static_cast<float>(v), 6.0f);
  cpu::gemm_lowp<Half, Half>(7, 5, 0, 1.0f, a.data(), 3, 1, b.data(), 5, 1, -0.5f, c.data(), 5);
  for (Half v : c) EXPECT_EQ(static_cast<float>(v), -3.0f);
}

TEST(CpuGemmLowp, SameBitsOnAnyThreadCount) {
  ThreadsRestore restore;
  // Split over m (more row tiles) and over n (more column tiles); k longer than a block.
  for (GemmShape s : std::vector<GemmShape>{{300, 100, 700}, {50, 500, 700}, {97, 131, 64}}) {
    for (LowpKernel kernel : available_bf16_kernels()) {
      for (float beta : {0.0f, 1.0f}) {
        auto one = run_with_threads<BFloat16, BFloat16>(kernel, 1, s, beta);
        auto f32 = run_with_threads<BFloat16, float>(kernel, 1, s, beta);
        for (int threads : {2, 3}) {
          EXPECT_EQ((result_bits<BFloat16, BFloat16>(run_with_threads<BFloat16, BFloat16>(kernel, threads, s, beta))),
                    (result_bits<BFloat16, BFloat16>(one)))
              << cpu::lowp_kernel_name(kernel) << " " << s.m << "x" << s.n << "x" << s.k << " threads " << threads;
          EXPECT_EQ((result_bits<BFloat16, float>(run_with_threads<BFloat16, float>(kernel, threads, s, beta))),
                    (result_bits<BFloat16, float>(f32)))
              << cpu::lowp_kernel_name(kernel) << " float32 C, threads " << threads;
        }
      }
    }
    auto h1 = run_with_threads<Half, Half>(LowpKernel::convert, 1, s, 1.0f);
    EXPECT_EQ((result_bits<Half, Half>(run_with_threads<Half, Half>(LowpKernel::convert, 2, s, 1.0f))),
              (result_bits<Half, Half>(h1)));
  }
}

// Prints the chosen kernel (for KernelChoiceFollowsTheCpuAndEnvironment's child processes).
TEST(CpuGemmLowp, DISABLED_ReportsKernel) {
  std::printf("lowp kernel: %s\n", cpu::lowp_kernel_name(cpu::lowp_kernel()));
}

TEST(CpuGemmLowp, KernelChoiceFollowsTheCpuAndEnvironment) {
  const char* env = std::getenv("NABLA_GEMM_LOWP");
  const std::string lowp = env ? env : "";
  const bool amx = cpu::lowp_kernel_available(LowpKernel::amx_bf16);
  const bool dp = cpu::lowp_kernel_available(LowpKernel::avx512_bf16);
  EXPECT_TRUE(cpu::lowp_kernel_available(LowpKernel::convert));
  LowpKernel want = LowpKernel::convert;
  if (lowp != "convert")
    want = amx && lowp != "avx512_bf16"                            ? LowpKernel::amx_bf16
           : dp && (lowp == "avx512_bf16" || !cpu::cpu_is_intel()) ? LowpKernel::avx512_bf16
                                                                   : LowpKernel::convert;
  EXPECT_EQ(cpu::lowp_kernel(), want) << "chose " << cpu::lowp_kernel_name(cpu::lowp_kernel());
  // The bfloat16 kernels are AVX-512 paths: only where the GEMM runs its AVX-512 kernels.
  if (amx || dp) EXPECT_EQ(cpu::gemm_isa(), cpu::Isa::avx512);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (cpu::gemm_isa() == cpu::Isa::avx512) EXPECT_EQ(dp, __builtin_cpu_supports("avx512bf16") != 0);
#endif
  // The environment, read once at start-up: checked in fresh processes.
  std::string out = nabla::testing::run_self("NABLA_GEMM_LOWP=convert", "CpuGemmLowp.DISABLED_ReportsKernel");
  EXPECT_NE(out.find("lowp kernel: convert"), std::string::npos) << out;
  out = nabla::testing::run_self("NABLA_GEMM_KERNEL=avx2", "CpuGemmLowp.DISABLED_ReportsKernel");
  EXPECT_NE(out.find("lowp kernel: convert"), std::string::npos) << out;
  if (dp && !env) {
    out = nabla::testing::run_self("NABLA_GEMM_LOWP=avx512_bf16", "CpuGemmLowp.DISABLED_ReportsKernel");
    EXPECT_NE(out.find("lowp kernel: avx512_bf16"), std::string::npos) << out;
  }
  // A kernel the CPU lacks, or a bfloat16 kernel for float16 inputs, is refused with the reason.
  std::vector<Half> h(64, Half(1.0f));
  for (LowpKernel k : {LowpKernel::avx512_bf16, LowpKernel::amx_bf16}) {
    try {
      cpu::gemm_lowp<Half, Half>(k, 8, 8, 8, 1.0f, h.data(), 8, 1, h.data(), 8, 1, 0.0f, h.data(), 8);
      ADD_FAILURE() << "float16 on " << cpu::lowp_kernel_name(k) << " did not throw";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(cpu::lowp_kernel_name(k)), std::string::npos) << e.what();
    }
  }
}

TEST(CpuGemmLowp, Bf16KernelRunsWhenSelected) {
  if (!cpu::lowp_kernel_available(LowpKernel::avx512_bf16))
    GTEST_SKIP() << "this CPU has no AVX512_BF16 (or NABLA_CPU_ISA / NABLA_GEMM_KERNEL turned AVX-512 off)";
  const LowpKernel k = LowpKernel::avx512_bf16;
  sweep_outputs<BFloat16>("avx512_bf16", &k);
}

TEST(CpuGemmLowp, AmxKernelRunsWhenSelected) {
  if (!cpu::lowp_kernel_available(LowpKernel::amx_bf16))
    GTEST_SKIP() << "this CPU (or its operating system) offers no AMX-BF16, or AVX-512 is turned off";
  const LowpKernel k = LowpKernel::amx_bf16;
  sweep_outputs<BFloat16>("amx_bf16", &k);
}

TEST(CpuGemmLowp, OtherCpuPathsMatchFloat64) {
  const LowpKernel k = LowpKernel::convert;
  sweep_outputs<BFloat16>("bf16 convert", &k);
  sweep_outputs<Half>("f16 convert", &k);
}
