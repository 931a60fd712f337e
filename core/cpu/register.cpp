// Chooses the CPU kernels for this processor (core/cpu/isa.h), once: the AVX2/FMA build when the CPU
// supports it, with its AVX-512 paths where the CPU has AVX-512, the portable build otherwise.
#include <cstdlib>
#include <cstring>

#include "core/backend.h"
#include "core/cpu/isa.h"

namespace nabla::cpu {
namespace avx2 {
Backend* make_backend();
}
namespace base {
Backend* make_backend();
}

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

}  // namespace nabla::cpu
