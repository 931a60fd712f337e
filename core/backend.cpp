// The backend registry.
#include "core/backend.h"

#include <atomic>

#include "core/cuda_env.h"
#include "core/error.h"

namespace nabla {

namespace cpu {
Backend* select_backend();  // core/cpu/register.cpp
}

namespace {
// The CPU's entry stays empty: backend_for picks the CPU build once (core/cpu/register.cpp).
DeviceTable<Backend>& backends() {
  static DeviceTable<Backend> table;
  return table;
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) { backends().set(type, backend); }

bool has_backend(DeviceType type) {
  if (type == DeviceType::cuda) return internal::load_cuda_backend();
  return type == DeviceType::cpu;  // built in
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static Backend* cpu_backend = cpu::select_backend();
    return *cpu_backend;
  }
  Backend* b = backends().find(device.type);
  if (!b && device.is_cuda() && internal::load_cuda_backend()) b = backends().find(device.type);
  if (!b)
    throw DeviceError(internal::str("device ", device, " is not available: ", internal::cuda_backend_missing_reason()));
  if (device.is_cuda() && !cuda::is_available())
    throw DeviceError(internal::str("device ", device,
                                    " is not available: no usable CUDA GPU was found (or NABLA_DISABLE_CUDA=1 "
                                    "is set); use Device::cpu() or check cuda::is_available() first"));
  return *b;
}

Backend* internal::registered_backend(DeviceType type) {
  return type == DeviceType::cpu ? &backend_for(kCPU) : backends().find(type);
}

Backend::Backend(const char* device_name) : name_(device_name) { name_entries(*this, device_name); }

void throw_kernel_missing(const char* kernel, const char* device, const char* lacking) {
  if (lacking)
    throw NotImplemented(internal::str(kernel, ": not implemented for device type '", device, "': ", lacking));
  throw NotImplemented(internal::str(kernel, ": not implemented for device type '", device, "'"));
}

// ---- cuda queries when no CUDA backend is registered --------------------------------------------
namespace cuda {
// The CUDA backend (cuda/) provides the answers through these hooks when it is loaded.
std::atomic<int (*)()> g_device_count_hook{nullptr};

int device_count() {
  if (nabla::internal::cuda_disabled_by_env()) return 0;
  auto hook = g_device_count_hook.load();
  if (!hook && nabla::internal::load_cuda_backend()) hook = g_device_count_hook.load();
  return hook ? hook() : 0;
}
bool is_available() { return device_count() > 0; }
}  // namespace cuda

}  // namespace nabla
