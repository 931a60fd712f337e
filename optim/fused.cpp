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

// The CPU's updates from the build nabla's CPU kernels use (the same instruction set).
static const FusedSteps& steps() {
  static const FusedSteps table = [] {
    FusedSteps t;
    NABLA_CPU_BUILD_CALL(fill_fused_steps, t);
    return t;
  }();
  return table;
}
}  // namespace cpu

namespace {
std::array<std::atomic<const FusedSteps*>, kNumDeviceTypes>& registry() {
  static std::array<std::atomic<const FusedSteps*>, kNumDeviceTypes> r{};
  return r;
}
}  // namespace

void register_fused_steps(DeviceType type, const FusedSteps* steps) { registry()[static_cast<int>(type)].store(steps); }

const FusedSteps& fused_steps(Device device) {
  if (device.is_cpu()) return cpu::steps();
  static const FusedSteps none;
  const FusedSteps* s = registry()[static_cast<int>(device.type)].load();
  return s ? *s : none;
}

}  // namespace nabla::optim
