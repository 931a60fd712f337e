// The table of fused optimizer updates per device type (optim/fused.h).
#include "optim/fused.h"

#include <array>
#include <atomic>

#include "core/cpu/isa.h"

namespace nabla::optim {

namespace cpu {
namespace base {
void fill_fused_steps(FusedSteps& t);
}
namespace avx2 {
void fill_fused_steps(FusedSteps& t);
}
}  // namespace cpu

namespace {
std::array<std::atomic<const FusedSteps*>, kNumDeviceTypes>& registry() {
  static std::array<std::atomic<const FusedSteps*>, kNumDeviceTypes> r{};
  return r;
}

// The CPU's updates from the build nabla's CPU kernels use (the same instruction set).
const FusedSteps& cpu_steps() {
  static const FusedSteps steps = [] {
    FusedSteps t;
#if defined(NABLA_HAVE_AVX2_BUILD)
    if (nabla::cpu::isa() == nabla::cpu::Isa::avx2) {
      cpu::avx2::fill_fused_steps(t);
      return t;
    }
#endif
    cpu::base::fill_fused_steps(t);
    return t;
  }();
  return steps;
}
}  // namespace

void register_fused_steps(DeviceType type, const FusedSteps* steps) { registry()[static_cast<int>(type)].store(steps); }

const FusedSteps& fused_steps(Device device) {
  if (device.is_cpu()) return cpu_steps();
  static const FusedSteps none;
  const FusedSteps* s = registry()[static_cast<int>(device.type)].load();
  return s ? *s : none;
}

}  // namespace nabla::optim
