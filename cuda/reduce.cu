// CUDA reductions (sum, prod, max, min, any, all over any dims) and arg-reductions (max/min with
// the index along one dim). The layout is planned in cuda/reduce_plan.h. Sums and products of
// floating tensors accumulate in double and of integers in int64, as on the CPU; max/min keep the
// element type and propagate NaN; reductions are deterministic (fixed combination order).
#include <cmath>
#include <limits>

#include "core/impl.h"
#include "core/scalar_math.h"
#include "cuda/allocator.h"
#include "cuda/block.cuh"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"
#include "cuda/reduce_plan.h"

namespace nabla::cuda {
namespace {

// ---- reducers: In (stored input type), A (accumulator), Out ----------------------------------------
template <ReduceOp OP, class T>
struct Reducer {
  using In = T;
  using C = opmath_t<T>;
  using A = std::conditional_t<OP == ReduceOp::sum || OP == ReduceOp::prod, sum_acc_t<T>,
                               std::conditional_t<OP == ReduceOp::any || OP == ReduceOp::all, bool, C>>;
  using Out = std::conditional_t<OP == ReduceOp::any || OP == ReduceOp::all, bool, T>;

  static __device__ A identity() { return ReduceAlgebra<OP, A>::identity(); }
  static __device__ A merge(A a, A b) { return ReduceAlgebra<OP, A>::merge(a, b); }
  static __device__ A combine(A a, In v) {
    if constexpr (OP == ReduceOp::any || OP == ReduceOp::all) return merge(a, convert<bool>(v));
    else return merge(a, static_cast<A>(static_cast<C>(v)));
  }
  static __device__ Out project(A a) {
    if constexpr (is_half_v<Out>) return Out(static_cast<float>(a));
    else return static_cast<Out>(a);
  }
};

// The second pass: combines partial accumulators.
template <class R>
struct PartialReducer {
  using In = typename R::A;
  using A = typename R::A;
  using Out = typename R::Out;
  static __device__ A identity() { return R::identity(); }
  static __device__ A merge(A a, A b) { return R::merge(a, b); }
  static __device__ A combine(A a, In v) { return R::merge(a, v); }
  static __device__ Out project(A a) { return R::project(a); }
};

// Kernel arguments: index spaces innermost first (the plan's dims reversed).
struct ReduceArgs {
  int kept_ndim, red_ndim;
  IntDivider kept_size[kMaxIterDims];
  int64_t kept_x[kMaxIterDims], kept_o[kMaxIterDims];
  IntDivider red_size[kMaxIterDims];
  int64_t red_x[kMaxIterDims];
  uint32_t nout, nred, chunk, splits;
  int64_t pstride, pbase;  // pass 1 with partials: output o's split s goes to partial[o * pstride + pbase + s]
  bool row_mode;

  __device__ void kept_offsets(uint32_t o, int64_t& xo, int64_t& oo) const {
    xo = 0;
    oo = 0;
#pragma unroll
    for (int d = 0; d < kMaxIterDims; ++d) {
      if (d == kept_ndim) break;
      uint32_t q = kept_size[d].div(o);
      uint32_t i = o - q * kept_size[d].divisor;
      o = q;
      xo += static_cast<int64_t>(i) * kept_x[d];
      oo += static_cast<int64_t>(i) * kept_o[d];
    }
  }
  __device__ int64_t red_offset(uint32_t r) const {
    if (red_ndim == 1) return static_cast<int64_t>(r) * red_x[0];
    int64_t off = 0;
#pragma unroll
    for (int d = 0; d < kMaxIterDims; ++d) {
      if (d == red_ndim) break;
      uint32_t q = red_size[d].div(r);
      uint32_t i = r - q * red_size[d].divisor;
      r = q;
      off += static_cast<int64_t>(i) * red_x[d];
    }
    return off;
  }
};

template <class R>
__global__ void __launch_bounds__(512)
    reduce_kernel(ReduceArgs args, const typename R::In* x, typename R::Out* out, typename R::A* partial) {
  using A = typename R::A;
  extern __shared__ __align__(16) unsigned char smem[];
  A* shared = reinterpret_cast<A*>(smem);
  const uint32_t split = blockIdx.y;
  const uint32_t r0 = split * args.chunk;
  const uint32_t r1 = ::min(r0 + args.chunk, args.nred);
  A acc = R::identity();
  uint32_t o;
  bool writer;
  if (args.row_mode) {
    o = blockIdx.x * blockDim.y + threadIdx.y;
    bool active = o < args.nout;
    if (active) {
      int64_t xo, oo;
      args.kept_offsets(o, xo, oo);
      for (uint32_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) acc = R::combine(acc, x[xo + args.red_offset(r)]);
    }
    acc = block_reduce_x(
        acc, [](A a, A b) { return R::merge(a, b); }, R::identity(), shared);
    writer = active && threadIdx.x == 0;
  } else {
    o = blockIdx.x * blockDim.x + threadIdx.x;
    bool active = o < args.nout;
    if (active) {
      int64_t xo, oo;
      args.kept_offsets(o, xo, oo);
      for (uint32_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) acc = R::combine(acc, x[xo + args.red_offset(r)]);
    }
    if (blockDim.y > 1) {
      shared[threadIdx.y * blockDim.x + threadIdx.x] = acc;
      __syncthreads();
      if (threadIdx.y == 0)
        for (uint32_t y = 1; y < blockDim.y; ++y) acc = R::merge(acc, shared[y * blockDim.x + threadIdx.x]);
    }
    writer = active && threadIdx.y == 0;
  }
  if (!writer) return;
  if (partial) {
    partial[static_cast<int64_t>(o) * args.pstride + args.pbase + split] = acc;
  } else {
    int64_t xo, oo;
    args.kept_offsets(o, xo, oo);
    out[oo] = R::project(acc);
  }
}

ReduceArgs make_args(const ReducePlan& p, int64_t pstride, int64_t pbase) {
  ReduceArgs a{};
  a.pstride = pstride;
  a.pbase = pbase;
  a.kept_ndim = static_cast<int>(p.kept.size.size());
  a.red_ndim = static_cast<int>(p.red.size.size());
  for (int d = 0; d < kMaxIterDims; ++d) {
    a.kept_size[d] = IntDivider(1);
    a.red_size[d] = IntDivider(1);
  }
  for (int d = 0; d < a.kept_ndim; ++d) {  // innermost first
    size_t s = p.kept.size.size() - 1 - d;
    a.kept_size[d] = IntDivider(static_cast<uint32_t>(p.kept.size[s]));
    a.kept_x[d] = p.kept.xstride[s];
    a.kept_o[d] = p.kept.ostride[s];
  }
  for (int d = 0; d < a.red_ndim; ++d) {
    size_t s = p.red.size.size() - 1 - d;
    a.red_size[d] = IntDivider(static_cast<uint32_t>(p.red.size[s]));
    a.red_x[d] = p.red.xstride[s];
  }
  a.nout = static_cast<uint32_t>(p.nout);
  a.nred = static_cast<uint32_t>(p.nred);
  a.chunk = static_cast<uint32_t>(p.chunk);
  a.splits = static_cast<uint32_t>(p.splits);
  a.row_mode = p.row_mode;
  return a;
}

size_t shared_bytes(const ReducePlan& p, size_t acc_size) {
  return p.row_mode ? acc_size * 32 * p.by : acc_size * p.bx * p.by;
}

// Without partials the results go to out; with them, output o's splits to partial[o * pstride + pbase, + splits).
template <class R>
void launch(const ReducePlan& p, const typename R::In* x, typename R::Out* out, typename R::A* partial,
            cudaStream_t stream, int64_t pstride = 0, int64_t pbase = 0) {
  dim3 block(p.bx, p.by), grid(static_cast<unsigned>(p.grid_x), static_cast<unsigned>(p.splits));
  reduce_kernel<R>
      <<<grid, block, shared_bytes(p, sizeof(typename R::A)), stream>>>(make_args(p, pstride, pbase), x, out, partial);
  NABLA_KERNEL_CHECK("reduce_kernel");
}

template <ReduceOp OP, class T>
void reduce_typed(const Tensor& x, const internal::DimMask& mask, const Tensor& out, int device) {
  using R = Reducer<OP, T>;
  using A = typename R::A;
  using Out = typename R::Out;
  cudaStream_t stream = stream_for(device);
  // One piece unless an output has more than 2^31 elements to reduce (reduce_plan.h).
  const std::vector<ReducePiece> pieces =
      plan_reduce_pieces(x.sizes(), x.strides(), out.strides(), mask, sm_count(device));
  const ReducePlan& p = pieces[0].plan;
  const T* xp = static_cast<const T*>(x.data_ptr());
  Out* op = static_cast<Out*>(out.data_ptr());
  if (pieces.size() == 1 && p.splits == 1) return launch<R>(p, xp, op, nullptr, stream);
  // Pass 1 into partials [nout, columns] (each piece's splits side by side); pass 2 reduces each row
  // of partials into out.
  int64_t columns = 0;
  for (const ReducePiece& piece : pieces) columns += piece.plan.splits;
  NABLA_CHECK(NotImplemented, columns <= kMax32, "CUDA reductions: too many pieces (shape ", x.sizes(), ")");
  Tensor partial = scratch(static_cast<size_t>(p.nout * columns) * sizeof(A), device);
  A* pp = static_cast<A*>(partial.data_ptr());
  int64_t base = 0;
  for (const ReducePiece& piece : pieces) {
    launch<R>(piece.plan, xp + piece.offset, op, pp, stream, columns, base);
    base += piece.plan.splits;
  }
  ReducePlan q;
  q.kept = p.kept;
  int64_t stride = columns;  // partial offset of output o is o * columns
  for (size_t d = q.kept.size.size(); d-- > 0;) {
    q.kept.xstride[d] = stride;
    stride *= q.kept.size[d];
  }
  q.red.size = {columns};
  q.red.xstride = {1};
  q.red.ostride = {0};
  q.nout = p.nout;
  q.nred = columns;
  q.row_mode = true;
  q.bx = 32;
  while (q.bx < q.nred && q.bx < 256) q.bx *= 2;
  q.by = 1;
  q.grid_x = q.nout;
  q.splits = 1;
  q.chunk = q.nred;
  launch<PartialReducer<R>>(q, pp, op, nullptr, stream);
}

template <ReduceOp OP>
void reduce_dispatch(const Tensor& x, const internal::DimMask& mask, const Tensor& out, int device) {
  visit_cuda_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (OP == ReduceOp::any || OP == ReduceOp::all) {
      NABLA_CHECK(DTypeError, out.dtype() == DType::boolean, "reduce: any/all output must be bool, got ", out.dtype());
    } else {
      NABLA_CHECK(DTypeError, out.dtype() == x.dtype(), "reduce: output dtype ", out.dtype(), " differs from input ",
                  x.dtype());
    }
    reduce_typed<OP, T>(x, mask, out, device);
  });
}

// ---- arg-reductions ---------------------------------------------------------------------------------
// Is (v, i) a better max (or min) than (bv, bi)? NaN wins, then the extreme, then the first index.
template <class C>
__device__ __forceinline__ bool better(C v, int64_t i, C bv, int64_t bi, bool is_max) {
  bool vn = v != v, bn = bv != bv;
  if (vn || bn) {
    if (vn && bn) return i < bi;
    return vn;
  }
  if (v == bv) return i < bi;
  return is_max ? v > bv : v < bv;
}

// Lines (outer, len, inner) of a contiguous x; values/indices contiguous (outer, inner).
// Row mode (inner == 1): a warp per line. Column mode: a thread per (o, i).
template <class T>
__global__ void arg_reduce_kernel(const T* x, int64_t outer, int64_t len, int64_t inner, T* values, int64_t* indices,
                                  bool is_max) {
  using C = opmath_t<T>;
  if (inner == 1) {
    int64_t line = blockIdx.x * int64_t(blockDim.y) + threadIdx.y;
    if (line >= outer) return;  // whole warps leave together
    const T* p = x + line * len;
    C bv = static_cast<C>(p[0]);
    int64_t bi = 0;
    for (int64_t j = threadIdx.x; j < len; j += 32) {
      C v = static_cast<C>(p[j]);
      if (better(v, j, bv, bi, is_max)) {
        bv = v;
        bi = j;
      }
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
      C ov = warp_shfl_down(bv, d);
      int64_t oi = warp_shfl_down(bi, d);
      if (better(ov, oi, bv, bi, is_max)) {
        bv = ov;
        bi = oi;
      }
    }
    if (threadIdx.x == 0) {
      values[line] = static_cast<T>(bv);
      indices[line] = bi;
    }
    return;
  }
  int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (k >= outer * inner) return;
  int64_t o = k / inner, i = k % inner;
  const T* p = x + o * len * inner + i;
  C bv = static_cast<C>(p[0]);
  int64_t bi = 0;
  for (int64_t j = 1; j < len; ++j) {
    C v = static_cast<C>(p[j * inner]);
    if (better(v, j, bv, bi, is_max)) {
      bv = v;
      bi = j;
    }
  }
  values[k] = static_cast<T>(bv);
  indices[k] = bi;
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out) {
  internal::DimMask mask = internal::dims_mask(dims, x.dim(), "reduce");
  if (out.numel() == 0) return;
  DeviceScope ds(out);
  if (x.numel() == 0) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::any: fill(out, 0); return;
      case ReduceOp::prod:
      case ReduceOp::all: fill(out, 1); return;
      default: throw ValueError("max/min: cannot reduce an empty tensor (the result has no identity)");
    }
  }
  int device = device_of(out);
  switch (op) {
    case ReduceOp::sum: return reduce_dispatch<ReduceOp::sum>(x, mask, out, device);
    case ReduceOp::prod: return reduce_dispatch<ReduceOp::prod>(x, mask, out, device);
    case ReduceOp::max: return reduce_dispatch<ReduceOp::max>(x, mask, out, device);
    case ReduceOp::min: return reduce_dispatch<ReduceOp::min>(x, mask, out, device);
    case ReduceOp::any: return reduce_dispatch<ReduceOp::any>(x, mask, out, device);
    case ReduceOp::all: return reduce_dispatch<ReduceOp::all>(x, mask, out, device);
  }
}

void arg_reduce(ReduceOp op, const Tensor& x_in, int64_t dim, const Tensor& values, const Tensor& indices) {
  DeviceScope ds(values);
  Tensor x = contiguous(x_in);
  if (x.dim() == 0) dim = 0;
  const auto [outer, len, inner] = internal::lines_of(x, dim);
  NABLA_CHECK(IndexError, len > 0, op == ReduceOp::max ? "max" : "min", ": cannot reduce over an empty dim ", dim,
              " of shape ", x.sizes());
  if (outer * inner == 0) return;
  Tensor vc = values.is_contiguous() ? values : internal::make_empty(values.sizes(), values.dtype(), values.device());
  Tensor ic = indices.is_contiguous() ? indices : internal::make_empty(indices.sizes(), DType::i64, indices.device());
  cudaStream_t stream = stream_of(values);
  visit_cuda_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dim3 block, grid;
    line_launch_shape(outer, inner, grid, block);
    arg_reduce_kernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(x.data_ptr()), outer, len, inner,
                                                     static_cast<T*>(vc.data_ptr()),
                                                     static_cast<int64_t*>(ic.data_ptr()), op == ReduceOp::max);
    NABLA_KERNEL_CHECK("arg_reduce_kernel");
  });
  if (!vc.is_same(values)) device_copy(vc, values);
  if (!ic.is_same(indices)) device_copy(ic, indices);
}

}  // namespace nabla::cuda
