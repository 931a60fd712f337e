// The one generic elementwise kernel of the CUDA backend, and the helpers every .cu file shares.
//
// launch_elementwise<N>(plan, stream, f) runs f(char* p[N]) for every element, where p[k] is the
// address of operand k's element (p[0] the output). Each op is a small functor (see unary.cu,
// binary.cu, copy.cu): the kernel, its indexing and its launch are written once. Each thread
// handles kUnroll elements kThreads apart, so warps read and write contiguous runs.
#pragma once

#include <cuda_runtime.h>

#include <limits>
#include <type_traits>

#include "../core/dtype.h"
#include "../core/scalar_math.h"
#include "common.h"
#include "iter.h"

namespace nabla::cuda {

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <class T>
struct OpMathT {
  using type = T;
};
template <>
struct OpMathT<Half> {
  using type = float;
};
template <>
struct OpMathT<BFloat16> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMathT<T>::type;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

using nabla::scalar::convert;  // the CPU's conversion semantics (core/scalar_math.h)

template <class T>
__device__ __forceinline__ T load(const char* p) {
  return *reinterpret_cast<const T*>(p);
}
template <class T>
__device__ __forceinline__ void store(char* p, T v) {
  *reinterpret_cast<T*>(p) = v;
}

constexpr int kThreads = 128;
constexpr int kUnroll = 4;

template <int N, class F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(Iter<N> it, uint32_t n, F f) {
  uint32_t i = blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (i < n) {
      char* p[N];
      it.pointers(i, p);
      f(p);
    }
    i += kThreads;
  }
}

template <int N, class F>
void launch_elementwise(const IterPlan& plan, cudaStream_t stream, const F& f) {
  split_32bit(plan, [&](const IterPlan& piece) {
    Iter<N> it = make_iter<N>(piece);
    uint32_t n = static_cast<uint32_t>(piece.numel);
    unsigned blocks = (n + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    elementwise_kernel<N><<<blocks, kThreads, 0, stream>>>(it, n, f);
    NABLA_KERNEL_CHECK("elementwise_kernel");
  });
}

// Calls f(type_tag<T>{}) for the dtypes the CUDA arithmetic kernels are compiled for (all eight).
template <class F>
decltype(auto) visit_cuda_dtype(DType d, F&& f) {
  return visit_dtype(d, std::forward<F>(f));
}

// Calls f(type_tag<T>{}) for floating dtypes (f32, f64, f16, bf16); throws DTypeError otherwise.
template <class F>
decltype(auto) visit_cuda_float(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::f32: return f(type_tag<float>{});
    case DType::f64: return f(type_tag<double>{});
    case DType::f16: return f(type_tag<Half>{});
    case DType::bf16: return f(type_tag<BFloat16>{});
    default: break;
  }
  throw DTypeError(internal::str(op, ": expected a floating dtype on CUDA, got ", dtype_name(d)));
}

}  // namespace nabla::cuda
