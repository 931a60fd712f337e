// CUDA indexing kernels: index_select, index_add, gather, scatter (deterministic last-write-wins, or
// atomic accumulation), nonzero; and the index checker they share.
//
// With use_deterministic_algorithms(true) (core/determinism.h), index_add and scatter_add add in
// index order instead of with atomics (cuda/index_plan.h): reproducible, and equal to the CPU.
//
// Out-of-range indices never touch memory: kernels skip them and record the first one in a small
// device record. By default (IndexChecks::deferred) the op does not wait: the IndexError is thrown
// at the next synchronization of the stream (cuda/deferred_checks.h). In immediate mode
// IndexChecker::check() reads the record back after the kernel (one synchronization) and throws as
// the CPU does; with checks off nothing is recorded.
#include "core/determinism.h"
#include "core/impl.h"
#include "cuda/block.cuh"
#include "cuda/index_plan.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {

// ---- index checks -------------------------------------------------------------------------------
IndexChecker::IndexChecker(int device, const char* op) : op_(op), device_(device) {
  switch (index_checks_mode()) {
    case IndexChecks::off: return;
    case IndexChecks::deferred: flag_ = deferred_check_slot(device, stream_for(device), &slot_); return;
    case IndexChecks::immediate: break;
  }
  buf_ = internal::make_empty({3}, DType::i64, Device::cuda(static_cast<int16_t>(device)));
  flag_ = static_cast<int64_t*>(buf_.data_ptr());
  NABLA_CUDA_CHECK(cudaMemsetAsync(flag_, 0, 3 * sizeof(int64_t), stream_for(device)));
}

namespace {
std::string out_of_range(const char* op, const int64_t* record, int64_t dim) {
  return internal::str(op, ": index ", record[1], " is out of range for dim ", dim, " of size ", record[2]);
}
}  // namespace

void IndexChecker::check(int64_t dim) {
  if (!flag_) return;
  if (slot_ >= 0) {  // deferred: reported when the stream is next synchronized
    arm_deferred_check(device_, slot_, [op = op_, dim](const int64_t* record) {
      if (record[0])
        throw IndexError(out_of_range(op, record, dim) +
                         " (found on the GPU and reported at this later synchronization; "
                         "cuda::set_index_checks(cuda::IndexChecks::immediate) or NABLA_CUDA_INDEX_CHECKS=sync "
                         "reports it at the op)");
    });
    slot_ = -1;
    return;
  }
  int64_t h[3] = {0, 0, 0};
  cudaStream_t s = stream_for(device_);
  NABLA_CUDA_CHECK(cudaMemcpyAsync(h, flag_, sizeof h, cudaMemcpyDeviceToHost, s));
  NABLA_CUDA_CHECK(cudaStreamSynchronize(s));
  if (h[0]) throw IndexError(out_of_range(op_, h, dim));
}

namespace {

// Wraps a negative index; false (and the first bad index recorded) when out of range.
__device__ __forceinline__ bool wrap_index(int64_t& v, int64_t n, int64_t* flag) {
  if (v < -n || v >= n) {
    if (flag && atomicCAS(reinterpret_cast<unsigned long long*>(flag), 0ull, 1ull) == 0ull) {
      flag[1] = v;
      flag[2] = n;
    }
    return false;
  }
  if (v < 0) v += n;
  return true;
}

constexpr int kIndexThreads = 256;

unsigned grid_for(int64_t n) {
  int64_t b = (n + kIndexThreads - 1) / kIndexThreads;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(b, 1), 1 << 20));
}

// Records the first out-of-range value of a contiguous index of m elements (for the ops that check
// every index before they write, or that have nothing to write).
__global__ void check_index_kernel(const int64_t* index, int64_t m, int64_t n, int64_t* flag) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < m; k += int64_t(gridDim.x) * blockDim.x) {
    int64_t v = index[k];
    wrap_index(v, n, flag);
  }
}

// Checks every element of a contiguous index against a dim of size n, throwing IndexError as the
// CPU does (nothing when index checks are off).
void check_indices(const Tensor& index, int64_t n, int64_t dim, IndexChecker& chk, cudaStream_t stream) {
  if (!chk.flag() || index.numel() == 0) return;
  check_index_kernel<<<grid_for(index.numel()), kIndexThreads, 0, stream>>>(
      static_cast<const int64_t*>(index.data_ptr()), index.numel(), n, chk.flag());
  NABLA_KERNEL_CHECK("check_index_kernel");
  chk.check(dim);
}

// out[o, j, i] = x[o, index[j], i] for contiguous x (outer, n, inner) and out (outer, m, inner);
// W moves one element.
template <class W>
__global__ void index_select_kernel(const W* x, const int64_t* index, W* out, int64_t outer, int64_t n, int64_t m,
                                    int64_t inner, int64_t* flag) {
  int64_t total = outer * m * inner;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total; k += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = k % inner, t = k / inner, j = t % m, o = t / m;
    int64_t v = index[j];
    if (!wrap_index(v, n, flag)) continue;
    out[k] = x[(o * n + v) * inner + i];
  }
}

// out[o, index[j], i] += src[o, j, i] (contiguous out and src).
template <class T>
__global__ void index_add_kernel(T* out, const int64_t* index, const T* src, int64_t outer, int64_t n, int64_t m,
                                 int64_t inner, int64_t* flag) {
  int64_t total = outer * m * inner;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total; k += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = k % inner, t = k / inner, j = t % m, o = t / m;
    int64_t v = index[j];
    if (!wrap_index(v, n, flag)) continue;
    atomic_add(out + (o * n + v) * inner + i, src[k]);
  }
}

// ---- deterministic accumulation (cuda/index_plan.h) ---------------------------------------------
// a + b in the precision of the CPU kernels (core/cpu/index.cpp).
template <class T>
__device__ __forceinline__ T ordered_add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (is_half_v<T>) return T(static_cast<float>(a) + static_cast<float>(b));
  else return static_cast<T>(a + b);
}

__global__ void wrap_indices_kernel(const int64_t* in, int64_t* out, int64_t count, int64_t n) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < count; k += int64_t(gridDim.x) * blockDim.x)
    out[k] = wrapped_index(in[k], n);
}

// out (outer, n, inner) += src (outer, m, inner) at the indices, each destination element adding its
// contributions in index order. Line o's wrapped indices, sorted, are sorted[o * ls, + m) and their
// positions order[o * ls, + m); ls = 0 shares one sorted index among all lines (index_add).
template <class T>
__global__ void add_ordered_kernel(T* out, const int64_t* sorted, const int64_t* order, int64_t ls, const T* src,
                                   int64_t outer, int64_t n, int64_t m, int64_t inner) {
  int64_t total = outer * n * inner;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total; k += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = k % inner, t = k / inner, v = t % n, o = t / n;
    IndexRun r = equal_run(sorted + o * ls, m, v);
    if (r.lo == r.hi) continue;
    const int64_t* pos = order + o * ls;
    T acc = out[k];
    for (int64_t s = r.lo; s < r.hi; ++s) acc = ordered_add(acc, src[(o * m + pos[s]) * inner + i]);
    out[k] = acc;
  }
}

// gather over (out, index, x line view): out = *(x_line + index * xs).
template <class W>
struct GatherFn {
  int64_t n, xs;
  int64_t* flag;
  __device__ void operator()(char** p) const {
    int64_t v = load<int64_t>(p[1]);
    if (!wrap_index(v, n, flag)) return;
    store<W>(p[0], load<W>(p[2] + v * xs));
  }
};

// scatter-add over (index, src, out line view).
template <class T>
struct ScatterAddFn {
  int64_t n, os;
  int64_t* flag;
  __device__ void operator()(char** p) const {
    int64_t v = load<int64_t>(p[0]);
    if (!wrap_index(v, n, flag)) return;
    atomic_add(reinterpret_cast<T*>(p[2] + v * os), load<T>(p[1]));
  }
};

// Deterministic scatter: the write whose index element comes last in memory wins, as on the CPU
// (which writes in that order). Pass 1 claims each destination with the largest key; pass 2 writes.
struct ScatterClaimFn {
  int64_t n, os, esize;
  const char* index_base;
  const char* out_base;
  long long* winner;
  int64_t* flag;
  __device__ void operator()(char** p) const {
    int64_t v = load<int64_t>(p[0]);
    if (!wrap_index(v, n, flag)) return;
    long long key = static_cast<long long>((p[0] - index_base) / 8);
    int64_t dst = (p[2] + v * os - out_base) / esize;
    atomicMax(winner + dst, key);
  }
};

template <class W>
struct ScatterWriteFn {
  int64_t n, os, esize;
  const char* index_base;
  const char* out_base;
  const long long* winner;
  __device__ void operator()(char** p) const {
    int64_t v = load<int64_t>(p[0]);
    if (v < -n || v >= n) return;
    if (v < 0) v += n;
    long long key = static_cast<long long>((p[0] - index_base) / 8);
    char* d = p[2] + v * os;
    if (winner[(d - out_base) / esize] == key) store<W>(d, load<W>(p[1]));
  }
};

// A view of `t` over `index`'s shape with stride 0 along `dim` (the start of each selected line).
Tensor line_view(const Tensor& t, const Tensor& index, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return internal::make_view(t, index.sizes(), strides, t.storage_offset());
}

template <class F>
void by_element_size(size_t es, F&& f) {
  switch (es) {
    case 1: return f(type_tag<uint8_t>{});
    case 2: return f(type_tag<uint16_t>{});
    case 4: return f(type_tag<uint32_t>{});
    case 8: return f(type_tag<uint64_t>{});
  }
  throw NotImplemented("CUDA indexing: unsupported element size");
}

// The wrapped indices of contiguous `index` sorted stably along its last dim, and their positions.
struct SortedIndex {
  Tensor values, order;
};
SortedIndex sort_index_lines(const Tensor& index, int64_t n, cudaStream_t stream) {
  Tensor w = internal::make_empty(index.sizes(), DType::i64, index.device());
  wrap_indices_kernel<<<grid_for(index.numel()), kIndexThreads, 0, stream>>>(
      static_cast<const int64_t*>(index.data_ptr()), static_cast<int64_t*>(w.data_ptr()), index.numel(), n);
  NABLA_KERNEL_CHECK("wrap_indices_kernel");
  SortedIndex r{internal::make_empty(index.sizes(), DType::i64, index.device()),
                internal::make_empty(index.sizes(), DType::i64, index.device())};
  cuda::sort(w, index.dim() - 1, /*descending=*/false, r.values, r.order);
  return r;
}

// Contiguous out (outer, n, inner) += contiguous src (outer, m, inner) in index order; `sorted` has
// one line of m indices per outer line (ls = m) or one for all (ls = 0).
void add_ordered(const Tensor& out, const SortedIndex& sorted, int64_t ls, const Tensor& src, int64_t outer, int64_t n,
                 int64_t m, int64_t inner, cudaStream_t stream) {
  if (outer * n * inner == 0 || m == 0) return;
  visit_cuda_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_ordered_kernel<T><<<grid_for(outer * n * inner), kIndexThreads, 0, stream>>>(
        static_cast<T*>(out.data_ptr()), static_cast<const int64_t*>(sorted.values.data_ptr()),
        static_cast<const int64_t*>(sorted.order.data_ptr()), ls, static_cast<const T*>(src.data_ptr()), outer, n, m,
        inner);
    NABLA_KERNEL_CHECK("add_ordered_kernel");
  });
}

// `t` seen with `sizes` (its own strides), `dim` moved last.
Tensor dim_last_view(const Tensor& t, IntArrayRef sizes, int64_t dim) {
  Shape sz, st;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d)
    if (d != dim) {
      sz.push_back(sizes[d]);
      st.push_back(t.strides()[d]);
    }
  sz.push_back(sizes[dim]);
  st.push_back(t.strides()[dim]);
  return internal::make_view(t, sz, st, t.storage_offset());
}

// ---- nonzero ------------------------------------------------------------------------------------
constexpr int kScanThreads = 256;
constexpr int kScanItems = 16;  // elements per thread
constexpr int64_t kScanChunk = int64_t(kScanThreads) * kScanItems;

template <class T>
__device__ __forceinline__ bool is_nonzero(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v) != 0.0f;
  else return v != T(0);
}

// counts[b] = number of nonzero elements in chunk b.
template <class T>
__global__ void count_nonzero_kernel(const T* x, int64_t n, int64_t* counts) {
  __shared__ int64_t shared[33];
  int64_t base = blockIdx.x * kScanChunk;
  int64_t c = 0;
  for (int k = 0; k < kScanItems; ++k) {
    int64_t i = base + int64_t(k) * kScanThreads + threadIdx.x;
    if (i < n && is_nonzero(x[i])) ++c;
  }
  c = block_reduce_x(
      c, [](int64_t a, int64_t b) { return a + b; }, int64_t(0), shared);
  if (threadIdx.x == 0) counts[blockIdx.x] = c;
}

// In place: counts -> exclusive prefix sums; total in counts[nb]. One block of 1024 threads.
__global__ void exclusive_scan_kernel(int64_t* counts, int64_t nb) {
  __shared__ int64_t shared[33];
  int64_t carry = 0;
  for (int64_t base = 0; base < nb; base += blockDim.x) {
    int64_t i = base + threadIdx.x;
    int64_t v = i < nb ? counts[i] : 0;
    int64_t total;
    int64_t inc = block_inclusive_scan(v, shared, &total);
    if (i < nb) counts[i] = carry + inc - v;
    carry += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[nb] = carry;
}

// Writes the coordinates of chunk b's nonzero elements at rows offsets[b] + rank.
template <class T>
__global__ void write_nonzero_kernel(const T* x, int64_t n, const int64_t* offsets, int64_t* out, int ndim,
                                     const int64_t* sizes_dev) {
  __shared__ int64_t shared[33];
  int64_t row = offsets[blockIdx.x];
  int64_t base = blockIdx.x * kScanChunk;
  for (int k = 0; k < kScanItems; ++k) {
    int64_t i = base + int64_t(k) * kScanThreads + threadIdx.x;
    int64_t f = (i < n && is_nonzero(x[i])) ? 1 : 0;
    int64_t total;
    int64_t inc = block_inclusive_scan(f, shared, &total);
    if (f) {
      int64_t r = row + inc - 1, rem = i;
      for (int d = ndim - 1; d >= 0; --d) {
        int64_t s = sizes_dev[d];
        out[r * ndim + d] = rem % s;
        rem /= s;
      }
    }
    row += total;
  }
}

}  // namespace

void index_select(const Tensor& x_in, int64_t dim, const Tensor& index_in, const Tensor& out) {
  DeviceScope ds(out);
  Tensor x = contiguous(x_in), index = contiguous(index_in);
  const auto [outer, n, inner] = internal::lines_of(x, dim);
  const int64_t m = index.numel();
  if (m == 0) return;
  IndexChecker chk(device_of(out), "index_select");
  if (outer * inner == 0) {  // nothing to copy, but the indices are still checked, as on the CPU
    check_indices(index, n, dim, chk, stream_of(out));
    return;
  }
  Tensor oc = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  by_element_size(x.element_size(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    index_select_kernel<W><<<grid_for(outer * m * inner), kIndexThreads, 0, stream_of(out)>>>(
        static_cast<const W*>(x.data_ptr()), static_cast<const int64_t*>(index.data_ptr()),
        static_cast<W*>(oc.data_ptr()), outer, n, m, inner, chk.flag());
    NABLA_KERNEL_CHECK("index_select_kernel");
  });
  chk.check(dim);
  if (!oc.is_same(out)) device_copy(oc, out);
}

void index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  DeviceScope ds(out);
  NABLA_CHECK(ValueError, out.is_contiguous(), "index_add: destination must be contiguous");
  Tensor index = contiguous(index_in), src = contiguous(src_in);
  const auto [outer, n, inner] = internal::lines_of(out, dim);
  const int64_t m = index.numel();
  if (m == 0) return;
  // Every index is checked before anything is added, so an error leaves `out` unchanged (as the CPU).
  IndexChecker chk(device_of(out), "index_add");
  check_indices(index, n, dim, chk, stream_of(out));
  if (outer * inner == 0) return;
  if (are_deterministic_algorithms_enabled()) {
    SortedIndex sorted =
        sort_index_lines(internal::make_view(index, {m}, {1}, index.storage_offset()), n, stream_of(out));
    add_ordered(out, sorted, /*ls=*/0, src, outer, n, m, inner, stream_of(out));
    return;
  }
  visit_cuda_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_kernel<T><<<grid_for(outer * m * inner), kIndexThreads, 0, stream_of(out)>>>(
        static_cast<T*>(out.data_ptr()), static_cast<const int64_t*>(index.data_ptr()),
        static_cast<const T*>(src.data_ptr()), outer, n, m, inner, nullptr);
    NABLA_KERNEL_CHECK("index_add_kernel");
  });
}

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  if (out.numel() == 0) return;
  DeviceScope ds(out);
  Tensor xv = x.dim() == 0 ? x : line_view(x, index, dim);
  int64_t n = x.dim() == 0 ? 1 : x.sizes()[dim];
  int64_t xs = x.dim() == 0 ? 0 : x.strides()[dim] * static_cast<int64_t>(x.element_size());
  IterPlan plan = plan_iter({&out, &index, &xv});
  IndexChecker chk(device_of(out), "gather");
  by_element_size(x.element_size(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    launch_elementwise<3>(plan, stream_of(out), GatherFn<W>{n, xs, chk.flag()});
  });
  chk.check(dim);
}

void scatter(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src, bool accumulate) {
  if (index_in.numel() == 0) return;
  DeviceScope ds(out);
  // The deterministic scatter tells writes apart by the index element's address: an expanded
  // (stride-0) index would give several writes one address, so it is made contiguous first.
  Tensor index = index_in;
  for (int64_t d = 0; d < index.dim() && !accumulate; ++d)
    if (index.sizes()[d] > 1 && index.strides()[d] == 0) {
      index = contiguous(index);
      break;
    }
  Tensor ov = out.dim() == 0 ? out : line_view(out, index, dim);
  int64_t n = out.dim() == 0 ? 1 : out.sizes()[dim];
  int64_t es = static_cast<int64_t>(out.element_size());
  int64_t os = out.dim() == 0 ? 0 : out.strides()[dim] * es;
  IterPlan plan = plan_iter({&index, &src, &ov});
  cudaStream_t stream = stream_of(out);
  if (accumulate && are_deterministic_algorithms_enabled()) return scatter_add_ordered(out, dim, index, src, true);
  IndexChecker chk(device_of(out), accumulate ? "scatter_add" : "scatter");
  if (accumulate) {
    visit_cuda_dtype(out.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      launch_elementwise<3>(plan, stream, ScatterAddFn<T>{n, os, chk.flag()});
    });
    chk.check(dim);
    return;
  }
  // The destination's span in elements (strides are non-negative in nabla).
  int64_t span = 1;
  for (int64_t d = 0; d < out.dim(); ++d) span += (out.sizes()[d] - 1) * out.strides()[d];
  Tensor winner = internal::make_empty({span}, DType::i64, out.device());
  NABLA_CUDA_CHECK(cudaMemsetAsync(winner.data_ptr(), 0xff, static_cast<size_t>(span) * 8, stream));  // -1
  const char* index_base = static_cast<const char*>(index.data_ptr());
  const char* out_base = static_cast<const char*>(out.data_ptr());
  auto* w = static_cast<long long*>(winner.data_ptr());
  launch_elementwise<3>(plan, stream, ScatterClaimFn{n, os, es, index_base, out_base, w, chk.flag()});
  chk.check(dim);
  by_element_size(out.element_size(), [&](auto tag) {
    using W = typename decltype(tag)::type;
    launch_elementwise<3>(plan, stream, ScatterWriteFn<W>{n, os, es, index_base, out_base, w});
  });
}

void scatter_add_ordered(const Tensor& out_in, int64_t dim, const Tensor& index_in, const Tensor& src_in,
                         bool check_index) {
  if (index_in.numel() == 0) return;
  DeviceScope ds(out_in);
  auto as_1d = [](const Tensor& t) { return t.dim() == 0 ? internal::make_view(t, {1}, {1}, t.storage_offset()) : t; };
  Tensor out = as_1d(out_in), index = as_1d(index_in), src = as_1d(src_in);
  cudaStream_t stream = stream_of(out);
  const int64_t n = out.sizes()[dim], m = index.sizes()[dim], lines = index.numel() / m;
  Shape out_sizes(index.sizes().begin(), index.sizes().end());
  out_sizes[dim] = n;
  // (lines, m) indices and values, (lines, n) destinations: the lines of `dim`, moved last.
  Tensor ic = contiguous(dim_last_view(index, index.sizes(), dim));
  Tensor sc = contiguous(dim_last_view(src, index.sizes(), dim));
  Tensor ov = dim_last_view(out, out_sizes, dim);
  if (check_index) {  // every index checked before anything is added
    IndexChecker chk(device_of(out), "scatter_add");
    check_indices(ic, n, dim, chk, stream);
  }
  Tensor oc = contiguous(ov);
  add_ordered(oc, sort_index_lines(ic, n, stream), /*ls=*/m, sc, lines, n, m, /*inner=*/1, stream);
  if (!oc.is_same(ov)) device_copy(oc, ov);
}

Tensor nonzero(const Tensor& x_in) {
  DeviceScope ds(x_in);
  Tensor x = contiguous(x_in);
  int64_t n = x.numel(), nd = x.dim();
  cudaStream_t stream = stream_of(x);
  if (n == 0) return internal::make_empty({0, nd}, DType::i64, x.device());
  int64_t nb = (n + kScanChunk - 1) / kScanChunk;
  NABLA_CHECK(NotImplemented, nb <= 0x7fffffff, "nonzero: tensor too large");
  Tensor counts = internal::make_empty({nb + 1}, DType::i64, x.device());
  auto* cp = static_cast<int64_t*>(counts.data_ptr());
  Tensor sizes_dev = internal::make_empty({std::max<int64_t>(nd, 1)}, DType::i64, x.device());
  if (nd > 0) {
    std::vector<int64_t> sz(x.sizes().begin(), x.sizes().end());
    NABLA_CUDA_CHECK(
        cudaMemcpyAsync(sizes_dev.data_ptr(), sz.data(), nd * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  }
  int64_t total = 0;
  Tensor out;
  visit_cuda_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    count_nonzero_kernel<T><<<static_cast<unsigned>(nb), kScanThreads, 0, stream>>>(xp, n, cp);
    NABLA_KERNEL_CHECK("count_nonzero_kernel");
    exclusive_scan_kernel<<<1, 1024, 0, stream>>>(cp, nb);
    NABLA_KERNEL_CHECK("exclusive_scan_kernel");
    NABLA_CUDA_CHECK(cudaMemcpyAsync(&total, cp + nb, sizeof total, cudaMemcpyDeviceToHost, stream));
    NABLA_CUDA_CHECK(cudaStreamSynchronize(stream));
    report_deferred_checks(device_of(x), stream);
    out = internal::make_empty({total, nd}, DType::i64, x.device());
    if (total > 0 && nd > 0) {
      write_nonzero_kernel<T><<<static_cast<unsigned>(nb), kScanThreads, 0, stream>>>(
          xp, n, cp, static_cast<int64_t*>(out.data_ptr()), static_cast<int>(nd),
          static_cast<const int64_t*>(sizes_dev.data_ptr()));
      NABLA_KERNEL_CHECK("write_nonzero_kernel");
    }
  });
  return out;
}

}  // namespace nabla::cuda
