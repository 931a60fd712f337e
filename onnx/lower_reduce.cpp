// Lowerings of the reductions, scans, sorting and softmax.
#include <algorithm>

#include "onnx/exporter.h"

namespace nabla::onnx::internal {

namespace {

std::vector<int64_t> wrapped(std::vector<int64_t> dims, int64_t rank) {
  for (auto& d : dims) d = wrap(d, rank);
  return dims;
}

// sum, mean, prod, amax, amin. prod: integers (and bool) multiply as int64, floats in their own
// dtype (ReduceProd of nothing is 1, as PyTorch's); amax/amin of floats give NaN where a NaN is
// (ONNX Runtime's ReduceMax/Min skip it).
void lower_reduce(Exporter& e, Call& c, const ReduceAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const std::vector<int64_t> dims = wrapped(a.dims, c.rank());
  const int64_t keep = a.keepdim;
  const std::string xn = e.cast(x, y.dtype);
  if (c.op == OpId::sum) {
    std::vector<std::string> ins{xn};
    if (!dims.empty()) ins.push_back(e.axes_input(dims));
    e.node("ReduceSum", ins, {ai("keepdims", keep)}, y.name);
  } else {
    std::vector<OAttr> at{ai("keepdims", keep)};
    if (!dims.empty()) at.push_back(aints("axes", dims));
    const bool nan_aware = (c.op == OpId::amax || c.op == OpId::amin) && is_floating(y.dtype);
    const char* type = c.op == OpId::mean   ? "ReduceMean"
                       : c.op == OpId::amax ? "ReduceMax"
                       : c.op == OpId::amin ? "ReduceMin"
                                            : "ReduceProd";
    const std::string r = e.node(type, {xn}, at, nan_aware ? std::string() : y.name);
    if (nan_aware) {
      const std::string any_nan = e.node(
          "Greater",
          {e.node("ReduceMax", {e.node("Cast", {e.node("IsNaN", {xn})}, {ai("to", onnx_dtype(DType::f32))})}, at),
           e.const_scalar(0, DType::f32)});
      e.node("Where", {any_nan, e.const_scalar(std::numeric_limits<double>::quiet_NaN(), y.dtype), r}, {}, y.name);
    }
  }
  Exporter::sym_reduce(y, x, dims, keep != 0);
}

// Counts of nonzero (any) or zero (all) elements: ReduceSum gives 0 for an empty reduction, so
// any() of nothing is false and all() true, as in PyTorch (NaN counts as nonzero).
void lower_any_all(Exporter& e, Call& c, const ReduceAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const bool is_any = c.op == OpId::any;
  std::string hit;
  if (x.dtype == DType::boolean) {
    hit = is_any ? x.name : e.node("Not", {x.name});
  } else {
    std::string zero = e.node("Equal", {x.name, e.const_tensor(scalar_tensor(0, dtype(x.dtype)))});
    hit = is_any ? e.node("Not", {zero}) : zero;
  }
  const std::vector<int64_t> dims = wrapped(a.dims, c.rank());
  std::vector<std::string> ins{e.node("Cast", {hit}, {ai("to", onnx_dtype(DType::i64))})};
  if (!dims.empty()) ins.push_back(e.axes_input(dims));
  std::string count = e.node("ReduceSum", ins, {ai("keepdims", a.keepdim)});
  e.node(is_any ? "Greater" : "Equal", {count, e.const_i64_scalar(0)}, {}, y.name);
  Exporter::sym_reduce(y, x, dims, a.keepdim);
}

// (values, indices) along one dim. ONNX Runtime's ReduceMax/ArgMax skip NaN; nabla's max/min stop
// at a line's first NaN (its value and index), so those lines are overridden.
void lower_extreme_dim(Exporter& e, Call& c, const DimKeepAttrs& a) {
  const Value& x = c.x();
  const int64_t rank = c.rank();
  if (rank == 0) e.no_mapping("on a 0-dim tensor");
  const int64_t d = wrap(a.dim, rank), keep = a.keepdim;
  const bool is_max = c.op == OpId::max_dim;
  const std::vector<OAttr> reduce_at{aints("axes", {d}), ai("keepdims", keep)},
      arg_at{ai("axis", d), ai("keepdims", keep)};
  if (is_floating(x.dtype)) {
    const std::string flag = e.node("Cast", {e.node("IsNaN", {x.name})}, {ai("to", onnx_dtype(DType::f32))});
    const std::string any_nan =
        e.node("Greater", {e.node("ReduceMax", {flag}, reduce_at), e.const_scalar(0, DType::f32)});
    e.node("Where",
           {any_nan, e.const_scalar(std::numeric_limits<double>::quiet_NaN(), x.dtype),
            e.node(is_max ? "ReduceMax" : "ReduceMin", {x.name}, reduce_at)},
           {}, c.ov[0].name);
    e.node("Where", {any_nan, e.node("ArgMax", {flag}, arg_at), e.node(is_max ? "ArgMax" : "ArgMin", {x.name}, arg_at)},
           {}, c.ov[1].name);
  } else {
    e.node(is_max ? "ReduceMax" : "ReduceMin", {x.name}, reduce_at, c.ov[0].name);
    e.node(is_max ? "ArgMax" : "ArgMin", {x.name}, arg_at, c.ov[1].name);
  }
  for (Value& o : c.ov) Exporter::sym_reduce(o, x, {d}, keep != 0);
}

void lower_cumsum(Exporter& e, Call& c, const DimAttrs& a) {
  const int64_t rank = c.rank(), d = rank == 0 ? 0 : wrap(a.dim, rank);
  const std::string xn = e.cast(c.x(), c.y().dtype);
  if (rank == 0) e.node("Identity", {xn}, {}, c.y().name);
  else e.node("CumSum", {xn, e.const_i64_scalar(d)}, {}, c.y().name);
  c.y().sym = c.x().sym;
}

// cumprod: ONNX has no CumProd. Along a static axis of length L, a log-step scan: ceil(log2 L)
// rounds of y = y * shift(y, s) with s = 1, 2, 4, ..., the shifted-in positions 1 (Pad, then
// Slice back to L). Exact multiplications, so zeros and negative values come out right and integers
// exactly; floating results differ from the sequential product by rounding only (a few ulps).
// Along a dynamic axis the rounds are a Loop's body, repeated while s < L.
void lower_cumprod(Exporter& e, Call& c, const DimAttrs& a) {
  const Value& x = c.x();
  Value& y = c.y();
  const int64_t rank = c.rank(), d = rank == 0 ? 0 : wrap(a.dim, rank);
  std::string cur = e.cast(x, y.dtype);
  y.sym = x.sym;
  const std::string one = e.const_tensor(scalar_tensor(1, dtype(y.dtype)));
  if (rank > 0 && !x.sym[d].empty()) {  // a dynamic length: the same rounds in a Loop
    std::vector<int64_t> unit(static_cast<size_t>(2 * rank), 0);
    unit[static_cast<size_t>(d)] = 1;
    const std::string unit_pads = e.const_i64(unit);
    e.doubling_loop({cur}, {y.dtype}, rank, d,
                    [&](const std::vector<std::string>& st, const std::string& s) {
                      const std::string len = e.shape_of(st[0], d, d + 1);
                      const std::string shifted =
                          e.node("Slice", {e.node("Pad", {st[0], e.node("Mul", {unit_pads, s}), one}), e.const_i64({0}),
                                           len, e.const_i64({d})});
                      return std::vector<std::string>{e.node("Mul", {st[0], shifted})};
                    },
                    {y.name});
    return;
  }
  const int64_t L = rank == 0 ? 1 : x.shape[d];
  if (L <= 1) {
    e.node("Identity", {cur}, {}, y.name);
    return;
  }
  for (int64_t s = 1; s < L; s *= 2) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(d)] = s;
    std::string shifted = e.node(
        "Slice", {e.node("Pad", {cur, e.const_i64(pads), one}), e.const_i64({0}), e.const_i64({L}), e.const_i64({d})});
    cur = e.node("Mul", {cur, shifted}, {}, 2 * s >= L ? y.name : std::string());
  }
}

// TopK: (values, indices) along one dim. NaN is the largest value in nabla's sort and topk; TopK
// would leave it where its comparisons fall, so for floats the stable order (two TopKs, NaN never
// seen) picks and GatherElements takes. sort along a dynamic axis takes all of it (K from Shape).
void lower_topk_like(Exporter& e, Call& c, int64_t dim, std::optional<int64_t> k_given, bool largest) {
  const Value& x = c.x();
  if (c.rank() == 0) e.no_mapping("on a 0-dim tensor");
  const int64_t d = wrap(dim, c.rank());
  const bool dynamic_k = !k_given && !x.sym[d].empty();
  const std::string k = dynamic_k ? e.shape_of(x.name, d, d + 1) : e.const_i64({k_given ? *k_given : x.shape[d]});
  if (is_floating(x.dtype)) {
    const std::string idx = e.stable_order(x, e.topk_key(x), d, k, largest);
    e.node("GatherElements", {x.name, idx}, {ai("axis", d)}, c.ov[0].name);
    e.node("Identity", {idx}, {}, c.ov[1].name);
  } else {
    e.node_multi("TopK", {x.name, k}, {ai("axis", d), ai("largest", largest), ai("sorted", 1)},
                 {c.ov[0].name, c.ov[1].name});
  }
  for (Value& o : c.ov) {
    o.sym = x.sym;
    if (!dynamic_k) o.sym[d].clear();
  }
}
void lower_sort(Exporter& e, Call& c, const SortAttrs& a) { lower_topk_like(e, c, a.dim, std::nullopt, a.descending); }
void lower_topk(Exporter& e, Call& c, const TopkAttrs& a) { lower_topk_like(e, c, a.dim, a.k, a.largest); }

void lower_softmax(Exporter& e, Call& c, const DimAttrs& a) {
  const int64_t rank = c.rank(), d = rank == 0 ? 0 : wrap(a.dim, rank);
  e.node(c.op == OpId::softmax ? "Softmax" : "LogSoftmax", {e.cast(c.x(), c.y().dtype)}, {ai("axis", d)}, c.y().name);
  c.y().sym = c.x().sym;
}

}  // namespace

void add_reduction_lowerings(LoweringTable& t) {
  lower<lower_reduce, OpId::sum, OpId::mean, OpId::prod, OpId::amax, OpId::amin>(t);
  lower<lower_any_all, OpId::any, OpId::all>(t);
  lower<lower_extreme_dim, OpId::max_dim, OpId::min_dim>(t);
  lower<lower_cumsum, OpId::cumsum>(t);
  lower<lower_cumprod, OpId::cumprod>(t);
  lower<lower_sort, OpId::sort>(t);
  lower<lower_topk, OpId::topk>(t);
  lower<lower_softmax, OpId::softmax, OpId::log_softmax>(t);
}

}  // namespace nabla::onnx::internal
