// The CUDA Backend: fills the kernel table with cuda/kernels.h's functions and registers it with core
// when libnabla is loaded (without touching the driver; the first device query does that). Every
// kernel of core/backend.h has a CUDA implementation (batch norm: float32 and float64, through cuDNN).
#include "core/backend.h"
#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

void install_hooks();                    // device.cpp
void register_fused_optimizer_steps();  // optim.cu

namespace {

Allocator& allocator(Device device) {
  if (device.is_cpu()) return pinned_allocator();
  int n = device_count();
  check<DeviceError>(device.index >= 0 && device.index < n, "device ", device, " does not exist (", n, " CUDA device",
                     n == 1 ? "" : "s", " available)");
  return device_allocator(device.index);
}

// One line per kernel of core/backend.h's list that CUDA has (today: all of them). A kernel added
// to the list without a line here raises NotImplemented on CUDA tensors.
Backend* make_backend() {
  auto* b = new Backend("cuda");  // never destroyed: tensors may outlive main()
  b->allocator_ = &allocator;
  b->copy.fn = &cuda::copy;
  b->fill.fn = &cuda::fill;
  b->unary.fn = &cuda::unary;
  b->binary.fn = &cuda::binary;
  b->where.fn = &cuda::where;
  b->reduce.fn = &cuda::reduce;
  b->arg_reduce.fn = &cuda::arg_reduce;
  b->scan.fn = &cuda::scan;
  b->sort.fn = &cuda::sort;
  b->topk.fn = &cuda::topk;
  b->softmax.fn = &cuda::softmax;
  b->softmax_backward.fn = &cuda::softmax_backward;
  b->index_select.fn = &cuda::index_select;
  b->index_add.fn = &cuda::index_add;
  b->gather.fn = &cuda::gather;
  b->scatter.fn = &cuda::scatter;
  b->nonzero.fn = &cuda::nonzero;
  b->random.fn = &cuda::random;
  b->random_int.fn = &cuda::random_int;
  b->matmul.fn = &cuda::matmul;
  b->conv.fn = &cuda::conv;
  b->conv_input_grad.fn = &cuda::conv_input_grad;
  b->conv_weight_grad.fn = &cuda::conv_weight_grad;
  b->max_pool2d.fn = &cuda::max_pool2d;
  b->max_pool2d_backward.fn = &cuda::max_pool2d_backward;
  b->avg_pool2d.fn = &cuda::avg_pool2d;
  b->avg_pool2d_backward.fn = &cuda::avg_pool2d_backward;
  b->has_fused_batch_norm.fn = &cuda::has_fused_batch_norm;
  b->batch_norm.fn = &cuda::batch_norm;
  b->batch_norm_backward.fn = &cuda::batch_norm_backward;
  return b;
}

}  // namespace

// Registration, once. No CUDA call happens here: a machine without a driver loads the library fine,
// and cuda::is_available() answers false when first asked. The plugin registers when it is loaded
// (below); a static libnabla calls this from detail::load_cuda_backend, and that call is also what
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
