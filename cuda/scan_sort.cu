// CUDA scans (cumsum, cumprod) and sorting (sort, topk) along one dim.
//
// Scans accumulate in double (floats) or int64 (integers) as on the CPU: a thread per line when
// lines are strided (neighbouring threads read neighbouring lines), a warp per line otherwise.
// Sorting is a bitonic network over each line padded to a power of two: in shared memory for lines
// up to 4096 elements, in global memory (one launch per network step) beyond. The order is the
// CPU's: NaN largest, ties broken by the original index, so the result equals a stable sort, and
// topk takes the first k of the line sorted by that order.
#include "core/impl.h"
#include "cuda/block.cuh"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {

template <class T>
using scan_acc_t =
    std::conditional_t<is_float_v<T>, double, std::conditional_t<std::is_same_v<T, bool>, bool, int64_t>>;

template <class A>
__device__ __forceinline__ A scan_op(A a, A b, bool prod) {
  if constexpr (std::is_same_v<A, bool>) return prod ? (a && b) : (a || b);
  else return prod ? a * b : a + b;
}

// Lines (outer, len, inner) of contiguous x and y.
template <class T>
__global__ void scan_kernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool prod) {
  using A = scan_acc_t<T>;
  using C = opmath_t<T>;
  const A identity = prod ? A(1) : A(0);
  if (inner == 1) {  // a warp per line, 32 elements at a time with a carry
    int64_t line = blockIdx.x * int64_t(blockDim.y) + threadIdx.y;
    if (line >= outer) return;
    const T* p = x + line * len;
    T* q = y + line * len;
    const int lane = threadIdx.x;
    A carry = identity;
    for (int64_t base = 0; base < len; base += 32) {
      int64_t j = base + lane;
      A v = j < len ? static_cast<A>(static_cast<C>(p[j])) : identity;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        A u = warp_shfl_up(v, d);
        if (lane >= d) v = scan_op(u, v, prod);
      }
      v = scan_op(carry, v, prod);
      if (j < len) q[j] = static_cast<T>(static_cast<C>(v));
      carry = warp_shfl(v, 31);
    }
    return;
  }
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= outer * inner) return;
  int64_t o = k / inner, i = k % inner;
  const T* p = x + o * len * inner + i;
  T* q = y + o * len * inner + i;
  A a = identity;
  for (int64_t j = 0; j < len; ++j) {
    a = scan_op(a, static_cast<A>(static_cast<C>(p[j * inner])), prod);
    q[j * inner] = static_cast<T>(static_cast<C>(a));
  }
}

// ---- sorting --------------------------------------------------------------------------------------
// Does (a, ia) come before (b, ib)? Padding (index -1) comes last; NaN is the largest value.
template <class K>
__device__ __forceinline__ bool before(K a, int64_t ia, K b, int64_t ib, bool descending) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  bool an = a != a, bn = b != b;
  bool a_gt_b = an ? !bn : (!bn && a > b);  // greater with NaN largest
  bool b_gt_a = bn ? !an : (!an && b > a);
  if (descending ? a_gt_b : b_gt_a) return true;
  if (descending ? b_gt_a : a_gt_b) return false;
  return ia < ib;
}

template <class T>
using sort_key_t = std::conditional_t<is_half_v<T>, float, T>;

constexpr int kSharedSortMax = 4096;

// Shared memory of the one-block sort: P int indices, then P keys at an 8-byte aligned offset.
__host__ __device__ inline size_t shared_key_offset(int64_t P) { return (static_cast<size_t>(P) * 4 + 7) & ~size_t(7); }

// One block sorts one line of `len` elements of contiguous x (lines of `len`), padded to P.
// Writes the sorted indices (int64) of each line.
template <class T>
__global__ void __launch_bounds__(1024)
    sort_shared_kernel(const T* x, int64_t len, int P, int64_t* out_idx, bool descending) {
  using K = sort_key_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  int* idx = reinterpret_cast<int*>(smem);
  K* keys = reinterpret_cast<K*>(smem + shared_key_offset(P));
  const int64_t line = blockIdx.x;
  const T* p = x + line * len;
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    if (i < len) {
      keys[i] = static_cast<K>(p[i]);
      idx[i] = i;
    } else {
      keys[i] = K(0);
      idx[i] = -1;
    }
  }
  __syncthreads();
  for (int k = 2; k <= P; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < P; i += blockDim.x) {
        int l = i ^ j;
        if (l > i) {
          bool up = (i & k) == 0;  // this pair sorts in the line's order (else reversed)
          K ki = keys[i], kl = keys[l];
          int ii = idx[i], il = idx[l];
          bool swap = up ? before(kl, il, ki, ii, descending) : before(ki, ii, kl, il, descending);
          if (swap) {
            keys[i] = kl;
            keys[l] = ki;
            idx[i] = il;
            idx[l] = ii;
          }
        }
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < len; i += blockDim.x) out_idx[line * len + i] = idx[i];
}

// Global-memory bitonic sort: fill padded buffers, then one launch per (k, j) step.
template <class T>
__global__ void sort_fill_kernel(const T* x, int64_t lines, int64_t len, int64_t P, sort_key_t<T>* keys, int64_t* idx) {
  int64_t total = lines * P;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t line = t / P, i = t % P;
    if (i < len) {
      keys[t] = static_cast<sort_key_t<T>>(x[line * len + i]);
      idx[t] = i;
    } else {
      keys[t] = sort_key_t<T>(0);
      idx[t] = -1;
    }
  }
}

template <class K>
__global__ void sort_step_kernel(K* keys, int64_t* idx, int64_t lines, int64_t P, int64_t k, int64_t j,
                                 bool descending) {
  int64_t total = lines * P;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = t % P, l = i ^ j;
    if (l <= i) continue;
    int64_t a = t, b = t - i + l;
    bool up = (i & k) == 0;
    K ka = keys[a], kb = keys[b];
    int64_t ia = idx[a], ib = idx[b];
    bool swap = up ? before(kb, ib, ka, ia, descending) : before(ka, ia, kb, ib, descending);
    if (swap) {
      keys[a] = kb;
      keys[b] = ka;
      idx[a] = ib;
      idx[b] = ia;
    }
  }
}

__global__ void sort_unpad_kernel(const int64_t* idx, int64_t lines, int64_t len, int64_t P, int64_t* out_idx) {
  int64_t total = lines * len;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t line = t / len, i = t % len;
    out_idx[t] = idx[line * P + i];
  }
}

// values[line, i] = x[line, idx[line, i]] for the first `k` of each line (x lines of `len`).
template <class W>
__global__ void take_kernel(const W* x, const int64_t* idx, int64_t lines, int64_t len, int64_t k, W* values,
                            int64_t* indices) {
  int64_t total = lines * k;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t line = t / k, i = t % k;
    int64_t s = idx[line * len + i];
    values[t] = x[line * len + s];
    indices[t] = s;
  }
}

// t with dims d0 and d1 swapped, as a plain view (no autograd).
Tensor swapped(const Tensor& t, int64_t d0, int64_t d1) {
  Shape sizes = t.sizes(), strides = t.strides();
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return internal::make_view(t, sizes, strides, t.storage_offset());
}

// A 0-dim tensor as a 1-element 1-D view.
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? internal::make_view(t, {1}, {1}, t.storage_offset()) : t; }

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + threads - 1) / threads, 1), 1 << 20));
}

// Sorts every line of contiguous xt (lines, len) and writes the first k sorted values and their
// indices into contiguous (lines, k) buffers.
void sort_lines(const Tensor& xt, int64_t lines, int64_t len, int64_t k, bool descending, const Tensor& values,
                const Tensor& indices) {
  int device = device_of(xt);
  cudaStream_t stream = stream_for(device);
  Tensor order = internal::make_empty({lines, len}, DType::i64, xt.device());
  auto* op = static_cast<int64_t*>(order.data_ptr());
  int64_t P = 1;
  while (P < len) P *= 2;
  visit_cuda_dtype(xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = sort_key_t<T>;
    const T* xp = static_cast<const T*>(xt.data_ptr());
    if (P <= kSharedSortMax && lines <= 0x7fffffff) {
      int threads = static_cast<int>(std::min<int64_t>(std::max<int64_t>(P / 2, 32), 1024));
      size_t smem = shared_key_offset(P) + static_cast<size_t>(P) * sizeof(K);
      sort_shared_kernel<T>
          <<<static_cast<unsigned>(lines), threads, smem, stream>>>(xp, len, static_cast<int>(P), op, descending);
      NABLA_KERNEL_CHECK("sort_shared_kernel");
    } else {
      Tensor kb = internal::make_empty({lines * P}, dtype_of<K>(), xt.device());
      Tensor ib = internal::make_empty({lines * P}, DType::i64, xt.device());
      K* kp = static_cast<K*>(kb.data_ptr());
      auto* ip = static_cast<int64_t*>(ib.data_ptr());
      unsigned g = grid_for(lines * P, 256);
      sort_fill_kernel<T><<<g, 256, 0, stream>>>(xp, lines, len, P, kp, ip);
      NABLA_KERNEL_CHECK("sort_fill_kernel");
      for (int64_t kk = 2; kk <= P; kk <<= 1)
        for (int64_t j = kk >> 1; j > 0; j >>= 1) {
          sort_step_kernel<K><<<g, 256, 0, stream>>>(kp, ip, lines, P, kk, j, descending);
          NABLA_KERNEL_CHECK("sort_step_kernel");
        }
      sort_unpad_kernel<<<grid_for(lines * len, 256), 256, 0, stream>>>(ip, lines, len, P, op);
      NABLA_KERNEL_CHECK("sort_unpad_kernel");
    }
  });
  switch (xt.element_size()) {
#define NABLA_TAKE(bytes, W)                                                                                          \
  case bytes:                                                                                                         \
    take_kernel<W><<<grid_for(lines* k, 256), 256, 0, stream>>>(static_cast<const W*>(xt.data_ptr()), op, lines, len, \
                                                                k, static_cast<W*>(values.data_ptr()),                \
                                                                static_cast<int64_t*>(indices.data_ptr()));           \
    NABLA_KERNEL_CHECK("take_kernel");                                                                                \
    break;
    NABLA_TAKE(1, uint8_t)
    NABLA_TAKE(2, uint16_t)
    NABLA_TAKE(4, uint32_t)
    NABLA_TAKE(8, uint64_t)
#undef NABLA_TAKE
  }
}

// Sorts x along dim and writes the first k of each line to values/indices (shaped like x with
// dim of size k).
void sort_topk(const Tensor& x_in, int64_t dim, int64_t k, bool descending, const Tensor& values,
               const Tensor& indices) {
  DeviceScope ds(values);
  Tensor x = at_least_1d(x_in);
  if (x_in.dim() == 0) dim = 0;
  const int64_t last = x.dim() - 1;
  int64_t len = x.sizes()[dim];
  int64_t lines = len == 0 ? 0 : x.numel() / len;
  if (lines == 0 || k == 0) return;
  // Move dim last and make the lines contiguous.
  Tensor xt = contiguous(swapped(x, dim, last));
  Shape tshape = xt.sizes();
  tshape.back() = k;
  Tensor vt = internal::make_empty(tshape, values.dtype(), values.device());
  Tensor it = internal::make_empty(tshape, DType::i64, values.device());
  sort_lines(xt, lines, len, k, descending, vt, it);
  device_copy(swapped(vt, dim, last), at_least_1d(values));
  device_copy(swapped(it, dim, last), at_least_1d(indices));
}

}  // namespace

void scan(ScanOp op, const Tensor& x_in, int64_t dim, const Tensor& out) {
  if (x_in.numel() == 0) return;
  DeviceScope ds(out);
  Tensor x = contiguous(x_in);
  if (x.dim() == 0) dim = 0;
  const auto [outer, len, inner] = internal::lines_of(x, dim);
  Tensor oc = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  cudaStream_t stream = stream_of(out);
  visit_cuda_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dim3 block, grid;
    line_launch_shape(outer, inner, grid, block);
    scan_kernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(oc.data_ptr()),
                                               outer, len, inner, op == ScanOp::cumprod);
    NABLA_KERNEL_CHECK("scan_kernel");
  });
  if (!oc.is_same(out)) device_copy(oc, out);
}

void sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  if (x.numel() == 0) return;
  int64_t len = x.dim() == 0 ? 1 : x.sizes()[dim];
  sort_topk(x, dim, len, descending, values, indices);
}

void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices) {
  if (k == 0 || x.numel() == 0) return;
  sort_topk(x, dim, k, largest, values, indices);
}

}  // namespace nabla::cuda
