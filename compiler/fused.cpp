// The fused programs' entry (compiler/fused.h): the CPU build's kernel (compiler/cpu/fused.cpp).
#include "compiler/fused.h"

#include "core/cpu/isa.h"

namespace nabla::compiler {

namespace cpu {
namespace base {
void run_fused(const FusedProgram& p, const float* const* in, float* const* out, int64_t n);
}
namespace avx2 {
void run_fused(const FusedProgram& p, const float* const* in, float* const* out, int64_t n);
}
}  // namespace cpu

void run_fused_cpu(const FusedProgram& p, const float* const* in, float* const* out, int64_t n) {
  using namespace cpu;
  NABLA_CPU_BUILD_CALL(run_fused, p, in, out, n);
}

}  // namespace nabla::compiler
