// Chooses the CPU kernels for this processor (core/cpu/isa.h), once: the AVX2/FMA build when the CPU
// supports it, with its AVX-512 paths where the CPU has AVX-512, the portable build otherwise; and
// the low-precision GEMM's kernel (gemm_lowp.h).
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/backend.h"
#include "core/cpu/gemm_lowp.h"
#include "core/cpu/isa.h"

namespace nabla::cpu {
namespace avx2 {
Backend* make_backend();
const LowpGemms& lowp_gemms();
}  // namespace avx2
namespace base {
Backend* make_backend();
const LowpGemms& lowp_gemms();
}  // namespace base

namespace {
bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(NABLA_HAVE_AVX2_BUILD)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) && defined(NABLA_HAVE_AVX2_BUILD)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

// CPUID leaf 7: sub-leaf 1 EAX bit 5 is AVX512_BF16; sub-leaf 0 EDX bits 22 and 24 are AMX-BF16 and
// AMX-TILE.
bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) && defined(NABLA_HAVE_AVX2_BUILD)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return cpu_has_avx512() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax >> 5 & 1u);
#else
  return false;
#endif
}

// AMX also needs the operating system's leave to use the tile registers (Linux 5.16 on: a process
// asks once with arch_prctl; without it the first tile instruction is a SIGILL).
bool cpu_has_amx_bf16() {
#if defined(__x86_64__) && defined(__linux__) && defined(NABLA_HAVE_AVX2_BUILD)
  static const bool ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!cpu_has_avx512() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if (!(edx >> 22 & 1u) || !(edx >> 24 & 1u)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

struct Choice {
  Isa vector, gemm;
};

const Choice& choice() {
  static const Choice chosen = [] {
    if (env_is("NABLA_CPU_ISA", "base") || !cpu_has_avx2()) return Choice{Isa::base, Isa::base};
    // NABLA_GEMM_KERNEL: unset (or empty) and avx512 allow AVX-512; any other value stops at AVX2.
    const char* gemm = std::getenv("NABLA_GEMM_KERNEL");
    const bool allow512 = !gemm || !*gemm || std::strcmp(gemm, "avx512") == 0;
    const Isa vector = allow512 && cpu_has_avx512() ? Isa::avx512 : Isa::avx2;
    return Choice{vector, env_is("NABLA_GEMM_KERNEL", "generic") ? Isa::base : vector};
  }();
  return chosen;
}
}  // namespace

Isa isa() { return vector_isa() == Isa::base ? Isa::base : Isa::avx2; }
Isa vector_isa() { return choice().vector; }
Isa gemm_isa() { return choice().gemm; }

const char* isa_name(Isa i) { return i == Isa::avx512 ? "avx512" : i == Isa::avx2 ? "avx2" : "base"; }

Backend* select_backend() { return NABLA_CPU_BUILD_CALL(make_backend); }

// The bfloat16 kernels are AVX-512 paths of the AVX2 build: they run where the GEMM runs its AVX-512
// kernels (not under NABLA_CPU_ISA=base or NABLA_GEMM_KERNEL=avx2/generic) and the CPU has them.
bool lowp_kernel_available(LowpKernel kernel) {
  switch (kernel) {
    case LowpKernel::convert: return true;
    case LowpKernel::avx512_bf16: return gemm_isa() == Isa::avx512 && cpu_has_avx512_bf16();
    case LowpKernel::amx_bf16: return gemm_isa() == Isa::avx512 && cpu_has_amx_bf16();
  }
  return false;
}

bool cpu_is_intel() {
#if defined(__x86_64__)
  static const bool intel = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
    char vendor[12];
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    return std::memcmp(vendor, "GenuineIntel", 12) == 0;
  }();
  return intel;
#else
  return false;
#endif
}

// NABLA_GEMM_LOWP: unset (or any other value) takes the fastest available: AMX first, then VDPBF16PS
// except on Intel cores, where it runs at half the float32 FMA's rate (Cooper Lake, and Sapphire
// Rapids guests without AMX: measured 0.67x the float32 GEMM, against 0.97x for convert);
// avx512_bf16 forces VDPBF16PS where the CPU has it; convert forces the portable path.
LowpKernel lowp_kernel() {
  static const LowpKernel chosen = [] {
    if (env_is("NABLA_GEMM_LOWP", "convert")) return LowpKernel::convert;
    const bool forced_dp = env_is("NABLA_GEMM_LOWP", "avx512_bf16");
    if (!forced_dp && lowp_kernel_available(LowpKernel::amx_bf16)) return LowpKernel::amx_bf16;
    if ((forced_dp || !cpu_is_intel()) && lowp_kernel_available(LowpKernel::avx512_bf16))
      return LowpKernel::avx512_bf16;
    return LowpKernel::convert;
  }();
  return chosen;
}

const char* lowp_kernel_name(LowpKernel kernel) {
  switch (kernel) {
    case LowpKernel::convert: return "convert";
    case LowpKernel::avx512_bf16: return "avx512_bf16";
    case LowpKernel::amx_bf16: return "amx_bf16";
  }
  return "?";
}

template <class In, class Out>
void gemm_lowp(LowpKernel kernel, int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa, int64_t csa,
               const In* b, int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc) {
  NABLA_CHECK(ValueError, lowp_kernel_available(kernel), "gemm_lowp: the ", lowp_kernel_name(kernel),
              " kernel does not run on this CPU (or is turned off by NABLA_CPU_ISA / NABLA_GEMM_KERNEL)");
  constexpr bool bf16_in = std::is_same_v<In, BFloat16>;
  NABLA_CHECK(ValueError, kernel == LowpKernel::convert || bf16_in, "gemm_lowp: the ", lowp_kernel_name(kernel),
              " kernel takes bfloat16 inputs, not float16");
  NABLA_CPU_BUILD_CALL(lowp_gemms).get<In, Out>()(kernel, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}

template <class In, class Out>
void gemm_lowp(int64_t m, int64_t n, int64_t k, float alpha, const In* a, int64_t rsa, int64_t csa, const In* b,
               int64_t rsb, int64_t csb, float beta, Out* c, int64_t ldc) {
  const LowpKernel kernel = std::is_same_v<In, BFloat16> ? lowp_kernel() : LowpKernel::convert;
  NABLA_CPU_BUILD_CALL(lowp_gemms).get<In, Out>()(kernel, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}

#define NABLA_INSTANTIATE_LOWP(In, Out)                                                                               \
  template void gemm_lowp<In, Out>(int64_t, int64_t, int64_t, float, const In*, int64_t, int64_t, const In*, int64_t, \
                                   int64_t, float, Out*, int64_t);                                                    \
  template void gemm_lowp<In, Out>(LowpKernel, int64_t, int64_t, int64_t, float, const In*, int64_t, int64_t,         \
                                   const In*, int64_t, int64_t, float, Out*, int64_t);
NABLA_INSTANTIATE_LOWP(BFloat16, BFloat16)
NABLA_INSTANTIATE_LOWP(BFloat16, float)
NABLA_INSTANTIATE_LOWP(Half, Half)
NABLA_INSTANTIATE_LOWP(Half, float)
#undef NABLA_INSTANTIATE_LOWP

}  // namespace nabla::cpu
