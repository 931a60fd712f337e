// Lowerings of the statistics, scans and counting ops (core/math_ops.h), as core/stats.cpp computes
// them: order statistics from the stable order of TopK (Exporter::stable_order), runs of equal
// neighbours for unique_consecutive and unique along a dim, log-step scans for the cumulative ops.
#include <algorithm>

#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

// median / nanmedian (of all elements, or along a dim: values and indices), kthvalue, mode. The
// index of each line's pick (x's shape with dim d of size 1), then the values through
// GatherElements, as nabla's own take().
//   median     the element (n - 1) / 2 of the stable order; a line with a NaN: its first NaN
//   nanmedian  the element (valid - 1) / 2 (valid: the line's non-NaN count; all NaN: index 0)
//   kthvalue   the element k - 1
//   mode       the count of each element's value from an (n, n) Equal per line (so memory grows
//              as n^2), the smallest value of the largest count, the last index holding it (an
//              all-NaN line: index 0)
void lower_order_stat(Exporter& e, Call& c, std::optional<int64_t> dim, bool keep, int64_t k = 0) {
  const OpId op = c.op;
  std::vector<Value>& ov = c.ov;
  const Value& x0 = c.x();
  const int64_t rank0 = static_cast<int64_t>(x0.shape.size());
  const bool whole = !dim;
  // The lines: x along dim d, or x flattened (the whole forms, and a 0-d x: one line of one element).
  Value x = x0;
  int64_t d = 0;
  if (whole || rank0 == 0) {
    int64_t numel = 1;
    for (int64_t s : x0.shape) numel *= s;
    x.name = e.node("Reshape", {x0.name, e.const_i64({-1})});
    x.shape = Shape{numel};
    x.sym = {Exporter::has_sym(x0) ? std::string("n") : std::string()};
  } else {
    d = wrap(*dim, rank0);
  }
  const bool fl = is_floating(x.dtype);
  const bool dyn = !x.sym[d].empty();
  const std::string n = dyn ? e.line_length(x.name, d) : e.const_i64({x.shape[d]});
  const std::string key = e.topk_key(x);
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto last = [&](const std::string& order) {
    return e.node("Slice", {order, e.const_i64({-1}), e.const_i64({big}), e.const_i64({d})});
  };
  // The lower middle position (n - 1) / 2, as a 1-D int64 tensor.
  auto middle = [&] {
    return dyn ? e.node("Div", {e.node("Sub", {n, e.const_i64({1})}), e.const_i64({2})})
               : e.const_i64({(x.shape[d] - 1) / 2});
  };
  std::string pick;
  if (op == OpId::kthvalue) {
    pick = last(e.stable_order(x, key, d, e.const_i64({k})));
  } else if (op == OpId::median || (op == OpId::nanmedian && !fl)) {
    pick = last(e.stable_order(x, key, d, e.node("Add", {middle(), e.const_i64({1})})));
    if (fl) {  // a line with a NaN: the first NaN
      const std::string flag = e.node("Cast", {e.node("IsNaN", {key})}, {ai("to", onnx_dtype(DType::f32))});
      const std::string any_nan =
          e.node("Greater",
                 {e.node("ReduceMax", {flag}, {aints("axes", {d}), ai("keepdims", 1)}), e.const_scalar(0, DType::f32)});
      pick = e.node("Where", {any_nan, e.node("ArgMax", {flag}, {ai("axis", d), ai("keepdims", 1)}), pick});
    }
  } else if (op == OpId::nanmedian) {
    const std::string order = e.stable_order(x, key, d, n);
    const std::string nans = e.node(
        "ReduceSum", {e.node("Cast", {e.node("IsNaN", {key})}, {ai("to", onnx_dtype(DType::i64))}), e.axes_input({d})},
        {ai("keepdims", 1)});
    const std::string valid = e.node("Sub", {n, nans});
    const std::string pos = e.node(
        "Div",
        {e.node("Max", {e.node("Sub", {valid, e.const_i64_scalar(1)}), e.const_i64_scalar(0)}), e.const_i64_scalar(2)});
    pick = e.node("GatherElements", {order, pos}, {ai("axis", d)});
  } else if (op == OpId::mode) {
    // eq[.., i, j, ..] = (x_i == x_j) with i at dim d, j at d + 1 (NaN equals nothing: count 0).
    const std::string eq = e.node(
        "Equal", {e.node("Unsqueeze", {key, e.axes_input({d + 1})}), e.node("Unsqueeze", {key, e.axes_input({d})})});
    const std::string count =
        e.node("ReduceSum", {e.node("Cast", {eq}, {ai("to", onnx_dtype(DType::i64))}), e.axes_input({d + 1})},
               {ai("keepdims", 0)});
    const std::string most = e.node("ReduceMax", {count}, {aints("axes", {d}), ai("keepdims", 1)});
    const std::string none =
        fl ? e.const_scalar(std::numeric_limits<double>::infinity(), x.dtype == DType::f64 ? DType::f64 : DType::f32)
           : e.const_i64_scalar(std::numeric_limits<int64_t>::max());
    const std::string value = e.node("ReduceMin", {e.node("Where", {e.node("Equal", {count, most}), key, none})},
                                     {aints("axes", {d}), ai("keepdims", 1)});
    const std::string at_value = e.node("Cast", {e.node("Equal", {key, value})}, {ai("to", onnx_dtype(DType::f32))});
    pick = e.node("ArgMax", {at_value}, {ai("axis", d), ai("keepdims", 1), ai("select_last_index", 1)});
    if (fl) pick = e.node("Where", {e.node("Equal", {most, e.const_i64_scalar(0)}), e.const_i64_scalar(0), pick});
  } else {
    e.no_mapping("");
  }
  const std::string values = e.node("GatherElements", {x.name, pick}, {ai("axis", d)});
  const std::vector<std::string> picked{values, pick};
  for (size_t i = 0; i < ov.size(); ++i) {
    if (whole || rank0 == 0 || !keep) e.node("Squeeze", {picked[i], e.axes_input({d})}, {}, ov[i].name);
    else e.node("Identity", {picked[i]}, {}, ov[i].name);
    if (!whole && rank0 > 0) Exporter::sym_reduce(ov[i], x0, {d}, keep);
  }
}

// quantile / nanquantile, as core/stats.cpp computes them: the line sorted (TopK, NaN as +inf; only
// values are read, so ties do not matter), ranks q (n - 1) (nanquantile: q (valid - 1), at least 0),
// rounded per interpolation (nearest: Round, half to even as nabla's round), the neighbouring order
// statistics gathered and blended with PyTorch's lerp; NaN where nabla's sorted line would give it
// (quantile: a line holding a NaN; nanquantile: a line of NaNs only). Computed along dim d in place,
// q's values along d, then q's dim moved first.
void lower_quantile(Exporter& e, Call& c, const QuantileAttrs& a) {
  const Value& x0 = c.x();
  const Value& q = *c.iv[1];
  Value& y = c.y();
  const bool ignore_nan = c.op == OpId::nanquantile;
  const std::string& interp = a.interpolation;
  const bool has_dim = a.dim.has_value(), keep = a.keepdim;
  const int64_t rank0 = static_cast<int64_t>(x0.shape.size());
  const DType dt = x0.dtype;
  NABLA_CHECK(NotImplemented, dt == DType::f32 || dt == DType::f64, "onnx::export_model: op '", e.op_label(), "' (",
              e.where(), ") on ", dt, " is not exported (float32 and float64 are)");
  Value x = x0;
  int64_t d = 0;
  if (!has_dim || rank0 == 0) {
    int64_t numel = 1;
    for (int64_t s : x0.shape) numel *= s;
    x.name = e.node("Reshape", {x0.name, e.const_i64({-1})});
    x.shape = Shape{numel};
    x.sym = {Exporter::has_sym(x0) ? std::string("n") : std::string()};
  } else {
    d = wrap(*a.dim, rank0);
  }
  const int64_t r = static_cast<int64_t>(x.shape.size());
  const bool q1 = q.shape.size() == 1;
  const int64_t Q = q1 ? q.shape[0] : 1;
  std::vector<int64_t> qs(static_cast<size_t>(r), 1);
  qs[static_cast<size_t>(d)] = Q;
  const std::string qv = e.node("Reshape", {e.cast(q, dt), e.const_i64(qs)});  // q along dim d
  auto k = [&](double v) { return e.const_scalar(v, dt); };
  const std::string n_i = x.sym[d].empty() ? e.const_i64({x.shape[d]}) : e.line_length(x.name, d);
  const std::string n = e.node("Cast", {n_i}, {ai("to", onnx_dtype(dt))});
  const std::string nan = e.node("IsNaN", {x.name});
  const std::string sorted = e.fresh("t");
  e.node_multi("TopK", {e.node("Where", {nan, k(std::numeric_limits<double>::infinity()), x.name}), n_i},
               {ai("axis", d), ai("largest", 0), ai("sorted", 1)}, {sorted, e.fresh("t")});
  const std::string nans =
      e.node("ReduceSum", {e.node("Cast", {nan}, {ai("to", onnx_dtype(dt))}), e.axes_input({d})}, {ai("keepdims", 1)});
  std::string ranks, nan_lines;
  if (ignore_nan) {
    const std::string valid = e.node("Sub", {n, nans});
    ranks = e.node("Mul", {qv, e.node("Sub", {valid, k(1)})});
    ranks = e.node("Where", {e.node("Less", {ranks, k(0)}), k(0), ranks});
    nan_lines = e.node("Equal", {valid, k(0)});
  } else {
    const std::string last = e.node("Sub", {n, k(1)});
    nan_lines = e.node("Greater", {nans, k(0)});
    ranks = e.node("Where", {nan_lines, last, e.node("Mul", {qv, last})});
  }
  if (interp == "lower") ranks = e.node("Floor", {ranks});
  else if (interp == "higher") ranks = e.node("Ceil", {ranks});
  else if (interp == "nearest") ranks = e.node("Round", {ranks});
  else
    NABLA_CHECK(NotImplemented, interp == "linear" || interp == "midpoint", "onnx::export_model: op '", e.op_label(),
                "' (", e.where(), ") has no ONNX mapping for interpolation '", interp, "'");
  const std::string below = e.node("Cast", {ranks}, {ai("to", onnx_dtype(DType::i64))});
  std::string res = e.node("GatherElements", {sorted, below}, {ai("axis", d)});
  if (interp == "linear" || interp == "midpoint") {
    const std::string w =
        interp == "midpoint" ? k(0.5) : e.node("Sub", {ranks, e.node("Cast", {below}, {ai("to", onnx_dtype(dt))})});
    const std::string above = e.node(
        "GatherElements", {sorted, e.node("Cast", {e.node("Ceil", {ranks})}, {ai("to", onnx_dtype(DType::i64))})},
        {ai("axis", d)});
    const std::string diff = e.node("Sub", {above, res});
    // PyTorch's lerp: a + w (b - a) for w < 0.5, b - (b - a)(1 - w) otherwise.
    res = e.node("Where", {e.node("Less", {w, k(0.5)}), e.node("Add", {res, e.node("Mul", {w, diff})}),
                           e.node("Sub", {above, e.node("Mul", {diff, e.node("Sub", {k(1), w})})})});
  }
  res = e.node("Where", {nan_lines, k(std::numeric_limits<double>::quiet_NaN()), res});  // x's shape, Q at dim d
  if (!has_dim || rank0 == 0) {  // res: (Q) -> (Q?, 1 x rank when keepdim)
    std::vector<int64_t> shape;
    if (q1) shape.push_back(Q);
    if (has_dim ? false : keep) shape.insert(shape.end(), static_cast<size_t>(rank0), 1);
    e.node("Reshape", {res, e.const_i64(shape)}, {}, y.name);
    return;
  }
  // Output dim j comes from x's dim src[j] (-1: q's dim).
  std::vector<int64_t> src;
  if (q1) {
    std::vector<int64_t> perm{d};
    for (int64_t i = 0; i < rank0; ++i)
      if (i != d) perm.push_back(i);
    res = e.node("Transpose", {res}, {aints("perm", perm)});
    if (keep) res = e.node("Unsqueeze", {res, e.axes_input({d + 1})});
    src.push_back(-1);
  } else if (!keep) {
    res = e.node("Squeeze", {res, e.axes_input({d})});
  }
  for (int64_t i = 0; i < rank0; ++i) {
    if (i != d) src.push_back(i);
    else if (keep) src.push_back(-1);
  }
  e.node("Identity", {res}, {}, y.name);
  for (size_t j = 0; j < src.size() && j < y.sym.size(); ++j)
    if (src[j] >= 0) y.sym[j] = x0.sym[static_cast<size_t>(src[j])];
}

// The runs of equal neighbours of v along axis d (a slice changes where any of its elements along
// `across` does; NaN differs from everything): `starts` a bool (n) true where a run begins, `at`
// the (m) positions of the starts. unique_consecutive and unique with dim share them.
struct Runs {
  std::string starts, at;
};
Runs runs_along(Exporter& e, const std::string& v, int64_t d, const std::vector<int64_t>& across,
                const std::string& n) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::string changed =
      e.node("Not", {e.node("Equal", {e.node("Slice", {v, e.const_i64({1}), e.const_i64({big}), e.const_i64({d})}),
                                      e.node("Slice", {v, e.const_i64({0}), e.const_i64({-1}), e.const_i64({d})})})});
  if (!across.empty())
    changed = e.node("Greater", {e.node("ReduceMax", {e.node("Cast", {changed}, {ai("to", onnx_dtype(DType::i64))})},
                                        {aints("axes", across), ai("keepdims", 0)}),
                                 e.const_i64_scalar(0)});
  Tensor first;
  {
    trace::Suspend s;
    first = ones({1}, dtype(kBool));
  }
  // The first element starts a run; the Slice to n keeps an empty input empty.
  Runs r;
  r.starts = e.node("Slice", {e.node("Concat", {e.const_tensor(first), changed}, {ai("axis", 0)}), e.const_i64({0}), n,
                              e.const_i64({0})});
  r.at = e.node("Squeeze", {e.node("NonZero", {r.starts}), e.axes_input({0})});  // (m) int64
  return r;
}

std::string run_of_each(Exporter& e, const Runs& r) {
  return e.node(
      "Sub", {e.node("CumSum", {e.node("Cast", {r.starts}, {ai("to", onnx_dtype(DType::i64))}), e.const_i64_scalar(0)}),
              e.const_i64_scalar(1)});
}

void run_lengths(Exporter& e, const Runs& r, const std::string& n, Value& out) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const std::string ends = e.node(
      "Concat", {e.node("Slice", {r.at, e.const_i64({1}), e.const_i64({big}), e.const_i64({0})}), n}, {ai("axis", 0)});
  e.node("Sub", {ends, r.at}, {}, out.name);
}

// unique_consecutive, flattened or (dim) of slices along dim: a run starts where an element (a slice:
// any of its elements) differs from the one before (NaN differs from everything, as in nabla);
// values at the run starts (NonZero, Gather), the inverse a CumSum of the starts, the counts the
// gaps between them.
void lower_unique_consecutive(Exporter& e, Call& c, const UniqueAttrs& a) {
  const Value& x = c.x();
  std::vector<Value>& ov = c.ov;
  const std::optional<int64_t> dim = a.dim;
  if (dim && c.rank() == 0) e.no_mapping("on a 0-dim tensor");
  const bool inverse = a.return_inverse, counts = a.return_counts;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t d = dim ? wrap(*dim, rank) : 0;
  const std::string flat = dim ? x.name : e.node("Reshape", {x.name, e.const_i64({-1})});
  const std::string n = dim ? e.shape_of(flat, d, d + 1) : e.node("Shape", {flat});
  std::vector<int64_t> across;  // a slice changed where any of its elements did
  for (int64_t k = 0; dim && k < rank; ++k)
    if (k != d) across.push_back(k);
  const Runs runs = runs_along(e, flat, d, across, n);
  const std::string& at = runs.at;
  e.node("Gather", {flat, at}, {ai("axis", d)}, ov[0].name);
  const std::string m = e.fresh("unique_");
  if (dim) ov[0].sym = x.sym;
  ov[0].sym[static_cast<size_t>(d)] = m;
  if (inverse) {
    const std::string run = run_of_each(e, runs);
    if (dim) {  // one entry per slice
      e.node("Identity", {run}, {}, ov[1].name);
      ov[1].sym[0] = x.sym[static_cast<size_t>(d)];
    } else {
      e.node("Reshape", {run, e.node("Shape", {x.name})}, {}, ov[1].name);
      ov[1].sym = x.sym;
    }
  }
  if (counts) {
    run_lengths(e, runs, n, ov.back());
    ov.back().sym[0] = m;
  }
}

// unique along a dim: the slices (rows of x with dim d moved first, the other dims flattened: len
// values each) sorted lexicographically and stably as nabla's row_less (NaN largest) by one stable
// order per column from the last to the first (TopK's ties keep the order so far: an LSD sort, so
// the graph holds len of them and the other dims must be static); then the runs of equal rows as
// unique_consecutive's, the inverse scattered back through the order.
void lower_unique_dim(Exporter& e, Call& c, const UniqueAttrs& a) {
  const Value& x = c.x();
  std::vector<Value>& ov = c.ov;
  const bool inverse = a.return_inverse, counts = a.return_counts;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) e.no_mapping("on a 0-dim tensor");
  const int64_t d = wrap(*a.dim, rank);
  int64_t len = 1;
  std::vector<int64_t> perm{d};
  for (int64_t k = 0; k < rank; ++k) {
    if (k == d) continue;
    perm.push_back(k);
    len *= x.shape[k];
    NABLA_CHECK(NotImplemented, x.sym[k].empty(), "onnx::export_model: op 'unique' with dim (", e.where(), ") on ",
                x.shape, " with the dynamic axis '", x.sym[k], "' in its slices; only dim ", d, " may be dynamic");
  }
  NABLA_CHECK(NotImplemented, len >= 1 && len <= 1024, "onnx::export_model: op 'unique' with dim (", e.where(), ") on ",
              x.shape, ": slices of ", len, " elements (1 to 1024 export: one sort per element)");
  const std::string rows =
      e.node("Reshape", {e.node("Transpose", {x.name}, {aints("perm", perm)}), e.const_i64({0, len})});  // (n, len)
  const std::string n = e.shape_of(rows, 0, 1);
  std::string order =
      e.node("Range", {e.const_i64_scalar(0), e.node("Squeeze", {n, e.axes_input({0})}), e.const_i64_scalar(1)});
  Value col = x;
  col.shape = Shape{x.shape[d]};
  col.sym = {x.sym[d]};
  for (int64_t k = len; k-- > 0;) {
    col.name =
        e.node("Gather", {e.node("Gather", {rows, order}, {ai("axis", 0)}), e.const_i64_scalar(k)}, {ai("axis", 1)});
    order = e.node("Gather", {order, e.stable_order(col, e.topk_key(col), 0, n)}, {ai("axis", 0)});
  }
  const std::string sorted = e.node("Gather", {rows, order}, {ai("axis", 0)});
  const Runs runs = runs_along(e, sorted, 0, {1}, n);
  const std::string& at = runs.at;
  e.node("Gather", {x.name, e.node("Gather", {order, at}, {ai("axis", 0)})}, {ai("axis", d)}, ov[0].name);
  const std::string m = e.fresh("unique_");
  ov[0].sym = x.sym;
  ov[0].sym[static_cast<size_t>(d)] = m;
  if (inverse) {  // inverse[order[k]] = the group of sorted row k
    const std::string group = run_of_each(e, runs);
    e.node("ScatterElements", {group, order, group}, {ai("axis", 0)}, ov[1].name);
    ov[1].sym[0] = x.sym[static_cast<size_t>(d)];
  }
  if (counts) {
    run_lengths(e, runs, n, ov.back());
    ov.back().sym[0] = m;
  }
}

// histc, as core/stats.cpp counts: the bin of v is (v - min) bins / (max - min) in x's dtype,
// truncated, the last bin holding max; values outside [min, max] and NaN are not counted. min = max
// (0 and 0 by default): the data's min and max (ReduceMin/ReduceMax), widened by 1 each way when
// equal. The counts from a one-hot (n, bins) Equal summed over n.
void lower_histc(Exporter& e, Call& c, const HistcAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t bins = a.bins;
  const double lo = a.min, hi = a.max;
  const DType dt = x.dtype;
  NABLA_CHECK(NotImplemented, dt == DType::f32 || dt == DType::f64, "onnx::export_model: op 'histc' (", e.where(),
              ") on ", dt, " is not exported (float32 and float64 are)");
  auto k = [&](double v) { return e.const_scalar(v, dt); };
  const std::string flat = e.node("Reshape", {x.name, e.const_i64({-1})});
  std::string left = k(lo), right = k(hi);
  if (lo == hi) {
    const std::string mn = e.node("ReduceMin", {flat}, {ai("keepdims", 0)}),
                      mx = e.node("ReduceMax", {flat}, {ai("keepdims", 0)});
    const std::string same = e.node("Equal", {mn, mx});
    left = e.node("Where", {same, e.node("Sub", {mn, k(1)}), mn});
    right = e.node("Where", {same, e.node("Add", {mx, k(1)}), mx});
  }
  std::string pos = e.node("Cast",
                           {e.node("Div", {e.node("Mul", {e.node("Sub", {flat, left}), k(static_cast<double>(bins))}),
                                           e.node("Sub", {right, left})})},
                           {ai("to", onnx_dtype(DType::i64))});
  pos = e.node("Min", {pos, e.const_i64_scalar(bins - 1)});
  const std::string inside =
      e.node("And", {e.node("GreaterOrEqual", {flat, left}), e.node("LessOrEqual", {flat, right})});
  std::vector<int64_t> ids(static_cast<size_t>(bins));
  for (int64_t i = 0; i < bins; ++i) ids[static_cast<size_t>(i)] = i;
  const std::string hit =
      e.node("And", {e.node("Equal", {e.node("Unsqueeze", {pos, e.axes_input({1})}), e.const_i64(ids)}),
                     e.node("Unsqueeze", {inside, e.axes_input({1})})});
  e.node("ReduceSum", {e.node("Cast", {hit}, {ai("to", onnx_dtype(dt))}), e.axes_input({0})}, {ai("keepdims", 0)},
         y.name);
}

// logcumsumexp as core/stats.cpp computes it: a Hillis-Steele scan along a static axis, each step
// max(a, b) + log1p(exp(-|a - b|)) (0 for the gap of equal infinities), the first `off` elements kept.
void lower_logcumsumexp(Exporter& e, Call& c, const DimAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t dim = a.dim;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t d = rank == 0 ? 0 : wrap(dim, rank);
  y.sym = x.sym;
  const int64_t n = rank == 0 ? 1 : x.shape[d];
  std::string cur = x.name;
  const DType dt = x.dtype;
  auto step = [&](const std::string& a, const std::string& b) {
    const std::string diff = e.node("Sub", {a, b});
    const std::string gap =
        e.node("Where", {e.node("IsNaN", {diff}), e.const_scalar(0, dt), e.node("Neg", {e.node("Abs", {diff})})});
    return e.node(
        "Add", {e.node("Max", {a, b}), e.node("Log", {e.node("Add", {e.node("Exp", {gap}), e.const_scalar(1, dt)})})});
  };
  if (rank > 0 && !x.sym[d].empty()) {  // a dynamic length: the rounds in a Loop, offsets from its shift
    const int64_t big = std::numeric_limits<int64_t>::max();
    e.doubling_loop({cur}, {dt}, rank, d,
                    [&](const std::vector<std::string>& st, const std::string& off) {
                      const std::string len = e.shape_of(st[0], d, d + 1), axis = e.const_i64({d}),
                                        zero = e.const_i64({0});
                      const std::string a = e.node("Slice", {st[0], off, e.const_i64({big}), axis});
                      const std::string b = e.node("Slice", {st[0], zero, e.node("Sub", {len, off}), axis});
                      return std::vector<std::string>{
                          e.node("Concat", {e.node("Slice", {st[0], zero, off, axis}), step(a, b)}, {ai("axis", d)})};
                    },
                    {y.name});
    return;
  }
  if (n <= 1) {
    e.node("Identity", {cur}, {}, y.name);
    return;
  }
  auto slice = [&](const std::string& t, int64_t a, int64_t b) {
    return e.node("Slice", {t, e.const_i64({a}), e.const_i64({b}), e.const_i64({d})});
  };
  for (int64_t off = 1; off < n; off *= 2)
    cur = e.node("Concat", {slice(cur, 0, off), step(slice(cur, off, n), slice(cur, 0, n - off))}, {ai("axis", d)},
                 2 * off >= n ? y.name : std::string());
}

// cummax / cummin: a log-step scan of (value, index) pairs along a static axis, combining the pair
// `s` before with the current one as core/stats.cpp's rule does: a NaN wins (the latest NaN), else
// the current pair where its value is >= (cummax) / <= (cummin) the earlier one (ties: the latest).
// Positions shifted in at the front hold -inf / +inf (integers: the dtype's extremes) and index -1,
// which never win.
void lower_cum_extreme(Exporter& e, Call& c, const DimAttrs& a) {
  const Value& x = c.x();
  std::vector<Value>& ov = c.ov;
  const int64_t dim = a.dim;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const bool is_max = c.op == OpId::cummax, fl = is_floating(x.dtype);
  for (Value& o : ov) o.sym = x.sym;
  if (rank == 0) {
    e.node("Identity", {x.name}, {}, ov[0].name);
    e.node("Identity", {e.const_i64_scalar(0)}, {}, ov[1].name);
    return;
  }
  const int64_t d = wrap(dim, rank), n = x.shape[d];
  const bool dyn = !x.sym[d].empty();
  const DType kd = fl ? x.dtype : DType::i64;
  std::string v = e.cast(x, kd);
  // idx: 0 .. n-1 along dim d, expanded to x's shape (dynamic: a CumSum of ones, minus 1).
  std::string idx;
  if (dyn) {
    idx = e.node(
        "Sub",
        {e.node("CumSum", {e.node("Expand", {e.const_i64_scalar(1), e.node("Shape", {v})}), e.const_i64_scalar(d)}),
         e.const_i64_scalar(1)});
  } else {
    std::vector<int64_t> col(static_cast<size_t>(rank), 1), ids(static_cast<size_t>(n));
    col[static_cast<size_t>(d)] = n;
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    idx = e.node("Expand", {e.node("Reshape", {e.const_i64(ids), e.const_i64(col)}), e.node("Shape", {v})});
  }
  std::string lowest;
  if (fl)
    lowest =
        e.const_scalar(is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), kd);
  else lowest = e.const_i64_scalar(is_max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
  // One round with shift s (pads: its Pad input; len: the dim's length, an int64 [1]).
  auto round = [&](const std::string& cv, const std::string& ci, const std::string& pads, const std::string& len) {
    auto shift = [&](const std::string& t, const std::string& fill) {
      return e.node("Slice", {e.node("Pad", {t, pads, fill}), e.const_i64({0}), len, e.const_i64({d})});
    };
    const std::string pv = shift(cv, lowest), pi = shift(ci, e.const_i64_scalar(-1));
    // take the current pair: current NaN, or (earlier not NaN and current >= / <= earlier)
    std::string take = e.node(is_max ? "GreaterOrEqual" : "LessOrEqual", {cv, pv});
    if (fl) take = e.node("Or", {e.node("IsNaN", {cv}), e.node("And", {e.node("Not", {e.node("IsNaN", {pv})}), take})});
    return std::vector<std::string>{e.node("Where", {take, cv, pv}), e.node("Where", {take, ci, pi})};
  };
  if (dyn) {
    std::vector<int64_t> unit(static_cast<size_t>(2 * rank), 0);
    unit[static_cast<size_t>(d)] = 1;
    const std::string unit_pads = e.const_i64(unit), vf = e.fresh("t");
    e.doubling_loop({v, idx}, {kd, DType::i64}, rank, d,
                    [&](const std::vector<std::string>& st, const std::string& s) {
                      return round(st[0], st[1], e.node("Mul", {unit_pads, s}), e.shape_of(st[0], d, d + 1));
                    },
                    {vf, ov[1].name});
    e.node("Identity", {e.cast(vf, kd, x.dtype)}, {}, ov[0].name);
    return;
  }
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(d)] = s;
    std::vector<std::string> next = round(v, idx, e.const_i64(pads), e.const_i64({n}));
    v = next[0];
    idx = next[1];
  }
  e.node("Identity", {e.cast(v, kd, x.dtype)}, {}, ov[0].name);
  e.node("Identity", {idx}, {}, ov[1].name);
}

// searchsorted (and bucketize through it): for each value, how many elements of its sorted line
// (through sorter when given) a binary search passes: those with !(m >= v) (side left) or !(m > v)
// (right), counted from a (..., m, n) comparison. So a NaN value goes past everything, as in nabla;
// a sorted line that holds NaN (last) is counted, where a binary search's answer depends on its path.
// Compared in the dtype nabla uses (result_type: a 0-d value of the line's kind takes its dtype).
void lower_searchsorted(Exporter& e, Call& c, const SearchsortedAttrs& a) {
  const std::vector<const Value*>& iv = c.iv;
  Value& y = c.y();
  const Value& seq = *iv[0];
  const Value& vals = *iv[1];
  const Value* sorter = iv.size() > 2 ? iv[2] : nullptr;
  DType common = promote_types(seq.dtype, vals.dtype);
  if (vals.shape.empty() && is_floating(vals.dtype) == is_floating(seq.dtype)) common = seq.dtype;
  if (common == DType::f16 || common == DType::bf16) common = DType::f32;
  std::string s = e.cast(seq, common);
  if (sorter) s = e.node("GatherElements", {s, sorter->name}, {ai("axis", -1)});
  const int64_t rs = static_cast<int64_t>(seq.shape.size()), rv = static_cast<int64_t>(vals.shape.size());
  if (rs > 1) s = e.node("Unsqueeze", {s, e.axes_input({rs - 1})});                       // (..., 1, n)
  const std::string v = e.node("Unsqueeze", {e.cast(vals, common), e.axes_input({rv})});  // (..., m, 1)
  const std::string stop = e.node(a.right ? "Greater" : "GreaterOrEqual", {s, v});
  const std::string count = e.node(
      "ReduceSum", {e.node("Cast", {e.node("Not", {stop})}, {ai("to", onnx_dtype(DType::i64))}), e.const_i64({-1})},
      {ai("keepdims", 0)});
  e.node("Identity", {e.cast(count, DType::i64, y.dtype)}, {}, y.name);
  y.sym = vals.sym;
}

// bincount: length max(max(x) + 1, minlength) (x's max with a -1 appended, so an empty x gives
// minlength), the counts (or weight sums) from a one-hot (n, length) Equal summed over n.
void lower_bincount(Exporter& e, Call& c, const BincountAttrs& a) {
  const Value& x = c.x();
  const Value* weights = c.iv[1];
  Value& y = c.y();
  const std::string xi = e.cast(x, DType::i64);
  const std::string top =
      e.node("ReduceMax", {e.node("Concat", {xi, e.const_i64({-1})}, {ai("axis", 0)})}, {ai("keepdims", 1)});
  const std::string len = e.node("Max", {e.node("Add", {top, e.const_i64({1})}), e.const_i64({a.minlength})});
  const std::string ids =
      e.node("Range", {e.const_i64_scalar(0), e.node("Squeeze", {len, e.axes_input({0})}), e.const_i64_scalar(1)});
  const std::string hit = e.node("Cast", {e.node("Equal", {e.node("Unsqueeze", {xi, e.axes_input({1})}), ids})},
                                 {ai("to", onnx_dtype(y.dtype))});
  const std::string terms =
      weights ? e.node("Mul", {hit, e.node("Unsqueeze", {e.cast(*weights, y.dtype), e.axes_input({1})})}) : hit;
  e.node("ReduceSum", {terms, e.axes_input({0})}, {ai("keepdims", 0)}, y.name);
  y.sym[0] = e.fresh("bincount_");
}

void lower_median(Exporter& e, Call& c, const OptionalDimAttrs& a) { lower_order_stat(e, c, a.dim, a.keepdim); }
void lower_mode(Exporter& e, Call& c, const DimKeepAttrs& a) { lower_order_stat(e, c, a.dim, a.keepdim); }
void lower_kthvalue(Exporter& e, Call& c, const KthvalueAttrs& a) { lower_order_stat(e, c, a.dim, a.keepdim, a.k); }

// unique of the flattened tensor is ONNX's Unique (values, then inverse (x's shape) and counts when
// asked for); along a dim, or unique_consecutive, the compositions above.
void lower_unique(Exporter& e, Call& c, const UniqueAttrs& a) {
  if (a.dim) return lower_unique_dim(e, c, a);
  const Value& x = c.x();
  std::vector<Value>& ov = c.ov;
  const bool inverse = a.return_inverse, counts = a.return_counts;
  std::string vals = ov[0].name, inv = e.fresh("t"), cnt = counts ? ov[inverse ? 2 : 1].name : e.fresh("t");
  e.node_multi("Unique", {x.name}, {ai("sorted", 1)}, {vals, e.fresh("t"), inv, cnt});
  const std::string n = e.fresh("unique_");
  ov[0].sym[0] = n;
  if (inverse) {
    e.node("Reshape", {inv, e.node("Shape", {x.name})}, {}, ov[1].name);
    ov[1].sym = x.sym;
  }
  if (counts) ov.back().sym[0] = n;
}

}  // namespace

void add_stats_lowerings(LoweringTable& t) {
  lower<lower_median, OpId::median, OpId::nanmedian>(t);
  lower<lower_kthvalue, OpId::kthvalue>(t);
  lower<lower_mode, OpId::mode>(t);
  lower<lower_quantile, OpId::quantile, OpId::nanquantile>(t);
  lower<lower_unique, OpId::unique>(t);
  lower<lower_unique_consecutive, OpId::unique_consecutive>(t);
  lower<lower_histc, OpId::histc>(t);
  lower<lower_bincount, OpId::bincount>(t);
  lower<lower_searchsorted, OpId::searchsorted>(t);
  lower<lower_logcumsumexp, OpId::logcumsumexp>(t);
  lower<lower_cum_extreme, OpId::cummax, OpId::cummin>(t);
}

}  // namespace nabla::onnx::internal
