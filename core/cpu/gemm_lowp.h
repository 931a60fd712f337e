// Low-precision GEMM on the CPU: C = alpha * A @ B + beta * C with A and B in bfloat16 or float16,
// C in the input's dtype or in float32. Products accumulate in float32 and the result is rounded once
// on store (to nearest even, bit for bit as BFloat16(float) / Half(float) of core/dtype.h).
//
// Kernels, chosen once from what the CPU reports (lowp_kernel()):
// - amx_bf16 (bfloat16 on CPUs with AMX-BF16, Intel Sapphire Rapids on): 16x16 float32 tiles updated
//   by TDPBF16PS, 2x2 tiles per micro-kernel (32x32 of C);
// - avx512_bf16 (bfloat16 on non-Intel CPUs with AVX512_BF16 but no AMX: AMD Zen 4/5): VDPBF16PS, a
//   12x32 micro-kernel of float32 accumulators, two k values per float32 lane. Not chosen on Intel
//   cores, where VDPBF16PS runs at half the float32 FMA's rate (Cooper Lake; Sapphire Rapids guests
//   that hide AMX), so the convert path is faster there;
// - convert (float16 always, since CPUs without AVX512-FP16 have no float16 arithmetic; bfloat16
//   elsewhere, Intel without AMX, AVX2-only and non-x86 CPUs included): the operands are converted to float32 while
//   they are packed (F16C, or shifts for bfloat16) and multiplied by the float32 GEMM's micro-kernel.
// The bfloat16 kernels pack B (and A for VDPBF16PS) as pairs along k: the two bfloat16 of one float32
// lane are B(p, j) and B(p + 1, j), the layout both instructions read.
//
// Blocking and threading follow the float32 GEMM (gemm.cpp): k blocks of kc, m blocks of mc, n blocks
// of nc, work split across nabla's thread pool over m or n, never over k, so the bits of the result
// do not depend on the thread count. With a 16-bit C and k longer than one block, the float32 sums of
// a block of C rows are kept in per-thread scratch until the last k block, then rounded once.
//
// The two bfloat16 kernels flush denormal inputs and sums to zero (the instructions do); the convert
// path keeps them. Either way results stay within bfloat16 accuracy of the float64 product.
//
// Overrides: NABLA_GEMM_LOWP=convert forces the portable path; NABLA_GEMM_LOWP=avx512_bf16 takes
// VDPBF16PS wherever the CPU has it (short of AMX, and on Intel too). The bfloat16 kernels are AVX-512 paths of the AVX2 build, so NABLA_CPU_ISA=base and
// NABLA_GEMM_KERNEL=avx2/generic (isa.h) turn them off too.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../dtype.h"

namespace nabla::cpu {

enum class LowpKernel { convert, avx512_bf16, amx_bf16 };

// The kernel bfloat16 products use on this CPU (float16 products always convert), chosen once.
LowpKernel lowp_kernel();
// Whether the processor (and for AMX the operating system) can run `kernel` in this build.
bool lowp_kernel_available(LowpKernel kernel);
const char* lowp_kernel_name(LowpKernel kernel);  // "convert", "avx512_bf16", "amx_bf16"
// Whether CPUID names the vendor GenuineIntel (lowp_kernel() then prefers convert to VDPBF16PS).
bool cpu_is_intel();

// C (m x n, row stride ldc) = alpha * A @ B + beta * C, where A(i, p) = a[i*rsa + p*csa] and
// B(p, j) = b[p*rsb + j*csb]: any strides, so transposed operands need no copy. With beta == 0, C is
// not read (NaN there is ignored, as in BLAS). In: BFloat16 or Half; Out: In or float.
template <class In, class Out>
void gemm_lowp(int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa, int64_t csa, const In* b,
               int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc);
// The same on a given kernel (tests, benchmarks): ValueError when lowp_kernel_available(kernel) is
// false, or for a bfloat16 kernel with float16 inputs.
template <class In, class Out>
void gemm_lowp(LowpKernel kernel, int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa, int64_t csa,
               const In* b, int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc);

// What each CPU build (core/cpu/isa.h) provides: one entry per (In, Out) pair. Internal to core/cpu.
struct LowpGemms {
  template <class In, class Out>
  using Fn = void (*)(LowpKernel kernel, int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa,
                      int64_t csa, const In* b, int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc);
  Fn<BFloat16, BFloat16> bf16_bf16;
  Fn<BFloat16, float> bf16_f32;
  Fn<Half, Half> f16_f16;
  Fn<Half, float> f16_f32;
  template <class In, class Out>
  Fn<In, Out> get() const {
    if constexpr (std::is_same_v<In, BFloat16>) {
      if constexpr (std::is_same_v<Out, float>) return bf16_f32;
      else return bf16_bf16;
    } else {
      if constexpr (std::is_same_v<Out, float>) return f16_f32;
      else return f16_f16;
    }
  }
};

}  // namespace nabla::cpu
