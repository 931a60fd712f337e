// CPU reductions, arg-reductions, scans, sort/topk and softmax.
//
// reduce(): the kept dims and the reduced dims are each merged where memory allows, which turns
// almost every call into one of two fast shapes: a reduction over a contiguous inner run (rows)
// or over an outer dim with a contiguous inner block (columns, e.g. a bias gradient).
// Floating sums accumulate in double and integer sums in int64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/lowp.h"
#include "core/cpu/vmath.h"
#include "core/impl.h"
#include "core/parallel.h"
#include "core/reduce_dims.h"
#include "core/scalar_math.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

using Dims = internal::ReduceDims;

// Reduction operators: identity, combine (an input into an accumulator), merge (ReduceAlgebra).
template <ReduceOp OP, class T>
struct Reducer {
  using A = std::conditional_t<OP == ReduceOp::sum || OP == ReduceOp::prod, sum_acc_t<T>,
                               std::conditional_t<OP == ReduceOp::any || OP == ReduceOp::all, bool, T>>;
  using Algebra = ReduceAlgebra<OP, A>;
  static A identity() { return Algebra::identity(); }
  static A combine(A a, T v) {
    if constexpr (OP == ReduceOp::any || OP == ReduceOp::all) return Algebra::merge(a, static_cast<bool>(v));
    else return Algebra::merge(a, static_cast<A>(v));
  }
  static A merge(A a, A b) { return Algebra::merge(a, b); }
};

// Reduces n contiguous values (4 independent accumulators for speed and accuracy).
template <ReduceOp OP, class T, class R = Reducer<OP, T>>
typename R::A reduce_run(const T* p, int64_t n, int64_t stride) {
  using A = typename R::A;
  if constexpr (OP == ReduceOp::sum && std::is_floating_point_v<T>) {
    if (stride == 1) {
      // 16 double lanes: vectorizes (float -> double conversions included) and keeps the
      // accuracy of double accumulation.
      double lanes[16] = {};
      int64_t i = 0;
      for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) lanes[j] += static_cast<double>(p[i + j]);
      double total = 0;
      for (int j = 0; j < 16; ++j) total += lanes[j];
      for (; i < n; ++i) total += p[i];
      return total;
    }
  }
  if (stride == 1) {
    A a0 = R::identity(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      a0 = R::combine(a0, p[i]);
      a1 = R::combine(a1, p[i + 1]);
      a2 = R::combine(a2, p[i + 2]);
      a3 = R::combine(a3, p[i + 3]);
    }
    for (; i < n; ++i) a0 = R::combine(a0, p[i]);
    return R::merge(R::merge(a0, a1), R::merge(a2, a3));
  }
  A a = R::identity();
  for (int64_t i = 0; i < n; ++i) a = R::combine(a, p[i * stride]);
  return a;
}

template <ReduceOp OP, class T, class O>
void reduce_typed(const Tensor& x, const internal::DimMask& mask, const Tensor& out) {
  using R = Reducer<OP, T>;
  using A = typename R::A;
  const T* xp = static_cast<const T*>(x.data_ptr());
  O* op = static_cast<O*>(out.data_ptr());
  Dims kept, red;
  for (int64_t d = 0; d < x.dim(); ++d) {
    Dims& t = mask[d] ? red : kept;
    t.size.push_back(x.sizes()[d]);
    t.xstride.push_back(x.strides()[d]);
    t.ostride.push_back(mask[d] ? 0 : out.strides()[d]);
  }
  kept = internal::coalesce_dims(kept);
  red = internal::coalesce_dims(red);
  if (red.size.empty()) {  // only size-1 dims reduced: each output is one element
    red.size.push_back(1);
    red.xstride.push_back(0);
    red.ostride.push_back(0);
  }
  int64_t nout = 1, nred = 1;
  for (int64_t s : kept.size) nout *= s;
  for (int64_t s : red.size) nred *= s;

  // Offsets of the reduced sub-space, used by the general path.
  auto red_offset = [&](int64_t r) {
    int64_t off = 0;
    for (size_t k = red.size.size(); k-- > 0;) {
      off += (r % red.size[k]) * red.xstride[k];
      r /= red.size[k];
    }
    return off;
  };
  auto kept_offsets = [&](int64_t o, int64_t& xo, int64_t& oo) {
    xo = 0;
    oo = 0;
    for (size_t k = kept.size.size(); k-- > 0;) {
      int64_t i = o % kept.size[k];
      xo += i * kept.xstride[k];
      oo += i * kept.ostride[k];
      o /= kept.size[k];
    }
  };

  if (nout == 1) {
    // Everything reduced: fixed blocks combined in order, so the result does not depend on threads.
    constexpr int64_t kBlock = 16384;
    int64_t nblocks = (nred + kBlock - 1) / kBlock;
    bool flat = red.size.size() <= 1;
    int64_t st = red.size.empty() ? 1 : red.xstride[0];
    SmallVector<A, 64> partial(static_cast<size_t>(std::max<int64_t>(nblocks, 1)), R::identity());
    parallel_for(0, nblocks, 4, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t s = b * kBlock, e = std::min(nred, s + kBlock);
        if (flat) {
          partial[b] = reduce_run<OP, T>(xp + s * st, e - s, st);
        } else {
          // Runs along the innermost reduced dim, cut at block boundaries.
          int64_t inner = red.size.back(), ist = red.xstride.back();
          A a = R::identity();
          for (int64_t r = s; r < e;) {
            int64_t within = r % inner, len = std::min(inner - within, e - r);
            a = R::merge(a, reduce_run<OP, T>(xp + red_offset(r), len, ist));
            r += len;
          }
          partial[b] = a;
        }
      }
    });
    A a = R::identity();
    for (int64_t b = 0; b < nblocks; ++b) a = R::merge(a, partial[b]);
    op[0] = static_cast<O>(a);
    return;
  }

  if (red.size.size() == 1 && red.xstride[0] == 1) {
    // Rows: each output reduces a contiguous run.
    int64_t n = red.size[0];
    parallel_for(0, nout, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        int64_t xo, oo;
        kept_offsets(o, xo, oo);
        op[oo] = static_cast<O>(reduce_run<OP, T>(xp + xo, n, 1));
      }
    });
    return;
  }

  if (kept.size.size() == 1 && kept.xstride[0] == 1 && red.size.size() == 1) {
    // Columns: out[j] = reduce_i x[i * s + j], vectorized across j with a per-thread accumulator row.
    int64_t n = kept.size[0], m = red.size[0], s = red.xstride[0], os = kept.ostride[0];
    parallel_for(0, n, std::max<int64_t>(64, 32768 / std::max<int64_t>(m, 1)), [&](int64_t b, int64_t e) {
      SmallVector<A, 512> acc(static_cast<size_t>(e - b), R::identity());
      A* ap = acc.data();
      for (int64_t i = 0; i < m; ++i) {
        const T* row = xp + i * s + b;
        for (int64_t j = 0; j < e - b; ++j) ap[j] = R::combine(ap[j], row[j]);
      }
      for (int64_t j = b; j < e; ++j) op[j * os] = static_cast<O>(acc[j - b]);
    });
    return;
  }

  // General case: the innermost reduced dim is reduced as a run; the other reduced dims are
  // walked with an odometer over their indices.
  const int64_t inner = red.size.back(), inner_stride = red.xstride.back();
  const int nouter = static_cast<int>(red.size.size()) - 1;
  parallel_for(0, nout, std::max<int64_t>(1, 16384 / std::max<int64_t>(nred, 1)), [&](int64_t b, int64_t e) {
    SmallVector<int64_t, 8> idx(static_cast<size_t>(std::max(nouter, 1)), 0);
    for (int64_t o = b; o < e; ++o) {
      int64_t xo, oo;
      kept_offsets(o, xo, oo);
      A a = R::identity();
      std::fill(idx.begin(), idx.end(), 0);
      int64_t off = 0;
      for (int64_t r = 0; r < nred / inner; ++r) {
        a = R::merge(a, reduce_run<OP, T>(xp + xo + off, inner, inner_stride));
        for (int d = nouter - 1; d >= 0; --d) {  // advance the odometer
          off += red.xstride[d];
          if (++idx[d] < red.size[d]) break;
          off -= red.xstride[d] * red.size[d];
          idx[d] = 0;
        }
      }
      op[oo] = static_cast<O>(a);
    }
  });
}

template <ReduceOp OP>
void reduce_dispatch(const Tensor& x, const internal::DimMask& mask, const Tensor& out) {
  visit_compute_dtype(x.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (OP == ReduceOp::any || OP == ReduceOp::all) {
      reduce_typed<OP, T, bool>(x, mask, out);
    } else {
      NABLA_CHECK(DTypeError, out.dtype() == x.dtype(), "reduce: output dtype ", out.dtype(), " differs from input ",
                  x.dtype());
      reduce_typed<OP, T, T>(x, mask, out);
    }
  });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out) {
  internal::DimMask mask = internal::dims_mask(dims, x.dim(), "reduce");
  if (out.numel() == 0) return;
  if (x.numel() == 0) {
    // Reducing an empty set gives the identity (sum 0, prod 1, any false, all true).
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::any: fill(out, 0); return;
      case ReduceOp::prod:
      case ReduceOp::all: fill(out, 1); return;
      default: throw ValueError("max/min: cannot reduce an empty tensor (the result has no identity)");
    }
  }
  if (lowp::is_lowp(x.dtype())) {
    Tensor o32 = f32_out(out);
    reduce(op, as_f32(x), dims, o32);
    return store_out(o32, out);
  }
  switch (op) {
    case ReduceOp::sum: return reduce_dispatch<ReduceOp::sum>(x, mask, out);
    case ReduceOp::prod: return reduce_dispatch<ReduceOp::prod>(x, mask, out);
    case ReduceOp::max: return reduce_dispatch<ReduceOp::max>(x, mask, out);
    case ReduceOp::min: return reduce_dispatch<ReduceOp::min>(x, mask, out);
    case ReduceOp::any: return reduce_dispatch<ReduceOp::any>(x, mask, out);
    case ReduceOp::all: return reduce_dispatch<ReduceOp::all>(x, mask, out);
  }
}

// ---- along one dim: lines of a contiguous tensor ------------------------------------------------
namespace {
using internal::Lines;
using internal::lines_of;
// Calls f(line_start_offset, stride) for every line along dim, in parallel.
template <class F>
void for_lines(const Lines& l, const F& f) {
  int64_t nlines = l.outer * l.inner;
  parallel_for(0, nlines, std::max<int64_t>(1, 16384 / std::max<int64_t>(l.len, 1)), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t o = k / l.inner, i = k % l.inner;
      f(o * l.len * l.inner + i, l.inner);
    }
  });
}
template <class T>
bool greater_nan(T a, T b) {  // a > b, with NaN largest
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return b == b;
    if (b != b) return false;
  }
  return a > b;
}
}  // namespace

void arg_reduce(ReduceOp op, const Tensor& x_in, int64_t dim, const Tensor& values, const Tensor& indices) {
  if (lowp::is_lowp(x_in.dtype())) {
    Tensor v32 = f32_out(values);
    arg_reduce(op, as_f32(x_in), dim, v32, indices);
    return store_out(v32, values);
  }
  Tensor x = contig(x_in);
  if (x.dim() == 0) dim = 0;
  Lines l = lines_of(x, dim);
  NABLA_CHECK(IndexError, l.len > 0, op == ReduceOp::max ? "max" : "min", ": cannot reduce over an empty dim ", dim,
              " of shape ", x.sizes());
  Tensor vc = contig(values), ic = contig(indices);
  visit_compute_dtype(x.dtype(), "argmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(vc.data_ptr());
    int64_t* ip = ic.data_ptr<int64_t>();
    bool is_max = op == ReduceOp::max;
    for_lines(l, [&](int64_t start, int64_t st) {
      const T* p = xp + start;
      int64_t best = 0;
      T bv = p[0];
      for (int64_t j = 1; j < l.len; ++j) {
        T v = p[j * st];
        if constexpr (std::is_floating_point_v<T>) {
          if (bv != bv) break;  // NaN wins and stays
          if (v != v) {
            bv = v;
            best = j;
            break;
          }
        }
        if (is_max ? v > bv : v < bv) {
          bv = v;
          best = j;
        }
      }
      int64_t out_idx = (start / (l.len * l.inner)) * l.inner + start % l.inner;
      vp[out_idx] = bv;
      ip[out_idx] = best;
    });
  });
  if (!vc.is_same(values)) copy(vc, values);
  if (!ic.is_same(indices)) copy(ic, indices);
}

void scan(ScanOp op, const Tensor& x_in, int64_t dim, const Tensor& out) {
  if (lowp::is_lowp(x_in.dtype())) {
    Tensor o32 = f32_out(out);
    scan(op, as_f32(x_in), dim, o32);
    return store_out(o32, out);
  }
  Tensor x = contig(x_in);
  if (x.numel() == 0) return;
  if (x.dim() == 0) dim = 0;
  Lines l = lines_of(x, dim);
  Tensor oc = contig(out);
  visit_compute_dtype(x.dtype(), "cumsum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = sum_acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(oc.data_ptr());
    for_lines(l, [&](int64_t start, int64_t st) {
      A a = op == ScanOp::cumsum ? A(0) : A(1);
      for (int64_t j = 0; j < l.len; ++j) {
        if (op == ScanOp::cumsum) a = a + static_cast<A>(xp[start + j * st]);
        else a = a * static_cast<A>(xp[start + j * st]);
        yp[start + j * st] = static_cast<T>(a);
      }
    });
  });
  if (!oc.is_same(out)) copy(oc, out);
}

namespace {
template <class T>
void sort_line(const T* p, int64_t len, int64_t st, bool descending, std::vector<int64_t>& idx, int64_t k,
               bool partial) {
  idx.resize(len);
  std::iota(idx.begin(), idx.end(), int64_t(0));
  auto cmp = [&](int64_t a, int64_t b) {
    T va = p[a * st], vb = p[b * st];
    return descending ? greater_nan(va, vb) : greater_nan(vb, va);
  };
  if (partial)
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int64_t a, int64_t b) { return cmp(a, b) || (!cmp(b, a) && a < b); });
  else std::stable_sort(idx.begin(), idx.end(), cmp);
}
}  // namespace

void sort(const Tensor& x_in, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  if (lowp::is_lowp(x_in.dtype())) {
    Tensor v32 = f32_out(values);
    sort(as_f32(x_in), dim, descending, v32, indices);
    return store_out(v32, values);
  }
  Tensor x = contig(x_in);
  if (x.numel() == 0) return;
  if (x.dim() == 0) dim = 0;
  Lines l = lines_of(x, dim);
  Tensor vc = contig(values), ic = contig(indices);
  visit_compute_dtype(x.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(vc.data_ptr());
    int64_t* ip = ic.data_ptr<int64_t>();
    for_lines(l, [&](int64_t start, int64_t st) {
      thread_local std::vector<int64_t> idx;
      sort_line(xp + start, l.len, st, descending, idx, l.len, false);
      for (int64_t j = 0; j < l.len; ++j) {
        vp[start + j * st] = xp[start + idx[j] * st];
        ip[start + j * st] = idx[j];
      }
    });
  });
  if (!vc.is_same(values)) copy(vc, values);
  if (!ic.is_same(indices)) copy(ic, indices);
}

void topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices) {
  if (lowp::is_lowp(x_in.dtype())) {
    Tensor v32 = f32_out(values);
    topk(as_f32(x_in), k, dim, largest, v32, indices);
    return store_out(v32, values);
  }
  Tensor x = contig(x_in);
  if (x.dim() == 0) dim = 0;
  Lines l = lines_of(x, dim);
  if (k == 0 || l.outer * l.inner == 0) return;
  Tensor vc = contig(values), ic = contig(indices);
  visit_compute_dtype(x.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* vp = static_cast<T*>(vc.data_ptr());
    int64_t* ip = ic.data_ptr<int64_t>();
    for_lines(l, [&](int64_t start, int64_t st) {
      thread_local std::vector<int64_t> idx;
      sort_line(xp + start, l.len, st, largest, idx, k, true);
      int64_t ostart = (start / (l.len * l.inner)) * k * l.inner + start % l.inner;
      for (int64_t j = 0; j < k; ++j) {
        vp[ostart + j * st] = xp[start + idx[j] * st];
        ip[ostart + j * st] = idx[j];
      }
    });
  });
  if (!vc.is_same(values)) copy(vc, values);
  if (!ic.is_same(indices)) copy(ic, indices);
}

namespace {

// softmax / log_softmax of one contiguous float32 line, in loops the compiler vectorizes: the max
// over 16 lanes, exp_f32 (a few ulp) stored into y, the sum in float64 lanes. A NaN anywhere makes
// the sum NaN and so every output, as in the general loop below.
void softmax_line_f32(const float* p, float* y, int64_t n, bool log) {
  constexpr int64_t L = 16;
  float lane_max[L];
  for (int64_t k = 0; k < L; ++k) lane_max[k] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + L <= n; j += L)
    for (int64_t k = 0; k < L; ++k) lane_max[k] = p[j + k] > lane_max[k] ? p[j + k] : lane_max[k];
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < L; ++k) m = std::max(m, lane_max[k]);
  for (; j < n; ++j) m = std::max(m, p[j]);
  if (m == -std::numeric_limits<float>::infinity()) m = 0;  // all -inf: avoid inf - inf
  for (j = 0; j < n; ++j) y[j] = vmath::exp_f32(p[j] - m);
  double lane_sum[8] = {};
  for (j = 0; j + 8 <= n; j += 8)
    for (int64_t k = 0; k < 8; ++k) lane_sum[k] += static_cast<double>(y[j + k]);
  double sum = 0;
  for (; j < n; ++j) sum += y[j];
  for (double s : lane_sum) sum += s;
  if (log) {
    // (x - max) - log(sum): see the general loop.
    const float log_sum = static_cast<float>(std::log(sum));
    for (j = 0; j < n; ++j) y[j] = (p[j] - m) - log_sum;
  } else {
    const float inv = static_cast<float>(1.0 / sum);
    for (j = 0; j < n; ++j) y[j] *= inv;
  }
}

}  // namespace

void softmax(const Tensor& x_in, int64_t dim, bool log, const Tensor& out) {
  if (lowp::is_lowp(x_in.dtype())) {
    Tensor o32 = f32_out(out);
    softmax(as_f32(x_in), dim, log, o32);
    return store_out(o32, out);
  }
  Tensor x = contig(x_in);
  if (x.numel() == 0) return;
  if (x.dim() == 0) dim = 0;
  Lines l = lines_of(x, dim);
  Tensor oc = contig(out);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(oc.data_ptr());
    for_lines(l, [&](int64_t start, int64_t st) {
      const T* p = xp + start;
      T* y = yp + start;
      if constexpr (std::is_same_v<T, float>) {
        if (st == 1) return softmax_line_f32(p, y, l.len, log);
      }
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < l.len; ++j) m = scalar::max(m, p[j * st]);
      if (m == -std::numeric_limits<T>::infinity()) m = 0;  // all -inf: avoid inf - inf
      double sum = 0;
      if (log) {
        for (int64_t j = 0; j < l.len; ++j) sum += std::exp(static_cast<double>(p[j * st] - m));
        // (x - max) - log(sum), not x - (max + log(sum)): for large x the rounding of max + log(sum)
        // would cost digits (1000 + 2.4076 keeps only 4 decimals in float32).
        T log_sum = static_cast<T>(std::log(sum));
        for (int64_t j = 0; j < l.len; ++j) y[j * st] = (p[j * st] - m) - log_sum;
      } else {
        for (int64_t j = 0; j < l.len; ++j) {
          T e = std::exp(p[j * st] - m);
          y[j * st] = e;
          sum += e;
        }
        T inv = static_cast<T>(1.0 / sum);
        for (int64_t j = 0; j < l.len; ++j) y[j * st] *= inv;
      }
    });
  };
  if (x.dtype() == DType::f32) run(type_tag<float>{});
  else if (x.dtype() == DType::f64) run(type_tag<double>{});
  else throw DTypeError(internal::str("softmax: expected a floating tensor, got ", x.dtype()));
  if (!oc.is_same(out)) copy(oc, out);
}

void softmax_backward(const Tensor& g_in, const Tensor& y_in, int64_t dim, bool log, const Tensor& out) {
  if (lowp::is_lowp(g_in.dtype()) || lowp::is_lowp(y_in.dtype())) {
    Tensor o32 = f32_out(out);
    softmax_backward(as_f32(g_in), as_f32(y_in), dim, log, o32);
    return store_out(o32, out);
  }
  Tensor g = contig(g_in), y = contig(y_in);
  if (g.numel() == 0) return;
  if (g.dim() == 0) dim = 0;
  Lines l = lines_of(g, dim);
  Tensor oc = contig(out);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* yp = static_cast<const T*>(y.data_ptr());
    T* op = static_cast<T*>(oc.data_ptr());
    for_lines(l, [&](int64_t s, int64_t st) {
      double dot = 0;
      if (log) {
        // d log_softmax: g - softmax * sum(g)
        for (int64_t j = 0; j < l.len; ++j) dot += gp[s + j * st];
        if constexpr (std::is_same_v<T, float>) {
          if (st == 1) {  // vectorized exp (a few ulp)
            const float* gl = gp + s;
            const float* yl = yp + s;
            float* ol = op + s;
            const float d = static_cast<float>(dot);
            for (int64_t j = 0; j < l.len; ++j) ol[j] = gl[j] - vmath::exp_f32(yl[j]) * d;
            return;
          }
        }
        for (int64_t j = 0; j < l.len; ++j)
          op[s + j * st] = gp[s + j * st] - std::exp(yp[s + j * st]) * static_cast<T>(dot);
      } else {
        // d softmax: y * (g - sum(g * y))
        for (int64_t j = 0; j < l.len; ++j) dot += static_cast<double>(gp[s + j * st]) * yp[s + j * st];
        for (int64_t j = 0; j < l.len; ++j) op[s + j * st] = yp[s + j * st] * (gp[s + j * st] - static_cast<T>(dot));
      }
    });
  };
  if (g.dtype() == DType::f32) run(type_tag<float>{});
  else if (g.dtype() == DType::f64) run(type_tag<double>{});
  else throw DTypeError(internal::str("softmax_backward: expected a floating tensor, got ", g.dtype()));
  if (!oc.is_same(out)) copy(oc, out);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
