// CUDA softmax / log-softmax and their backward along one dim.
//
// Along a contiguous dim (inner == 1, the usual last-dim case) nabla's own kernel runs: a warp per
// line for lines up to 1024 elements, a block of 512 threads per line beyond, three passes (max,
// sum of exponentials, write) with double accumulation as on the CPU. Along a strided dim
// (inner > 1, e.g. channels of NCHW) cuDNN's channel-mode softmax runs (cudnn.cpp), falling back to
// a thread-per-column kernel for dtypes or sizes cuDNN does not take.
#include <cmath>

#include "core/impl.h"
#include "cuda/block.cuh"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {

struct MaxOp {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
  }
};
struct SumOp {
  template <class A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

// Row kernels: line = blockIdx.x * blockDim.y + threadIdx.y; blockDim.x threads share a line.
template <class T>
__global__ void __launch_bounds__(512) softmax_rows_kernel(const T* x, T* y, int64_t lines, int64_t len, bool log) {
  using C = opmath_t<T>;
  __shared__ double shared[32 * 32];
  int64_t line = blockIdx.x * int64_t(blockDim.y) + threadIdx.y;
  bool active = line < lines;
  const T* p = x + (active ? line : 0) * len;
  T* q = y + (active ? line : 0) * len;
  double* sh = shared;
  double m = -INFINITY;
  if (active)
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) m = MaxOp()(m, static_cast<double>(static_cast<C>(p[j])));
  m = block_reduce_x(m, MaxOp(), -static_cast<double>(INFINITY), sh);
  if (threadIdx.x == 0) sh[32 * 32 - 1 - threadIdx.y] = m;  // broadcast through shared memory
  __syncthreads();
  m = sh[32 * 32 - 1 - threadIdx.y];
  if (m == -INFINITY) m = 0;  // all -inf: avoid inf - inf
  // As the CPU: the max and the exponentials are computed in the element type, the sum in double.
  const C mc = static_cast<C>(m);
  double s = 0;
  if (active)
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      s += log ? ::exp(static_cast<double>(static_cast<C>(p[j]) - mc))
               : static_cast<double>(static_cast<C>(::exp(static_cast<C>(p[j]) - mc)));
  __syncthreads();
  s = block_reduce_x(s, SumOp(), 0.0, sh);
  if (threadIdx.x == 0) sh[32 * 32 - 1 - threadIdx.y] = s;
  __syncthreads();
  s = sh[32 * 32 - 1 - threadIdx.y];
  if (!active) return;
  if (log) {
    // (x - max) - log(sum), as the CPU: x - (max + log(sum)) loses digits to the rounding of the sum.
    const C ls = static_cast<C>(::log(s));
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) q[j] = static_cast<T>((static_cast<C>(p[j]) - mc) - ls);
  } else {
    C inv = static_cast<C>(1.0 / s);
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      q[j] = static_cast<T>(::exp(static_cast<C>(p[j]) - mc) * inv);
  }
}

template <class T>
__global__ void __launch_bounds__(512)
    softmax_backward_rows_kernel(const T* g, const T* y, T* out, int64_t lines, int64_t len, bool log) {
  using C = opmath_t<T>;
  __shared__ double shared[32 * 32];
  int64_t line = blockIdx.x * int64_t(blockDim.y) + threadIdx.y;
  bool active = line < lines;
  int64_t base = (active ? line : 0) * len;
  double dot = 0;
  if (active)
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      double gv = static_cast<double>(static_cast<C>(g[base + j]));
      dot += log ? gv : gv * static_cast<double>(static_cast<C>(y[base + j]));
    }
  dot = block_reduce_x(dot, SumOp(), 0.0, shared);
  if (threadIdx.x == 0) shared[32 * 32 - 1 - threadIdx.y] = dot;
  __syncthreads();
  dot = shared[32 * 32 - 1 - threadIdx.y];
  if (!active) return;
  const C d = static_cast<C>(dot);
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    C gv = static_cast<C>(g[base + j]), yv = static_cast<C>(y[base + j]);
    out[base + j] = static_cast<T>(log ? gv - ::exp(yv) * d : yv * (gv - d));
  }
}

// Column kernels (inner > 1): a thread per (o, i), walking the line with stride `inner`.
template <class T>
__global__ void softmax_cols_kernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool log) {
  using C = opmath_t<T>;
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= outer * inner) return;
  int64_t o = k / inner, i = k % inner;
  const T* p = x + o * len * inner + i;
  T* q = y + o * len * inner + i;
  C m = static_cast<C>(-INFINITY);
  for (int64_t j = 0; j < len; ++j) m = MaxOp()(m, static_cast<C>(p[j * inner]));
  if (m == static_cast<C>(-INFINITY)) m = 0;
  double s = 0;
  for (int64_t j = 0; j < len; ++j)
    s += log ? ::exp(static_cast<double>(static_cast<C>(p[j * inner]) - m))
             : static_cast<double>(static_cast<C>(::exp(static_cast<C>(p[j * inner]) - m)));
  if (log) {
    const C ls = static_cast<C>(::log(s));
    for (int64_t j = 0; j < len; ++j) q[j * inner] = static_cast<T>((static_cast<C>(p[j * inner]) - m) - ls);
  } else {
    C inv = static_cast<C>(1.0 / s);
    for (int64_t j = 0; j < len; ++j) q[j * inner] = static_cast<T>(::exp(static_cast<C>(p[j * inner]) - m) * inv);
  }
}

template <class T>
__global__ void softmax_backward_cols_kernel(const T* g, const T* y, T* out, int64_t outer, int64_t len, int64_t inner,
                                             bool log) {
  using C = opmath_t<T>;
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= outer * inner) return;
  int64_t o = k / inner, i = k % inner, base = o * len * inner + i;
  double dot = 0;
  for (int64_t j = 0; j < len; ++j) {
    double gv = static_cast<double>(static_cast<C>(g[base + j * inner]));
    dot += log ? gv : gv * static_cast<double>(static_cast<C>(y[base + j * inner]));
  }
  const C d = static_cast<C>(dot);
  for (int64_t j = 0; j < len; ++j) {
    C gv = static_cast<C>(g[base + j * inner]), yv = static_cast<C>(y[base + j * inner]);
    out[base + j * inner] = static_cast<T>(log ? gv - ::exp(yv) * d : yv * (gv - d));
  }
}

using internal::Lines;
using internal::lines_of;

// Block shape for row kernels: a warp per line up to 1024 elements, else 512 threads per line.
void row_launch_shape(int64_t lines, int64_t len, dim3& grid, dim3& block) {
  if (len <= 1024) {
    block = dim3(32, 8);
    grid = dim3(blocks_for(lines, 8));
  } else {
    block = dim3(512, 1);
    grid = dim3(blocks_for(lines, 1));
  }
}

}  // namespace

void softmax(const Tensor& x_in, int64_t dim, bool log, const Tensor& out) {
  if (x_in.numel() == 0) return;
  DeviceScope ds(out);
  Tensor x = contiguous(x_in);
  if (x.dim() == 0) dim = 0;
  Lines l = lines_of(x, dim);
  Tensor oc = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  cudaStream_t stream = stream_of(out);
  if (l.inner > 1 && cudnn_softmax(x, l.outer, l.len, l.inner, log, oc)) {
    // done by cuDNN
  } else {
    visit_cuda_float(x.dtype(), "softmax", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* xp = static_cast<const T*>(x.data_ptr());
      T* yp = static_cast<T*>(oc.data_ptr());
      if (l.inner == 1) {
        dim3 grid, block;
        row_launch_shape(l.outer, l.len, grid, block);
        softmax_rows_kernel<T><<<grid, block, 0, stream>>>(xp, yp, l.outer, l.len, log);
        NABLA_KERNEL_CHECK("softmax_rows_kernel");
      } else {
        softmax_cols_kernel<T>
            <<<blocks_for(l.outer * l.inner, 256), 256, 0, stream>>>(xp, yp, l.outer, l.len, l.inner, log);
        NABLA_KERNEL_CHECK("softmax_cols_kernel");
      }
    });
  }
  if (!oc.is_same(out)) device_copy(oc, out);
}

void softmax_backward(const Tensor& g_in, const Tensor& y_in, int64_t dim, bool log, const Tensor& out) {
  if (g_in.numel() == 0) return;
  DeviceScope ds(out);
  Tensor g = contiguous(g_in), y = contiguous(y_in);
  if (g.dim() == 0) dim = 0;
  Lines l = lines_of(g, dim);
  Tensor oc = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  cudaStream_t stream = stream_of(out);
  if (l.inner > 1 && cudnn_softmax_backward(g, y, l.outer, l.len, l.inner, log, oc)) {
    // done by cuDNN
  } else {
    visit_cuda_float(g.dtype(), "softmax_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* gp = static_cast<const T*>(g.data_ptr());
      const T* yp = static_cast<const T*>(y.data_ptr());
      T* op = static_cast<T*>(oc.data_ptr());
      if (l.inner == 1) {
        dim3 grid, block;
        row_launch_shape(l.outer, l.len, grid, block);
        softmax_backward_rows_kernel<T><<<grid, block, 0, stream>>>(gp, yp, op, l.outer, l.len, log);
        NABLA_KERNEL_CHECK("softmax_backward_rows_kernel");
      } else {
        softmax_backward_cols_kernel<T>
            <<<blocks_for(l.outer * l.inner, 256), 256, 0, stream>>>(gp, yp, op, l.outer, l.len, l.inner, log);
        NABLA_KERNEL_CHECK("softmax_backward_cols_kernel");
      }
    });
  }
  if (!oc.is_same(out)) device_copy(oc, out);
}

}  // namespace nabla::cuda
