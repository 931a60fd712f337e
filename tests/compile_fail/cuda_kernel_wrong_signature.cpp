// expect: no matching function for call to .*fill_entry
// A CUDA kernel declared with another signature than its row of the kernel list must not compile
// either (here one parameter fewer than the row's).
#include "cuda/kernels.h"

#define KERNELS_WITH_A_NEW_ROW(X) NABLA_KERNELS(X) X(extra_kernel, void, (const Tensor& x, const Tensor& out), raise)

namespace nabla::cuda {
void extra_kernel(const Tensor& x);

struct TableWithANewRow {
  NABLA_DEVICE_ENTRIES(KERNELS_WITH_A_NEW_ROW)
};
void fill_for_the_check() {
  TableWithANewRow table;
  namespace impl = nabla::cuda;
  KERNELS_WITH_A_NEW_ROW(NABLA_FILL_ENTRY)
}
}  // namespace nabla::cuda
