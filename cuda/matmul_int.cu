// Integer matmuls on CUDA (cuBLAS has no int64 GEMM): a thread per output element with an int64
// accumulator and the CPU's rounding of alpha and beta (core/cpu/gemm.cpp, gemm_naive).
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {

template <class T>
__global__ void matmul_int_kernel(const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                                  int64_t sa0, int64_t sa1, int64_t sa2, int64_t sb0, int64_t sb1, int64_t sb2,
                                  int64_t sc0, int64_t sc1, int64_t sc2, int64_t alpha, int64_t beta, bool use_beta) {
  int64_t total = batch * m * n;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t j = t % n, r = t / n, i = r % m, bt = r / m;
    const T* ap = a + bt * sa0 + i * sa1;
    const T* bp = b + bt * sb0 + j * sb2;
    int64_t acc = 0;
    for (int64_t p = 0; p < k; ++p) acc += static_cast<int64_t>(ap[p * sa2]) * static_cast<int64_t>(bp[p * sb1]);
    T& o = c[bt * sc0 + i * sc1 + j * sc2];
    o = static_cast<T>(alpha * acc + (use_beta ? beta * static_cast<int64_t>(o) : 0));
  }
}

}  // namespace

void matmul_integer(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta) {
  DeviceScope ds(out);
  int64_t batch = out.sizes()[0], m = out.sizes()[1], n = out.sizes()[2], k = a.sizes()[2];
  int64_t total = batch * m * n;
  if (total == 0) return;
  unsigned grid = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 1 << 20));
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    matmul_int_kernel<T><<<grid, 256, 0, stream_of(out)>>>(
        static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr()), static_cast<T*>(out.data_ptr()),
        batch, m, n, k, a.strides()[0], a.strides()[1], a.strides()[2], b.strides()[0], b.strides()[1], b.strides()[2],
        out.strides()[0], out.strides()[1], out.strides()[2], static_cast<int64_t>(alpha), static_cast<int64_t>(beta),
        beta != 0);
    NABLA_KERNEL_CHECK("matmul_int_kernel");
  };
  switch (a.dtype()) {
    case DType::i64: return run(type_tag<int64_t>{});
    case DType::i32: return run(type_tag<int32_t>{});
    case DType::u8: return run(type_tag<uint8_t>{});
    default: throw DTypeError(internal::str("matmul: unsupported dtype ", a.dtype(), " on CUDA"));
  }
}

}  // namespace nabla::cuda
