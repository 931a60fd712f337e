// Front-ends of core/math_ops.h (median, quantile, cummax, logcumsumexp, histc, bincount,
// searchsorted, unique, ...) and the composite elementwise ops nan_to_num and div(rounding_mode).
// How each runs (composite, or host loop + gather) is said in math_ops.h.
#include "core/math_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/trace.h"

namespace nabla {
namespace internal {
Tensor polygamma(const Tensor& x, double p0, double p1);  // generated from NABLA_UNARY_PARAM_OPS (elementwise.cpp)
}  // namespace internal
namespace {

using internal::make_empty;

// NaN-aware order: NaN is the largest value (PyTorch's sort, kthvalue, median).
template <class T>
bool less_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return false;
    if (b != b) return true;
  }
  return a < b;
}
template <class T>
bool is_nan_v(T a) {
  if constexpr (std::is_floating_point_v<T>) return a != a;
  else return false;
}

// x with dim d moved last, contiguous, on the host (16-bit floats as float32: order is kept).
// A 0-d tensor is one line of one element.
Tensor host_lines(const Tensor& x, int64_t d) {
  autograd::NoGradGuard ng;
  Tensor xl = x.dim() == 0 ? x.reshape({1}) : x.movedim(d, -1);
  Tensor h = xl.contiguous().cpu();
  if (is_reduced_float(h.dtype())) h = h.to(DType::f32);
  return h.contiguous();
}

// Per line of x along dim d: the int64 index pick(row, n) returns; shape of x with dim d of size 1,
// on x's device. `pick` is called with a typed pointer to a contiguous line.
template <class Pick>
Tensor pick_indices(const Tensor& x, int64_t d, const char* op, Pick pick) {
  autograd::NoGradGuard ng;
  Tensor h = host_lines(x, d);
  const int64_t n = h.size(-1);
  Shape shape(h.sizes().begin(), h.sizes().end());
  shape.back() = 1;
  Tensor idx = make_empty(shape, DType::i64, kCPU);
  const int64_t rows = idx.numel();
  if (rows > 0 && n > 0) {
    visit_compute_dtype(h.dtype(), op, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = h.data_ptr<T>();
      int64_t* o = idx.data_ptr<int64_t>();
      for (int64_t r = 0; r < rows; ++r) o[r] = pick(p + r * n, n);
    });
  }
  if (x.dim() == 0) return idx.reshape({}).to(x.device());
  return idx.movedim(-1, d).to(x.device());
}

// The values at `idx` (x's shape with dim d of size 1) through gather, so their gradient is
// gather's: scattered to the chosen elements. keepdim false drops dim d.
std::tuple<Tensor, Tensor> take(const Tensor& x, int64_t d, Tensor idx, bool keepdim) {
  Tensor v;
  if (x.dim() == 0) {
    v = gather(x.reshape({1}), 0, idx.reshape({1})).reshape({});
    return {v, idx};
  }
  v = gather(x, d, idx);
  if (!keepdim) {
    v = v.squeeze(d);
    idx = idx.squeeze(d);
  }
  return {v, idx};
}

void check_nonempty_dim(const Tensor& x, int64_t d, const char* op) {
  if (x.dim() == 0) return;
  NABLA_CHECK(IndexError, x.size(d) > 0, op, ": cannot reduce over dimension ", d, " of size 0 (input shape ",
              x.sizes(), ")");
}

// Element k (0-based) of the line in the order (value with NaN largest, then index): the same
// element as a stable sort's position k.
template <class T>
int64_t kth_index(const T* row, int64_t n, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t i, int64_t j) {
    if (less_nan(row[i], row[j])) return true;
    if (less_nan(row[j], row[i])) return false;
    return i < j;
  });
  return idx[static_cast<size_t>(k)];
}

template <class T>
int64_t median_index(const T* row, int64_t n, bool ignore_nan) {
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (is_nan_v(row[i])) {
      if (!ignore_nan) return i;  // median: the first NaN
      ++nans;
    }
  }
  if (nans == n) return 0;  // nanmedian of all-NaN: NaN (the first element)
  return kth_index(row, n, (n - nans - 1) / 2);
}

// The whole-tensor forms: the value, with the gradient spread evenly over the elements equal to it
// (NaN: over the NaNs), as PyTorch's evenly_distribute_backward.
Tensor whole_median(const Tensor& x, bool ignore_nan, const char* op) {
  NABLA_CHECK(DTypeError, x.dtype() != DType::boolean, op, ": not implemented for bool tensors");
  Tensor flat = x.reshape({-1});
  if (flat.numel() == 0) {
    NABLA_CHECK(DTypeError, is_floating(x.dtype()), op, ": an empty integer tensor has no median");
    return full({}, std::numeric_limits<double>::quiet_NaN(), TensorOptions().dtype(x.dtype()).device(x.device())) +
           sum(flat) * 0;
  }
  Tensor i = pick_indices(flat, 0, op, [&](const auto* row, int64_t n) { return median_index(row, n, ignore_nan); });
  Tensor m;
  {
    autograd::NoGradGuard ng;
    m = gather(flat, 0, i).reshape({});
  }
  if (!autograd::needs_grad(x)) return m;
  Tensor mask = is_floating(x.dtype()) ? logical_or(eq(flat.detach(), m), logical_and(isnan(flat.detach()), isnan(m)))
                                       : eq(flat.detach(), m);
  Tensor count = sum(mask.to(x.dtype()));
  // m + sum over the tied elements of (x - m) / count: the value is m exactly, the gradient g / count.
  return m + sum(where(mask, flat - m, zeros_like(flat))) / count;
}

std::tuple<Tensor, Tensor> dim_median(const Tensor& x, int64_t dim, bool keepdim, bool ignore_nan, const char* op) {
  NABLA_CHECK(DTypeError, x.dtype() != DType::boolean, op, ": not implemented for bool tensors");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  check_nonempty_dim(x, d, op);
  Tensor i = pick_indices(x, d, op, [&](const auto* row, int64_t n) { return median_index(row, n, ignore_nan); });
  return take(x, d, i, keepdim);
}

// mode of one line: the smallest of the most frequent values, the last index where it occurs.
template <class T>
int64_t mode_index(const T* row, int64_t n) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t i, int64_t j) { return less_nan(row[i], row[j]); });
  int64_t best = idx[0], best_freq = 0, freq = 0;
  for (int64_t k = 0; k < n; ++k) {
    ++freq;
    const bool run_ends = k == n - 1 || !(row[idx[k]] == row[idx[k + 1]]);
    if (run_ends) {
      if (freq > best_freq) {
        best_freq = freq;
        best = idx[k];  // the stable sort leaves the run in index order: its last is the latest
      }
      freq = 0;
    }
  }
  return best;
}

// ---- quantile -----------------------------------------------------------------------------------
enum class Interp { linear, lower, higher, nearest, midpoint };

Interp parse_interp(std::string_view s, const char* op) {
  if (s == "linear") return Interp::linear;
  if (s == "lower") return Interp::lower;
  if (s == "higher") return Interp::higher;
  if (s == "nearest") return Interp::nearest;
  if (s == "midpoint") return Interp::midpoint;
  throw ValueError(
      internal::str(op, ": interpolation must be one of linear, lower, higher, midpoint or nearest, got '", s, "'"));
}

Tensor quantile_impl(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                     std::string_view interpolation, bool ignore_nan, const char* op) {
  NABLA_CHECK(ValueError, x.defined() && q.defined(), op, ": undefined tensor");
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), op, ": input must be a floating tensor, got ", x.dtype());
  NABLA_CHECK(DTypeError, q.dtype() == x.dtype(), op, ": q (", q.dtype(), ") must have the input's dtype (", x.dtype(),
              ")");
  NABLA_CHECK(ShapeError, q.dim() <= 1, op, ": q must be a scalar or a 1-D tensor, got shape ", q.sizes());
  NABLA_CHECK(ValueError, x.numel() > 0, op, ": input tensor must be non-empty");
  NABLA_CHECK(DeviceError, q.device() == x.device(), op, ": q is on ", q.device(), " but the input on ", x.device());
  const Interp interp = parse_interp(interpolation, op);
  {
    autograd::NoGradGuard ng;
    if (q.numel() > 0) {
      Tensor qd = q.detach().to(DType::f64).cpu();
      const double lo = min(qd).item<double>(), hi = max(qd).item<double>();
      NABLA_CHECK(ValueError, lo >= 0 && hi <= 1, op, ": q values must be in the range [0, 1], got [", lo, ", ", hi,
                  "]");
    }
  }
  // sorted: (R..., n), the reduced dim last.
  Tensor lines;
  Shape out_shape;  // the result's shape without q's dim
  if (!dim) {
    lines = x.reshape({-1});
    if (keepdim) out_shape.assign(static_cast<size_t>(x.dim()), 1);
  } else {
    const int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), op);
    NABLA_CHECK(IndexError, x.dim() == 0 || x.size(d) > 0, op, ": cannot reduce over dimension ", d, " of size 0");
    lines = x.dim() == 0 ? x.reshape({1}) : x.movedim(d, -1);
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (i != d) out_shape.push_back(x.size(i));
      else if (keepdim) out_shape.push_back(1);
    }
  }
  Tensor sorted = std::get<0>(sort(lines, -1));
  const int64_t n = sorted.size(-1);
  Shape qshape(static_cast<size_t>(sorted.dim()), 1);
  qshape.back() = q.dim() == 0 ? 1 : q.size(0);
  Tensor qv = q.detach().reshape(qshape);
  Tensor ranks;
  {
    autograd::NoGradGuard ng;
    Tensor nan = isnan(sorted.detach());
    if (ignore_nan) {
      Tensor valid = sum(logical_not(nan), {-1}, true).to(x.dtype());
      ranks = qv * (valid - 1);
      ranks = where(ranks < 0, zeros_like(ranks), ranks);
    } else {
      Tensor r = qv * static_cast<double>(n - 1);
      Tensor any_nan = any(nan, -1, true);
      auto bt = broadcast_tensors({r, any_nan});
      ranks = where(bt[1], full_like(bt[0], static_cast<double>(n - 1)), bt[0]);
    }
    if (interp == Interp::lower) ranks = floor(ranks);
    else if (interp == Interp::higher) ranks = ceil(ranks);
    else if (interp == Interp::nearest) ranks = round(ranks);
  }
  Tensor below_idx = ranks.to(DType::i64);  // ranks: (R..., Q), the leading dims of sorted
  Tensor result = gather(sorted, -1, below_idx);
  if (interp == Interp::linear || interp == Interp::midpoint) {
    Tensor w;
    Tensor above_idx;
    {
      autograd::NoGradGuard ng;
      w = interp == Interp::midpoint ? full_like(ranks, 0.5) : ranks - below_idx.to(ranks.dtype());
      above_idx = ceil(ranks).to(DType::i64);
    }
    Tensor above = gather(sorted, -1, above_idx);
    // PyTorch's lerp: a + w (b - a) for w < 0.5, b - (b - a)(1 - w) otherwise.
    Tensor diff = above - result;
    result = where(w < 0.5, result + w * diff, above - diff * (1 - w));
  }
  // result: (R..., Q) -> (Q, out_shape...)
  result = result.movedim(-1, 0);
  Shape final_shape;
  if (q.dim() == 1) final_shape.push_back(result.size(0));
  for (int64_t s : out_shape) final_shape.push_back(s);
  return result.reshape(final_shape);
}

// Binary search of PyTorch's searchsorted: the first position in [0, n) whose value is >= v (left)
// or > v (right); through sorter when given.
template <class T>
int64_t search(const T* seq, const int64_t* sorter, int64_t n, T v, bool right) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const T m = sorter ? seq[sorter[mid]] : seq[mid];
    const bool go_right = right ? !(m > v) : !(m >= v);
    if (go_right) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

Tensor to_host_contiguous(const Tensor& t) {
  autograd::NoGradGuard ng;
  return t.detach().contiguous().cpu().contiguous();
}

}  // namespace

// ---- composite elementwise ----------------------------------------------------------------------
Tensor polygamma(int64_t n, const Tensor& x) {
  NABLA_CHECK(ValueError, n >= 0, "polygamma: n must be non-negative, got ", n);
  return internal::polygamma(x, static_cast<double>(n), 0);
}

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  NABLA_CHECK(ValueError, x.defined(), "nan_to_num: input tensor is undefined");
  if (!is_floating(x.dtype())) return x.clone();
  double big = std::numeric_limits<double>::max();
  if (x.dtype() == DType::f32) big = std::numeric_limits<float>::max();
  else if (x.dtype() == DType::f16) big = 65504.0;
  else if (x.dtype() == DType::bf16) big = 3.3895313892515355e38;
  const double pv = posinf.value_or(big), nv = neginf.value_or(-big), qv = nan.value_or(0.0);
  Tensor inf = isinf(x);
  return where(isnan(x), Scalar(qv), where(logical_and(inf, x > 0), Scalar(pv), where(inf, Scalar(nv), x)));
}

Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode) return div(a, b);
  if (*rounding_mode == "floor") return floor_divide(a, b);
  NABLA_CHECK(ValueError, *rounding_mode == "trunc",
              "div: expected rounding_mode to be one of None, 'trunc', or 'floor' ", "but found '", *rounding_mode,
              "'");
  const DType dt = internal::result_type(a, b);
  if (is_floating(dt)) {
    // trunc(a / b) with a zero gradient of its own (as PyTorch's): through div it would be 0 / b, NaN
    // where b is 0.
    Tensor q;
    {
      autograd::NoGradGuard ng;
      q = trunc(div(a, b));
    }
    if (autograd::needs_grad(a, b))
      autograd::record("DivBackward", {&a, &b}, {&q},
                       [sa = Shape(a.sizes()), sb = Shape(b.sizes()), fa = is_floating(a.dtype()) ? a.dtype() : dt,
                        fb = is_floating(b.dtype()) ? b.dtype() : dt](autograd::Node&, autograd::GradList& grads) {
                         const Device dev = grads[0].device();
                         return autograd::GradList{zeros(sa, TensorOptions().dtype(fa).device(dev)),
                                                   zeros(sb, TensorOptions().dtype(fb).device(dev))};
                       });
    return q;
  }
  // Integers: the floor quotient, one up where the division was inexact and the signs differ.
  Tensor q = floor_divide(a, b);
  Tensor fix = logical_and(ne(remainder(a, b), 0), ne(lt(a, 0), lt(b, 0)));
  return q + fix.to(q.dtype());
}

Tensor div(const Tensor& a, Scalar b, std::optional<std::string_view> rounding_mode) {
  return div(a, internal::wrap_scalar(b, internal::promote_with_scalar(a.dtype(), b)), rounding_mode);
}

// ---- sorting-based reductions -------------------------------------------------------------------
Tensor median(const Tensor& x) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::median>(t, {x}, {}, [&] { return median(x); });
  return whole_median(x, false, "median");
}
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::median>(t, {x}, {.dim = dim, .keepdim = keepdim},
                                       [&] { return median(x, dim, keepdim); });
  return dim_median(x, dim, keepdim, false, "median");
}
Tensor nanmedian(const Tensor& x) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::nanmedian>(t, {x}, {}, [&] { return nanmedian(x); });
  return whole_median(x, true, "nanmedian");
}
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::nanmedian>(t, {x}, {.dim = dim, .keepdim = keepdim},
                                          [&] { return nanmedian(x, dim, keepdim); });
  return dim_median(x, dim, keepdim, true, "nanmedian");
}

std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::kthvalue>(t, {x}, {.k = k, .dim = dim, .keepdim = keepdim},
                                         [&] { return kthvalue(x, k, dim, keepdim); });
  NABLA_CHECK(DTypeError, x.dtype() != DType::boolean, "kthvalue: not implemented for bool tensors");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "kthvalue");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  NABLA_CHECK(IndexError, k >= 1 && k <= n, "kthvalue: k (", k, ") out of range for dimension ", d, " of size ", n,
              " (input shape ", x.sizes(), ")");
  Tensor i = pick_indices(x, d, "kthvalue", [&](const auto* row, int64_t len) { return kth_index(row, len, k - 1); });
  return take(x, d, i, keepdim);
}

std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::mode>(t, {x}, {.dim = dim, .keepdim = keepdim}, [&] { return mode(x, dim, keepdim); });
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "mode");
  check_nonempty_dim(x, d, "mode");
  Tensor i = pick_indices(x, d, "mode", [&](const auto* row, int64_t n) { return mode_index(row, n); });
  return take(x, d, i, keepdim);
}

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                std::string_view interpolation) {
  if (auto ac = autocast_internal::cast<OpId::quantile>(x, q)) [[unlikely]]
    return quantile(ac[0], ac[1], dim, keepdim, interpolation);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::quantile>(t, {x, q}, {dim, keepdim, std::string(interpolation)},
                                         [&] { return quantile(x, q, dim, keepdim, interpolation); });
  return quantile_impl(x, q, dim, keepdim, interpolation, false, "quantile");
}
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim, std::string_view interpolation) {
  NABLA_CHECK(ValueError, x.defined(), "quantile: input tensor is undefined");
  return quantile(x, full({}, q, TensorOptions().dtype(x.dtype()).device(x.device())), dim, keepdim, interpolation);
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   std::string_view interpolation) {
  if (auto ac = autocast_internal::cast<OpId::nanquantile>(x, q)) [[unlikely]]
    return nanquantile(ac[0], ac[1], dim, keepdim, interpolation);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::nanquantile>(t, {x, q}, {dim, keepdim, std::string(interpolation)},
                                            [&] { return nanquantile(x, q, dim, keepdim, interpolation); });
  return quantile_impl(x, q, dim, keepdim, interpolation, true, "nanquantile");
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   std::string_view interpolation) {
  NABLA_CHECK(ValueError, x.defined(), "nanquantile: input tensor is undefined");
  return nanquantile(x, full({}, q, TensorOptions().dtype(x.dtype()).device(x.device())), dim, keepdim, interpolation);
}

// ---- scans --------------------------------------------------------------------------------------
namespace {
template <bool Max>
std::tuple<Tensor, Tensor> cum_extreme(const Tensor& x, int64_t dim, const char* op) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced < Max ? OpId::cummax
                               : OpId::cummin > (t, {x}, {.dim = dim}, [&] { return cum_extreme<Max>(x, dim, op); });
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  Tensor idx;
  {
    autograd::NoGradGuard ng;
    Tensor h = host_lines(x, d);
    const int64_t n = h.numel() == 0 ? 0 : h.size(-1);
    Tensor o = make_empty(h.sizes(), DType::i64, kCPU);
    if (n > 0) {
      const int64_t rows = h.numel() / n;
      visit_compute_dtype(h.dtype(), op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = h.data_ptr<T>();
        int64_t* out = o.data_ptr<int64_t>();
        for (int64_t r = 0; r < rows; ++r) {
          const T* row = p + r * n;
          int64_t* oi = out + r * n;
          T best = row[0];
          int64_t bi = 0;
          for (int64_t j = 0; j < n; ++j) {
            const T v = row[j];
            // PyTorch's cummax_cummin_helper: a NaN always takes over; otherwise >= (<=) so the latest
            // of equal values wins.
            bool take_it;
            if constexpr (std::is_same_v<T, bool>) take_it = Max ? (v >= best) : (v <= best);
            else take_it = is_nan_v(v) || (!is_nan_v(best) && (Max ? v >= best : v <= best));
            if (take_it) {
              best = v;
              bi = j;
            }
            oi[j] = bi;
          }
        }
      });
    }
    idx = x.dim() == 0 ? o.reshape({}) : o.movedim(-1, d);
    idx = idx.to(x.device());
  }
  if (x.dim() == 0) return {gather(x.reshape({1}), 0, idx.reshape({1})).reshape({}), idx};
  return {gather(x, d, idx), idx};
}
}  // namespace

std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) { return cum_extreme<true>(x, dim, "cummax"); }
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) { return cum_extreme<false>(x, dim, "cummin"); }

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::logcumsumexp>(t, {x}, {.dim = dim}, [&] { return logcumsumexp(x, dim); });
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "logcumsumexp: defined for floating tensors only, got ", x.dtype());
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "logcumsumexp");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  if (n <= 1) return x.clone();
  // Hillis-Steele scan: after the step with offset `off`, y[i] = logsumexp(x[max(0, i - 2 off + 1) .. i]).
  // Each step is log(exp(a) + exp(b)) = max(a, b) + log1p(exp(-|a - b|)), whose derivatives of every
  // order stay finite however far apart a and b are (logaddexp's 1 / (exp(b - a) + 1) gives inf / inf
  // in its second derivative); equal infinities (a - b NaN) give themselves.
  auto step = [](const Tensor& a, const Tensor& b) {
    Tensor diff = a - b;
    Tensor gap = where(isnan(diff), zeros_like(diff), -abs(diff));
    return maximum(a, b) + log1p(exp(gap));
  };
  Tensor y = x;
  for (int64_t off = 1; off < n; off *= 2) {
    Tensor tail = step(y.narrow(d, off, n - off), y.narrow(d, 0, n - off));
    y = cat({y.narrow(d, 0, off), tail}, d);
  }
  return y;
}

// ---- counting and searching ---------------------------------------------------------------------
Tensor histc(const Tensor& x, int64_t bins, double min_v, double max_v) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::histc>(t, {x}, {.bins = bins, .min = min_v, .max = max_v},
                                      [&] { return histc(x, bins, min_v, max_v); });
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "histc: defined for floating tensors only, got ", x.dtype());
  NABLA_CHECK(ValueError, bins > 0, "histc: bins must be > 0, but got ", bins);
  Tensor h = to_host_contiguous(x);
  if (is_reduced_float(h.dtype())) h = h.to(DType::f32);
  double lo = min_v, hi = max_v;
  if (lo == hi && h.numel() > 0) {
    autograd::NoGradGuard ng;
    lo = min(h).item<double>();
    hi = max(h).item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  NABLA_CHECK(ValueError, std::isfinite(lo) && std::isfinite(hi), "histc: range of [", lo, ", ", hi, "] is not finite");
  NABLA_CHECK(ValueError, lo < hi, "histc: max must be larger than min, got min ", lo, " and max ", hi);
  Tensor out = zeros({bins}, TensorOptions().dtype(h.dtype()));
  visit_dtype(h.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* p = h.data_ptr<T>();
      T* o = out.data_ptr<T>();
      const T left = static_cast<T>(lo), right = static_cast<T>(hi);
      for (int64_t i = 0; i < h.numel(); ++i) {
        const T v = p[i];
        if (!(v >= left && v <= right)) continue;
        // PyTorch's histogramdd LINEAR_INTERPOLATION, in the element type.
        int64_t pos = static_cast<int64_t>((v - left) * static_cast<T>(bins) / (right - left));
        if (pos >= bins) pos = bins - 1;
        o[pos] += T(1);
      }
    }
  });
  return out.to(x.device(), x.dtype());
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::bincount>(t, {x, weights}, {.minlength = minlength},
                                         [&] { return bincount(x, weights, minlength); });
  NABLA_CHECK(ValueError, x.defined(), "bincount: input tensor is undefined");
  NABLA_CHECK(ValueError, minlength >= 0, "bincount: minlength should be >= 0, got ", minlength);
  NABLA_CHECK(DTypeError, is_integral(x.dtype()) && x.dtype() != DType::boolean,
              "bincount: only supports 1-d non-negative integral inputs, got dtype ", x.dtype());
  NABLA_CHECK(ShapeError, x.dim() == 1, "bincount: only supports 1-d non-negative integral inputs, got shape ",
              x.sizes());
  const bool has_w = weights.defined();
  if (has_w) {
    NABLA_CHECK(ShapeError, weights.dim() == 1 && weights.size(0) == x.size(0),
                "bincount: weights should be 1-d and have the same length as input: input ", x.sizes(), " weights ",
                weights.sizes());
    NABLA_CHECK(DeviceError, weights.device() == x.device(), "bincount: weights are on ", weights.device(),
                " but the input on ", x.device());
  }
  if (x.numel() == 0) return zeros({minlength}, TensorOptions().dtype(DType::i64).device(x.device()));
  Tensor h = to_host_contiguous(x).to(DType::i64).contiguous();
  const int64_t* p = h.data_ptr<int64_t>();
  int64_t mx = -1;
  for (int64_t i = 0; i < h.numel(); ++i) {
    NABLA_CHECK(ValueError, p[i] >= 0, "bincount: only supports 1-d non-negative integral inputs, got the value ",
                p[i]);
    mx = std::max(mx, p[i]);
  }
  const int64_t len = std::max(mx + 1, minlength);
  if (!has_w) {
    Tensor out = zeros({len}, TensorOptions().dtype(DType::i64));
    int64_t* o = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < h.numel(); ++i) ++o[p[i]];
    return out.to(x.device());
  }
  const DType wdt = weights.dtype() == DType::f32 ? DType::f32 : DType::f64;
  Tensor w = to_host_contiguous(weights).to(wdt).contiguous();
  Tensor out = zeros({len}, TensorOptions().dtype(wdt));
  visit_dtype(wdt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      const T* wp = w.data_ptr<T>();
      T* o = out.data_ptr<T>();
      for (int64_t i = 0; i < h.numel(); ++i) o[p[i]] += wp[i];
    }
  });
  return out.to(x.device());
}

Tensor searchsorted(const Tensor& seq_in, const Tensor& values_in, bool out_int32, bool right,
                    std::optional<std::string_view> side, const Tensor& sorter_in) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::searchsorted>(
        t, {seq_in, values_in, sorter_in}, {.right = right || (side && *side == "right")},
        [&] { return searchsorted(seq_in, values_in, out_int32, right, side, sorter_in); });
  const char* op = "searchsorted";
  NABLA_CHECK(ValueError, seq_in.defined() && values_in.defined(), op, ": undefined tensor");
  if (side) {
    NABLA_CHECK(ValueError, *side == "left" || *side == "right", op, ": side can only be 'left' or 'right', got '",
                *side, "'");
    NABLA_CHECK(ValueError, !(right && *side == "left"), op,
                ": side and right can't be set to opposites, got side of left ", "while right was True");
    right = *side == "right";
  }
  NABLA_CHECK(ShapeError, seq_in.dim() >= 1, op, ": boundaries tensor should have at least 1 dimension, got 0-d");
  const bool one_d = seq_in.dim() == 1;
  if (!one_d) {
    bool match = values_in.dim() == seq_in.dim();
    for (int64_t i = 0; match && i + 1 < seq_in.dim(); ++i) match = seq_in.size(i) == values_in.size(i);
    NABLA_CHECK(ShapeError, match, op, ": boundaries tensor should be 1 dimension or the first N-1 dimensions of ",
                "boundaries tensor and input value tensor must match, but we got boundaries tensor ", seq_in.sizes(),
                " and input value tensor ", values_in.sizes());
  }
  NABLA_CHECK(DeviceError, seq_in.device() == values_in.device(), op, ": boundaries are on ", seq_in.device(),
              " but the values on ", values_in.device());
  if (sorter_in.defined()) {
    NABLA_CHECK(DTypeError, sorter_in.dtype() == DType::i64, op, ": sorter must be an int64 tensor, got ",
                sorter_in.dtype());
    NABLA_CHECK(ShapeError, IntArrayRef(sorter_in.sizes()) == IntArrayRef(seq_in.sizes()), op,
                ": boundaries and sorter must have the same size, got ", seq_in.sizes(), " and ", sorter_in.sizes());
  }
  const DType common = internal::result_type(seq_in, values_in);
  Tensor seq = to_host_contiguous(seq_in).to(is_reduced_float(common) ? DType::f32 : common).contiguous();
  Tensor vals = to_host_contiguous(values_in).to(seq.dtype()).contiguous();
  Tensor sorter = sorter_in.defined() ? to_host_contiguous(sorter_in) : Tensor();
  const int64_t n = seq.size(-1);
  if (sorter.defined()) {
    const int64_t* s = sorter.data_ptr<int64_t>();
    for (int64_t i = 0; i < sorter.numel(); ++i)
      NABLA_CHECK(IndexError, s[i] >= 0 && s[i] < n, op, ": sorter index out of range: ", s[i], " for a size of ", n);
  }
  Tensor out = make_empty(vals.sizes(), DType::i64, kCPU);
  const int64_t vn = vals.dim() == 0 ? 1 : vals.size(-1);
  visit_compute_dtype(seq.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* sp = seq.data_ptr<T>();
    const T* vp = vals.data_ptr<T>();
    const int64_t* so = sorter.defined() ? sorter.data_ptr<int64_t>() : nullptr;
    int64_t* o = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < vals.numel(); ++i) {
      const int64_t row = one_d || vn == 0 ? 0 : i / vn;
      o[i] = search(sp + row * n, so ? so + row * n : nullptr, n, vp[i], right);
    }
  });
  return out.to(values_in.device(), out_int32 ? DType::i32 : DType::i64);
}

Tensor searchsorted(const Tensor& sorted_sequence, Scalar value, bool out_int32, bool right,
                    std::optional<std::string_view> side, const Tensor& sorter) {
  NABLA_CHECK(ShapeError, sorted_sequence.defined() && sorted_sequence.dim() == 1,
              "searchsorted: a scalar value needs a 1-D boundaries tensor");
  return searchsorted(sorted_sequence,
                      internal::wrap_scalar(value, internal::promote_with_scalar(sorted_sequence.dtype(), value))
                          .to(sorted_sequence.device()),
                      out_int32, right, side, sorter);
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32, bool right) {
  NABLA_CHECK(ValueError, x.defined() && boundaries.defined(), "bucketize: undefined tensor");
  NABLA_CHECK(ShapeError, boundaries.dim() == 1, "bucketize: boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  return searchsorted(boundaries, x, out_int32, right);
}

namespace {
UniqueResult unique_impl(const Tensor& x, bool return_inverse, bool return_counts, bool consecutive, const char* op) {
  NABLA_CHECK(ValueError, x.defined(), op, ": input tensor is undefined");
  Tensor h = to_host_contiguous(x).reshape({-1});
  const bool half = is_reduced_float(h.dtype());
  if (half) h = h.to(DType::f32).contiguous();
  const int64_t n = h.numel();
  std::vector<int64_t> order(static_cast<size_t>(n)), group(static_cast<size_t>(n));
  std::vector<int64_t> first_of_group, counts;
  visit_compute_dtype(h.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = h.data_ptr<T>();
    std::iota(order.begin(), order.end(), 0);
    if (!consecutive)
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return less_nan(p[i], p[j]); });
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = order[static_cast<size_t>(k)];
      if (k == 0 || !(p[order[static_cast<size_t>(k - 1)]] == p[i])) {  // NaN != NaN: each NaN its own
        first_of_group.push_back(i);
        counts.push_back(0);
      }
      ++counts.back();
      group[static_cast<size_t>(i)] = static_cast<int64_t>(first_of_group.size()) - 1;
    }
  });
  const int64_t m = static_cast<int64_t>(first_of_group.size());
  Tensor pick = tensor(first_of_group, TensorOptions().dtype(DType::i64));
  if (m == 0) pick = zeros({0}, TensorOptions().dtype(DType::i64));
  UniqueResult r;
  {
    autograd::NoGradGuard ng;
    r.values = index_select(to_host_contiguous(x).reshape({-1}), 0, pick).to(x.device());
  }
  if (return_inverse)
    r.inverse =
        (n == 0 ? zeros({0}, TensorOptions().dtype(DType::i64)) : tensor(group, TensorOptions().dtype(DType::i64)))
            .reshape(x.sizes())
            .to(x.device());
  if (return_counts)
    r.counts =
        (m == 0 ? zeros({0}, TensorOptions().dtype(DType::i64)) : tensor(counts, TensorOptions().dtype(DType::i64)))
            .to(x.device());
  return r;
}

// unique and unique_consecutive along a dim: slices compared as rows, lexicographically.
UniqueResult unique_dim_impl(const Tensor& x, int64_t dim, bool return_inverse, bool return_counts, bool consecutive,
                             const char* op) {
  NABLA_CHECK(ValueError, x.defined(), op, ": input tensor is undefined");
  NABLA_CHECK(ShapeError, x.dim() > 0, op, ": dim ", dim, " given for a 0-dim tensor");
  const int64_t d = wrap_dim(dim, x.dim(), op);
  const int64_t n = x.size(d);
  const TensorOptions i64 = TensorOptions().dtype(DType::i64);
  UniqueResult r;
  if (x.numel() == 0) {
    int64_t zero_dims = 0;
    for (int64_t s : x.sizes()) zero_dims += s == 0;
    NABLA_CHECK(ValueError, n == 0 && zero_dims == 1, op, ": cannot take the unique slices along dim ", d,
                " of a tensor of shape ", x.sizes(), " (dim must be its only dim of size 0)");
    r.values = x.detach().clone();
    if (return_inverse) r.inverse = zeros({0}, i64).to(x.device());
    if (return_counts) r.counts = zeros({0}, i64).to(x.device());
    return r;
  }
  // Rows: the slices, moved first (the other dims in order) and flattened.
  std::vector<int64_t> perm{d};
  for (int64_t k = 0; k < x.dim(); ++k)
    if (k != d) perm.push_back(k);
  Tensor h = to_host_contiguous(x.detach().permute(perm)).reshape({n, -1});
  if (is_reduced_float(h.dtype())) h = h.to(DType::f32).contiguous();
  const int64_t len = h.size(1);
  std::vector<int64_t> order(static_cast<size_t>(n)), group(static_cast<size_t>(n)), first_of_group, counts;
  visit_compute_dtype(h.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = h.data_ptr<T>();
    auto row_less = [&](int64_t a, int64_t b) {
      for (int64_t k = 0; k < len; ++k) {
        if (less_nan(p[a * len + k], p[b * len + k])) return true;
        if (less_nan(p[b * len + k], p[a * len + k])) return false;
      }
      return false;
    };
    auto row_equal = [&](int64_t a, int64_t b) {  // NaN != NaN: a row with a NaN is its own
      for (int64_t k = 0; k < len; ++k)
        if (!(p[a * len + k] == p[b * len + k])) return false;
      return true;
    };
    std::iota(order.begin(), order.end(), 0);
    if (!consecutive) std::stable_sort(order.begin(), order.end(), row_less);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = order[static_cast<size_t>(k)];
      if (k == 0 || !row_equal(order[static_cast<size_t>(k - 1)], i)) {
        first_of_group.push_back(i);
        counts.push_back(0);
      }
      ++counts.back();
      group[static_cast<size_t>(i)] = static_cast<int64_t>(first_of_group.size()) - 1;
    }
  });
  {
    autograd::NoGradGuard ng;
    r.values = index_select(to_host_contiguous(x.detach()), d, tensor(first_of_group, i64)).to(x.device());
  }
  if (return_inverse) r.inverse = tensor(group, i64).to(x.device());
  if (return_counts) r.counts = tensor(counts, i64).to(x.device());
  return r;
}
}  // namespace

namespace {
// unique or unique_consecutive, traced as one op (`consecutive`) whose outputs are the values, then
// the inverse and the counts when asked for (onnx/ composes them).
UniqueResult unique_any(const Tensor& x, bool return_inverse, bool return_counts, std::optional<int64_t> dim,
                        bool consecutive) {
  const char* name = consecutive ? "unique_consecutive" : "unique";
  auto run = [&] {
    return dim ? unique_dim_impl(x, *dim, return_inverse, return_counts, consecutive, name)
               : unique_impl(x, return_inverse, return_counts, consecutive, name);
  };
  trace::Tracer* t = trace::active();
  if (!t) [[likely]]
    return run();
  UniqueResult r;
  (void)trace::traced(t, consecutive ? OpId::unique_consecutive : OpId::unique, {x},
                      UniqueAttrs{dim, return_inverse, return_counts}, [&] {
                        r = run();
                        std::vector<Tensor> outs{r.values};
                        for (const Tensor* o : {&r.inverse, &r.counts})
                          if (o->defined()) outs.push_back(*o);
                        return outs;
                      });
  return r;
}
}  // namespace

UniqueResult unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  (void)sorted;  // always sorted (math_ops.h)
  return unique_any(x, return_inverse, return_counts, dim, false);
}

UniqueResult unique_consecutive(const Tensor& x, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  return unique_any(x, return_inverse, return_counts, dim, true);
}

}  // namespace nabla
