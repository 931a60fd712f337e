// The table of fused optimizer updates per device type (optim/fused.h).
#include "optim/fused.h"

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
    name_entries(t, "cpu");
    NABLA_CPU_BUILD_CALL(fill_fused_steps, t);
    return t;
  }();
  return table;
}
}  // namespace cpu

namespace {
// The CPU's entry stays empty: fused_steps picks the CPU build's table once (above).
DeviceTable<const FusedSteps>& tables() {
  static DeviceTable<const FusedSteps> t;
  return t;
}
}  // namespace

void register_fused_steps(DeviceType type, const FusedSteps* steps) { tables().set(type, steps); }

const FusedSteps& fused_steps(Device device) {
  if (device.is_cpu()) return cpu::steps();
  return tables().get(device.type);
}

}  // namespace nabla::optim
