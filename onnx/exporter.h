// The exporter's inside (onnx/*.cpp only): the ONNX graph being built (ir below), the tracer that
// names every traced tensor, the node-building helpers every lowering uses, and the lowering table.
//
// How a traced call becomes nodes, y = conv2d(x, w, b):
//   1. conv2d's front-end calls Exporter::record(OpId::conv2d, {x, w, b}, {y}, ConvAttrs{...});
//   2. record() finds each input's Value: a graph input, an earlier op's output, or an initializer
//      (a parameter "conv1.weight", a buffer, a constant); a tensor with a grad_fn that it has never
//      seen came from an op without a hook, and the export stops naming it;
//   3. the op's lowering (lowerings()[op], registered by the family files lower_*.cpp) emits the
//      nodes, Conv here, and fills in the output Values (names, dynamic dims).
#pragma once

#include <array>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "../core/op_schema.h"
#include "../core/trace.h"
#include "export.h"

namespace nabla::onnx::internal {
// The library's private helpers (internal::str, ...) are reachable from here as well.
using namespace ::nabla::internal;

// ---- ONNX's pieces ----------------------------------------------------------------------------------
int onnx_dtype(DType d);  // TensorProto.DataType

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
OAttr ai(std::string n, int64_t v);
OAttr af(std::string n, double v);
OAttr aints(std::string n, std::vector<int64_t> v);
OAttr astr(std::string n, std::string v);
OAttr astrings(std::string n, std::vector<std::string> v);
OAttr agraph(std::string n, std::shared_ptr<SubGraph> g);

struct ONode {
  std::string op_type, name;
  std::vector<std::string> inputs, outputs;
  std::vector<OAttr> attrs;
};

// A graph attribute (a Loop's or Scan's body): its nodes, and its inputs and outputs by name, ONNX
// element type and rank. Its nodes may read the outer graph's values and initializers by name.
struct SubGraph {
  struct IO {
    std::string name;
    DType dtype;
    int64_t rank;
  };
  std::vector<ONode> nodes;
  std::vector<IO> inputs, outputs;
};

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
  // A constant of the graph, or computed from constants only (no input, parameter or buffer).
  bool constant = false;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
};

// A module call seen by the forward hooks: its path and the autograd nodes created inside it.
struct ModuleCall {
  std::string path;
  uint64_t first_seq = 0, end_seq = std::numeric_limits<uint64_t>::max();
};

inline int64_t wrap(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }
// Two values of an IntArrayRef-style argument (1 value means both).
std::array<int64_t, 2> pair2(const std::vector<int64_t>& v, int64_t dflt);
std::string describe(const Tensor& t);

// One traced call as a lowering sees it.
struct Call {
  OpId op;
  const std::vector<Tensor>& in;  // the tensors as the op got them (undefined: an absent optional input)
  std::vector<const Value*> iv;   // their Values (null for an absent one)
  std::vector<Value>& ov;         // the outputs' Values: named already; a lowering sets their dynamic dims
  const OpAttrs& attrs;
  const Value& x() const { return *iv[0]; }
  Value& y() const { return ov[0]; }
  int64_t rank() const { return iv.empty() || !iv[0] ? 0 : iv[0]->rank(); }
};

class Exporter;
using Lowering = void (*)(Exporter&, Call&);
// An op's lowerings by opset: the entry with the highest `since` at or below the graph's opset is
// used (scatter_add's ScatterElements with reduction 'add' from 16, hardswish's HardSwish from 14);
// below every entry's `since` the op is refused, naming the opset it needs.
struct VersionedLowering {
  struct Entry {
    int64_t since = 0;
    Lowering fn = nullptr;
  };
  std::array<Entry, 3> entries{};
  const Entry* find(int64_t opset) const;
  bool empty() const { return !entries[0].fn; }
  void add(int64_t since, Lowering fn);
};
using LoweringTable = std::array<VersionedLowering, kOpCount>;
// Every op's lowerings (empty: none), filled by the family files below once.
const LoweringTable& lowerings();
void add_elementwise_lowerings(LoweringTable& t);
void add_shape_lowerings(LoweringTable& t);
void add_indexing_lowerings(LoweringTable& t);
void add_reduction_lowerings(LoweringTable& t);
void add_stats_lowerings(LoweringTable& t);
void add_nn_lowerings(LoweringTable& t);
void add_rnn_lowerings(LoweringTable& t);

// The lowest opset the exporter writes.
inline constexpr int64_t kMinOpset = 13;

// Registers f(Exporter&, Call&, const Attrs&) as the lowering of the ops from opset `since` on,
// each of whose rows names Attrs as its attribute struct (another does not compile) and says
// to_onnx():
//   lower<lower_conv, OpId::conv1d, OpId::conv2d, OpId::conv3d>(t);
//   lower<lower_scatter, OpId::scatter_add>(t, 16);
template <auto f, OpId first, OpId... more>
void lower(LoweringTable& t, int64_t since = kMinOpset) {
  using A = op_attrs_t<first>;
  static_assert((std::is_same_v<A, op_attrs_t<more>> && ...), "ops lowered together share their attribute struct");
  static_assert((op_row_is_lowered(first) && ... && op_row_is_lowered(more)),
                "only ops whose schema row says to_onnx() get a lowering");
  Lowering l = [](Exporter& e, Call& c) { f(e, c, std::get<A>(c.attrs)); };
  for (OpId op : {first, more...}) t[static_cast<size_t>(op)].add(since, l);
}

// ---- the exporter -----------------------------------------------------------------------------------
class Exporter : public trace::Tracer {
 public:
  Exporter(int64_t opset, bool fold) : opset(opset), fold_(fold) {}

  void add_named(const Tensor& t, const std::string& name) {
    if (t.defined()) named.emplace(t.impl(), name);
  }
  void add_input(const Tensor& t, const std::string& name, const std::map<int64_t, std::string>& axes);
  void record(OpId op, const std::vector<Tensor>& in, const std::vector<Tensor>& out, const OpAttrs& attrs) override;
  // A traced value computed from constants that then gets an autograd node was made by an op
  // without a hook (its last step a hooked clone of its untraced result): forgotten, so that a
  // read of it names that op.
  void on_history(const Tensor& t) override;
  // The ModelProto (after the forward). With `data` given and options.external_data set or the
  // weights over 2 GiB, initializers of 1 KiB and more go there instead (ONNX's external data, each
  // at a 4 KiB-aligned offset of the file `data_name` next to the model).
  std::string serialize(const std::vector<std::string>& output_names, const std::vector<Tensor>& outputs,
                        const ExportOptions& options, std::string* data, const std::string& data_name);

  // ---- for the lowerings ----------------------------------------------------------------------
  // The Value of a tensor an op reads (an initializer when it is a parameter, a buffer or a constant).
  const Value& value_of(const Tensor& t);
  // Stops the export: op has no ONNX mapping (for this input), with why.
  [[noreturn]] void no_mapping(const std::string& why) const;
  // "in module 'features.2'" for the module running now.
  std::string where() const;
  const std::string& op_label() const { return op_; }
  std::string fresh(const char* stem) { return internal::str(stem, counter_++); }
  // A node with one output (a fresh name unless given), named after the module running it.
  std::string node(const std::string& op_type, std::vector<std::string> inputs, std::vector<OAttr> attrs = {},
                   std::string out = {});
  void node_multi(const std::string& op_type, std::vector<std::string> inputs, std::vector<OAttr> attrs,
                  std::vector<std::string> outs);
  std::string const_tensor(const Tensor& t);
  std::string const_i64(const std::vector<int64_t>& v);
  std::string const_i64_scalar(int64_t v);
  std::string const_scalar(double v, DType dt);
  std::string cast(const std::string& name, DType from, DType to);
  std::string cast(const Value& v, DType to) { return cast(v.name, v.dtype, to); }
  // Axes as opset 13's Squeeze/Unsqueeze/ReduceSum take them (an input).
  std::string axes_input(const std::vector<int64_t>& axes) { return const_i64(axes); }
  // A 1-D int64 tensor of dims [from, to) of x's shape (Shape, then Slice).
  std::string shape_of(const std::string& x, int64_t from, int64_t to);
  // A reshape of `x` to `out`'s shape that keeps x's dynamic dims dynamic: a dim that keeps its
  // place and size becomes 0 (copy), a dim the caller left to inference (-1) stays -1.
  std::string reshape_to(const Value& x, Value& out, const std::vector<int64_t>& requested);
  // Runs `f(x, y)` on x with a leading batch dim when x lacks one (unbatched conv/pool inputs).
  void batched(const Value& x, int64_t want_rank, Value& out,
               const std::function<void(const std::string&, const std::string&)>& f);
  // A scan along a dynamic axis d: `round` (the state's names and the shift s, an int64 [1]) emits
  // one round's nodes and returns the new state; the rounds run in an ONNX Loop while s < L (s = 1,
  // 2, 4, ...; L the length of dim d of the first state, from Shape), so no round count is baked in.
  // The final state is named `outs`.
  using Round = std::function<std::vector<std::string>(const std::vector<std::string>&, const std::string&)>;
  void doubling_loop(const std::vector<std::string>& init, const std::vector<DType>& dtypes, int64_t rank, int64_t d,
                     const Round& round, const std::vector<std::string>& outs);
  // Emits the nodes `f` makes into a new subgraph (a Loop's or Scan's body), returned.
  std::shared_ptr<SubGraph> subgraph(const std::string& tag, const std::function<void()>& f);
  // Sorting as nabla sorts (value ascending, NaN largest, ties by index): x as TopK takes it (16-bit
  // floats as float32, integers as int64); the int64 indices of the first k elements of each line
  // along d in that order (largest: descending, NaN first); the length of dim d (int64 [1]).
  std::string topk_key(const Value& x);
  std::string stable_order(const Value& x, const std::string& key, int64_t d, const std::string& k,
                           bool largest = false);
  std::string line_length(const std::string& x, int64_t d) { return shape_of(x, d, d + 1); }

  // ---- dynamic dims -------------------------------------------------------------------------
  // Output dim j takes the symbol of the input dim aligned with it from the right (broadcasting).
  static void sym_broadcast(Value& out, const std::vector<const Value*>& in);
  // Output dims [0, n) take the input's symbols.
  static void sym_prefix(Value& out, const Value& in, int64_t n);
  static bool has_sym(const Value& v);
  // Reduced dims' symbols (sum, any, ...): the kept dims keep theirs.
  static void sym_reduce(Value& y, const Value& x, std::vector<int64_t> dims, bool keep);

  const int64_t opset;
  std::vector<ModuleCall> calls;
  std::unordered_map<TensorImpl*, std::string> named;  // parameters and buffers by state-dict name
  std::vector<Initializer> inits;

 private:
  Value make_value(const Tensor& t, std::string name) const;
  std::string module_of_seq(uint64_t seq) const;  // where the autograd node `seq` was created
  std::string current_module() const;
  void fold_batch_norms(const std::set<std::string>& graph_outputs);
  void prune(const std::set<std::string>& graph_outputs);

  bool fold_;
  int64_t counter_ = 0;
  std::string op_;  // the op being lowered, for messages
  std::unordered_map<TensorImpl*, Value> values_;
  std::vector<Tensor> keep_;  // every tensor seen stays alive, so no address is reused
  std::vector<Value> inputs_;
  std::vector<ONode> nodes_;
};

}  // namespace nabla::onnx::internal
