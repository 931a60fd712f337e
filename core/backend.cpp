// The backend registry and the NotImplemented defaults of the Backend interface.
#include "core/backend.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace nabla {

namespace cpu {
Backend* select_backend();  // core/cpu/register.cpp
}

namespace {
std::array<std::atomic<Backend*>, kNumDeviceTypes>& registry() {
  static std::array<std::atomic<Backend*>, kNumDeviceTypes> r{};
  return r;
}
}  // namespace

void register_backend(DeviceType type, Backend* backend) {
  registry()[static_cast<int>(type)].store(backend);
}

bool has_backend(DeviceType type) {
  if (type == DeviceType::cpu) return true;
  return registry()[static_cast<int>(type)].load() != nullptr;
}

Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static Backend* cpu_backend = cpu::select_backend();
    return *cpu_backend;
  }
  Backend* b = registry()[static_cast<int>(device.type)].load();
  if (!b)
    throw DeviceError(detail::str("device ", device,
                                  " is not available: this build of nabla has no CUDA backend "
                                  "(configure with -DNABLA_CUDA=ON on a machine with the CUDA toolkit)"));
  if (device.is_cuda() && !cuda::is_available())
    throw DeviceError(detail::str("device ", device,
                                  " is not available: no usable CUDA GPU was found (or NABLA_DISABLE_CUDA=1 "
                                  "is set); use Device::cpu() or check cuda::is_available() first"));
  return *b;
}

void Backend::not_implemented(const char* op) const {
  throw NotImplemented(detail::str(op, ": not implemented for device type '", name(), "'"));
}

void Backend::copy(const Tensor&, const Tensor&, bool) { not_implemented("copy"); }
void Backend::fill(const Tensor&, Scalar) { not_implemented("fill"); }
void Backend::unary(UnaryOp op, const Tensor&, const Tensor&, double, double) { not_implemented(op_name(op)); }
void Backend::binary(BinaryOp op, const Tensor&, const Tensor&, const Tensor&, Scalar) { not_implemented(op_name(op)); }
void Backend::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { not_implemented("where"); }
void Backend::reduce(ReduceOp, const Tensor&, IntArrayRef, const Tensor&) { not_implemented("reduce"); }
void Backend::arg_reduce(ReduceOp, const Tensor&, int64_t, const Tensor&, const Tensor&) { not_implemented("argmax/argmin"); }
void Backend::scan(ScanOp, const Tensor&, int64_t, const Tensor&) { not_implemented("cumsum/cumprod"); }
void Backend::sort(const Tensor&, int64_t, bool, const Tensor&, const Tensor&) { not_implemented("sort"); }
void Backend::topk(const Tensor&, int64_t, int64_t, bool, const Tensor&, const Tensor&) { not_implemented("topk"); }
void Backend::softmax(const Tensor&, int64_t, bool, const Tensor&) { not_implemented("softmax"); }
void Backend::softmax_backward(const Tensor&, const Tensor&, int64_t, bool, const Tensor&) { not_implemented("softmax_backward"); }
void Backend::index_select(const Tensor&, int64_t, const Tensor&, const Tensor&) { not_implemented("index_select"); }
void Backend::index_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { not_implemented("index_add"); }
void Backend::gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { not_implemented("gather"); }
void Backend::scatter(const Tensor&, int64_t, const Tensor&, const Tensor&, bool) { not_implemented("scatter"); }
Tensor Backend::nonzero(const Tensor&) { not_implemented("nonzero"); }
void Backend::random(RandomOp, const Tensor&, double, double, Generator&) { not_implemented("random"); }
void Backend::random_int(const Tensor&, int64_t, int64_t, Generator&) { not_implemented("randint"); }
void Backend::matmul(const Tensor&, const Tensor&, const Tensor&, double, double) { not_implemented("matmul"); }
void Backend::conv2d(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&, const Tensor&) { not_implemented("conv2d"); }
void Backend::conv2d_input_grad(const Tensor&, const Tensor&, const Conv2dParams&, const Tensor&) { not_implemented("conv2d_input_grad"); }
void Backend::conv2d_weight_grad(const Tensor&, const Tensor&, const Conv2dParams&, const Tensor&) { not_implemented("conv2d_weight_grad"); }
void Backend::max_pool2d(const Tensor&, const Pool2dParams&, const Tensor&, const Tensor&) { not_implemented("max_pool2d"); }
void Backend::max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&) { not_implemented("max_pool2d_backward"); }
void Backend::avg_pool2d(const Tensor&, const Pool2dParams&, const Tensor&) { not_implemented("avg_pool2d"); }
void Backend::avg_pool2d_backward(const Tensor&, const Pool2dParams&, const Tensor&) { not_implemented("avg_pool2d_backward"); }
void Backend::batch_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool, double, double,
                         const Tensor&, const Tensor&, const Tensor&) { not_implemented("batch_norm"); }
void Backend::batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double,
                                  const Tensor&, const Tensor&, const Tensor&) { not_implemented("batch_norm_backward"); }

// ---- cuda queries when no CUDA backend is registered --------------------------------------------
namespace cuda {
namespace {
bool disabled_by_env() {
  const char* e = std::getenv("NABLA_DISABLE_CUDA");
  return e && std::strcmp(e, "1") == 0;
}
}  // namespace
// The CUDA backend (cuda/) provides the answers through these hooks when it is loaded.
std::atomic<int (*)()> g_device_count_hook{nullptr};

int device_count() {
  if (disabled_by_env()) return 0;
  auto hook = g_device_count_hook.load();
  return hook ? hook() : 0;
}
bool is_available() { return device_count() > 0; }
}  // namespace cuda

}  // namespace nabla
