// Matrix products on CUDA through cuBLAS: one strided-batched GEMM call per matmul/bmm/addmm/
// linear, with transposed operands passed as cuBLAS transposes rather than copies (see
// cuda/gemm_plan.h), 64-bit sizes, a workspace from the caching allocator per call, and TF32 only
// when cuda::set_allow_tf32(true). Integer dtypes use nabla's own kernel (matmul_int.cu).
#include <cublas_v2.h>

#include <array>

#include "core/impl.h"
#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/cublas_check.h"
#include "cuda/gemm_plan.h"
#include "cuda/handles.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

namespace {

// 32 MiB, what cuBLAS asks for on Hopper. Each call takes it from the caching allocator and gives
// it back after (the handle is bound to the stream, so the next kernel on it may reuse the memory),
// so empty_cache() can return it to the driver; when the memory is not there, cuBLAS runs without
// a workspace (algorithms that need none) instead of failing.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

cublasHandle_t create_handle(int device, cudaStream_t stream) {
  DeviceScope ds(device);
  cublasHandle_t h;
  NABLA_CUBLAS_CHECK(cublasCreate(&h));
  NABLA_CUBLAS_CHECK(cublasSetStream(h, stream));
  NABLA_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  return h;
}

HandlePool<cublasHandle_t>& pool() {
  static auto* p = new HandlePool<cublasHandle_t>(&create_handle);
  return *p;
}

// A contiguous copy of a 3-D operand (batch broadcast dims stay stride 0).
Tensor contiguous_matrices(const Tensor& t) {
  if (t.strides()[0] == 0 && t.sizes()[0] > 1) {
    // Copy one matrix and broadcast it again.
    Tensor one = internal::make_view(t, {1, t.sizes()[1], t.sizes()[2]}, t.strides(), t.storage_offset());
    Tensor c = contiguous(one);
    return internal::make_view(c, t.sizes(), {0, c.strides()[1], c.strides()[2]}, c.storage_offset());
  }
  return contiguous(t);
}

// out *= beta (k == 0: nothing else to add).
void scale(const Tensor& out, double beta) {
  if (beta == 0) return fill(out, 0);
  if (beta == 1) return;
  Tensor b = internal::wrap_scalar(beta, out.dtype());
  binary(BinaryOp::mul, out, internal::broadcast_view(b, out.sizes()), out, 1);
}

}  // namespace

void matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out_in, double alpha, double beta) {
  DeviceScope ds(out_in);
  const DType dt = a_in.dtype();
  NABLA_CHECK(DTypeError, dt != DType::boolean, "matmul: not supported for bool tensors");
  if (is_integral(dt)) return matmul_integer(a_in, b_in, out_in, alpha, beta);
  const int64_t batch = out_in.sizes()[0], m = out_in.sizes()[1], n = out_in.sizes()[2], k = a_in.sizes()[2];
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) return scale(out_in, beta);

  // A and B enter as their transposes (C^T = B^T A^T in cuBLAS's column-major terms).
  Tensor a = a_in, b = b_in;
  GemmOperand ga = transposed_operand(m, k, a.strides()[1], a.strides()[2]);
  if (!ga.ok) {
    a = contiguous_matrices(a);
    ga = transposed_operand(m, k, a.strides()[1], a.strides()[2]);
  }
  GemmOperand gb = transposed_operand(k, n, b.strides()[1], b.strides()[2]);
  if (!gb.ok) {
    b = contiguous_matrices(b);
    gb = transposed_operand(k, n, b.strides()[1], b.strides()[2]);
  }
  // The output must be row-major with non-overlapping matrices.
  GemmOperand gc = output_operand(m, n, out_in.strides()[1], out_in.strides()[2]);
  bool out_ok = gc.ok && (batch == 1 || out_in.strides()[0] >= gc.ld * (m - 1) + n);
  Tensor out = out_ok ? out_in : internal::make_empty(out_in.sizes(), dt, out_in.device());
  if (!out_ok) {
    if (beta != 0) device_copy(out_in, out);
    gc = output_operand(m, n, out.strides()[1], out.strides()[2]);
  }
  const int64_t sa = batch > 1 ? a.strides()[0] : 0, sb = batch > 1 ? b.strides()[0] : 0;
  const int64_t sc = batch > 1 ? out.strides()[0] : 0;

  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (dt) {
    case DType::f32:
      type = CUDA_R_32F;
      compute = allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case DType::f64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case DType::f16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case DType::bf16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    default: throw DTypeError(internal::str("matmul: unsupported dtype ", dt, " on CUDA"));
  }
  const double alpha_d = alpha, beta_d = beta;
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const void* pa = dt == DType::f64 ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* pb = dt == DType::f64 ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);

  const int device = device_of(out);
  cudaStream_t stream = stream_for(device);
  Lease<cublasHandle_t> h(pool(), device, stream);
  Tensor ws = try_scratch(kWorkspaceBytes, device);
  NABLA_CUBLAS_CHECK(
      cublasSetWorkspace(h.get(), ws.defined() ? ws.data_ptr() : nullptr, ws.defined() ? kWorkspaceBytes : 0));
  // C^T (n x m) = op(B^T) (n x k) @ op(A^T) (k x m)
  NABLA_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(h.get(), gb.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                   ga.trans ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, pa, b.data_ptr(),
                                                   type, gb.ld, sb, a.data_ptr(), type, ga.ld, sa, pb, out.data_ptr(),
                                                   type, gc.ld, sc, batch, compute, CUBLAS_GEMM_DEFAULT));
  if (!out.is_same(out_in)) device_copy(out, out_in);
}

}  // namespace nabla::cuda
