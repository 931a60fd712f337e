// ONNX export: a tracer that turns each op call into ONNX nodes as it happens, then the ModelProto.
//
// How a call flows, y = conv2d(x, w, b) inside export_model:
//   1. conv2d's front-end sees the thread's tracer (core/trace.h), runs the op untraced and calls
//      Exporter::record("conv", {x, w, b}, {y}, {stride, padding, dilation, groups});
//   2. record() names the inputs: x is a graph input or the output of an earlier traced op, w and b
//      are parameters (initializers "conv1.weight", "conv1.bias"); a tensor it has never seen is
//      either the output of an op that has no hook (it has a grad_fn: the export fails naming that
//      op and the module it ran in) or a constant (an initializer);
//   3. convert() emits the ONNX nodes for the op (Conv here) and names y's value.
// After the forward, the output is renamed, batch norms are folded into convolutions
// (do_constant_folding) and the graph is serialized with onnx/proto.h.
#include "onnx/export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numbers>
#include <set>
#include <unordered_map>

#include "core/graph.h"
#include "core/io.h"
#include "core/trace.h"
#include "nn/functional.h"
#include "onnx/proto.h"

namespace nabla::onnx {

namespace {

using trace::Attrs;

// ---- ONNX pieces --------------------------------------------------------------------------------
// TensorProto.DataType
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
  }
  return 0;
}

struct SubGraph;  // a Loop's or Scan's body
struct OAttr {
  enum Kind { kInt, kFloat, kInts, kString, kStrings, kGraph } kind;
  std::string name;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::string s;
  std::vector<std::string> strings;
  std::shared_ptr<SubGraph> g;
};
OAttr ai(std::string n, int64_t v) { return {OAttr::kInt, std::move(n), v, 0, {}, {}, {}, {}}; }
OAttr af(std::string n, double v) { return {OAttr::kFloat, std::move(n), 0, static_cast<float>(v), {}, {}, {}, {}}; }
OAttr aints(std::string n, std::vector<int64_t> v) { return {OAttr::kInts, std::move(n), 0, 0, std::move(v), {}, {}, {}}; }
OAttr astr(std::string n, std::string v) { return {OAttr::kString, std::move(n), 0, 0, {}, std::move(v), {}, {}}; }
OAttr astrings(std::string n, std::vector<std::string> v) {
  return {OAttr::kStrings, std::move(n), 0, 0, {}, {}, std::move(v), {}};
}

struct ONode {
  std::string op_type, name;
  std::vector<std::string> inputs, outputs;
  std::vector<OAttr> attrs;
};

// A graph attribute (a Loop's or Scan's body): its nodes, and its inputs and outputs by name, ONNX element type
// and rank. Its nodes may read the outer graph's values and initializers by name.
struct SubGraph {
  struct IO {
    std::string name;
    DType dtype;
    int64_t rank;
  };
  std::vector<ONode> nodes;
  std::vector<IO> inputs, outputs;
};
OAttr agraph(std::string n, std::shared_ptr<SubGraph> g) {
  OAttr a{OAttr::kGraph, std::move(n), 0, 0, {}, {}, {}, {}};
  a.g = std::move(g);
  return a;
}

struct Initializer {
  std::string name;
  Tensor data;  // CPU, contiguous
};

// What the exporter knows of a traced tensor.
struct Value {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  std::vector<std::string> sym;  // per dim: a dynamic axis' name, or "" for a fixed size
  uint32_t version = 0;
};

// A module call seen by the forward hooks: its path and the autograd nodes created inside it.
struct ModuleCall {
  std::string path;
  uint64_t first_seq = 0, end_seq = std::numeric_limits<uint64_t>::max();
};

int64_t attr_int(const Attrs& a, const char* name) {
  for (const auto& x : a)
    if (x.name == name) return std::get<int64_t>(x.value);
  throw Error(detail::str("onnx::export_model: internal: attribute '", name, "' missing"));
}
double attr_double(const Attrs& a, const char* name) {
  for (const auto& x : a)
    if (x.name == name) return std::get<double>(x.value);
  throw Error(detail::str("onnx::export_model: internal: attribute '", name, "' missing"));
}
std::vector<int64_t> attr_ints(const Attrs& a, const char* name) {
  for (const auto& x : a)
    if (x.name == name) return std::get<std::vector<int64_t>>(x.value);
  throw Error(detail::str("onnx::export_model: internal: attribute '", name, "' missing"));
}
std::vector<double> attr_doubles(const Attrs& a, const char* name) {
  for (const auto& x : a)
    if (x.name == name) return std::get<std::vector<double>>(x.value);
  throw Error(detail::str("onnx::export_model: internal: attribute '", name, "' missing"));
}
std::string attr_string(const Attrs& a, const char* name) {
  for (const auto& x : a)
    if (x.name == name) return std::get<std::string>(x.value);
  throw Error(detail::str("onnx::export_model: internal: attribute '", name, "' missing"));
}

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

std::string describe(const Tensor& t) { return detail::str("a tensor of shape ", t.sizes(), " and dtype ", t.dtype()); }

int64_t wrap(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

// Two values of an IntArrayRef-style argument (1 value means both).
std::array<int64_t, 2> pair2(const std::vector<int64_t>& v, int64_t dflt) {
  if (v.empty()) return {dflt, dflt};
  if (v.size() == 1) return {v[0], v[0]};
  return {v[0], v[1]};
}

// ---- the exporter -------------------------------------------------------------------------------
class Exporter : public trace::Tracer {
 public:
  Exporter(int64_t opset, bool fold) : opset_(opset), fold_(fold) {}

  void add_named(const Tensor& t, const std::string& name) {
    if (t.defined()) named_.emplace(t.impl(), name);
  }
  void add_input(const Tensor& t, const std::string& name, const std::map<int64_t, std::string>& axes) {
    Value v = make_value(t, name);
    for (const auto& [d, s] : axes) {
      int64_t dd = wrap(d, t.dim());
      check<ValueError>(dd >= 0 && dd < t.dim(), "onnx::export_model: dynamic_axes names dim ", d, " of input '", name,
                        "' of shape ", t.sizes());
      v.sym[dd] = s;
    }
    inputs_.push_back(v);
    values_[t.impl()] = v;
    keep_.push_back(t);
  }
  std::vector<ModuleCall> calls;

  void record(const char* op, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
              const Attrs& attrs) override {
    op_ = op;
    std::vector<const Value*> iv;
    for (const Tensor& t : in) iv.push_back(t.defined() ? &value_of(t) : nullptr);
    // An op that returns one of its inputs (x.to(same dtype), a no-op view) adds nothing.
    if (out.size() == 1 && std::any_of(in.begin(), in.end(), [&](const Tensor& t) { return t.impl() == out[0].impl(); }))
      return;
    std::vector<Value> ov;
    for (const Tensor& t : out) ov.push_back(make_value(t, fresh("t")));
    convert(op, in, iv, out, ov, attrs);
    for (size_t i = 0; i < out.size(); ++i) {
      values_[out[i].impl()] = ov[i];
      keep_.push_back(out[i]);
    }
  }

  // The graph output (after the forward).
  const Value& output_value(const Tensor& y) { return value_of(y); }

  // The ModelProto. With `data` given and options.external_data set or the weights over 2 GiB,
  // initializers of 1 KiB and more go there instead (ONNX's external data, each at a 4 KiB-aligned
  // offset of the file `data_name` next to the model).
  std::string serialize(const std::vector<std::string>& output_names, const std::vector<Tensor>& outputs,
                        const ExportOptions& options, std::string* data, const std::string& data_name);

 private:
  // ---- values ---------------------------------------------------------------------------------
  Value make_value(const Tensor& t, std::string name) {
    Value v;
    v.name = std::move(name);
    v.shape = t.sizes();
    v.dtype = t.dtype();
    v.sym.assign(static_cast<size_t>(t.dim()), "");
    v.version = t.version();
    return v;
  }
  std::string fresh(const char* stem) { return detail::str(stem, counter_++); }

  // Where the autograd node with sequence number `seq` was created.
  std::string module_of_seq(uint64_t seq) const {
    const ModuleCall* best = nullptr;
    for (const auto& c : calls)
      if (seq >= c.first_seq && seq < c.end_seq && (!best || c.first_seq >= best->first_seq)) best = &c;
    return best ? best->path : std::string();
  }
  std::string current_module() const {
    const ModuleCall* best = nullptr;
    for (const auto& c : calls)
      if (c.end_seq == std::numeric_limits<uint64_t>::max()) best = &c;  // the innermost open call
    return best ? best->path : std::string();
  }
  static std::string where(const std::string& path) {
    return path.empty() ? std::string("in the top-level module") : "in module '" + path + "'";
  }

  const Value& value_of(const Tensor& t) {
    auto it = values_.find(t.impl());
    if (it != values_.end()) {
      if (t.version() != it->second.version)
        throw ValueError(detail::str("onnx::export_model: the input of op '", op_, "' (", where(current_module()),
                                     ") was modified in place after it was computed (", describe(t),
                                     "); in-place ops cannot be traced: use their out-of-place forms"));
      return it->second;
    }
    if (autograd::Node* fn = t.grad_fn()) {
      std::string op = op_from_node_name(fn->name());
      throw NotImplemented(detail::str("onnx::export_model: op '", op, "' (", where(module_of_seq(fn->sequence_nr())),
                                       ") has no ONNX mapping (it produced ", describe(t), ", autograd node ",
                                       fn->name(), ", read by ", !op_.empty() && op_[0] == '(' ? op_ : "op '" + op_ + "'", ")"));
    }
    // The same data as a traced value under another handle (x.detach(), or an untraced view that
    // changes nothing: same address, sizes, strides and dtype) is that value: detaching changes the
    // gradients, not the graph, and a constant would freeze the example's data into it.
    if (t.numel() > 0 && !named_.count(t.impl())) {
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
        if (t.version() != alias->version)
          throw ValueError(detail::str("onnx::export_model: the input of op '", op_, "' (", where(current_module()),
                                       ") was modified in place after it was computed (", describe(t),
                                       "); in-place ops cannot be traced: use their out-of-place forms"));
        Value v = *alias;
        keep_.push_back(t);
        return values_[t.impl()] = v;
      }
    }
    // A parameter, a buffer or a constant: an initializer.
    auto nm = named_.find(t.impl());
    std::string name = nm != named_.end() ? nm->second : fresh("const");
    Tensor data = t.detach().to(kCPU).contiguous();
    inits_.push_back({name, data});
    keep_.push_back(t);
    return values_[t.impl()] = make_value(t, name);
  }

  // ---- emitting nodes -------------------------------------------------------------------------
  std::string node(const std::string& op_type, std::vector<std::string> inputs, std::vector<OAttr> attrs = {},
                   std::string out = {}) {
    if (out.empty()) out = fresh("t");
    std::string path = current_module();
    ONode n{op_type, (path.empty() ? "" : "/" + path) + "/" + op_type + "_" + std::to_string(nodes_.size()),
            std::move(inputs), {out}, std::move(attrs)};
    nodes_.push_back(std::move(n));
    return out;
  }
  void node_multi(const std::string& op_type, std::vector<std::string> inputs, std::vector<OAttr> attrs,
                  std::vector<std::string> outs) {
    std::string path = current_module();
    nodes_.push_back({op_type, (path.empty() ? "" : "/" + path) + "/" + op_type + "_" + std::to_string(nodes_.size()),
                      std::move(inputs), std::move(outs), std::move(attrs)});
  }
  std::string const_tensor(const Tensor& t) {
    std::string name = fresh("const");
    inits_.push_back({name, t.contiguous()});
    return name;
  }
  std::string const_i64(const std::vector<int64_t>& v) { return const_tensor(tensor(v, dtype(kInt64))); }
  std::string const_i64_scalar(int64_t v) { return const_tensor(scalar_tensor(v, dtype(kInt64))); }
  std::string const_scalar(double v, DType dt) { return const_tensor(scalar_tensor(v, dtype(dt))); }
  std::string cast(const std::string& name, DType from, DType to) {
    if (from == to) return name;
    return node("Cast", {name}, {ai("to", onnx_dtype(to))});
  }
  std::string cast(const Value& v, DType to) { return cast(v.name, v.dtype, to); }
  // Axes as opset 13's Squeeze/Unsqueeze/ReduceSum take them (an input).
  std::string axes_input(const std::vector<int64_t>& axes) { return const_i64(axes); }

  // ---- dynamic dims ---------------------------------------------------------------------------
  // Output dim j takes the symbol of the input dim aligned with it from the right (broadcasting).
  static void sym_broadcast(Value& out, const std::vector<const Value*>& in) {
    int64_t r = static_cast<int64_t>(out.shape.size());
    for (int64_t j = 0; j < r; ++j)
      for (const Value* v : in) {
        if (!v) continue;
        int64_t k = j - (r - static_cast<int64_t>(v->shape.size()));
        if (k >= 0 && !v->sym[k].empty() && v->shape[k] == out.shape[j]) {
          out.sym[j] = v->sym[k];
          break;
        }
      }
  }
  // Output dims [0, n) take the input's symbols.
  static void sym_prefix(Value& out, const Value& in, int64_t n) {
    for (int64_t j = 0; j < n && j < static_cast<int64_t>(out.sym.size()) && j < static_cast<int64_t>(in.sym.size()); ++j)
      if (out.shape[j] == in.shape[j]) out.sym[j] = in.sym[j];
  }
  static bool has_sym(const Value& v) {
    return std::any_of(v.sym.begin(), v.sym.end(), [](const std::string& s) { return !s.empty(); });
  }

  // A reshape of `x` to `out`'s shape that keeps x's dynamic dims dynamic: a dim that keeps its
  // place and size becomes 0 (copy), a dim the caller left to inference (-1) stays -1.
  std::string reshape_to(const Value& x, Value& out, const std::vector<int64_t>& requested) {
    std::vector<int64_t> shape(out.shape.begin(), out.shape.end());
    if (has_sym(x)) {
      int64_t inferred = -1;
      for (size_t j = 0; j < shape.size(); ++j) {
        if (j < requested.size() && requested[j] == -1 && requested.size() == shape.size()) inferred = static_cast<int64_t>(j);
      }
      for (size_t j = 0; j < shape.size(); ++j) {
        if (j < x.shape.size() && !x.sym[j].empty() && x.shape[j] == out.shape[j] && static_cast<int64_t>(j) != inferred) {
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
          const int64_t ro = static_cast<int64_t>(out.shape.size()), ri = static_cast<int64_t>(x.shape.size());
          int64_t lo = 0, hi = 0;
          while (lo < ro && lo < ri && out.shape[lo] == x.shape[lo] && x.sym[lo].empty()) ++lo;
          while (hi < ro - lo && hi < ri - lo && out.shape[ro - 1 - hi] == x.shape[ri - 1 - hi] &&
                 x.sym[ri - 1 - hi].empty())
            ++hi;
          if (ro - lo - hi == 1) inferred = lo;
        }
        check<NotImplemented>(inferred >= 0 && dynamic_in == 1, "onnx::export_model: op '", op_, "' (",
                              where(current_module()), ") reshapes ", x.shape, " to ", out.shape,
                              " in a way that a dynamic axis cannot follow; give its size as -1 in the shape or leave "
                              "that axis static");
        shape[inferred] = -1;
        for (const auto& s : x.sym)
          if (!s.empty()) out.sym[inferred] = s;
      }
    }
    return node("Reshape", {x.name, const_i64(shape)}, {}, out.name);
  }

  // Runs `f` on x with a leading batch dim when x lacks one (unbatched conv/pool inputs).
  template <class F>
  void batched(const Value& x, int64_t want_rank, Value& out, F&& f) {
    if (static_cast<int64_t>(x.shape.size()) == want_rank) {
      f(x.name, out.name);
      return;
    }
    check<ShapeError>(static_cast<int64_t>(x.shape.size()) == want_rank - 1, "onnx::export_model: op '", op_,
                      "' expects an input of rank ", want_rank, " or ", want_rank - 1, ", got ", x.shape);
    std::string x4 = node("Unsqueeze", {x.name, axes_input({0})});
    std::string y4 = fresh("t");
    f(x4, y4);
    node("Squeeze", {y4, axes_input({0})}, {}, out.name);
  }

  void convert(const std::string& op, const std::vector<Tensor>& in, const std::vector<const Value*>& iv,
               const std::vector<Tensor>& out, std::vector<Value>& ov, const Attrs& attrs);
  bool convert_unary(const std::string& op, const Value& x, Value& y, const Attrs& attrs);
  bool convert_binary(const std::string& op, const std::vector<const Value*>& iv, Value& y, const Attrs& attrs);
  void convert_division(const std::string& op, const std::string& a, const std::string& b, Value& y);
  void convert_interpolate(const Value& x, Value& y, const Attrs& attrs);
  void convert_cumprod(const Value& x, Value& y, int64_t dim);
  // A scan along a dynamic axis d: `round` (the state's names and the shift s, an int64 [1]) emits
  // one round's nodes and returns the new state; the rounds run in an ONNX Loop while s < L (s = 1,
  // 2, 4, ...; L the length of dim d of the first state, from Shape), so no round count is baked in.
  // The final state is named `outs`.
  using Round = std::function<std::vector<std::string>(const std::vector<std::string>&, const std::string&)>;
  void doubling_loop(const std::vector<std::string>& init, const std::vector<DType>& dtypes, int64_t rank, int64_t d,
                     const Round& round, const std::vector<std::string>& outs);
  // A 1-D int64 tensor of dims [from, to) of x's shape (Shape, then Slice).
  std::string shape_of(const std::string& x, int64_t from, int64_t to) {
    return node("Slice", {node("Shape", {x}), const_i64({from}), const_i64({to}), const_i64({0})});
  }
  // Reduced dims' symbols (sum, any, ...): the kept dims keep theirs.
  static void sym_reduce(Value& y, const Value& x, std::vector<int64_t> dims, bool keep) {
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    for (auto& d : dims) d = wrap(d, rank);
    for (int64_t d = 0, j = 0; d < rank; ++d) {
      bool reduced = dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!reduced) y.sym[j++] = x.sym[d];
      else if (keep) ++j;
    }
  }
  void convert_rnn(const std::string& op, const std::vector<Tensor>& in, const std::vector<const Value*>& iv,
                   std::vector<Value>& ov, const Attrs& attrs);
  // ---- the stats ops (median, kthvalue, mode, quantile, histc, unique_consecutive) ---------------
  std::string topk_key(const Value& x);
  std::string stable_order(const Value& x, const std::string& key, int64_t d, const std::string& k, bool largest = false);
  std::string line_length(const std::string& x, int64_t d);
  void convert_stats(const std::string& op, const std::vector<const Value*>& iv, std::vector<Value>& ov,
                     const Attrs& attrs);
  void convert_quantile(const std::string& op, const Value& x, const Value& q, Value& y, const Attrs& attrs);
  // The runs of equal neighbours of v along axis d (a slice changes where any of its elements along
  // `across` does; NaN differs from everything): `starts` a bool (n) true where a run begins, `at`
  // the (m) positions of the starts. unique_consecutive and unique with dim share them.
  struct Runs {
    std::string starts, at;
  };
  Runs runs_along(const std::string& v, int64_t d, const std::vector<int64_t>& across, const std::string& n);
  std::string run_of_each(const Runs& r);                           // CumSum(starts) - 1: (n) int64
  void run_lengths(const Runs& r, const std::string& n, Value& out);  // the gaps between the starts and n
  void convert_unique_consecutive(const Value& x, std::vector<Value>& ov, const Attrs& attrs, std::optional<int64_t> dim);
  void convert_unique_dim(const Value& x, std::vector<Value>& ov, const Attrs& attrs);
  void convert_histc(const Value& x, Value& y, const Attrs& attrs);
  void convert_bincount(const Value& x, const Value* weights, Value& y, const Attrs& attrs);
  void convert_logcumsumexp(const Value& x, Value& y, int64_t dim);
  void convert_searchsorted(const std::vector<const Value*>& iv, Value& y, const Attrs& attrs);
  void convert_cum_extreme(const std::string& op, const Value& x, std::vector<Value>& ov, int64_t dim);
  void fold_batch_norms(const std::set<std::string>& graph_outputs);
  void prune(const std::set<std::string>& graph_outputs);

  int64_t opset_;
  bool fold_;
  int64_t counter_ = 0;
  std::string op_;
  std::unordered_map<TensorImpl*, std::string> named_;
  std::unordered_map<TensorImpl*, Value> values_;
  std::vector<Tensor> keep_;  // every tensor seen stays alive, so no address is reused
  std::vector<Value> inputs_;
  std::vector<ONode> nodes_;
  std::vector<Initializer> inits_;
};

bool Exporter::convert_unary(const std::string& op, const Value& x, Value& y, const Attrs& attrs) {
  static const std::map<std::string, std::string> direct = {
      {"exp", "Exp"},   {"log", "Log"},       {"sqrt", "Sqrt"},       {"sin", "Sin"},     {"cos", "Cos"},
      {"tan", "Tan"},   {"asin", "Asin"},     {"acos", "Acos"},       {"atan", "Atan"},   {"sinh", "Sinh"},
      {"cosh", "Cosh"}, {"tanh", "Tanh"},     {"erf", "Erf"},         {"sigmoid", "Sigmoid"}, {"reciprocal", "Reciprocal"},
      {"neg", "Neg"},   {"abs", "Abs"},       {"sign", "Sign"},       {"relu", "Relu"},   {"floor", "Floor"},
      {"ceil", "Ceil"}, {"round", "Round"},   {"selu", "Selu"},       {"isnan", "IsNaN"}, {"isinf", "IsInf"},
      {"logical_not", "Not"}};
  const bool predicate = op == "isnan" || op == "isinf" || op == "isfinite" || op == "logical_not";
  std::string xn = predicate ? (op == "logical_not" ? cast(x, DType::boolean) : x.name) : cast(x, y.dtype);
  const DType dt = y.dtype;
  auto c = [&](double v) { return const_scalar(v, dt); };
  const double p0 = attr_double(attrs, "p0"), p1 = attr_double(attrs, "p1");
  if ((op == "isnan" || op == "isinf" || op == "isfinite") && !is_floating(x.dtype)) {
    // Integers and bools are never NaN or infinite (IsNaN/IsInf take floats only): x == x.
    const std::string i = cast(x, DType::i64), same = node("Equal", {i, i}, {}, op == "isfinite" ? y.name : std::string());
    if (op != "isfinite") node("Not", {same}, {}, y.name);
  } else if (auto it = direct.find(op); it != direct.end()) {
    node(it->second, {xn}, {}, y.name);
  } else if (op == "rsqrt") {
    node("Reciprocal", {node("Sqrt", {xn})}, {}, y.name);
  } else if (op == "square") {
    node("Mul", {xn, xn}, {}, y.name);
  } else if (op == "exp2") {
    node("Pow", {c(2.0), xn}, {}, y.name);
  } else if (op == "log2" || op == "log10") {
    node("Div", {node("Log", {xn}), c(std::log(op == "log2" ? 2.0 : 10.0))}, {}, y.name);
  } else if (op == "log1p") {
    node("Log", {node("Add", {xn, c(1.0)})}, {}, y.name);
  } else if (op == "expm1") {
    node("Sub", {node("Exp", {xn}), c(1.0)}, {}, y.name);
  } else if (op == "logsigmoid") {
    node("Neg", {node("Softplus", {node("Neg", {xn})})}, {}, y.name);
  } else if (op == "gelu") {  // x/2 (1 + erf(x/sqrt(2))) (opset 20's Gelu is past 17)
    std::string e = node("Erf", {node("Div", {xn, c(std::numbers::sqrt2)})});
    node("Mul", {node("Mul", {xn, c(0.5)}), node("Add", {e, c(1.0)})}, {}, y.name);
  } else if (op == "gelu_tanh") {  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    std::string x3 = node("Mul", {node("Mul", {xn, xn}), xn});
    std::string inner = node("Mul", {node("Add", {xn, node("Mul", {x3, c(0.044715)})}), c(std::sqrt(2.0 / std::numbers::pi))});
    node("Mul", {node("Mul", {xn, c(0.5)}), node("Add", {node("Tanh", {inner}), c(1.0)})}, {}, y.name);
  } else if (op == "silu") {
    node("Mul", {xn, node("Sigmoid", {xn})}, {}, y.name);
  } else if (op == "mish") {
    node("Mul", {xn, node("Tanh", {node("Softplus", {xn})})}, {}, y.name);
  } else if (op == "hardsigmoid") {
    node("HardSigmoid", {xn}, {af("alpha", 1.0 / 6), af("beta", 0.5)}, y.name);
  } else if (op == "hardswish") {
    if (opset_ >= 14) node("HardSwish", {xn}, {}, y.name);
    else node("Mul", {xn, node("HardSigmoid", {xn}, {af("alpha", 1.0 / 6), af("beta", 0.5)})}, {}, y.name);
  } else if (op == "leaky_relu") {
    node("LeakyRelu", {xn}, {af("alpha", p0)}, y.name);
  } else if (op == "elu") {
    node("Elu", {xn}, {af("alpha", p0)}, y.name);
  } else if (op == "softplus") {
    // PyTorch returns x itself where beta x > threshold; log1p(exp(t)) - t < 3e-9 there for the
    // default threshold 20.
    if (p0 == 1) node("Softplus", {xn}, {}, y.name);
    else node("Div", {node("Softplus", {node("Mul", {xn, c(p0)})}), c(p0)}, {}, y.name);
  } else if (op == "hardtanh" || op == "clamp") {
    std::string lo = std::isinf(p0) ? std::string() : c(p0), hi = std::isinf(p1) ? std::string() : c(p1);
    std::vector<std::string> ins{xn, lo, hi};
    if (hi.empty()) ins.pop_back();  // an absent optional input at the end is left out
    node("Clip", ins, {}, y.name);
  } else if (op == "isfinite") {
    node("Not", {node("Or", {node("IsNaN", {xn}), node("IsInf", {xn})})}, {}, y.name);
  } else {
    return false;
  }
  y.sym = x.sym;
  return true;
}

bool Exporter::convert_binary(const std::string& op, const std::vector<const Value*>& iv, Value& y, const Attrs& attrs) {
  static const std::map<std::string, std::string> arith = {{"add", "Add"}, {"sub", "Sub"},     {"mul", "Mul"},
                                                           {"div", "Div"}, {"pow", "Pow"},     {"maximum", "Max"},
                                                           {"minimum", "Min"}};
  static const std::map<std::string, std::string> compare = {{"eq", "Equal"},          {"lt", "Less"},
                                                             {"le", "LessOrEqual"},    {"gt", "Greater"},
                                                             {"ge", "GreaterOrEqual"}, {"ne", "Equal"}};
  static const std::map<std::string, std::string> logical = {{"logical_and", "And"}, {"logical_or", "Or"},
                                                             {"logical_xor", "Xor"}};
  const Value& a = *iv[0];
  const Value& b = *iv[1];
  if (auto it = arith.find(op); it != arith.end()) {
    std::string an = cast(a, y.dtype), bn = cast(b, y.dtype);
    double alpha = attr_double(attrs, "alpha");
    if (alpha != 1 && (op == "add" || op == "sub")) bn = node("Mul", {bn, const_scalar(alpha, y.dtype)});
    node(it->second, {an, bn}, {}, y.name);
  } else if (auto ic = compare.find(op); ic != compare.end()) {
    DType dt = promote_types(a.dtype, b.dtype);
    std::string r = node(ic->second, {cast(a, dt), cast(b, dt)}, {}, op == "ne" ? std::string() : y.name);
    if (op == "ne") node("Not", {r}, {}, y.name);
  } else if (auto il = logical.find(op); il != logical.end()) {
    node(il->second, {cast(a, DType::boolean), cast(b, DType::boolean)}, {}, y.name);
  } else if (op == "fmod" || op == "remainder" || op == "floor_divide" || op == "atan2") {
    convert_division(op, cast(a, y.dtype), cast(b, y.dtype), y);
  } else {
    return false;
  }
  sym_broadcast(y, {&a, &b});
  return true;
}

// fmod (sign of a), remainder (sign of b), floor_divide and atan2, as PyTorch computes them
// (core/scalar_math.h). ONNX's Mod with fmod=0 (Python's %) is for integers only, so float
// remainder and floor_divide are built from Mod fmod=1 as scalar_math.h builds them from std::fmod;
// opsets 13-17 have no Atan2: atan(a / b) plus pi where b < 0.
void Exporter::convert_division(const std::string& op, const std::string& a, const std::string& b, Value& y) {
  const DType dt = y.dtype;
  const bool is_float = is_floating(dt);
  auto c = [&](double v) { return const_scalar(v, dt); };
  const std::string zero = is_float ? c(0.0) : const_tensor(scalar_tensor(0, dtype(dt)));
  if (op == "atan2") {
    // atan(a / b) + (b < 0 ? (a >= 0 ? pi : -pi) : 0); where b is (+-)0: sign(a) pi/2 (0 for a = 0;
    // signed zeros of a and of b = 0 are not told apart).
    std::string t = node("Atan", {node("Div", {a, b})});
    std::string pi = node("Where", {node("GreaterOrEqual", {a, zero}), c(std::numbers::pi), c(-std::numbers::pi)});
    std::string r = node("Add", {t, node("Where", {node("Less", {b, zero}), pi, zero})});
    node("Where", {node("Equal", {b, zero}), node("Mul", {node("Sign", {a}), c(std::numbers::pi / 2)}), r}, {}, y.name);
    return;
  }
  if (op == "fmod") {
    node("Mod", {a, b}, {ai("fmod", 1)}, y.name);
    return;
  }
  if (!is_float) {
    // Integers: Mod fmod=0 is Python's remainder; floor_divide = (a - a mod b) / b, exact.
    std::string r = node("Mod", {a, b}, {ai("fmod", 0)}, op == "remainder" ? y.name : std::string());
    if (op == "floor_divide") node("Div", {node("Sub", {a, r}), b}, {}, y.name);
    return;
  }
  // mod = fmod(a, b); where mod != 0 and its sign differs from b's, the floor is one lower.
  std::string mod = node("Mod", {a, b}, {ai("fmod", 1)});
  std::string fix = node("And", {node("Not", {node("Equal", {mod, zero})}),
                                 node("Xor", {node("Less", {b, zero}), node("Less", {mod, zero})})});
  if (op == "remainder") {
    node("Where", {fix, node("Add", {mod, b}), mod}, {}, y.name);
    return;
  }
  // floor_divide: div = (a - mod) / b - fix; q = floor(div), one up where div - q > 0.5; b == 0: a / b.
  std::string div = node("Sub", {node("Div", {node("Sub", {a, mod}), b}), node("Cast", {fix}, {ai("to", onnx_dtype(dt))})});
  std::string q = node("Floor", {div});
  std::string up = node("Greater", {node("Sub", {div, q}), c(0.5)});
  std::string rounded = node("Where", {up, node("Add", {q, c(1.0)}), q});
  node("Where", {node("Equal", {b, zero}), node("Div", {a, b}), rounded}, {}, y.name);
}

// nn::functional::interpolate (and nn::Upsample) as ONNX's Resize, with the coordinate rules that
// reproduce PyTorch's (nn/functional.cpp):
//   nearest        asymmetric + floor: in[floor(j / scale)]
//   nearest-exact  half_pixel + round_prefer_ceil: in[floor((j + 0.5) / scale)]
//   linear modes   linear, half_pixel (ONNX Runtime clamps the source position to [0, n - 1] as
//                  PyTorch does; pytorch_half_pixel would differ for an output of size 1) or align_corners
//   bicubic        cubic with cubic_coeff_a = -0.75, half_pixel or align_corners, border repeated
// A scale factor goes in as Resize's scales (the positions then use 1 / scale, as PyTorch's do), an
// output size as its sizes (N and C from Shape, so a dynamic batch stays dynamic). Mode area
// (adaptive average pooling) is a MatMul per spatial dim with the averaging matrix.
void Exporter::convert_interpolate(const Value& x, Value& y, const Attrs& attrs) {
  const std::string mode = attr_string(attrs, "mode");
  const std::vector<double> scale = attr_doubles(attrs, "scale_factor");
  const bool corners = attr_int(attrs, "align_corners") != 0;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  y.sym = x.sym;
  for (int64_t d = 2; d < rank; ++d)
    if (y.shape[d] != x.shape[d] || !scale.empty()) y.sym[d].clear();
  if (mode == "area") {
    std::string cur = x.name;
    std::vector<int64_t> resized;
    for (int64_t d = 2; d < rank; ++d)
      if (x.shape[d] != y.shape[d]) resized.push_back(d);
    if (resized.empty()) {
      node("Identity", {cur}, {}, y.name);
      return;
    }
    for (int64_t d : resized) {
      check<NotImplemented>(x.sym[d].empty(), "onnx::export_model: op 'interpolate' (", where(current_module()),
                            ") with mode 'area' resizes the dynamic axis '", x.sym[d], "' of ", x.shape);
      const int64_t n_in = x.shape[d], n_out = y.shape[d];
      // W: (n_out, n_in), row j averages adaptive pooling's window [floor(j n_in / n_out), ceil((j + 1) n_in / n_out)).
      // Wt: its transpose (n_in, n_out), for the last dim.
      std::vector<double> w(static_cast<size_t>(n_out * n_in), 0.0), wt(w.size(), 0.0);
      for (int64_t j = 0; j < n_out; ++j) {
        const int64_t start = (j * n_in) / n_out, end = ((j + 1) * n_in + n_out - 1) / n_out;
        for (int64_t i = start; i < end; ++i) {
          w[static_cast<size_t>(j * n_in + i)] = 1.0 / static_cast<double>(end - start);
          wt[static_cast<size_t>(i * n_out + j)] = 1.0 / static_cast<double>(end - start);
        }
      }
      Tensor W, Wt;
      {
        trace::Suspend s;  // the matrices are constants, not part of the trace
        W = tensor(w, {n_out, n_in}, dtype(x.dtype));
        Wt = tensor(wt, {n_in, n_out}, dtype(x.dtype));
      }
      const std::string out = d == resized.back() ? y.name : fresh("t");
      if (d == rank - 1) {
        node("MatMul", {cur, const_tensor(Wt)}, {}, out);
      } else if (d == rank - 2) {
        node("MatMul", {const_tensor(W), cur}, {}, out);
      } else {  // D of (N, C, D, H, W): swap it with H around the product
        std::vector<int64_t> perm;
        for (int64_t k = 0; k < rank; ++k) perm.push_back(k);
        std::swap(perm[d], perm[rank - 2]);
        std::string t = node("MatMul", {const_tensor(W), node("Transpose", {cur}, {aints("perm", perm)})});
        node("Transpose", {t}, {aints("perm", perm)}, out);
      }
      cur = out;
    }
    return;
  }
  std::vector<OAttr> at;
  if (mode == "nearest" || mode == "nearest-exact") {
    const bool exact = mode == "nearest-exact";
    at = {astr("mode", "nearest"), astr("coordinate_transformation_mode", exact ? "half_pixel" : "asymmetric"),
          astr("nearest_mode", exact ? "round_prefer_ceil" : "floor")};
  } else if (mode == "linear" || mode == "bilinear" || mode == "trilinear" || mode == "bicubic") {
    at = {astr("mode", mode == "bicubic" ? "cubic" : "linear"),
          astr("coordinate_transformation_mode", corners ? "align_corners" : "half_pixel")};
    if (mode == "bicubic") at.push_back(af("cubic_coeff_a", -0.75));
  } else {
    throw NotImplemented(detail::str("onnx::export_model: op 'interpolate' (", where(current_module()), ") has no ONNX mapping for mode '",
                                     mode, "'"));
  }
  std::vector<std::string> ins{x.name, ""};
  if (!scale.empty() && !corners) {
    std::vector<float> s(static_cast<size_t>(rank), 1.0f);
    for (int64_t d = 2; d < rank; ++d) s[d] = static_cast<float>(scale.size() == 1 ? scale[0] : scale[d - 2]);
    ins.push_back(const_tensor(tensor(std::vector<double>(s.begin(), s.end()), dtype(kFloat32))));
  } else {
    std::vector<int64_t> spatial(y.shape.begin() + 2, y.shape.end());
    ins.push_back("");
    if (has_sym(x))
      ins.push_back(node("Concat", {shape_of(x.name, 0, 2), const_i64(spatial)}, {ai("axis", 0)}));
    else
      ins.push_back(const_i64(std::vector<int64_t>(y.shape.begin(), y.shape.end())));
  }
  node("Resize", ins, at, y.name);
  if (!scale.empty())
    for (int64_t d = 2; d < rank; ++d)
      if (!x.sym[d].empty()) y.sym[d] = detail::str(x.sym[d], "_resized");
}

// cumprod: ONNX has no CumProd. Along a static axis of length L, a log-step scan: ceil(log2 L)
// rounds of y = y * shift(y, s) with s = 1, 2, 4, ..., the shifted-in positions 1 (Pad, then
// Slice back to L). Exact multiplications, so zeros and negative values come out right and integers
// exactly; floating results differ from the sequential product by rounding only (a few ulps).
// Along a dynamic axis the rounds are a Loop's body, repeated while s < L.
void Exporter::convert_cumprod(const Value& x, Value& y, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t d = rank == 0 ? 0 : wrap(dim, rank);
  std::string cur = cast(x, y.dtype);
  y.sym = x.sym;
  const std::string one = const_tensor(scalar_tensor(1, dtype(y.dtype)));
  if (rank > 0 && !x.sym[d].empty()) {  // a dynamic length: the same rounds in a Loop
    std::vector<int64_t> unit(static_cast<size_t>(2 * rank), 0);
    unit[static_cast<size_t>(d)] = 1;
    const std::string unit_pads = const_i64(unit);
    doubling_loop({cur}, {y.dtype}, rank, d, [&](const std::vector<std::string>& st, const std::string& s) {
      const std::string len = shape_of(st[0], d, d + 1);
      const std::string shifted =
          node("Slice", {node("Pad", {st[0], node("Mul", {unit_pads, s}), one}), const_i64({0}), len, const_i64({d})});
      return std::vector<std::string>{node("Mul", {st[0], shifted})};
    }, {y.name});
    return;
  }
  const int64_t L = rank == 0 ? 1 : x.shape[d];
  if (L <= 1) {
    node("Identity", {cur}, {}, y.name);
    return;
  }
  for (int64_t s = 1; s < L; s *= 2) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(d)] = s;
    std::string shifted = node("Slice", {node("Pad", {cur, const_i64(pads), one}), const_i64({0}), const_i64({L}), const_i64({d})});
    cur = node("Mul", {cur, shifted}, {}, 2 * s >= L ? y.name : std::string());
  }
}

// ---- the stats ops ------------------------------------------------------------------------------
// median, nanmedian, kthvalue and quantile (and sort and topk of floats) take elements in nabla's
// order (core/stats.cpp: value ascending, NaN largest, ties by index, as a stable sort) from ONNX's
// TopK, whose ties go to the lower index too. TopK puts NaN anywhere (ONNX Runtime compares with <), so it never sees one:
// NaN becomes +inf, and where NaNs must come after real infinities, a first TopK on the NaN flag
// orders the line before a second one orders it by value (its ties keep the first one's order).

// x as TopK and the reductions take it: float32/float64 as they are, 16-bit floats as float32,
// integers as int64.
std::string Exporter::topk_key(const Value& x) {
  if (x.dtype == DType::f32 || x.dtype == DType::f64) return x.name;
  return cast(x, is_floating(x.dtype) ? DType::f32 : DType::i64);
}
// The length of dim d of x: a 1-D int64 tensor of one element.
std::string Exporter::line_length(const std::string& x, int64_t d) { return shape_of(x, d, d + 1); }

// int64 indices (x's shape with dim d of size k) of the first k elements of each line along d in
// nabla's stable order: ascending with NaN last or (largest) descending with NaN first, ties by
// index (TopK's tie rule in both directions).
std::string Exporter::stable_order(const Value& x, const std::string& key, int64_t d, const std::string& k, bool largest) {
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
  node_multi("TopK", {node("Cast", {nan}, {ai("to", onnx_dtype(DType::f32))}), line_length(key, d)}, at, {fresh("t"), p1});
  node_multi("TopK", {node("GatherElements", {clean, p1}, {ai("axis", d)}), k}, at, {fresh("t"), p2});
  return node("GatherElements", {p1, p2}, {ai("axis", d)});
}

// median / nanmedian (of all elements, or along a dim: values and indices), kthvalue, mode. The
// index of each line's pick (x's shape with dim d of size 1), then the values through
// GatherElements, as nabla's own take().
//   median     the element (n - 1) / 2 of the stable order; a line with a NaN: its first NaN
//   nanmedian  the element (valid - 1) / 2 (valid: the line's non-NaN count; all NaN: index 0)
//   kthvalue   the element k - 1
//   mode       the count of each element's value from an (n, n) Equal per line (so memory grows
//              as n^2), the smallest value of the largest count, the last index holding it (an
//              all-NaN line: index 0)
void Exporter::convert_stats(const std::string& op, const std::vector<const Value*>& iv, std::vector<Value>& ov,
                             const Attrs& attrs) {
  const Value& x0 = *iv[0];
  const int64_t rank0 = static_cast<int64_t>(x0.shape.size());
  const bool whole = std::none_of(attrs.begin(), attrs.end(), [](const trace::Attr& a) { return a.name == "dim"; });
  // The lines: x along dim d, or x flattened (the whole forms, and a 0-d x: one line of one element).
  Value x = x0;
  int64_t d = 0;
  bool keep = false;
  if (whole || rank0 == 0) {
    int64_t numel = 1;
    for (int64_t s : x0.shape) numel *= s;
    x.name = node("Reshape", {x0.name, const_i64({-1})});
    x.shape = Shape{numel};
    x.sym = {has_sym(x0) ? std::string("n") : std::string()};
  } else {
    d = wrap(attr_int(attrs, "dim"), rank0);
    keep = attr_int(attrs, "keepdim") != 0;
  }
  const bool fl = is_floating(x.dtype);
  const bool dyn = !x.sym[d].empty();
  const std::string n = dyn ? line_length(x.name, d) : const_i64({x.shape[d]});
  const std::string key = topk_key(x);
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto last = [&](const std::string& order) {
    return node("Slice", {order, const_i64({-1}), const_i64({big}), const_i64({d})});
  };
  // The lower middle position (n - 1) / 2, as a 1-D int64 tensor.
  auto middle = [&] {
    return dyn ? node("Div", {node("Sub", {n, const_i64({1})}), const_i64({2})}) : const_i64({(x.shape[d] - 1) / 2});
  };
  std::string pick;
  if (op == "kthvalue") {
    pick = last(stable_order(x, key, d, const_i64({attr_int(attrs, "k")})));
  } else if (op == "median" || (op == "nanmedian" && !fl)) {
    pick = last(stable_order(x, key, d, node("Add", {middle(), const_i64({1})})));
    if (fl) {  // a line with a NaN: the first NaN
      const std::string flag = node("Cast", {node("IsNaN", {key})}, {ai("to", onnx_dtype(DType::f32))});
      const std::string any_nan =
          node("Greater", {node("ReduceMax", {flag}, {aints("axes", {d}), ai("keepdims", 1)}), const_scalar(0, DType::f32)});
      pick = node("Where", {any_nan, node("ArgMax", {flag}, {ai("axis", d), ai("keepdims", 1)}), pick});
    }
  } else if (op == "nanmedian") {
    const std::string order = stable_order(x, key, d, n);
    const std::string nans = node("ReduceSum", {node("Cast", {node("IsNaN", {key})}, {ai("to", onnx_dtype(DType::i64))}),
                                                axes_input({d})},
                                  {ai("keepdims", 1)});
    const std::string valid = node("Sub", {n, nans});
    const std::string pos =
        node("Div", {node("Max", {node("Sub", {valid, const_i64_scalar(1)}), const_i64_scalar(0)}), const_i64_scalar(2)});
    pick = node("GatherElements", {order, pos}, {ai("axis", d)});
  } else if (op == "mode") {
    // eq[.., i, j, ..] = (x_i == x_j) with i at dim d, j at d + 1 (NaN equals nothing: count 0).
    const std::string eq = node("Equal", {node("Unsqueeze", {key, axes_input({d + 1})}), node("Unsqueeze", {key, axes_input({d})})});
    const std::string count =
        node("ReduceSum", {node("Cast", {eq}, {ai("to", onnx_dtype(DType::i64))}), axes_input({d + 1})}, {ai("keepdims", 0)});
    const std::string most = node("ReduceMax", {count}, {aints("axes", {d}), ai("keepdims", 1)});
    const std::string none = fl ? const_scalar(std::numeric_limits<double>::infinity(), x.dtype == DType::f64 ? DType::f64 : DType::f32)
                                : const_i64_scalar(std::numeric_limits<int64_t>::max());
    const std::string value =
        node("ReduceMin", {node("Where", {node("Equal", {count, most}), key, none})}, {aints("axes", {d}), ai("keepdims", 1)});
    const std::string at_value = node("Cast", {node("Equal", {key, value})}, {ai("to", onnx_dtype(DType::f32))});
    pick = node("ArgMax", {at_value}, {ai("axis", d), ai("keepdims", 1), ai("select_last_index", 1)});
    if (fl) pick = node("Where", {node("Equal", {most, const_i64_scalar(0)}), const_i64_scalar(0), pick});
  } else {
    throw Error(detail::str("onnx::export_model: internal: convert_stats got op '", op, "'"));
  }
  const std::string values = node("GatherElements", {x.name, pick}, {ai("axis", d)});
  const std::vector<std::string> picked{values, pick};
  for (size_t i = 0; i < ov.size(); ++i) {
    if (whole || rank0 == 0 || !keep) node("Squeeze", {picked[i], axes_input({d})}, {}, ov[i].name);
    else node("Identity", {picked[i]}, {}, ov[i].name);
    if (!whole && rank0 > 0) sym_reduce(ov[i], x0, {d}, keep);
  }
}

// quantile / nanquantile, as core/stats.cpp computes them: the line sorted (TopK, NaN as +inf; only
// values are read, so ties do not matter), ranks q (n - 1) (nanquantile: q (valid - 1), at least 0),
// rounded per interpolation (nearest: Round, half to even as nabla's round), the neighbouring order
// statistics gathered and blended with PyTorch's lerp; NaN where nabla's sorted line would give it
// (quantile: a line holding a NaN; nanquantile: a line of NaNs only). Computed along dim d in place,
// q's values along d, then q's dim moved first.
void Exporter::convert_quantile(const std::string& op, const Value& x0, const Value& q, Value& y, const Attrs& attrs) {
  const bool ignore_nan = op == "nanquantile";
  const std::string interp = attr_string(attrs, "interpolation");
  const bool has_dim = attr_int(attrs, "has_dim") != 0, keep = attr_int(attrs, "keepdim") != 0;
  const int64_t rank0 = static_cast<int64_t>(x0.shape.size());
  const DType dt = x0.dtype;
  check<NotImplemented>(dt == DType::f32 || dt == DType::f64, "onnx::export_model: op '", op, "' (", where(current_module()),
                        ") on ", dt, " is not exported (float32 and float64 are)");
  Value x = x0;
  int64_t d = 0;
  if (!has_dim || rank0 == 0) {
    int64_t numel = 1;
    for (int64_t s : x0.shape) numel *= s;
    x.name = node("Reshape", {x0.name, const_i64({-1})});
    x.shape = Shape{numel};
    x.sym = {has_sym(x0) ? std::string("n") : std::string()};
  } else {
    d = wrap(attr_int(attrs, "dim"), rank0);
  }
  const int64_t r = static_cast<int64_t>(x.shape.size());
  const bool q1 = q.shape.size() == 1;
  const int64_t Q = q1 ? q.shape[0] : 1;
  std::vector<int64_t> qs(static_cast<size_t>(r), 1);
  qs[static_cast<size_t>(d)] = Q;
  const std::string qv = node("Reshape", {cast(q, dt), const_i64(qs)});  // q along dim d
  auto c = [&](double v) { return const_scalar(v, dt); };
  const std::string n_i = x.sym[d].empty() ? const_i64({x.shape[d]}) : line_length(x.name, d);
  const std::string n = node("Cast", {n_i}, {ai("to", onnx_dtype(dt))});
  const std::string nan = node("IsNaN", {x.name});
  const std::string sorted = fresh("t");
  node_multi("TopK", {node("Where", {nan, c(std::numeric_limits<double>::infinity()), x.name}), n_i},
             {ai("axis", d), ai("largest", 0), ai("sorted", 1)}, {sorted, fresh("t")});
  const std::string nans =
      node("ReduceSum", {node("Cast", {nan}, {ai("to", onnx_dtype(dt))}), axes_input({d})}, {ai("keepdims", 1)});
  std::string ranks, nan_lines;
  if (ignore_nan) {
    const std::string valid = node("Sub", {n, nans});
    ranks = node("Mul", {qv, node("Sub", {valid, c(1)})});
    ranks = node("Where", {node("Less", {ranks, c(0)}), c(0), ranks});
    nan_lines = node("Equal", {valid, c(0)});
  } else {
    const std::string last = node("Sub", {n, c(1)});
    nan_lines = node("Greater", {nans, c(0)});
    ranks = node("Where", {nan_lines, last, node("Mul", {qv, last})});
  }
  if (interp == "lower") ranks = node("Floor", {ranks});
  else if (interp == "higher") ranks = node("Ceil", {ranks});
  else if (interp == "nearest") ranks = node("Round", {ranks});
  else
    check<NotImplemented>(interp == "linear" || interp == "midpoint", "onnx::export_model: op '", op, "' (",
                          where(current_module()), ") has no ONNX mapping for interpolation '", interp, "'");
  const std::string below = node("Cast", {ranks}, {ai("to", onnx_dtype(DType::i64))});
  std::string res = node("GatherElements", {sorted, below}, {ai("axis", d)});
  if (interp == "linear" || interp == "midpoint") {
    const std::string w = interp == "midpoint" ? c(0.5) : node("Sub", {ranks, node("Cast", {below}, {ai("to", onnx_dtype(dt))})});
    const std::string above = node("GatherElements", {sorted, node("Cast", {node("Ceil", {ranks})}, {ai("to", onnx_dtype(DType::i64))})},
                                   {ai("axis", d)});
    const std::string diff = node("Sub", {above, res});
    // PyTorch's lerp: a + w (b - a) for w < 0.5, b - (b - a)(1 - w) otherwise.
    res = node("Where", {node("Less", {w, c(0.5)}), node("Add", {res, node("Mul", {w, diff})}),
                         node("Sub", {above, node("Mul", {diff, node("Sub", {c(1), w})})})});
  }
  res = node("Where", {nan_lines, c(std::numeric_limits<double>::quiet_NaN()), res});  // x's shape, Q at dim d
  if (!has_dim || rank0 == 0) {  // res: (Q) -> (Q?, 1 x rank when keepdim)
    std::vector<int64_t> shape;
    if (q1) shape.push_back(Q);
    if (has_dim ? false : keep) shape.insert(shape.end(), static_cast<size_t>(rank0), 1);
    node("Reshape", {res, const_i64(shape)}, {}, y.name);
    return;
  }
  // Output dim j comes from x's dim src[j] (-1: q's dim).
  std::vector<int64_t> src;
  if (q1) {
    std::vector<int64_t> perm{d};
    for (int64_t i = 0; i < rank0; ++i)
      if (i != d) perm.push_back(i);
    res = node("Transpose", {res}, {aints("perm", perm)});
    if (keep) res = node("Unsqueeze", {res, axes_input({d + 1})});
    src.push_back(-1);
  } else if (!keep) {
    res = node("Squeeze", {res, axes_input({d})});
  }
  for (int64_t i = 0; i < rank0; ++i) {
    if (i != d) src.push_back(i);
    else if (keep) src.push_back(-1);
  }
  node("Identity", {res}, {}, y.name);
  for (size_t j = 0; j < src.size() && j < y.sym.size(); ++j)
    if (src[j] >= 0) y.sym[j] = x0.sym[static_cast<size_t>(src[j])];
}

// unique_consecutive, flattened or (dim) of slices along dim: a run starts where an element (a slice:
// any of its elements) differs from the one before (NaN differs from everything, as in nabla);
// values at the run starts (NonZero, Gather), the inverse a CumSum of the starts, the counts the
// gaps between them.
void Exporter::convert_unique_consecutive(const Value& x, std::vector<Value>& ov, const Attrs& attrs,
                                          std::optional<int64_t> dim) {
  const bool inverse = attr_int(attrs, "return_inverse") != 0, counts = attr_int(attrs, "return_counts") != 0;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t d = dim ? wrap(*dim, rank) : 0;
  const std::string flat = dim ? x.name : node("Reshape", {x.name, const_i64({-1})});
  const std::string n = dim ? shape_of(flat, d, d + 1) : node("Shape", {flat});
  std::vector<int64_t> across;  // a slice changed where any of its elements did
  for (int64_t k = 0; dim && k < rank; ++k)
    if (k != d) across.push_back(k);
  const Runs runs = runs_along(flat, d, across, n);
  const std::string& at = runs.at;
  node("Gather", {flat, at}, {ai("axis", d)}, ov[0].name);
  const std::string m = fresh("unique_");
  if (dim) ov[0].sym = x.sym;
  ov[0].sym[static_cast<size_t>(d)] = m;
  if (inverse) {
    const std::string run = run_of_each(runs);
    if (dim) {  // one entry per slice
      node("Identity", {run}, {}, ov[1].name);
      ov[1].sym[0] = x.sym[static_cast<size_t>(d)];
    } else {
      node("Reshape", {run, node("Shape", {x.name})}, {}, ov[1].name);
      ov[1].sym = x.sym;
    }
  }
  if (counts) {
    run_lengths(runs, n, ov.back());
    ov.back().sym[0] = m;
  }
}

// unique along a dim: the slices (rows of x with dim d moved first, the other dims flattened: len
// values each) sorted lexicographically and stably as nabla's row_less (NaN largest) by one stable
// order per column from the last to the first (TopK's ties keep the order so far: an LSD sort, so
// the graph holds len of them and the other dims must be static); then the runs of equal rows as
// unique_consecutive's, the inverse scattered back through the order.
void Exporter::convert_unique_dim(const Value& x, std::vector<Value>& ov, const Attrs& attrs) {
  const bool inverse = attr_int(attrs, "return_inverse") != 0, counts = attr_int(attrs, "return_counts") != 0;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t d = wrap(attr_int(attrs, "dim"), rank);
  int64_t len = 1;
  std::vector<int64_t> perm{d};
  for (int64_t k = 0; k < rank; ++k) {
    if (k == d) continue;
    perm.push_back(k);
    len *= x.shape[k];
    check<NotImplemented>(x.sym[k].empty(), "onnx::export_model: op 'unique' with dim (", where(current_module()),
                          ") on ", x.shape, " with the dynamic axis '", x.sym[k], "' in its slices; only dim ", d,
                          " may be dynamic");
  }
  check<NotImplemented>(len >= 1 && len <= 1024, "onnx::export_model: op 'unique' with dim (", where(current_module()),
                        ") on ", x.shape, ": slices of ", len, " elements (1 to 1024 export: one sort per element)");
  const std::string rows = node("Reshape", {node("Transpose", {x.name}, {aints("perm", perm)}), const_i64({0, len})});  // (n, len)
  const std::string n = shape_of(rows, 0, 1);
  std::string order = node("Range", {const_i64_scalar(0), node("Squeeze", {n, axes_input({0})}), const_i64_scalar(1)});
  Value col = x;
  col.shape = Shape{x.shape[d]};
  col.sym = {x.sym[d]};
  for (int64_t k = len; k-- > 0;) {
    col.name = node("Gather", {node("Gather", {rows, order}, {ai("axis", 0)}), const_i64_scalar(k)}, {ai("axis", 1)});
    order = node("Gather", {order, stable_order(col, topk_key(col), 0, n)}, {ai("axis", 0)});
  }
  const std::string sorted = node("Gather", {rows, order}, {ai("axis", 0)});
  const Runs runs = runs_along(sorted, 0, {1}, n);
  const std::string& at = runs.at;
  node("Gather", {x.name, node("Gather", {order, at}, {ai("axis", 0)})}, {ai("axis", d)}, ov[0].name);
  const std::string m = fresh("unique_");
  ov[0].sym = x.sym;
  ov[0].sym[static_cast<size_t>(d)] = m;
  if (inverse) {  // inverse[order[k]] = the group of sorted row k
    const std::string group = run_of_each(runs);
    node("ScatterElements", {group, order, group}, {ai("axis", 0)}, ov[1].name);
    ov[1].sym[0] = x.sym[static_cast<size_t>(d)];
  }
  if (counts) {
    run_lengths(runs, n, ov.back());
    ov.back().sym[0] = m;
  }
}

Exporter::Runs Exporter::runs_along(const std::string& v, int64_t d, const std::vector<int64_t>& across,
                                    const std::string& n) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::string changed = node("Not", {node("Equal", {node("Slice", {v, const_i64({1}), const_i64({big}), const_i64({d})}),
                                                    node("Slice", {v, const_i64({0}), const_i64({-1}), const_i64({d})})})});
  if (!across.empty())
    changed = node("Greater", {node("ReduceMax", {node("Cast", {changed}, {ai("to", onnx_dtype(DType::i64))})},
                                    {aints("axes", across), ai("keepdims", 0)}),
                               const_i64_scalar(0)});
  Tensor first;
  {
    trace::Suspend s;
    first = ones({1}, dtype(kBool));
  }
  // The first element starts a run; the Slice to n keeps an empty input empty.
  Runs r;
  r.starts = node("Slice", {node("Concat", {const_tensor(first), changed}, {ai("axis", 0)}), const_i64({0}), n,
                            const_i64({0})});
  r.at = node("Squeeze", {node("NonZero", {r.starts}), axes_input({0})});  // (m) int64
  return r;
}

std::string Exporter::run_of_each(const Runs& r) {
  return node("Sub", {node("CumSum", {node("Cast", {r.starts}, {ai("to", onnx_dtype(DType::i64))}), const_i64_scalar(0)}),
                      const_i64_scalar(1)});
}

void Exporter::run_lengths(const Runs& r, const std::string& n, Value& out) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const std::string ends = node("Concat", {node("Slice", {r.at, const_i64({1}), const_i64({big}), const_i64({0})}), n},
                                {ai("axis", 0)});
  node("Sub", {ends, r.at}, {}, out.name);
}

// histc, as core/stats.cpp counts: the bin of v is (v - min) bins / (max - min) in x's dtype,
// truncated, the last bin holding max; values outside [min, max] and NaN are not counted. min = max
// (0 and 0 by default): the data's min and max (ReduceMin/ReduceMax), widened by 1 each way when
// equal. The counts from a one-hot (n, bins) Equal summed over n.
void Exporter::convert_histc(const Value& x, Value& y, const Attrs& attrs) {
  const int64_t bins = attr_int(attrs, "bins");
  const double lo = attr_double(attrs, "min"), hi = attr_double(attrs, "max");
  const DType dt = x.dtype;
  check<NotImplemented>(dt == DType::f32 || dt == DType::f64, "onnx::export_model: op 'histc' (", where(current_module()),
                        ") on ", dt, " is not exported (float32 and float64 are)");
  auto c = [&](double v) { return const_scalar(v, dt); };
  const std::string flat = node("Reshape", {x.name, const_i64({-1})});
  std::string left = c(lo), right = c(hi);
  if (lo == hi) {
    const std::string mn = node("ReduceMin", {flat}, {ai("keepdims", 0)}), mx = node("ReduceMax", {flat}, {ai("keepdims", 0)});
    const std::string same = node("Equal", {mn, mx});
    left = node("Where", {same, node("Sub", {mn, c(1)}), mn});
    right = node("Where", {same, node("Add", {mx, c(1)}), mx});
  }
  std::string pos = node("Cast", {node("Div", {node("Mul", {node("Sub", {flat, left}), c(static_cast<double>(bins))}),
                                               node("Sub", {right, left})})},
                         {ai("to", onnx_dtype(DType::i64))});
  pos = node("Min", {pos, const_i64_scalar(bins - 1)});
  const std::string inside = node("And", {node("GreaterOrEqual", {flat, left}), node("LessOrEqual", {flat, right})});
  std::vector<int64_t> ids(static_cast<size_t>(bins));
  for (int64_t i = 0; i < bins; ++i) ids[static_cast<size_t>(i)] = i;
  const std::string hit = node("And", {node("Equal", {node("Unsqueeze", {pos, axes_input({1})}), const_i64(ids)}),
                                       node("Unsqueeze", {inside, axes_input({1})})});
  node("ReduceSum", {node("Cast", {hit}, {ai("to", onnx_dtype(dt))}), axes_input({0})}, {ai("keepdims", 0)}, y.name);
}

// logcumsumexp as core/stats.cpp computes it: a Hillis-Steele scan along a static axis, each step
// max(a, b) + log1p(exp(-|a - b|)) (0 for the gap of equal infinities), the first `off` elements kept.
void Exporter::convert_logcumsumexp(const Value& x, Value& y, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t d = rank == 0 ? 0 : wrap(dim, rank);
  y.sym = x.sym;
  const int64_t n = rank == 0 ? 1 : x.shape[d];
  std::string cur = x.name;
  const DType dt = x.dtype;
  auto step = [&](const std::string& a, const std::string& b) {
    const std::string diff = node("Sub", {a, b});
    const std::string gap = node("Where", {node("IsNaN", {diff}), const_scalar(0, dt), node("Neg", {node("Abs", {diff})})});
    return node("Add", {node("Max", {a, b}), node("Log", {node("Add", {node("Exp", {gap}), const_scalar(1, dt)})})});
  };
  if (rank > 0 && !x.sym[d].empty()) {  // a dynamic length: the rounds in a Loop, offsets from its shift
    const int64_t big = std::numeric_limits<int64_t>::max();
    doubling_loop({cur}, {dt}, rank, d, [&](const std::vector<std::string>& st, const std::string& off) {
      const std::string len = shape_of(st[0], d, d + 1), axis = const_i64({d}), zero = const_i64({0});
      const std::string a = node("Slice", {st[0], off, const_i64({big}), axis});
      const std::string b = node("Slice", {st[0], zero, node("Sub", {len, off}), axis});
      return std::vector<std::string>{
          node("Concat", {node("Slice", {st[0], zero, off, axis}), step(a, b)}, {ai("axis", d)})};
    }, {y.name});
    return;
  }
  if (n <= 1) {
    node("Identity", {cur}, {}, y.name);
    return;
  }
  auto slice = [&](const std::string& t, int64_t a, int64_t b) {
    return node("Slice", {t, const_i64({a}), const_i64({b}), const_i64({d})});
  };
  for (int64_t off = 1; off < n; off *= 2)
    cur = node("Concat", {slice(cur, 0, off), step(slice(cur, off, n), slice(cur, 0, n - off))}, {ai("axis", d)},
               2 * off >= n ? y.name : std::string());
}

// cummax / cummin: a log-step scan of (value, index) pairs along a static axis, combining the pair
// `s` before with the current one as core/stats.cpp's rule does: a NaN wins (the latest NaN), else
// the current pair where its value is >= (cummax) / <= (cummin) the earlier one (ties: the latest).
// Positions shifted in at the front hold -inf / +inf (integers: the dtype's extremes) and index -1,
// which never win.
void Exporter::convert_cum_extreme(const std::string& op, const Value& x, std::vector<Value>& ov, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const bool is_max = op == "cummax", fl = is_floating(x.dtype);
  for (Value& o : ov) o.sym = x.sym;
  if (rank == 0) {
    node("Identity", {x.name}, {}, ov[0].name);
    node("Identity", {const_i64_scalar(0)}, {}, ov[1].name);
    return;
  }
  const int64_t d = wrap(dim, rank), n = x.shape[d];
  const bool dyn = !x.sym[d].empty();
  const DType kd = fl ? x.dtype : DType::i64;
  std::string v = cast(x, kd);
  // idx: 0 .. n-1 along dim d, expanded to x's shape (dynamic: a CumSum of ones, minus 1).
  std::string idx;
  if (dyn) {
    idx = node("Sub", {node("CumSum", {node("Expand", {const_i64_scalar(1), node("Shape", {v})}), const_i64_scalar(d)}),
                       const_i64_scalar(1)});
  } else {
    std::vector<int64_t> col(static_cast<size_t>(rank), 1), ids(static_cast<size_t>(n));
    col[static_cast<size_t>(d)] = n;
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    idx = node("Expand", {node("Reshape", {const_i64(ids), const_i64(col)}), node("Shape", {v})});
  }
  std::string lowest;
  if (fl) lowest = const_scalar(is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity(), kd);
  else lowest = const_i64_scalar(is_max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
  // One round with shift s (pads: its Pad input; len: the dim's length, an int64 [1]).
  auto round = [&](const std::string& cv, const std::string& ci, const std::string& pads, const std::string& len) {
    auto shift = [&](const std::string& t, const std::string& fill) {
      return node("Slice", {node("Pad", {t, pads, fill}), const_i64({0}), len, const_i64({d})});
    };
    const std::string pv = shift(cv, lowest), pi = shift(ci, const_i64_scalar(-1));
    // take the current pair: current NaN, or (earlier not NaN and current >= / <= earlier)
    std::string take = node(is_max ? "GreaterOrEqual" : "LessOrEqual", {cv, pv});
    if (fl) take = node("Or", {node("IsNaN", {cv}), node("And", {node("Not", {node("IsNaN", {pv})}), take})});
    return std::vector<std::string>{node("Where", {take, cv, pv}), node("Where", {take, ci, pi})};
  };
  if (dyn) {
    std::vector<int64_t> unit(static_cast<size_t>(2 * rank), 0);
    unit[static_cast<size_t>(d)] = 1;
    const std::string unit_pads = const_i64(unit), vf = fresh("t");
    doubling_loop({v, idx}, {kd, DType::i64}, rank, d, [&](const std::vector<std::string>& st, const std::string& s) {
      return round(st[0], st[1], node("Mul", {unit_pads, s}), shape_of(st[0], d, d + 1));
    }, {vf, ov[1].name});
    node("Identity", {cast(vf, kd, x.dtype)}, {}, ov[0].name);
    return;
  }
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(d)] = s;
    std::vector<std::string> next = round(v, idx, const_i64(pads), const_i64({n}));
    v = next[0];
    idx = next[1];
  }
  node("Identity", {cast(v, kd, x.dtype)}, {}, ov[0].name);
  node("Identity", {idx}, {}, ov[1].name);
}

// searchsorted (and bucketize through it): for each value, how many elements of its sorted line
// (through sorter when given) a binary search passes: those with !(m >= v) (side left) or !(m > v)
// (right), counted from a (..., m, n) comparison. So a NaN value goes past everything, as in nabla;
// a sorted line that holds NaN (last) is counted, where a binary search's answer depends on its path.
// Compared in the dtype nabla uses (result_type: a 0-d value of the line's kind takes its dtype).
void Exporter::convert_searchsorted(const std::vector<const Value*>& iv, Value& y, const Attrs& attrs) {
  const Value& seq = *iv[0];
  const Value& vals = *iv[1];
  const Value* sorter = iv.size() > 2 ? iv[2] : nullptr;
  DType common = promote_types(seq.dtype, vals.dtype);
  if (vals.shape.empty() && is_floating(vals.dtype) == is_floating(seq.dtype)) common = seq.dtype;
  if (common == DType::f16 || common == DType::bf16) common = DType::f32;
  std::string s = cast(seq, common);
  if (sorter) s = node("GatherElements", {s, sorter->name}, {ai("axis", -1)});
  const int64_t rs = static_cast<int64_t>(seq.shape.size()), rv = static_cast<int64_t>(vals.shape.size());
  if (rs > 1) s = node("Unsqueeze", {s, axes_input({rs - 1})});  // (..., 1, n)
  const std::string v = node("Unsqueeze", {cast(vals, common), axes_input({rv})});  // (..., m, 1)
  const std::string stop = node(attr_int(attrs, "right") ? "Greater" : "GreaterOrEqual", {s, v});
  const std::string count = node("ReduceSum", {node("Cast", {node("Not", {stop})}, {ai("to", onnx_dtype(DType::i64))}),
                                               const_i64({-1})},
                                 {ai("keepdims", 0)});
  node("Identity", {cast(count, DType::i64, y.dtype)}, {}, y.name);
  y.sym = vals.sym;
}

// bincount: length max(max(x) + 1, minlength) (x's max with a -1 appended, so an empty x gives
// minlength), the counts (or weight sums) from a one-hot (n, length) Equal summed over n.
void Exporter::convert_bincount(const Value& x, const Value* weights, Value& y, const Attrs& attrs) {
  const std::string xi = cast(x, DType::i64);
  const std::string top = node("ReduceMax", {node("Concat", {xi, const_i64({-1})}, {ai("axis", 0)})}, {ai("keepdims", 1)});
  const std::string len = node("Max", {node("Add", {top, const_i64({1})}), const_i64({attr_int(attrs, "minlength")})});
  const std::string ids = node("Range", {const_i64_scalar(0), node("Squeeze", {len, axes_input({0})}), const_i64_scalar(1)});
  const std::string hit = node("Cast", {node("Equal", {node("Unsqueeze", {xi, axes_input({1})}), ids})},
                               {ai("to", onnx_dtype(y.dtype))});
  const std::string terms = weights ? node("Mul", {hit, node("Unsqueeze", {cast(*weights, y.dtype), axes_input({1})})}) : hit;
  node("ReduceSum", {terms, axes_input({0})}, {ai("keepdims", 0)}, y.name);
  y.sym[0] = fresh("bincount_");
}

void Exporter::doubling_loop(const std::vector<std::string>& init, const std::vector<DType>& dtypes, int64_t rank,
                             int64_t d, const Round& round, const std::vector<std::string>& outs) {
  auto body = std::make_shared<SubGraph>();
  const std::string it = fresh("loop_i"), cond_in = fresh("loop_cond"), s_in = fresh("loop_s");
  std::vector<std::string> state_in;
  for (size_t i = 0; i < init.size(); ++i) state_in.push_back(fresh("loop_v"));
  std::swap(body->nodes, nodes_);  // the nodes emitted until the swap back are the body's
  const std::vector<std::string> state_out = round(state_in, s_in);
  const std::string s_out = node("Mul", {s_in, const_i64({2})});
  const std::string cond_out = node("Squeeze", {node("Less", {s_out, shape_of(state_in[0], d, d + 1)}), axes_input({0})});
  std::swap(body->nodes, nodes_);
  const std::string tag = fresh("/loop");
  for (ONode& n : body->nodes) n.name = tag + n.name;
  body->inputs = {{it, DType::i64, 0}, {cond_in, DType::boolean, 0}};
  body->outputs = {{cond_out, DType::boolean, 0}};
  for (size_t i = 0; i < init.size(); ++i) {
    body->inputs.push_back({state_in[i], dtypes[i], rank});
    body->outputs.push_back({state_out[i], dtypes[i], rank});
  }
  body->inputs.push_back({s_in, DType::i64, 1});
  body->outputs.push_back({s_out, DType::i64, 1});
  const std::string go = node("Squeeze", {node("Less", {const_i64({1}), shape_of(init[0], d, d + 1)}), axes_input({0})});
  std::vector<std::string> ins{"", go};
  ins.insert(ins.end(), init.begin(), init.end());
  ins.push_back(const_i64({1}));
  std::vector<std::string> louts = outs;
  louts.push_back(fresh("t"));
  node_multi("Loop", ins, {agraph("body", body)}, louts);
}

// nn::RNN / LSTM / GRU as ONNX's RNN / LSTM / GRU, one node per layer (both directions in it).
// in: x, h0, c0 (undefined: zeros), then per layer and direction weight_ih, weight_hh, bias_ih,
// bias_hh, weight_hr. ONNX wants X as (L, N, I) (batch_first and unbatched inputs are transposed /
// unsqueezed around the nodes), W (D, G*H, I), R (D, G*H, H), B (D, 2*G*H) = [Wb, Rb], with the
// gates in its own order: LSTM i, o, f, c (PyTorch i, f, g, o), GRU z, r, h (PyTorch r, z, n; PyTorch
// applies r after the hidden projection: linear_before_reset=1). The weights are reordered here
// into new initializers.
void Exporter::convert_rnn(const std::string& op, const std::vector<Tensor>& in, const std::vector<const Value*>& iv,
                           std::vector<Value>& ov, const Attrs& attrs) {
  const Value& x = *iv[0];
  const int64_t layers = attr_int(attrs, "num_layers"), H = attr_int(attrs, "hidden_size");
  const int64_t D = attr_int(attrs, "bidirectional") ? 2 : 1;
  const bool batch_first = attr_int(attrs, "batch_first") != 0, lstm = op == "lstm";
  const bool batched = x.shape.size() == 3;
  const std::string onnx_op = lstm ? "LSTM" : op == "gru" ? "GRU" : "RNN";
  // LSTM with proj_size: ONNX's LSTM has no projection, so each direction is a Scan over the
  // sequence (below), whatever its length.
  const int64_t P = attr_int(attrs, "proj_size");
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 3, 1, 2}
                                     : op == "gru" ? std::vector<int64_t>{1, 0, 2}
                                                   : std::vector<int64_t>{0};
  const int64_t G = static_cast<int64_t>(order.size());
  auto weight = [&](int64_t layer, int64_t d, int64_t k) -> const Tensor& { return in[3 + 5 * (layer * D + d) + k]; };
  for (int64_t layer = 0; layer < layers; ++layer)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t k = 0; k < 4; ++k) {
        check<NotImplemented>(!iv[3 + 5 * (layer * D + d) + k] ||
                                  std::any_of(inits_.begin(), inits_.end(),
                                              [&](const Initializer& i) { return i.name == iv[3 + 5 * (layer * D + d) + k]->name; }),
                              "onnx::export_model: op '", op, "' (", where(current_module()),
                              ") reads a weight computed in the graph; only parameters and constants export as ONNX's ",
                              onnx_op, " weights");
      }
  // A parameter's name with its layer suffix replaced: "lstm.weight_ih_l1" -> "lstm.onnx_W_l1".
  auto init_name = [&](const Tensor& w, const std::string& what, int64_t layer) {
    auto it = named_.find(w.impl());
    if (it == named_.end()) return fresh("const");
    std::string prefix = it->second.substr(0, it->second.rfind('.') + 1);
    return detail::str(prefix, "onnx_", what, "_l", layer);
  };
  std::string X = x.name;  // (L, N, I)
  if (!batched) X = node("Unsqueeze", {X, axes_input({1})});
  else if (batch_first) X = node("Transpose", {X}, {aints("perm", {1, 0, 2})});
  auto state = [&](const Value* s) {  // (D * layers, N, H)
    if (!s) return std::string();
    return batched ? s->name : node("Unsqueeze", {s->name, axes_input({1})});
  };
  const std::string h0 = state(iv[1]), c0 = lstm ? state(iv[2]) : std::string();
  std::vector<std::string> hs, cs;
  for (int64_t layer = 0; layer < layers; ++layer) {
    if (P > 0) {
      // Each direction a Scan over X's steps (backwards for the reverse direction, its outputs then
      // stacked in input order), the body one step as nabla's LSTM computes it (gates i, f, g, o):
      //   gates = x_t W_ih^T + b_ih + h W_hh^T + b_hh;  c = f c + i g;  h = (o tanh(c)) W_hr^T
      // The body reads the weights from the outer graph.
      std::vector<std::string> dir_outs;
      for (int64_t dd = 0; dd < D; ++dd) {
        auto w = [&](int64_t k) {
          const Value* v = iv[static_cast<size_t>(3 + 5 * (layer * D + dd) + k)];
          return v ? v->name : std::string();
        };
        auto gemm = [&](const std::string& a, const std::string& wt, const std::string& b) {
          std::vector<std::string> ins{a, wt};
          if (!b.empty()) ins.push_back(b);
          return node("Gemm", ins, {ai("transB", 1)});
        };
        auto initial = [&](const std::string& given, int64_t size) {  // (N, size)
          if (!given.empty()) return node("Gather", {given, const_i64_scalar(layer * D + dd)}, {ai("axis", 0)});
          return node("Expand", {const_scalar(0, x.dtype), node("Concat", {shape_of(X, 1, 2), const_i64({size})}, {ai("axis", 0)})});
        };
        const std::string h_init = initial(h0, P), c_init = initial(c0, H);
        auto body = std::make_shared<SubGraph>();
        const std::string h_in = fresh("scan_h"), c_in = fresh("scan_c"), x_in = fresh("scan_x");
        std::swap(body->nodes, nodes_);  // the nodes emitted until the swap back are the body's
        const std::string g = node("Add", {gemm(x_in, w(0), w(2)), gemm(h_in, w(1), w(3))});  // (N, 4H)
        std::vector<std::string> q{fresh("t"), fresh("t"), fresh("t"), fresh("t")};
        node_multi("Split", {g, const_i64({H, H, H, H})}, {ai("axis", 1)}, q);
        const std::string c_out =
            node("Add", {node("Mul", {node("Sigmoid", {q[1]}), c_in}), node("Mul", {node("Sigmoid", {q[0]}), node("Tanh", {q[2]})})});
        const std::string h_out = gemm(node("Mul", {node("Sigmoid", {q[3]}), node("Tanh", {c_out})}), w(4), "");  // (N, P)
        const std::string y_out = node("Identity", {h_out});  // the step's output (a graph output once)
        std::swap(body->nodes, nodes_);
        const std::string tag = fresh("/scan");
        for (ONode& n : body->nodes) n.name = tag + n.name;
        body->inputs = {{h_in, x.dtype, 2}, {c_in, x.dtype, 2}, {x_in, x.dtype, 2}};
        body->outputs = {{h_out, x.dtype, 2}, {c_out, x.dtype, 2}, {y_out, x.dtype, 2}};
        const std::string h_last = fresh("t"), c_last = fresh("t"), ys = fresh("t");  // ys: (L, N, P)
        node_multi("Scan", {h_init, c_init, X},
                   {agraph("body", body), ai("num_scan_inputs", 1), aints("scan_input_directions", {dd}),
                    aints("scan_output_directions", {dd})},
                   {h_last, c_last, ys});
        dir_outs.push_back(ys);
        hs.push_back(node("Unsqueeze", {h_last, axes_input({0})}));
        cs.push_back(node("Unsqueeze", {c_last, axes_input({0})}));
      }
      X = D == 1 ? dir_outs[0] : node("Concat", dir_outs, {ai("axis", 2)});  // (L, N, D * P)
      continue;
    }
    std::string W, R, B;
    {
      trace::Suspend s;  // the reordering is not part of the model
      auto reorder = [&](const Tensor& t) {
        std::vector<Tensor> chunks = t.detach().to(kCPU).chunk(G, 0), parts;
        for (int64_t g : order) parts.push_back(chunks[static_cast<size_t>(g)]);
        return cat(parts, 0);
      };
      std::vector<Tensor> ws, rs, bs;
      for (int64_t d = 0; d < D; ++d) {
        ws.push_back(reorder(weight(layer, d, 0)));
        rs.push_back(reorder(weight(layer, d, 1)));
        if (weight(layer, d, 2).defined() || weight(layer, d, 3).defined()) {
          Tensor bi = weight(layer, d, 2).defined() ? reorder(weight(layer, d, 2)) : zeros({G * H}, dtype(x.dtype));
          Tensor bh = weight(layer, d, 3).defined() ? reorder(weight(layer, d, 3)) : zeros({G * H}, dtype(x.dtype));
          bs.push_back(cat({bi, bh}, 0));
        }
      }
      W = init_name(weight(layer, 0, 0), "W", layer);
      R = init_name(weight(layer, 0, 0), "R", layer);
      inits_.push_back({W, stack(ws, 0).contiguous()});
      inits_.push_back({R, stack(rs, 0).contiguous()});
      if (!bs.empty()) {
        B = init_name(weight(layer, 0, 0), "B", layer);
        inits_.push_back({B, stack(bs, 0).contiguous()});
      }
    }
    auto slice_state = [&](const std::string& s) {
      if (s.empty() || layers == 1) return s;
      return node("Slice", {s, const_i64({layer * D}), const_i64({(layer + 1) * D}), const_i64({0})});
    };
    std::vector<std::string> ins{X, W, R, B, "", slice_state(h0)};
    if (lstm) ins.push_back(slice_state(c0));
    while (ins.back().empty()) ins.pop_back();  // absent optional inputs at the end are left out
    std::vector<OAttr> at{ai("hidden_size", H), astr("direction", D == 2 ? "bidirectional" : "forward")};
    if (op == "gru") at.push_back(ai("linear_before_reset", 1));
    if (op == "rnn") at.push_back(astrings("activations", std::vector<std::string>(static_cast<size_t>(D),
                                                                                   attr_int(attrs, "relu") ? "Relu" : "Tanh")));
    std::string Y = fresh("t"), Yh = fresh("t"), Yc = lstm ? fresh("t") : std::string();
    std::vector<std::string> outs{Y, Yh};
    if (lstm) outs.push_back(Yc);
    node_multi(onnx_op, ins, at, outs);
    hs.push_back(Yh);
    if (lstm) cs.push_back(Yc);
    // Y: (L, D, N, H) -> (L, N, D * H), the next layer's input
    if (D == 1) X = node("Squeeze", {Y, axes_input({1})});
    else X = node("Reshape", {node("Transpose", {Y}, {aints("perm", {0, 2, 1, 3})}), const_i64({0, 0, -1})});
  }
  Value& out = ov[0];
  if (!batched) node("Squeeze", {X, axes_input({1})}, {}, out.name);
  else if (batch_first) node("Transpose", {X}, {aints("perm", {1, 0, 2})}, out.name);
  else node("Identity", {X}, {}, out.name);
  auto states_out = [&](const std::vector<std::string>& parts, Value& v) {  // (D * layers, N, H)
    std::string s = parts.size() == 1 ? parts[0] : node("Concat", parts, {ai("axis", 0)});
    if (!batched) node("Squeeze", {s, axes_input({1})}, {}, v.name);
    else node("Identity", {s}, {}, v.name);
  };
  states_out(hs, ov[1]);
  if (lstm) states_out(cs, ov[2]);
  // Dynamic dims: the output's (L, N) or (N, L) are the input's; the states' N is the input's batch.
  out.sym[0] = x.sym[0];
  if (batched) {
    out.sym[1] = x.sym[1];
    for (size_t i = 1; i < ov.size(); ++i) ov[i].sym[1] = x.sym[batch_first ? 0 : 1];
  }
}

void Exporter::convert(const std::string& op, const std::vector<Tensor>& in, const std::vector<const Value*>& iv,
                       const std::vector<Tensor>& out, std::vector<Value>& ov, const Attrs& attrs) {
  Value& y = ov[0];
  const Value* x = iv.empty() ? nullptr : iv[0];
  const int64_t rank = x ? static_cast<int64_t>(x->shape.size()) : 0;
  auto no_mapping = [&](const std::string& why) {
    throw NotImplemented(detail::str("onnx::export_model: op '", op, "' (", where(current_module()),
                                     ") has no ONNX mapping", why.empty() ? "" : ": ", why));
  };
  // unary_kernel's calls carry p0/p1, binary()'s carry alpha.
  auto has = [&](const char* name) {
    return std::any_of(attrs.begin(), attrs.end(), [&](const trace::Attr& a) { return a.name == name; });
  };
  if (iv.size() == 1 && x && has("p0") && convert_unary(op, *x, y, attrs)) return;
  if (iv.size() == 2 && x && iv[1] && has("alpha") && convert_binary(op, iv, y, attrs)) return;

  if (op == "rnn" || op == "lstm" || op == "gru") {
    convert_rnn(op, in, iv, ov, attrs);
  } else if (op == "interpolate") {
    convert_interpolate(*x, y, attrs);
  } else if (op == "cumprod") {
    convert_cumprod(*x, y, attr_int(attrs, "dim"));
  } else if (op == "median" || op == "nanmedian" || op == "kthvalue" || op == "mode") {
    convert_stats(op, iv, ov, attrs);
  } else if (op == "quantile" || op == "nanquantile") {
    convert_quantile(op, *x, *iv[1], y, attrs);
  } else if (op == "unique_consecutive") {
    convert_unique_consecutive(*x, ov, attrs, std::nullopt);
  } else if (op == "unique_dim") {
    if (rank == 0) no_mapping("on a 0-dim tensor");
    convert_unique_dim(*x, ov, attrs);
  } else if (op == "unique_consecutive_dim") {
    if (rank == 0) no_mapping("on a 0-dim tensor");
    convert_unique_consecutive(*x, ov, attrs, attr_int(attrs, "dim"));
  } else if (op == "histc") {
    convert_histc(*x, y, attrs);
  } else if (op == "logcumsumexp") {
    convert_logcumsumexp(*x, y, attr_int(attrs, "dim"));
  } else if (op == "cummax" || op == "cummin") {  // (values, indices)
    convert_cum_extreme(op, *x, ov, attr_int(attrs, "dim"));
  } else if (op == "searchsorted") {  // in: sorted_sequence, values, sorter (undefined: none)
    convert_searchsorted(iv, y, attrs);
  } else if (op == "bincount") {  // in: x, weights (undefined: none)
    convert_bincount(*x, iv[1], y, attrs);
  } else if (op == "any" || op == "all") {
    // Counts of nonzero (any) or zero (all) elements: ReduceSum gives 0 for an empty reduction, so
    // any() of nothing is false and all() true, as in PyTorch (NaN counts as nonzero).
    const bool is_any = op == "any";
    std::string hit;
    if (x->dtype == DType::boolean) hit = is_any ? x->name : node("Not", {x->name});
    else {
      std::string zero = node("Equal", {x->name, const_tensor(scalar_tensor(0, dtype(x->dtype)))});
      hit = is_any ? node("Not", {zero}) : zero;
    }
    std::vector<int64_t> dims = attr_ints(attrs, "dims");
    for (auto& d : dims) d = wrap(d, rank);
    const int64_t keep = attr_int(attrs, "keepdim");
    std::vector<std::string> ins{node("Cast", {hit}, {ai("to", onnx_dtype(DType::i64))})};
    if (!dims.empty()) ins.push_back(axes_input(dims));
    std::string count = node("ReduceSum", ins, {ai("keepdims", keep)});
    node(is_any ? "Greater" : "Equal", {count, const_i64_scalar(0)}, {}, y.name);
    sym_reduce(y, *x, dims, keep != 0);
  } else if (op == "index_add") {  // in: x, index (1-D), src -> ScatterElements with reduction='add'
    if (rank == 0) no_mapping("on a 0-dim tensor");
    check<NotImplemented>(opset_ >= 16, "onnx::export_model: op 'index_add' (", where(current_module()),
                          ") needs opset 16 or later (ScatterElements' reduction='add'), got ", opset_);
    const int64_t d = wrap(attr_int(attrs, "dim"), rank);
    const Value& src = *iv[2];
    // The index along dim d, broadcast to src's shape: index[k] for every src element with k on dim d.
    std::vector<int64_t> col(static_cast<size_t>(rank), 1);
    col[static_cast<size_t>(d)] = -1;
    std::string idx = node("Reshape", {cast(*iv[1], DType::i64), const_i64(col)});
    idx = node("Expand", {idx, node("Shape", {src.name})});
    node("ScatterElements", {x->name, idx, cast(src, x->dtype)}, {ai("axis", d), astr("reduction", "add")}, y.name);
    y.sym = x->sym;
  } else if (op == "pad") {  // (before, after) pairs from the last dim -> Pad's [begins, ends]
    // constant: Pad (negative padding crops: a Slice first); reflect: Pad mode reflect; replicate:
    // Pad mode edge; circular (Pad's wrap is opset 19): Concat of the wrapped-around slices, per dim.
    const std::string mode = has("mode") ? attr_string(attrs, "mode") : std::string("constant");
    const std::vector<int64_t> p = attr_ints(attrs, "padding");
    if (mode != "constant") {
      check<NotImplemented>(std::all_of(p.begin(), p.end(), [](int64_t v) { return v >= 0; }), "onnx::export_model: op 'pad' (",
                            where(current_module()), ") with mode '", mode, "' and negative padding ", IntArrayRef(p));
      y.sym = x->sym;
      for (int64_t d = 0; d < rank; ++d)
        if (y.shape[d] != x->shape[d]) y.sym[d].clear();
      if (mode == "reflect" || mode == "replicate") {
        std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
        for (size_t i = 0; i < p.size() / 2; ++i) {
          pads[static_cast<size_t>(rank - 1 - static_cast<int64_t>(i))] = p[2 * i];
          pads[static_cast<size_t>(2 * rank - 1 - static_cast<int64_t>(i))] = p[2 * i + 1];
        }
        node("Pad", {x->name, const_i64(pads)}, {astr("mode", mode == "reflect" ? "reflect" : "edge")}, y.name);
        return;
      }
      check<NotImplemented>(mode == "circular", "onnx::export_model: op 'pad' (", where(current_module()),
                            ") has no ONNX mapping for mode '", mode, "'");
      std::string cur = x->name;
      const int64_t big = std::numeric_limits<int64_t>::max();
      for (size_t i = 0; i < p.size() / 2; ++i) {
        const int64_t d = rank - 1 - static_cast<int64_t>(i), before = p[2 * i], after = p[2 * i + 1];
        if (before == 0 && after == 0) continue;
        std::vector<std::string> parts;
        // [x[n - before:], x, x[:after]] (the slices of the input as padded so far along other dims)
        if (before > 0) parts.push_back(node("Slice", {cur, const_i64({-before}), const_i64({big}), const_i64({d})}));
        parts.push_back(cur);
        if (after > 0) parts.push_back(node("Slice", {cur, const_i64({0}), const_i64({after}), const_i64({d})}));
        cur = node("Concat", parts, {ai("axis", d)});
      }
      node("Identity", {cur}, {}, y.name);
      return;
    }
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0), starts, ends, axes;
    for (size_t i = 0; i < p.size() / 2; ++i) {
      const int64_t d = rank - 1 - static_cast<int64_t>(i);
      int64_t& lo = pads[static_cast<size_t>(d)];
      int64_t& hi = pads[static_cast<size_t>(rank + d)];
      lo = p[2 * i];
      hi = p[2 * i + 1];
      if (lo < 0 || hi < 0) {  // negative padding crops: a Slice first
        check<NotImplemented>(x->sym[d].empty(), "onnx::export_model: op 'pad' (", where(current_module()),
                              ") crops the dynamic axis '", x->sym[d], "' of ", x->shape);
        starts.push_back(std::max<int64_t>(-lo, 0));
        ends.push_back(x->shape[d] - std::max<int64_t>(-hi, 0));
        axes.push_back(d);
        lo = std::max<int64_t>(lo, 0);
        hi = std::max<int64_t>(hi, 0);
      }
    }
    std::string cur = x->name;
    if (!axes.empty()) cur = node("Slice", {cur, const_i64(starts), const_i64(ends), const_i64(axes)});
    node("Pad", {cur, const_i64(pads), const_scalar(attr_double(attrs, "value"), x->dtype)}, {}, y.name);
    y.sym = x->sym;
    for (int64_t d = 0; d < rank; ++d)
      if (y.shape[d] != x->shape[d]) y.sym[d].clear();
  } else if (op == "instance_norm") {  // in: x, running_mean, running_var, weight, bias
    if (!attr_int(attrs, "use_input_stats")) {
      // The running statistics (InstanceNorm with track_running_stats, in eval): batch norm's
      // formula, traced as the ops instance_norm is made of.
      Tensor r;
      {
        trace::StepAside parts;
        r = nn::functional::instance_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, attr_double(attrs, "eps"));
      }
      const Value& rv = value_of(r);
      node("Identity", {rv.name}, {}, y.name);
      y.sym = rv.sym;
    } else {
      const int64_t C = x->shape[1];
      std::string scale = iv[3] ? cast(*iv[3], x->dtype) : const_tensor(ones({C}, dtype(x->dtype)));
      std::string bias = iv[4] ? cast(*iv[4], x->dtype) : const_tensor(zeros({C}, dtype(x->dtype)));
      node("InstanceNormalization", {x->name, scale, bias}, {af("epsilon", attr_double(attrs, "eps"))}, y.name);
      y.sym = x->sym;
    }
  } else if (op == "grid_sample") {  // in: input (N, C, H, W), grid (N, H_out, W_out, 2)
    const std::string mode = attr_string(attrs, "mode"), padding = attr_string(attrs, "padding_mode");
    const bool corners = attr_int(attrs, "align_corners") != 0;
    if (opset_ >= 16 && rank == 4) {
      node("GridSample", {x->name, cast(*iv[1], x->dtype)},
           {astr("mode", mode), astr("padding_mode", padding), ai("align_corners", corners)}, y.name);
      y.sym[0] = !x->sym[0].empty() ? x->sym[0] : iv[1]->sym[0];
    } else {
      // GridSample is opset 16 and 4-D (N-D in opset 20): here the ops grid_sample is made of,
      // traced now (the batch then stays static: the composition builds batch-shaped constants).
      const nn::functional::GridSampleOptions o{.mode = mode, .padding_mode = padding, .align_corners = corners};
      Tensor r;
      {
        trace::StepAside parts;
        r = nn::functional::grid_sample(in[0], in[1], o);
      }
      const Value& rv = value_of(r);
      node("Identity", {rv.name}, {}, y.name);
      y.sym = rv.sym;
    }
  } else if (op == "nonzero") {  // NonZero is (rank, n); PyTorch's nonzero (n, rank)
    if (rank == 0) no_mapping("on a 0-dim tensor");
    node("Transpose", {node("NonZero", {x->name})}, {aints("perm", {1, 0})}, y.name);
    y.sym[0] = fresh("nonzero_");  // how many: known when the model runs
  } else if (op == "unique") {  // values, then inverse (x's shape) and counts when asked for
    const bool inverse = attr_int(attrs, "return_inverse") != 0, counts = attr_int(attrs, "return_counts") != 0;
    std::string vals = ov[0].name, inv = fresh("t"), cnt = counts ? ov[inverse ? 2 : 1].name : fresh("t");
    node_multi("Unique", {x->name}, {ai("sorted", 1)}, {vals, fresh("t"), inv, cnt});
    const std::string n = fresh("unique_");
    ov[0].sym[0] = n;
    if (inverse) {
      node("Reshape", {inv, node("Shape", {x->name})}, {}, ov[1].name);
      ov[1].sym = x->sym;
    }
    if (counts) ov.back().sym[0] = n;
  } else if (op == "where") {
    node("Where", {cast(*iv[0], DType::boolean), cast(*iv[1], y.dtype), cast(*iv[2], y.dtype)}, {}, y.name);
    sym_broadcast(y, iv);
  } else if (op == "split") {
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    std::vector<std::string> names;
    for (Value& o : ov) {
      names.push_back(o.name);
      o.sym = x->sym;
      if (o.shape[d] != x->shape[d]) o.sym[d].clear();
    }
    check<NotImplemented>(x->sym[d].empty() || ov.size() == 1, "onnx::export_model: op 'split' (",
                          where(current_module()), ") splits the dynamic axis '", x->sym[d], "' of ", x->shape);
    node_multi("Split", {x->name, const_i64(attr_ints(attrs, "sizes"))}, {ai("axis", d)}, names);
  } else if (op == "unbind") {
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    for (size_t i = 0; i < ov.size(); ++i) {
      node("Gather", {x->name, const_i64_scalar(static_cast<int64_t>(i))}, {ai("axis", d)}, ov[i].name);
      for (int64_t k = 0, j = 0; k < rank; ++k)
        if (k != d) ov[i].sym[j++] = x->sym[k];
    }
  } else if (op == "pow_scalar") {
    node("Pow", {cast(*x, y.dtype), const_scalar(attr_double(attrs, "exponent"), y.dtype)}, {}, y.name);
    y.sym = x->sym;
  } else if (op == "view" || op == "reshape") {
    reshape_to(*x, y, attr_ints(attrs, "shape"));
  } else if (op == "flatten") {
    int64_t s = rank == 0 ? 0 : wrap(attr_int(attrs, "start"), rank), e = rank == 0 ? 0 : wrap(attr_int(attrs, "end"), rank);
    if (rank >= 2 && s == 1 && e == rank - 1) {
      node("Flatten", {x->name}, {ai("axis", 1)}, y.name);
      sym_prefix(y, *x, 1);
    } else {
      std::vector<int64_t> req(y.shape.size(), 0);
      for (size_t j = 0; j < req.size(); ++j) req[j] = y.shape[j];
      if (static_cast<int64_t>(req.size()) > s) req[s] = -1;  // the merged dim
      reshape_to(*x, y, req);
    }
  } else if (op == "permute") {
    std::vector<int64_t> perm = attr_ints(attrs, "dims");
    for (auto& p : perm) p = wrap(p, rank);
    node("Transpose", {x->name}, {aints("perm", perm)}, y.name);
    for (size_t j = 0; j < perm.size(); ++j) y.sym[j] = x->sym[perm[j]];
  } else if (op == "squeeze") {
    std::vector<int64_t> axes;
    bool all = std::none_of(attrs.begin(), attrs.end(), [](const trace::Attr& a) { return a.name == "dim"; });
    for (int64_t d = 0; d < rank; ++d)
      if (x->shape[d] == 1 && (all || d == wrap(attr_int(attrs, "dim"), rank))) axes.push_back(d);
    if (axes.empty()) node("Identity", {x->name}, {}, y.name);
    else node("Squeeze", {x->name, axes_input(axes)}, {}, y.name);
    for (int64_t d = 0, j = 0; d < rank; ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) y.sym[j++] = x->sym[d];
  } else if (op == "unsqueeze") {
    int64_t d = wrap(attr_int(attrs, "dim"), rank + 1);
    node("Unsqueeze", {x->name, axes_input({d})}, {}, y.name);
    for (int64_t k = 0, j = 0; j <= rank; ++j)
      if (j != d) y.sym[j] = x->sym[k++];
  } else if (op == "expand") {
    std::vector<int64_t> shape(y.shape.begin(), y.shape.end());
    int64_t r = static_cast<int64_t>(shape.size());
    for (int64_t j = 0; j < r; ++j) {
      int64_t k = j - (r - rank);
      if (k >= 0 && x->shape[k] == shape[j]) shape[j] = 1;  // 1: keeps the input's size (dynamic or not)
    }
    node("Expand", {x->name, const_i64(shape)}, {}, y.name);
    sym_broadcast(y, {x});
  } else if (op == "slice") {
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    int64_t start = attr_int(attrs, "start"), end = attr_int(attrs, "end"), step = attr_int(attrs, "step");
    check<NotImplemented>(x->sym[d].empty() || (start == 0 && end == std::numeric_limits<int64_t>::max()),
                          "onnx::export_model: op 'slice' (", where(current_module()), ") slices the dynamic axis '",
                          x->sym[d], "' of ", x->shape, "; slicing a dynamic axis is not exported");
    node("Slice", {x->name, const_i64({start}), const_i64({end}), const_i64({d}), const_i64({step})}, {}, y.name);
    y.sym = x->sym;
    if (y.shape[d] != x->shape[d]) y.sym[d].clear();
  } else if (op == "select") {
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    node("Gather", {x->name, const_i64_scalar(attr_int(attrs, "index"))}, {ai("axis", d)}, y.name);
    for (int64_t k = 0, j = 0; k < rank; ++k)
      if (k != d) y.sym[j++] = x->sym[k];
  } else if (op == "cat") {
    int64_t d = wrap(attr_int(attrs, "dim"), static_cast<int64_t>(y.shape.size()));
    std::vector<std::string> parts;
    std::vector<const Value*> used;
    for (const Value* v : iv)
      if (!(v->shape.size() == 1 && v->shape[0] == 0 && y.shape.size() != 1)) {
        parts.push_back(cast(*v, y.dtype));
        used.push_back(v);
      }
    node("Concat", parts, {ai("axis", d)}, y.name);
    for (size_t j = 0; j < y.sym.size(); ++j)
      if (static_cast<int64_t>(j) != d) y.sym[j] = used[0]->sym[j];
  } else if (op == "embedding") {
    // in: weight, indices
    node("Gather", {iv[0]->name, iv[1]->name}, {ai("axis", 0)}, y.name);
    for (size_t j = 0; j < iv[1]->sym.size(); ++j) y.sym[j] = iv[1]->sym[j];
  } else if (op == "index_select") {
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    node("Gather", {x->name, iv[1]->name}, {ai("axis", d)}, y.name);
    y.sym = x->sym;
    y.sym[d].clear();
  } else if (op == "gather") {  // torch.gather is GatherElements (negative indices count from the end in both)
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    node("GatherElements", {x->name, cast(*iv[1], DType::i64)}, {ai("axis", d)}, y.name);
    sym_broadcast(y, {iv[1]});
  } else if (op == "cumsum") {
    int64_t d = rank == 0 ? 0 : wrap(attr_int(attrs, "dim"), rank);
    std::string xn = cast(*x, y.dtype);
    if (rank == 0) node("Identity", {xn}, {}, y.name);
    else node("CumSum", {xn, const_i64_scalar(d)}, {}, y.name);
    y.sym = x->sym;
  } else if (op == "scatter" || op == "scatter_add") {  // in: x, index, src -> ScatterElements
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    const Value& idx = *iv[1];
    const Value& src = *iv[2];
    check<NotImplemented>(op == "scatter" || opset_ >= 16, "onnx::export_model: op 'scatter_add' (",
                          where(current_module()), ") needs opset 16 or later (ScatterElements' reduction='add'), got ",
                          opset_);
    std::string sn = src.name;
    if (src.shape != idx.shape) {  // scatter reads the window of src that the index covers
      check<NotImplemented>(!has_sym(idx) && !has_sym(src), "onnx::export_model: op '", op, "' (", where(current_module()),
                            ") with a source ", src.shape, " larger than the index ", idx.shape, " on a dynamic axis");
      std::vector<int64_t> starts(idx.shape.size(), 0), ends(idx.shape.begin(), idx.shape.end()), axes;
      for (size_t j = 0; j < idx.shape.size(); ++j) axes.push_back(static_cast<int64_t>(j));
      sn = node("Slice", {sn, const_i64(starts), const_i64(ends), const_i64(axes)});
    }
    std::vector<OAttr> at{ai("axis", d)};
    if (op == "scatter_add") at.push_back(astr("reduction", "add"));
    node("ScatterElements", {x->name, cast(idx, DType::i64), sn}, at, y.name);
    y.sym = x->sym;
  } else if (op == "sort" || op == "topk") {  // TopK: (values, indices) along one dim
    if (rank == 0) no_mapping("on a 0-dim tensor");
    int64_t d = wrap(attr_int(attrs, "dim"), rank);
    const bool sort = op == "sort";
    // sort along a dynamic axis takes all of it: K from the input's shape.
    const bool dynamic_k = sort && !x->sym[d].empty();
    const std::string k = dynamic_k ? shape_of(x->name, d, d + 1) : const_i64({sort ? x->shape[d] : attr_int(attrs, "k")});
    const bool largest = attr_int(attrs, sort ? "descending" : "largest") != 0;
    if (is_floating(x->dtype)) {
      // NaN is the largest value in nabla's sort and topk; TopK would leave it where its
      // comparisons fall, so the stable order (two TopKs, NaN never seen) picks, GatherElements takes.
      const std::string idx = stable_order(*x, topk_key(*x), d, k, largest);
      node("GatherElements", {x->name, idx}, {ai("axis", d)}, ov[0].name);
      node("Identity", {idx}, {}, ov[1].name);
    } else {
      node_multi("TopK", {x->name, k}, {ai("axis", d), ai("largest", largest), ai("sorted", 1)}, {ov[0].name, ov[1].name});
    }
    for (Value& o : ov) {
      o.sym = x->sym;
      if (!dynamic_k) o.sym[d].clear();
    }
  } else if (op == "to") {
    node("Cast", {x->name}, {ai("to", onnx_dtype(y.dtype))}, y.name);
    y.sym = x->sym;
  } else if (op == "clone") {
    node("Identity", {x->name}, {}, y.name);
    y.sym = x->sym;
  } else if (op == "sum" || op == "mean" || op == "amax" || op == "amin" || op == "prod") {
    std::vector<int64_t> dims = attr_ints(attrs, "dims");
    for (auto& d : dims) d = wrap(d, rank);
    int64_t keep = attr_int(attrs, "keepdim");
    std::string xn = cast(*x, y.dtype);
    if (op == "sum") {
      std::vector<std::string> ins{xn};
      if (!dims.empty()) ins.push_back(axes_input(dims));
      node("ReduceSum", ins, {ai("keepdims", keep)}, y.name);
    } else {
      std::vector<OAttr> at{ai("keepdims", keep)};
      if (!dims.empty()) at.push_back(aints("axes", dims));
      // prod: integers (and bool) multiply as int64, floats in their own dtype (ReduceProd of
      // nothing is 1, as PyTorch's).
      const bool extreme = op == "amax" || op == "amin";
      const bool nan_aware = extreme && is_floating(y.dtype);  // ReduceMax/Min skip NaN; nabla's give NaN
      const std::string r = node(op == "mean" ? "ReduceMean" : op == "amax" ? "ReduceMax" : op == "amin" ? "ReduceMin" : "ReduceProd",
                                 {xn}, at, nan_aware ? std::string() : y.name);
      if (nan_aware) {
        const std::string any_nan = node(
            "Greater", {node("ReduceMax", {node("Cast", {node("IsNaN", {xn})}, {ai("to", onnx_dtype(DType::f32))})}, at),
                        const_scalar(0, DType::f32)});
        node("Where", {any_nan, const_scalar(std::numeric_limits<double>::quiet_NaN(), y.dtype), r}, {}, y.name);
      }
    }
    bool all = dims.empty();
    for (int64_t d = 0, j = 0; d < rank; ++d) {
      bool reduced = all || std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!reduced) y.sym[j++] = x->sym[d];
      else if (keep) ++j;
    }
  } else if (op == "max_dim" || op == "min_dim") {  // (values, indices) along one dim
    if (rank == 0) no_mapping("on a 0-dim tensor");
    int64_t d = wrap(attr_int(attrs, "dim"), rank), keep = attr_int(attrs, "keepdim");
    const bool is_max = op == "max_dim";
    if (is_floating(x->dtype)) {
      // ONNX Runtime's ReduceMax/ArgMax skip NaN; nabla's max/min stop at a line's first NaN (its
      // value and index), so those lines are overridden.
      const std::string flag = node("Cast", {node("IsNaN", {x->name})}, {ai("to", onnx_dtype(DType::f32))});
      const std::string any_nan = node(
          "Greater", {node("ReduceMax", {flag}, {aints("axes", {d}), ai("keepdims", keep)}), const_scalar(0, DType::f32)});
      node("Where", {any_nan, const_scalar(std::numeric_limits<double>::quiet_NaN(), x->dtype),
                     node(is_max ? "ReduceMax" : "ReduceMin", {x->name}, {aints("axes", {d}), ai("keepdims", keep)})},
           {}, ov[0].name);
      node("Where", {any_nan, node("ArgMax", {flag}, {ai("axis", d), ai("keepdims", keep)}),
                     node(is_max ? "ArgMax" : "ArgMin", {x->name}, {ai("axis", d), ai("keepdims", keep)})},
           {}, ov[1].name);
    } else {
      node(is_max ? "ReduceMax" : "ReduceMin", {x->name}, {aints("axes", {d}), ai("keepdims", keep)}, ov[0].name);
      node(is_max ? "ArgMax" : "ArgMin", {x->name}, {ai("axis", d), ai("keepdims", keep)}, ov[1].name);
    }
    for (Value& o : ov)
      for (int64_t k = 0, j = 0; k < rank; ++k) {
        if (k != d) o.sym[j++] = x->sym[k];
        else if (keep) ++j;
      }
  } else if (op == "softmax" || op == "log_softmax") {
    int64_t d = rank == 0 ? 0 : wrap(attr_int(attrs, "dim"), rank);
    node(op == "softmax" ? "Softmax" : "LogSoftmax", {cast(*x, y.dtype)}, {ai("axis", d)}, y.name);
    y.sym = x->sym;
  } else if (op == "matmul") {
    node("MatMul", {x->name, iv[1]->name}, {}, y.name);
    int64_t ra = rank, rb = static_cast<int64_t>(iv[1]->shape.size()), ry = static_cast<int64_t>(y.shape.size());
    // Batch dims broadcast; the row dim of a comes along.
    for (int64_t j = 0; j < ry; ++j) {
      int64_t ka = ra >= 2 ? j - (ry - ra) : -1;  // a's dims sit at the front (minus its column dim)
      if (ra >= 2 && ka >= 0 && ka < ra - 1 && x->shape[ka] == y.shape[j] && !x->sym[ka].empty()) y.sym[j] = x->sym[ka];
      int64_t kb = rb >= 2 ? j - (ry - rb) : -1;
      if (rb >= 3 && kb >= 0 && kb < rb - 2 && iv[1]->shape[kb] == y.shape[j] && !iv[1]->sym[kb].empty())
        y.sym[j] = iv[1]->sym[kb];
    }
  } else if (op == "linear") {
    const Value& w = *iv[1];
    const Value* b = iv[2];
    if (rank == 2) {
      std::vector<std::string> ins{x->name, w.name};
      if (b) ins.push_back(b->name);
      node("Gemm", ins, {ai("transB", 1)}, y.name);
    } else {
      std::string wt = node("Transpose", {w.name}, {aints("perm", {1, 0})});
      if (b) node("Add", {node("MatMul", {x->name, wt}), b->name}, {}, y.name);
      else node("MatMul", {x->name, wt}, {}, y.name);
    }
    sym_prefix(y, *x, rank - 1);
  } else if (op == "conv") {
    const Value& w = *iv[1];
    const Value* b = iv[2];
    std::vector<int64_t> stride = attr_ints(attrs, "stride"), padding = attr_ints(attrs, "padding"),
                         dilation = attr_ints(attrs, "dilation");
    const int64_t nd = static_cast<int64_t>(stride.size());
    std::vector<int64_t> pads = padding;
    pads.insert(pads.end(), padding.begin(), padding.end());
    std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
    batched(*x, nd + 2, y, [&](const std::string& xin, const std::string& yout) {
      std::vector<std::string> ins{xin, w.name};
      if (b) ins.push_back(b->name);
      node("Conv", ins,
           {aints("kernel_shape", kernel), aints("strides", stride), aints("pads", pads), aints("dilations", dilation),
            ai("group", attr_int(attrs, "groups"))},
           yout);
    });
    if (rank == nd + 2) sym_prefix(y, *x, 1);
  } else if (op == "conv_transpose2d") {
    const Value& w = *iv[1];
    const Value* b = iv[2];
    auto s = pair2(attr_ints(attrs, "stride"), 1), p = pair2(attr_ints(attrs, "padding"), 0),
         op2 = pair2(attr_ints(attrs, "output_padding"), 0), d = pair2(attr_ints(attrs, "dilation"), 1);
    batched(*x, 4, y, [&](const std::string& xin, const std::string& yout) {
      std::vector<std::string> ins{xin, w.name};
      if (b) ins.push_back(b->name);
      node("ConvTranspose", ins,
           {aints("kernel_shape", {w.shape[2], w.shape[3]}), aints("strides", {s[0], s[1]}),
            aints("pads", {p[0], p[1], p[0], p[1]}), aints("output_padding", {op2[0], op2[1]}),
            aints("dilations", {d[0], d[1]}), ai("group", attr_int(attrs, "groups"))},
           yout);
    });
    if (rank == 4) sym_prefix(y, *x, 1);
  } else if (op == "max_pool2d" || op == "avg_pool2d") {
    auto k = pair2(attr_ints(attrs, "kernel"), 1);
    auto s = pair2(attr_ints(attrs, "stride"), 0);
    if (attr_ints(attrs, "stride").empty()) s = k;
    auto p = pair2(attr_ints(attrs, "padding"), 0);
    std::vector<OAttr> at{aints("kernel_shape", {k[0], k[1]}), aints("strides", {s[0], s[1]}),
                          aints("pads", {p[0], p[1], p[0], p[1]}), ai("ceil_mode", attr_int(attrs, "ceil_mode"))};
    if (op == "max_pool2d") {
      auto d = pair2(attr_ints(attrs, "dilation"), 1);
      at.push_back(aints("dilations", {d[0], d[1]}));
    } else {
      at.push_back(ai("count_include_pad", attr_int(attrs, "count_include_pad")));
    }
    batched(*x, 4, y, [&](const std::string& xin, const std::string& yout) {
      node(op == "max_pool2d" ? "MaxPool" : "AveragePool", {xin}, at, yout);
    });
    if (rank == 4) sym_prefix(y, *x, 1);
  } else if (op == "adaptive_avg_pool2d" || op == "adaptive_max_pool2d") {
    const bool is_max = op == "adaptive_max_pool2d";
    int64_t H = x->shape[rank - 2], W = x->shape[rank - 1];
    int64_t oh = y.shape[rank - 2], ow = y.shape[rank - 1];
    batched(*x, 4, y, [&](const std::string& xin, const std::string& yout) {
      if (oh == 1 && ow == 1) {
        node(is_max ? "GlobalMaxPool" : "GlobalAveragePool", {xin}, {}, yout);
      } else if (H % oh == 0 && W % ow == 0) {
        node(is_max ? "MaxPool" : "AveragePool", {xin},
             {aints("kernel_shape", {H / oh, W / ow}), aints("strides", {H / oh, W / ow})}, yout);
      } else {
        no_mapping(detail::str("output size ", y.shape, " does not divide the input size ", x->shape,
                               " (only 1x1 and exact divisions map to ONNX pooling)"));
      }
    });
    if (rank == 4) sym_prefix(y, *x, 1);
  } else if (op == "batch_norm") {
    check<NotImplemented>(!attr_int(attrs, "training"), "onnx::export_model: op 'batch_norm' (", where(current_module()),
                          ") runs in training mode (batch statistics); export runs modules in eval mode, so this "
                          "call passes training=true itself");
    const int64_t C = x->shape[1];
    std::string scale = iv[1] ? iv[1]->name : const_tensor(ones({C}, dtype(x->dtype)));
    std::string bias = iv[2] ? iv[2]->name : const_tensor(zeros({C}, dtype(x->dtype)));
    std::vector<OAttr> at{af("epsilon", attr_double(attrs, "eps")), af("momentum", 1 - attr_double(attrs, "momentum"))};
    std::string xn = x->name;
    if (rank == 2) xn = node("Unsqueeze", {xn, axes_input({2})});  // (N, C): BatchNormalization wants (N, C, D...)
    std::string yo = rank == 2 ? fresh("t") : y.name;
    node("BatchNormalization", {xn, scale, bias, iv[3]->name, iv[4]->name}, at, yo);
    if (rank == 2) node("Squeeze", {yo, axes_input({2})}, {}, y.name);
    y.sym = x->sym;
  } else {
    no_mapping("");
  }
  (void)in;
  (void)out;
}

// Conv -> BatchNormalization, where the conv's output feeds nothing else and every per-channel
// tensor is an initializer: the conv's weight and bias absorb the normalization.
void Exporter::fold_batch_norms(const std::set<std::string>& graph_outputs) {
  std::unordered_map<std::string, size_t> init_index;
  for (size_t i = 0; i < inits_.size(); ++i) init_index[inits_[i].name] = i;
  std::unordered_map<std::string, int> uses;  // by this graph's nodes and by the bodies of its Loops and Scans
  for (const auto& n : nodes_) {
    for (const auto& i : n.inputs) ++uses[i];
    for (const auto& a : n.attrs)
      if (a.g)
        for (const auto& bn : a.g->nodes)
          for (const auto& i : bn.inputs) ++uses[i];
  }
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes_.size(); ++i) producer[nodes_[i].outputs[0]] = i;
  std::vector<bool> dead(nodes_.size(), false);
  for (size_t bi = 0; bi < nodes_.size(); ++bi) {
    ONode& bn = nodes_[bi];
    if (bn.op_type != "BatchNormalization") continue;
    auto pit = producer.find(bn.inputs[0]);
    if (pit == producer.end()) continue;
    ONode& conv = nodes_[pit->second];
    if (conv.op_type != "Conv" || uses[conv.outputs[0]] != 1 || graph_outputs.count(conv.outputs[0])) continue;
    bool all_const = init_index.count(conv.inputs[1]) > 0 && (conv.inputs.size() < 3 || init_index.count(conv.inputs[2]) > 0);
    for (size_t k = 1; k < 5; ++k) all_const = all_const && init_index.count(bn.inputs[k]) > 0;
    if (!all_const) continue;
    auto get = [&](const std::string& n) { return inits_[init_index[n]].data.to(kFloat64); };
    const Tensor& w0 = inits_[init_index[conv.inputs[1]]].data;
    float eps = 0;
    for (const auto& a : bn.attrs)
      if (a.name == "epsilon") eps = a.f;
    Tensor w = get(conv.inputs[1]);
    Tensor scale = get(bn.inputs[1]), shift = get(bn.inputs[2]), mean = get(bn.inputs[3]), var = get(bn.inputs[4]);
    Tensor b = conv.inputs.size() >= 3 ? get(conv.inputs[2]) : zeros_like(mean);
    Tensor g = scale / (var + static_cast<double>(eps)).sqrt();  // (C_out)
    Shape gs(static_cast<size_t>(w.dim()), 1);
    gs[0] = g.numel();
    Tensor wf = (w * g.reshape(gs)).to(w0.dtype()).contiguous();
    Tensor bf = ((b - mean) * g + shift).to(w0.dtype()).contiguous();
    std::string wname = conv.inputs[1] + "_bn_folded", bname = bn.outputs[0] + "_bias_bn_folded";
    inits_.push_back({wname, wf});
    inits_.push_back({bname, bf});
    conv.inputs.resize(3);
    conv.inputs[1] = wname;
    conv.inputs[2] = bname;
    conv.outputs[0] = bn.outputs[0];
    dead[bi] = true;
  }
  std::vector<ONode> kept;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (!dead[i]) kept.push_back(std::move(nodes_[i]));
  nodes_ = std::move(kept);
}

// Drops the nodes whose results reach no graph output (ops whose results the forward discarded,
// e.g. a bounds check's min/max) and the initializers nothing reads any more.
void Exporter::prune(const std::set<std::string>& graph_outputs) {
  std::set<std::string> needed(graph_outputs.begin(), graph_outputs.end());
  std::vector<bool> keep(nodes_.size(), false);
  for (size_t i = nodes_.size(); i-- > 0;) {
    for (const auto& o : nodes_[i].outputs) keep[i] = keep[i] || needed.count(o) > 0;
    if (keep[i]) {
      for (const auto& in : nodes_[i].inputs) needed.insert(in);
      for (const auto& a : nodes_[i].attrs)  // what a Loop's body reads from this graph
        if (a.g)
          for (const auto& bn : a.g->nodes) needed.insert(bn.inputs.begin(), bn.inputs.end());
    }
  }
  std::vector<ONode> kept;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (keep[i]) kept.push_back(std::move(nodes_[i]));
  nodes_ = std::move(kept);
  std::vector<Initializer> live;
  for (auto& i : inits_)
    if (needed.count(i.name)) live.push_back(std::move(i));
  inits_ = std::move(live);
}

proto::Writer value_info(const std::string& name, DType dt, const Shape& shape, const std::vector<std::string>& sym) {
  proto::Writer shp;
  for (size_t j = 0; j < shape.size(); ++j) {
    proto::Writer dim;
    if (!sym[j].empty()) dim.bytes(2, sym[j]);  // Dimension.dim_param
    else dim.int64(1, shape[j]);                // Dimension.dim_value
    shp.message(1, dim);                        // TensorShapeProto.dim
  }
  proto::Writer tt;
  tt.int64(1, onnx_dtype(dt));  // TypeProto.Tensor.elem_type
  tt.message(2, shp);           // TypeProto.Tensor.shape
  proto::Writer type;
  type.message(1, tt);  // TypeProto.tensor_type
  proto::Writer vi;
  vi.bytes(1, name);    // ValueInfoProto.name
  vi.message(2, type);  // ValueInfoProto.type
  return vi;
}

// A ValueInfoProto of a Loop body's input or output: element type and rank, sizes unknown.
proto::Writer body_value_info(const SubGraph::IO& io) {
  proto::Writer shp;
  for (int64_t j = 0; j < io.rank; ++j) shp.message(1, proto::Writer());  // an unknown Dimension
  proto::Writer tt;
  tt.int64(1, onnx_dtype(io.dtype));  // TypeProto.Tensor.elem_type
  tt.message(2, shp);                 // TypeProto.Tensor.shape
  proto::Writer type;
  type.message(1, tt);  // TypeProto.tensor_type
  proto::Writer vi;
  vi.bytes(1, io.name);
  vi.message(2, type);
  return vi;
}

proto::Writer node_proto(const ONode& n) {
  proto::Writer nw;
  for (const auto& i : n.inputs) nw.bytes(1, i);   // NodeProto.input
  for (const auto& o : n.outputs) nw.bytes(2, o);  // NodeProto.output
  nw.bytes(3, n.name);                             // NodeProto.name
  nw.bytes(4, n.op_type);                          // NodeProto.op_type
  for (const auto& a : n.attrs) {
    proto::Writer aw;
    aw.bytes(1, a.name);  // AttributeProto.name
    switch (a.kind) {
      case OAttr::kInt: aw.int64(3, a.i); aw.int64(20, 2); break;          // i, type INT
      case OAttr::kFloat: aw.float32(2, a.f); aw.int64(20, 1); break;      // f, type FLOAT
      case OAttr::kInts: aw.packed_int64(8, a.ints); aw.int64(20, 7); break;  // ints, type INTS
      case OAttr::kString: aw.bytes(4, a.s); aw.int64(20, 3); break;       // s, type STRING
      case OAttr::kStrings:                                                 // strings, type STRINGS
        for (const auto& x : a.strings) aw.bytes(9, x);
        aw.int64(20, 8);
        break;
      case OAttr::kGraph: {  // g, type GRAPH
        proto::Writer gw;
        for (const auto& bn : a.g->nodes) gw.message(1, node_proto(bn));       // GraphProto.node
        gw.bytes(2, "body");                                                   // GraphProto.name
        for (const auto& io : a.g->inputs) gw.message(11, body_value_info(io));   // GraphProto.input
        for (const auto& io : a.g->outputs) gw.message(12, body_value_info(io));  // GraphProto.output
        aw.message(6, gw);
        aw.int64(20, 5);
        break;
      }
    }
    nw.message(5, aw);  // NodeProto.attribute
  }
  return nw;
}

std::string Exporter::serialize(const std::vector<std::string>& output_names, const std::vector<Tensor>& outputs,
                                 const ExportOptions& options, std::string* data, const std::string& data_name) {
  // Graph outputs: the traced values, renamed (an input or initializer returned as is goes
  // through an Identity).
  std::vector<Value> outs;
  op_ = "(the graph output)";
  for (size_t i = 0; i < outputs.size(); ++i) {
    Value v = output_value(outputs[i]);
    const std::string& want = output_names[i];
    bool produced = false;
    for (auto& n : nodes_)
      for (auto& o : n.outputs)
        if (o == v.name) {
          o = want;
          produced = true;
        }
    if (produced) {
      for (auto& n : nodes_)
        for (auto& in : n.inputs)
          if (in == v.name) in = want;
    } else {
      bool is_input = std::any_of(inputs_.begin(), inputs_.end(), [&](const Value& in) { return in.name == v.name; });
      check<NotImplemented>(is_input, "onnx::export_model: the output (", describe(outputs[i]),
                            ") does not depend on the inputs: an op the exporter does not see computed it (one "
                            "without a trace hook on tensors that take no part in autograd, or code under NoGradGuard "
                            "in forward), so the graph would return a constant");
      node("Identity", {v.name}, {}, want);
    }
    v.name = want;
    if (auto it = options.dynamic_axes.find(want); it != options.dynamic_axes.end())
      for (const auto& [d, s] : it->second) {
        int64_t dd = wrap(d, static_cast<int64_t>(v.shape.size()));
        check<ValueError>(dd >= 0 && dd < static_cast<int64_t>(v.shape.size()), "onnx::export_model: dynamic_axes names dim ",
                          d, " of output '", want, "' of shape ", v.shape);
        v.sym[dd] = s;
      }
    outs.push_back(v);
  }
  if (fold_) fold_batch_norms({output_names.begin(), output_names.end()});
  prune({output_names.begin(), output_names.end()});

  proto::Writer graph;
  for (const auto& n : nodes_) graph.message(1, node_proto(n));  // GraphProto.node
  graph.bytes(2, "nabla");  // GraphProto.name
  // Protobuf messages stop at 2 GiB: beyond that the weights must go to an external data file.
  size_t total = 0;
  for (const auto& init : inits_) total += init.data.nbytes();
  const bool too_big = total >= (size_t(2) << 30) - (size_t(64) << 20);
  check<ValueError>(data || !too_big, "onnx::export_model: the weights take ", total,
                    " bytes, more than a protobuf message holds (2 GiB); export_model to a file writes them to an "
                    "external data file");
  if (!options.external_data && !too_big) data = nullptr;
  for (const auto& init : inits_) {
    proto::Writer tw;
    for (int64_t d : init.data.sizes()) tw.int64(1, d);  // TensorProto.dims
    tw.int64(2, onnx_dtype(init.data.dtype()));           // TensorProto.data_type
    tw.bytes(8, init.name);                               // TensorProto.name
    std::string_view bytes(static_cast<const char*>(init.data.data_ptr()), init.data.nbytes());
    if (data && bytes.size() >= 1024) {
      data->resize((data->size() + 4095) / 4096 * 4096, '\0');
      auto entry = [&](const char* key, const std::string& value) {
        proto::Writer e;
        e.bytes(1, key);    // StringStringEntryProto.key
        e.bytes(2, value);  // StringStringEntryProto.value
        tw.message(13, e);  // TensorProto.external_data
      };
      entry("location", data_name);
      entry("offset", std::to_string(data->size()));
      entry("length", std::to_string(bytes.size()));
      tw.int64(14, 1);  // TensorProto.data_location = EXTERNAL
      data->append(bytes);
    } else {
      tw.bytes(9, bytes);  // TensorProto.raw_data
    }
    graph.message(5, tw);  // GraphProto.initializer
  }
  for (const auto& v : inputs_) graph.message(11, value_info(v.name, v.dtype, v.shape, v.sym));  // GraphProto.input
  for (const auto& v : outs) graph.message(12, value_info(v.name, v.dtype, v.shape, v.sym));     // GraphProto.output

  proto::Writer model;
  model.int64(1, 8);                // ModelProto.ir_version (ONNX 1.12: IR 8, opsets up to 17)
  model.bytes(2, "nabla");          // producer_name
  model.bytes(3, "0.1");            // producer_version
  model.message(7, graph);          // graph
  proto::Writer opset;
  opset.bytes(1, "");               // OperatorSetIdProto.domain (ai.onnx)
  opset.int64(2, opset_);           // OperatorSetIdProto.version
  model.message(8, opset);          // opset_import
  return model.data();
}

// Restores each module's training flag (parents first, so a child's own flag wins).
class TrainingFlags {
 public:
  explicit TrainingFlags(nn::Module& m) {
    for (auto& [name, mod] : m.named_modules()) flags_.emplace_back(mod, mod->is_training());
  }
  ~TrainingFlags() {
    for (auto& [mod, on] : flags_) mod->train(on);
  }

 private:
  std::vector<std::pair<std::shared_ptr<nn::Module>, bool>> flags_;
};

}  // namespace

namespace {
std::string export_impl(nn::Module& module, const std::vector<Tensor>& example_inputs, const ExportOptions& options,
                        std::string* data, const std::string& data_name) {
  check<ValueError>(options.opset_version >= 13 && options.opset_version <= 17,
                    "onnx::export_model: opset_version must be 13 to 17, got ", options.opset_version);
  check<ValueError>(example_inputs.size() == 1 || example_inputs.size() == 2,
                    "onnx::export_model: expected 1 or 2 example inputs (what Module::operator() takes), got ",
                    example_inputs.size());
  check<ValueError>(options.input_names.empty() || options.input_names.size() == example_inputs.size(),
                    "onnx::export_model: ", options.input_names.size(), " input_names for ", example_inputs.size(),
                    " example inputs");
  check<ValueError>(options.output_names.size() <= 1, "onnx::export_model: the module has 1 output, got ",
                    options.output_names.size(), " output_names");
  for (const auto& [name, axes] : options.dynamic_axes) {
    bool known = name == (options.output_names.empty() ? "output" : options.output_names[0]);
    for (size_t i = 0; i < example_inputs.size(); ++i)
      known = known || name == (options.input_names.empty() ? (example_inputs.size() == 1 ? std::string("input")
                                                                                            : "input_" + std::to_string(i))
                                                            : options.input_names[i]);
    check<ValueError>(known, "onnx::export_model: dynamic_axes names '", name, "', which is no input or output name");
  }

  TrainingFlags restore(module);
  module.eval();
  Exporter ex(options.opset_version, options.do_constant_folding);
  for (const auto& [name, t] : module.named_parameters()) ex.add_named(t, name);
  for (const auto& [name, t] : module.named_buffers()) ex.add_named(t, name);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& t = example_inputs[i];
    check<ValueError>(t.defined(), "onnx::export_model: example input ", i, " is undefined");
    // Floating inputs take part in autograd, so the output of an op the tracer does not know
    // carries a grad_fn that names it.
    Tensor x = t.detach();
    if (is_floating(x.dtype())) x.requires_grad_(true);
    std::string name = !options.input_names.empty() ? options.input_names[i]
                       : example_inputs.size() == 1 ? std::string("input")
                                                    : "input_" + std::to_string(i);
    auto it = options.dynamic_axes.find(name);
    ex.add_input(x, name, it == options.dynamic_axes.end() ? std::map<int64_t, std::string>{} : it->second);
    xs.push_back(x);
  }
  // Module paths for messages: forward hooks mark where each module call starts and ends, in
  // autograd sequence numbers (the nodes of the ops it ran) and on the tracer's stack.
  std::vector<nn::RemovableHandle> handles;
  for (auto& [name, mod] : module.named_modules()) {
    std::string path = name;
    handles.push_back(mod->register_forward_pre_hook([&ex, path](nn::Module&, std::vector<Tensor>&) {
      ex.calls.push_back({path, autograd::next_sequence_nr()});
    }));
    handles.push_back(mod->register_forward_hook([&ex, path](nn::Module&, const std::vector<Tensor>&, Tensor&) {
      for (auto it = ex.calls.rbegin(); it != ex.calls.rend(); ++it)
        if (it->path == path && it->end_seq == std::numeric_limits<uint64_t>::max()) {
          it->end_seq = autograd::next_sequence_nr();
          break;
        }
    }));
  }
  struct RemoveHooks {
    std::vector<nn::RemovableHandle>& h;
    ~RemoveHooks() {
      for (auto& x : h) x.remove();
    }
  } remove_hooks{handles};

  Tensor y;
  {
    // Recording on (also inside a caller's NoGradGuard or InferenceMode): untraced ops must leave
    // their grad_fn.
    autograd::AutoGradMode grad(true);
    trace::TracerGuard guard(&ex);
    y = xs.size() == 1 ? module(xs[0]) : module(xs[0], xs[1]);
  }
  check<ValueError>(y.defined(), "onnx::export_model: the module returned an undefined tensor");
  std::vector<std::string> out_names{options.output_names.empty() ? std::string("output") : options.output_names[0]};
  return ex.serialize(out_names, {y}, options, data, data_name);
}
}  // namespace

std::string export_model_to_string(nn::Module& module, const std::vector<Tensor>& example_inputs,
                                   const ExportOptions& options) {
  check<ValueError>(!options.external_data, "onnx::export_model_to_string: external_data needs a file: use export_model");
  return export_impl(module, example_inputs, options, nullptr, "");
}

void export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options) {
  // Weights over 2 GiB go to <file>.data whatever external_data says.
  std::string data;
  const std::string data_path = path + ".data";
  const std::string data_name = std::filesystem::path(data_path).filename().string();
  std::string bytes = export_impl(module, example_inputs, options, &data, data_name);
  if (!data.empty()) io::atomic_write(data_path, [&](std::FILE* f) { io::write_all(f, data.data(), data.size(), data_path); });
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

}  // namespace nabla::onnx
