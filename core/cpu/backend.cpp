// The CPU Backend of this ISA's build: every entry of core/backend.h's kernel list, filled from the
// list with this build's functions (core/cpu/kernels.h).
#include "core/cpu/kernels.h"

namespace nabla::cpu::NABLA_CPU_ISA {

Backend* make_backend() {
  static Backend backend = [] {
    Backend b("cpu");
    b.allocator_ = [](Device) -> Allocator& { return cpu_allocator(); };
#define NABLA_FILL_KERNEL(name, ...) b.name.fn = &cpu::NABLA_CPU_ISA::name;
    NABLA_KERNELS(NABLA_FILL_KERNEL)
#undef NABLA_FILL_KERNEL
    return b;
  }();
  return &backend;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
