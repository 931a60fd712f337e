// Chooses the CPU kernels for this processor (core/cpu/isa.h): the AVX2/FMA build when the CPU
// supports it, the portable build otherwise.
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
}  // namespace

Isa isa() {
  static const Isa chosen = [] {
    const char* forced = std::getenv("NABLA_CPU_ISA");
    if (forced && std::strcmp(forced, "base") == 0) return Isa::base;
    return cpu_has_avx2() ? Isa::avx2 : Isa::base;
  }();
  return chosen;
}

const char* isa_name(Isa i) { return i == Isa::avx2 ? "avx2" : "base"; }

Backend* select_backend() {
#if defined(NABLA_HAVE_AVX2_BUILD)
  if (isa() == Isa::avx2) return avx2::make_backend();
#endif
  return base::make_backend();
}

}  // namespace nabla::cpu
