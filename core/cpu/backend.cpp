// The CPU Backend of this ISA's build: every entry of core/backend.h's kernel list, filled from the
// list with this build's functions (core/cpu/kernels.h). The CPU lacks no kernel.
#include "core/cpu/kernels.h"

namespace nabla::cpu::NABLA_CPU_ISA {

Backend* make_backend() {
  static Backend backend = [] {
    Backend table("cpu");
    table.allocator_ = [](Device) -> Allocator& { return cpu_allocator(); };
    namespace impl = nabla::cpu::NABLA_CPU_ISA;
    NABLA_KERNELS(NABLA_FILL_ENTRY)
    return table;
  }();
  return &backend;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
