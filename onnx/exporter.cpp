// The exporter's core (onnx/exporter.h): naming traced tensors, building nodes, dispatching each
// traced call to its op's lowering.
#include "onnx/exporter.h"

#include <algorithm>
#include <cctype>

#include "core/graph.h"

namespace nabla::onnx::internal {

// ---- ONNX's pieces ----------------------------------------------------------------------------------
int onnx_dtype(DType d) {
  switch (d) {
    case DType::f32: return 1;
    case DType::u8: return 2;
    case DType::i32: return 6;
    case DType::i64: return 7;
    case DType::boolean: return 9;
    case DType::f16: return 10;
    case DType::f64: return 11;
    case DType::bf16: return 16;
    case DType::c64: return 14;  // COMPLEX64: a graph input or initializer may hold it; no operator takes it
    case DType::c128: return 15;
  }
  return 0;
}

OAttr ai(std::string n, int64_t v) { return {OAttr::kInt, std::move(n), v, 0, {}, {}, {}, {}}; }
OAttr af(std::string n, double v) { return {OAttr::kFloat, std::move(n), 0, static_cast<float>(v), {}, {}, {}, {}}; }
OAttr aints(std::string n, std::vector<int64_t> v) {
  return {OAttr::kInts, std::move(n), 0, 0, std::move(v), {}, {}, {}};
}
OAttr astr(std::string n, std::string v) { return {OAttr::kString, std::move(n), 0, 0, {}, std::move(v), {}, {}}; }
OAttr astrings(std::string n, std::vector<std::string> v) {
  return {OAttr::kStrings, std::move(n), 0, 0, {}, {}, std::move(v), {}};
}
OAttr agraph(std::string n, std::shared_ptr<SubGraph> g) {
  OAttr a{OAttr::kGraph, std::move(n), 0, 0, {}, {}, {}, {}};
  a.g = std::move(g);
  return a;
}

std::array<int64_t, 2> pair2(const std::vector<int64_t>& v, int64_t dflt) {
  if (v.empty()) return {dflt, dflt};
  if (v.size() == 1) return {v[0], v[0]};
  return {v[0], v[1]};
}

std::string describe(const Tensor& t) {
  return internal::str("a tensor of shape ", t.sizes(), " and dtype ", t.dtype());
}

namespace {
// "MaxPool2dBackward" -> "max_pool2d", the op's name as users call it.
std::string op_from_node_name(std::string n) {
  if (n.size() > 8 && n.compare(n.size() - 8, 8, "Backward") == 0) n.resize(n.size() - 8);
  std::string out;
  for (size_t i = 0; i < n.size(); ++i) {
    char c = n[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out.push_back('_');
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else {
      out.push_back(c);
    }
  }
  return out;
}
}  // namespace

const VersionedLowering::Entry* VersionedLowering::find(int64_t opset) const {
  const Entry* best = nullptr;
  for (const Entry& e : entries)
    if (e.fn && e.since <= opset && (!best || e.since > best->since)) best = &e;
  return best;
}

void VersionedLowering::add(int64_t since, Lowering fn) {
  for (Entry& e : entries)
    if (!e.fn || e.since == since) {
      e = {since, fn};
      return;
    }
  throw Error("onnx: internal: more opset versions of a lowering than VersionedLowering holds");
}

const LoweringTable& lowerings() {
  static const LoweringTable table = [] {
    LoweringTable t{};
    add_elementwise_lowerings(t);
    add_shape_lowerings(t);
    add_indexing_lowerings(t);
    add_reduction_lowerings(t);
    add_stats_lowerings(t);
    add_nn_lowerings(t);
    add_rnn_lowerings(t);
    return t;
  }();
  return table;
}

// ---- tracing ----------------------------------------------------------------------------------------
void Exporter::add_input(const Tensor& t, const std::string& name, const std::map<int64_t, std::string>& axes) {
  Value v = make_value(t, name);
  for (const auto& [d, s] : axes) {
    int64_t dd = wrap(d, t.dim());
    NABLA_CHECK(ValueError, dd >= 0 && dd < t.dim(), "onnx::export_model: dynamic_axes names dim ", d, " of input '",
                name, "' of shape ", t.sizes());
    v.sym[dd] = s;
  }
  inputs_.push_back(v);
  values_[t.impl()] = v;
  keep_.push_back(t);
}

void Exporter::record(OpId op, const std::vector<Tensor>& in, const std::vector<Tensor>& out, const OpAttrs& attrs) {
  op_ = op_name(op);
  std::vector<const Value*> iv;
  for (const Tensor& t : in) iv.push_back(t.defined() ? &value_of(t) : nullptr);
  // An op that returns one of its inputs (x.to(same dtype), a no-op view) adds nothing.
  if (out.size() == 1 && std::any_of(in.begin(), in.end(), [&](const Tensor& t) { return t.impl() == out[0].impl(); }))
    return;
  const bool from_constants = std::all_of(iv.begin(), iv.end(), [](const Value* v) { return !v || v->constant; }) &&
                              std::any_of(iv.begin(), iv.end(), [](const Value* v) { return v != nullptr; });
  std::vector<Value> ov;
  for (const Tensor& t : out) {
    ov.push_back(make_value(t, fresh("t")));
    ov.back().constant = from_constants;
  }
  const VersionedLowering& versions = lowerings()[static_cast<size_t>(op)];
  if (versions.empty()) no_mapping(op_row(op).onnx.reason ? op_row(op).onnx.reason : "");
  const VersionedLowering::Entry* lower = versions.find(opset);
  if (!lower) {
    int64_t first = std::numeric_limits<int64_t>::max();
    for (const auto& v : versions.entries)
      if (v.fn) first = std::min(first, v.since);
    throw NotImplemented(internal::str("onnx::export_model: op '", op_, "' (", where(), ") needs opset ", first,
                                       " or later, got ", opset));
  }
  Call call{op, in, std::move(iv), ov, attrs};
  lower->fn(*this, call);
  for (size_t i = 0; i < out.size(); ++i) {
    values_[out[i].impl()] = ov[i];
    keep_.push_back(out[i]);
  }
}

void Exporter::on_history(const Tensor& t) {
  auto it = values_.find(t.impl());
  if (it != values_.end() && it->second.constant) values_.erase(it);
}

Value Exporter::make_value(const Tensor& t, std::string name) const {
  Value v;
  v.name = std::move(name);
  v.shape = t.sizes();
  v.dtype = t.dtype();
  v.sym.assign(static_cast<size_t>(t.dim()), "");
  v.version = t.version();
  return v;
}

std::string Exporter::module_of_seq(uint64_t seq) const {
  const ModuleCall* best = nullptr;
  for (const auto& c : calls)
    if (seq >= c.first_seq && seq < c.end_seq && (!best || c.first_seq >= best->first_seq)) best = &c;
  return best ? best->path : std::string();
}
std::string Exporter::current_module() const {
  const ModuleCall* best = nullptr;
  for (const auto& c : calls)
    if (c.end_seq == std::numeric_limits<uint64_t>::max()) best = &c;  // the innermost open call
  return best ? best->path : std::string();
}
namespace {
std::string where_path(const std::string& path) {
  return path.empty() ? std::string("in the top-level module") : "in module '" + path + "'";
}
}  // namespace
std::string Exporter::where() const { return where_path(current_module()); }

void Exporter::no_mapping(const std::string& why) const {
  throw NotImplemented(internal::str("onnx::export_model: op '", op_, "' (", where(), ") has no ONNX mapping",
                                     why.empty() ? "" : ": ", why));
}

const Value& Exporter::value_of(const Tensor& t) {
  auto modified = [&] {
    return ValueError(internal::str("onnx::export_model: the input of op '", op_, "' (", where(),
                                    ") was modified in place after it was computed (", describe(t),
                                    "); in-place ops cannot be traced: use their out-of-place forms"));
  };
  auto it = values_.find(t.impl());
  if (it != values_.end()) {
    if (t.version() != it->second.version) throw modified();
    return it->second;
  }
  if (autograd::Node* fn = t.grad_fn()) {
    std::string op = op_from_node_name(fn->name());
    throw NotImplemented(
        internal::str("onnx::export_model: op '", op, "' (", where_path(module_of_seq(fn->sequence_nr())),
                      ") has no ONNX mapping (it produced ", describe(t), ", autograd node ", fn->name(), ", read by ",
                      !op_.empty() && op_[0] == '(' ? op_ : "op '" + op_ + "'", ")"));
  }
  // The same data as a traced value under another handle (x.detach(), or an untraced view that
  // changes nothing: same address, sizes, strides and dtype) is that value: detaching changes the
  // gradients, not the graph, and a constant would freeze the example's data into it.
  if (t.numel() > 0 && !named.count(t.impl())) {
    const Value* alias = nullptr;
    for (const Tensor& known : keep_) {
      auto kv = values_.find(known.impl());
      if (kv != values_.end() && known.data_ptr() == t.data_ptr() && known.sizes() == t.sizes() &&
          known.strides() == t.strides() && known.dtype() == t.dtype()) {
        alias = &kv->second;
        break;
      }
    }
    if (alias) {
      if (t.version() != alias->version) throw modified();
      Value v = *alias;
      keep_.push_back(t);
      return values_[t.impl()] = v;
    }
  }
  // A parameter, a buffer or a constant: an initializer (its copy is not part of the graph: a
  // traced clone of a strided parameter would ask for that parameter's value again).
  auto nm = named.find(t.impl());
  std::string name = nm != named.end() ? nm->second : fresh("const");
  Tensor data;
  {
    trace::Suspend s;
    data = t.detach().to(kCPU).contiguous();
  }
  inits.push_back({name, data});
  keep_.push_back(t);
  Value v = make_value(t, name);
  v.constant = nm == named.end();
  return values_[t.impl()] = v;
}

// ---- building nodes ---------------------------------------------------------------------------------
std::string Exporter::node(const std::string& op_type, std::vector<std::string> inputs, std::vector<OAttr> attrs,
                           std::string out) {
  if (out.empty()) out = fresh("t");
  node_multi(op_type, std::move(inputs), std::move(attrs), {out});
  return out;
}
void Exporter::node_multi(const std::string& op_type, std::vector<std::string> inputs, std::vector<OAttr> attrs,
                          std::vector<std::string> outs) {
  std::string path = current_module();
  nodes_.push_back({op_type, (path.empty() ? "" : "/" + path) + "/" + op_type + "_" + std::to_string(nodes_.size()),
                    std::move(inputs), std::move(outs), std::move(attrs)});
}
std::string Exporter::const_tensor(const Tensor& t) {
  std::string name = fresh("const");
  trace::Suspend s;
  inits.push_back({name, t.contiguous()});
  return name;
}
std::string Exporter::const_i64(const std::vector<int64_t>& v) { return const_tensor(tensor(v, dtype(kInt64))); }
std::string Exporter::const_i64_scalar(int64_t v) { return const_tensor(scalar_tensor(v, dtype(kInt64))); }
std::string Exporter::const_scalar(double v, DType dt) { return const_tensor(scalar_tensor(v, dtype(dt))); }
std::string Exporter::cast(const std::string& name, DType from, DType to) {
  if (from == to) return name;
  return node("Cast", {name}, {ai("to", onnx_dtype(to))});
}
std::string Exporter::shape_of(const std::string& x, int64_t from, int64_t to) {
  return node("Slice", {node("Shape", {x}), const_i64({from}), const_i64({to}), const_i64({0})});
}

void Exporter::sym_broadcast(Value& out, const std::vector<const Value*>& in) {
  int64_t r = out.rank();
  for (int64_t j = 0; j < r; ++j)
    for (const Value* v : in) {
      if (!v) continue;
      int64_t k = j - (r - v->rank());
      if (k >= 0 && !v->sym[k].empty() && v->shape[k] == out.shape[j]) {
        out.sym[j] = v->sym[k];
        break;
      }
    }
}
void Exporter::sym_prefix(Value& out, const Value& in, int64_t n) {
  for (int64_t j = 0; j < n && j < static_cast<int64_t>(out.sym.size()) && j < static_cast<int64_t>(in.sym.size()); ++j)
    if (out.shape[j] == in.shape[j]) out.sym[j] = in.sym[j];
}
bool Exporter::has_sym(const Value& v) {
  return std::any_of(v.sym.begin(), v.sym.end(), [](const std::string& s) { return !s.empty(); });
}
void Exporter::sym_reduce(Value& y, const Value& x, std::vector<int64_t> dims, bool keep) {
  const int64_t rank = x.rank();
  for (auto& d : dims) d = wrap(d, rank);
  for (int64_t d = 0, j = 0; d < rank; ++d) {
    bool reduced = dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) y.sym[j++] = x.sym[d];
    else if (keep) ++j;
  }
}

std::string Exporter::reshape_to(const Value& x, Value& out, const std::vector<int64_t>& requested) {
  std::vector<int64_t> shape(out.shape.begin(), out.shape.end());
  if (has_sym(x)) {
    int64_t inferred = -1;
    for (size_t j = 0; j < shape.size(); ++j) {
      if (j < requested.size() && requested[j] == -1 && requested.size() == shape.size())
        inferred = static_cast<int64_t>(j);
    }
    for (size_t j = 0; j < shape.size(); ++j) {
      if (j < x.shape.size() && !x.sym[j].empty() && x.shape[j] == out.shape[j] &&
          static_cast<int64_t>(j) != inferred) {
        shape[j] = 0;
        out.sym[j] = x.sym[j];
      }
    }
    int64_t dynamic_in = 0, kept = 0;
    for (const auto& s : x.sym) dynamic_in += !s.empty();
    for (const auto& s : out.sym) kept += !s.empty();
    if (kept < dynamic_in) {
      // A dynamic dim was merged into another or moved: -1 where the caller asked for inference,
      // else the one dim that changed size.
      if (inferred < 0 && dynamic_in == 1) {
        // The dims that keep their size from the left and from the right stay; when exactly one
        // output dim is left between them, the dynamic dim went into it.
        const int64_t ro = out.rank(), ri = x.rank();
        int64_t lo = 0, hi = 0;
        while (lo < ro && lo < ri && out.shape[lo] == x.shape[lo] && x.sym[lo].empty()) ++lo;
        while (hi < ro - lo && hi < ri - lo && out.shape[ro - 1 - hi] == x.shape[ri - 1 - hi] &&
               x.sym[ri - 1 - hi].empty())
          ++hi;
        if (ro - lo - hi == 1) inferred = lo;
      }
      NABLA_CHECK(NotImplemented, inferred >= 0 && dynamic_in == 1, "onnx::export_model: op '", op_, "' (", where(),
                  ") reshapes ", x.shape, " to ", out.shape,
                  " in a way that a dynamic axis cannot follow; give its size as -1 in the shape or leave "
                  "that axis static");
      shape[inferred] = -1;
      for (const auto& s : x.sym)
        if (!s.empty()) out.sym[inferred] = s;
    }
  }
  return node("Reshape", {x.name, const_i64(shape)}, {}, out.name);
}

void Exporter::batched(const Value& x, int64_t want_rank, Value& out,
                       const std::function<void(const std::string&, const std::string&)>& f) {
  if (x.rank() == want_rank) {
    f(x.name, out.name);
    return;
  }
  NABLA_CHECK(ShapeError, x.rank() == want_rank - 1, "onnx::export_model: op '", op_, "' expects an input of rank ",
              want_rank, " or ", want_rank - 1, ", got ", x.shape);
  std::string x4 = node("Unsqueeze", {x.name, axes_input({0})});
  std::string y4 = fresh("t");
  f(x4, y4);
  node("Squeeze", {y4, axes_input({0})}, {}, out.name);
}

std::shared_ptr<SubGraph> Exporter::subgraph(const std::string& tag, const std::function<void()>& f) {
  auto body = std::make_shared<SubGraph>();
  std::swap(body->nodes, nodes_);  // the nodes emitted until the swap back are the body's
  f();
  std::swap(body->nodes, nodes_);
  for (ONode& n : body->nodes) n.name = tag + n.name;
  return body;
}

void Exporter::doubling_loop(const std::vector<std::string>& init, const std::vector<DType>& dtypes, int64_t rank,
                             int64_t d, const Round& round, const std::vector<std::string>& outs) {
  const std::string it = fresh("loop_i"), cond_in = fresh("loop_cond"), s_in = fresh("loop_s");
  std::vector<std::string> state_in, state_out;
  std::string s_out, cond_out;
  for (size_t i = 0; i < init.size(); ++i) state_in.push_back(fresh("loop_v"));
  auto body = subgraph(fresh("/loop"), [&] {
    state_out = round(state_in, s_in);
    s_out = node("Mul", {s_in, const_i64({2})});
    cond_out = node("Squeeze", {node("Less", {s_out, shape_of(state_in[0], d, d + 1)}), axes_input({0})});
  });
  body->inputs = {{it, DType::i64, 0}, {cond_in, DType::boolean, 0}};
  body->outputs = {{cond_out, DType::boolean, 0}};
  for (size_t i = 0; i < init.size(); ++i) {
    body->inputs.push_back({state_in[i], dtypes[i], rank});
    body->outputs.push_back({state_out[i], dtypes[i], rank});
  }
  body->inputs.push_back({s_in, DType::i64, 1});
  body->outputs.push_back({s_out, DType::i64, 1});
  const std::string go =
      node("Squeeze", {node("Less", {const_i64({1}), shape_of(init[0], d, d + 1)}), axes_input({0})});
  std::vector<std::string> ins{"", go};
  ins.insert(ins.end(), init.begin(), init.end());
  ins.push_back(const_i64({1}));
  std::vector<std::string> louts = outs;
  louts.push_back(fresh("t"));
  node_multi("Loop", ins, {agraph("body", body)}, louts);
}

// median, nanmedian, kthvalue and quantile (and sort and topk of floats) take elements in nabla's
// order (core/stats.cpp: value ascending, NaN largest, ties by index, as a stable sort) from ONNX's
// TopK, whose ties go to the lower index too. TopK puts NaN anywhere (ONNX Runtime compares with <),
// so it never sees one: NaN becomes +inf, and where NaNs must come after real infinities, a first
// TopK on the NaN flag orders the line before a second one orders it by value (its ties keep the
// first one's order).
std::string Exporter::topk_key(const Value& x) {
  if (x.dtype == DType::f32 || x.dtype == DType::f64) return x.name;
  return cast(x, is_floating(x.dtype) ? DType::f32 : DType::i64);
}
std::string Exporter::stable_order(const Value& x, const std::string& key, int64_t d, const std::string& k,
                                   bool largest) {
  const std::vector<OAttr> at{ai("axis", d), ai("largest", largest), ai("sorted", 1)};
  if (!is_floating(x.dtype)) {
    const std::string i = fresh("t");
    node_multi("TopK", {key, k}, at, {fresh("t"), i});
    return i;
  }
  const DType kd = x.dtype == DType::f64 ? DType::f64 : DType::f32;
  const std::string nan = node("IsNaN", {key});
  const std::string clean = node("Where", {nan, const_scalar(std::numeric_limits<double>::infinity(), kd), key});
  const std::string p1 = fresh("t"), p2 = fresh("t");
  node_multi("TopK", {node("Cast", {nan}, {ai("to", onnx_dtype(DType::f32))}), line_length(key, d)}, at,
             {fresh("t"), p1});
  node_multi("TopK", {node("GatherElements", {clean, p1}, {ai("axis", d)}), k}, at, {fresh("t"), p2});
  return node("GatherElements", {p1, p2}, {ai("axis", d)});
}

}  // namespace nabla::onnx::internal
