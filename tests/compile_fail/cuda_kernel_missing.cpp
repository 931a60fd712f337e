// expect: extra_kernel.* is not a member of|no member named .*extra_kernel.* in namespace
// A kernel added to the kernel list without a CUDA function and without a line in NABLA_CUDA_LACKS
// must not compile: cuda/kernels.h's fill, over the list with one more row, as it would be after a
// row is added to NABLA_KERNELS.
#include "cuda/kernels.h"

#define KERNELS_WITH_A_NEW_ROW(X) NABLA_KERNELS(X) X(extra_kernel, void, (const Tensor& x, const Tensor& out), raise)

namespace nabla::cuda {
struct TableWithANewRow {
  NABLA_DEVICE_ENTRIES(KERNELS_WITH_A_NEW_ROW)
};
void fill_for_the_check() {
  TableWithANewRow table;
  namespace impl = nabla::cuda;
  KERNELS_WITH_A_NEW_ROW(NABLA_FILL_ENTRY)
}
}  // namespace nabla::cuda
