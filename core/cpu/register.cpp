// Chooses the CPU kernels for this processor: the AVX2/FMA build when the CPU supports it, the
// portable build otherwise. NABLA_CPU_ISA=base forces the portable one (to test it).
#include <cstdlib>
#include <cstring>

#include "core/backend.h"

namespace nabla::cpu {
namespace avx2 {
Backend* make_backend();
}
namespace base {
Backend* make_backend();
}

bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(NABLA_HAVE_AVX2_BUILD)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

const char* selected_isa() {
  const char* forced = std::getenv("NABLA_CPU_ISA");
  if (forced && std::strcmp(forced, "base") == 0) return "base";
  return cpu_has_avx2() ? "avx2" : "base";
}

Backend* select_backend() {
#if defined(NABLA_HAVE_AVX2_BUILD)
  if (std::strcmp(selected_isa(), "avx2") == 0) return avx2::make_backend();
#endif
  return base::make_backend();
}

}  // namespace nabla::cpu
