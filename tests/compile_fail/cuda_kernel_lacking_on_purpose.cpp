// expect: compiles
// cuda_kernel_missing.cpp's new row, listed as lacking on CUDA with the reason (as a NABLA_CUDA_LACKS
// line declares it), compiles: the entry stays empty and names the reason when called.
#include "cuda/kernels.h"

#define KERNELS_WITH_A_NEW_ROW(X) NABLA_KERNELS(X) X(extra_kernel, void, (const Tensor& x, const Tensor& out), raise)

namespace nabla::cuda {
// (cuda/kernels.h has declared the rows NABLA_CUDA_LACKS lists already; this adds the new one.)
#define LACKS_THE_NEW_ROW(X) X(extra_kernel, "the CPU's kernel is fast enough for its sizes")
LACKS_THE_NEW_ROW(NABLA_DECLARE_LACKING)

struct TableWithANewRow {
  NABLA_DEVICE_ENTRIES(KERNELS_WITH_A_NEW_ROW)
};
void fill_for_the_check() {
  TableWithANewRow table;
  namespace impl = nabla::cuda;
  KERNELS_WITH_A_NEW_ROW(NABLA_FILL_ENTRY)
}
}  // namespace nabla::cuda
