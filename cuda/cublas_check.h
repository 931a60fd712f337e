// NABLA_CUBLAS_CHECK: a failed cuBLAS status becomes a CudaError naming the call, the status and
// where (internal to cuda/; blas.cpp's GEMMs and solver.cpp's batched LU).
#pragma once

#include <cublas_v2.h>

#include "../core/error.h"
#include "../core/impl.h"

namespace nabla::cuda {

[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* what, const char* file, int line) {
  throw CudaError(internal::str("cuBLAS error: ", cublasGetStatusString(s), " (", cublasGetStatusName(s), ") in ", what,
                                " at ", file, ":", line));
}

}  // namespace nabla::cuda

#define NABLA_CUBLAS_CHECK(expr)                                         \
  do {                                                                   \
    cublasStatus_t nabla_st_ = (expr);                                   \
    if (nabla_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                 \
      ::nabla::cuda::throw_cublas(nabla_st_, #expr, __FILE__, __LINE__); \
  } while (0)
