// expect: compiles
// The CUDA backend's kernel table, filled from the kernel list as cuda/backend.cpp fills it, on a
// machine without nvcc: every kernel of NABLA_KERNELS has a CUDA declaration of the list's
// signature, or a NABLA_CUDA_LACKS line. The control of cuda_kernel_missing.cpp.
#include "cuda/kernels.h"

namespace nabla::cuda {
void fill_for_the_check() {
  Backend table("cuda");
  fill_kernels(table);
}
}  // namespace nabla::cuda
