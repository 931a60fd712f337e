// The CUDA Backend: fills the kernel table with cuda/kernels.h's functions and registers it with core
// when libnabla is loaded (without touching the driver; the first device query does that). Every
// kernel of core/backend.h has a CUDA implementation (batch norm: float32 and float64, through cuDNN)
// but those on cuda/kernels.h's NABLA_CUDA_LACKS (none today).
#include "core/backend.h"
#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

void install_hooks();                   // device.cpp
void register_fused_optimizer_steps();  // optim.cu

namespace {

Allocator& allocator(Device device) {
  if (device.is_cpu()) return pinned_allocator();
  int n = device_count();
  NABLA_CHECK(DeviceError, device.index >= 0 && device.index < n, "device ", device, " does not exist (", n,
              " CUDA device", n == 1 ? "" : "s", " available)");
  return device_allocator(device.index);
}

// Every kernel of core/backend.h's list, from the list (cuda/kernels.h's fill_kernels): the CUDA
// function of that name, or empty where NABLA_CUDA_LACKS says why.
Backend* make_backend() {
  auto* b = new Backend("cuda");  // never destroyed: tensors may outlive main()
  b->allocator_ = &allocator;
  fill_kernels(*b);
  return b;
}

}  // namespace

// Registration, once. No CUDA call happens here: a machine without a driver loads the library fine,
// and cuda::is_available() answers false when first asked. The plugin registers when it is loaded
// (below); a static libnabla calls this from internal::load_cuda_backend, and that call is also what
// makes the linker keep this file, and the kernels it names, in a program linked statically.
void register_cuda_backend() {
  static const bool done = [] {
    static Backend* backend = make_backend();
    install_hooks();
    register_backend(DeviceType::cuda, backend);
    register_fused_optimizer_steps();
    return true;
  }();
  (void)done;
}

namespace {
struct Registrar {
  Registrar() { register_cuda_backend(); }
};
Registrar g_registrar;
}  // namespace

}  // namespace nabla::cuda
