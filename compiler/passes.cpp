// The passes over a captured graph (compiler/passes.h). Dead nodes are marked by clearing their
// outputs and removed by compact().
#include "compiler/passes.h"

#include <algorithm>
#include <map>

#include "compiler/fused.h"
#include "compiler/replay.h"
#include "core/graph.h"
#include "core/ops.h"

namespace nabla::compiler {

namespace {

bool is_dead(const Node& n) { return n.dead(); }
bool is_fixed(const Value& v) { return v.kind == Value::param || v.kind == Value::constant; }

// Every read of value `from` (and the graph's outputs) reads `to` instead.
void replace_uses(Graph& g, int from, int to) {
  for (Node& n : g.nodes)
    for (int& v : n.inputs)
      if (v == from) v = to;
  for (int& v : g.outputs)
    if (v == from) v = to;
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

}  // namespace

int fold_constants(Graph& g) {
  int folded = 0;
  autograd::NoGradGuard no_grad;
  for (Node& n : g.nodes) {
    if (is_dead(n) || n.kind != Node::op) continue;
    bool fixed = !n.inputs.empty();
    for (int v : n.inputs) fixed = fixed && (v < 0 || is_fixed(g.values[v]));
    if (!fixed) continue;
    std::vector<Tensor> in;
    for (int v : n.inputs) in.push_back(v < 0 ? Tensor() : g.values[v].tensor);
    std::vector<Tensor> out;
    try {
      out = replay_table()[static_cast<size_t>(n.id)](n, in, &g.values[n.outputs[0]]);
    } catch (const Error&) {
      continue;  // left to the replay, which reports it with the op's name
    }
    if (out.size() != n.outputs.size()) continue;
    for (size_t j = 0; j < out.size(); ++j) {
      Value& v = g.values[n.outputs[j]];
      v.kind = Value::constant;
      v.tensor = out[j];
      v.index = -1;
    }
    n.outputs.clear();
    ++folded;
  }
  return folded;
}

int fold_batch_norm(Graph& g) {
  const std::vector<int> uses = g.use_counts();
  int folded = 0;
  autograd::NoGradGuard no_grad;
  for (Node& bn : g.nodes) {
    if (is_dead(bn) || bn.kind != Node::op || bn.id != OpId::batch_norm) continue;
    const auto& a = std::get<BatchNormAttrs>(bn.attrs);
    const int x = bn.inputs[0];
    if (a.training || x < 0 || g.values[x].kind != Value::computed || uses[x] != 1) continue;
    Node& conv = g.nodes[g.values[x].index];
    if (conv.kind != Node::op || (conv.id != OpId::conv1d && conv.id != OpId::conv2d && conv.id != OpId::conv3d))
      continue;
    // The convolution's weight and bias and the batch norm's tensors must be fixed (not computed).
    bool fixed = is_fixed(g.values[conv.inputs[1]]) && (conv.inputs[2] < 0 || is_fixed(g.values[conv.inputs[2]]));
    for (int k = 1; k <= 4; ++k) fixed = fixed && (bn.inputs[k] < 0 || is_fixed(g.values[bn.inputs[k]]));
    if (!fixed || bn.inputs[3] < 0 || bn.inputs[4] < 0) continue;
    const Tensor& w = g.values[conv.inputs[1]].tensor;
    if (!is_floating(w.dtype())) continue;
    auto f64 = [&](int v) { return v < 0 ? Tensor() : g.values[v].tensor.to(DType::f64); };
    const int64_t out_ch = w.size(0);
    Tensor mean = f64(bn.inputs[3]), var = f64(bn.inputs[4]);
    Tensor gamma = bn.inputs[1] < 0 ? ones({out_ch}, dtype(DType::f64)) : f64(bn.inputs[1]);
    Tensor beta = bn.inputs[2] < 0 ? zeros({out_ch}, dtype(DType::f64)) : f64(bn.inputs[2]);
    Tensor bias = conv.inputs[2] < 0 ? zeros({out_ch}, dtype(DType::f64)) : f64(conv.inputs[2]);
    // y = (conv(x, w) + b - mean) / sqrt(var + eps) * gamma + beta = conv(x, w * s) + (b - mean) * s + beta
    Tensor scale = gamma / sqrt(var + a.eps);
    Shape per_channel(w.dim(), 1);
    per_channel[0] = out_ch;
    Tensor new_w = (w.to(DType::f64) * scale.view(per_channel)).to(w.dtype()).contiguous();
    Tensor new_b = ((bias - mean) * scale + beta).to(w.dtype());
    auto constant = [&](Tensor t, const char* name) {
      Value v;
      v.kind = Value::constant;
      v.sizes = t.sizes();
      v.dtype = t.dtype();
      v.device = t.device();
      v.tensor = std::move(t);
      v.name = name;
      return g.add_value(std::move(v));
    };
    // (add_value may move the nodes' values; conv and bn are nodes, which stay put.)
    const int wv = constant(new_w, "folded_weight"), bv = constant(new_b, "folded_bias");
    conv.inputs[1] = wv;
    conv.inputs.resize(3);
    conv.inputs[2] = bv;
    const int y = bn.outputs[0];
    bn.outputs.clear();
    replace_uses(g, y, x);
    ++folded;
  }
  return folded;
}

int eliminate_common_subexpressions(Graph& g) {
  // (op, inputs) -> the first node; attributes compared on a match.
  std::map<std::pair<OpId, std::vector<int>>, std::vector<size_t>> seen;
  int merged = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& n = g.nodes[k];
    if (is_dead(n) || n.kind != Node::op) continue;
    auto& same = seen[{n.id, n.inputs}];
    bool done = false;
    for (size_t j : same) {
      Node& m = g.nodes[j];
      if (is_dead(m) || m.attrs != n.attrs || m.outputs.size() != n.outputs.size()) continue;
      for (size_t o = 0; o < n.outputs.size(); ++o) replace_uses(g, n.outputs[o], m.outputs[o]);
      n.outputs.clear();
      ++merged;
      done = true;
      break;
    }
    if (!done) same.push_back(k);
  }
  return merged;
}

int eliminate_dead_code(Graph& g) {
  int removed = 0;
  std::vector<int> uses = g.use_counts();
  for (size_t k = g.nodes.size(); k-- > 0;) {
    Node& n = g.nodes[k];
    if (is_dead(n) || n.kind == Node::value_check) continue;  // checks stay: they may throw, as eager did
    const bool read = std::any_of(n.outputs.begin(), n.outputs.end(), [&](int v) { return uses[v] > 0; });
    if (read) continue;
    for (int v : n.inputs)
      if (v >= 0) --uses[v];
    n.outputs.clear();
    ++removed;
  }
  return removed;
}

int sink_activations_through_pools(Graph& g) {
  const std::vector<int> uses = g.use_counts();
  int moved = 0;
  for (Node& pool : g.nodes) {
    if (is_dead(pool) || pool.kind != Node::op || pool.id != OpId::max_pool2d || pool.outputs.size() != 1) continue;
    const int a = pool.inputs[0];
    if (a < 0 || g.values[a].kind != Value::computed || uses[a] != 1) continue;
    Node& act = g.nodes[g.values[a].index];
    if (act.kind != Node::op || act.inputs.size() != 1 || act.outputs.size() != 1) continue;
    bool monotone = act.id == OpId::relu || act.id == OpId::hardtanh || act.id == OpId::clamp;
    if (act.id == OpId::leaky_relu) monotone = std::get<UnaryAttrs>(act.attrs).p0 >= 0;
    if (!monotone || !is_floating(g.values[a].dtype)) continue;
    // pool(act(x)) -> act(pool(x)): the pool reads x and writes the activation's old value (now of
    // the pool's shape); the activation reads that and writes the pool's output, and moves after it.
    const int x = act.inputs[0], mid = a, y = pool.outputs[0];
    g.values[mid].sizes = g.values[y].sizes;
    pool.inputs[0] = x;
    pool.outputs[0] = mid;
    act.inputs[0] = mid;
    act.outputs[0] = y;
    std::swap(pool, act);  // act stood before pool: swapping their places keeps the order valid
    g.values[mid].index = static_cast<int>(&act - g.nodes.data());
    g.values[y].index = static_cast<int>(&pool - g.nodes.data());
    ++moved;
  }
  return moved;
}

namespace {

// The fused instruction of an elementwise op on float32, or nothing.
std::optional<FusedInstr> instruction(const Node& n) {
  if (n.kind != Node::op) return std::nullopt;
  FusedInstr c;
  const auto id = static_cast<uint16_t>(n.id);
  const auto first_binary = static_cast<uint16_t>(op_id(BinaryOp::add));
  const auto first_predicate = static_cast<uint16_t>(op_id(UnaryOp::isnan));
  if (n.id == OpId::clamp || id < first_predicate) {
    c.kind = FusedInstr::unary;
    c.uop = n.id == OpId::clamp ? UnaryOp::clamp : static_cast<UnaryOp>(id);
    const auto& a = std::get<UnaryAttrs>(n.attrs);
    c.p0 = a.p0;
    c.p1 = a.p1;
    if (c.uop == UnaryOp::clamp && (std::isnan(c.p0) || std::isnan(c.p1))) return std::nullopt;
    return c;
  }
  if (id >= first_binary && id < static_cast<uint16_t>(op_id(BinaryOp::eq))) {
    c.kind = FusedInstr::binary;
    c.bop = static_cast<BinaryOp>(id - first_binary);
    c.alpha = std::get<BinaryAttrs>(n.attrs).alpha;
    return c;
  }
  if (n.id == OpId::pow_scalar) {
    c.kind = FusedInstr::pow_scalar;
    c.p0 = std::get<ScalarAttrs>(n.attrs).value;
    return c;
  }
  return std::nullopt;
}

// How a fused program reads an input of shape `in` for an output of shape `out`, if it can.
std::optional<FusedInput> read_of(const Shape& in, const Shape& out) {
  if (in == out) return FusedInput{FusedInput::whole, 0};
  const int64_t n = numel_of(in);
  if (n == 1) return FusedInput{FusedInput::one, 1};
  // A broadcast of trailing dims: in's dims (leading 1s dropped) equal out's last dims.
  size_t lead = 0;
  while (lead < in.size() && in[lead] == 1) ++lead;
  const size_t k = in.size() - lead;
  if (k > out.size()) return std::nullopt;
  for (size_t i = 0; i < k; ++i)
    if (in[lead + i] != out[out.size() - k + i]) return std::nullopt;
  return FusedInput{FusedInput::periodic, n};
}

bool fusible(const Graph& g, const Node& n) {
  if (is_dead(n) || !instruction(n) || n.outputs.size() != 1) return false;
  const Value& out = g.values[n.outputs[0]];
  if (out.dtype != DType::f32 || !out.device.is_cpu()) return false;
  for (int v : n.inputs) {
    if (v < 0) return false;
    const Value& in = g.values[v];
    if (in.dtype != DType::f32 || !in.device.is_cpu() || !read_of(in.sizes, out.sizes)) return false;
  }
  return true;
}

}  // namespace

int fuse_elementwise(Graph& g) {
  // Groups of fusible nodes with one output shape, in graph order. A node joins the open group of
  // one of its inputs' producers; a group closes when a node outside it reads one of its values (the
  // fused node stands where its last member stood, so nothing outside may read it before that).
  constexpr size_t kMaxMembers = 24;  // each member takes a register
  std::vector<std::vector<size_t>> groups;
  std::vector<bool> open;
  std::vector<int> group_of(g.values.size(), -1);  // computed value -> the group whose member made it
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    int join = -1;
    if (fusible(g, n)) {
      // The open groups this node reads, of its shape: it joins the first and merges the others
      // into it (none has been read from outside yet, so one node can stand for them all).
      const Shape& shape = g.values[n.outputs[0]].sizes;
      for (int v : n.inputs) {
        const int gi = group_of[v];
        if (gi < 0 || gi == join || !open[gi] || g.values[g.nodes[groups[gi][0]].outputs[0]].sizes != shape) continue;
        if (join < 0) {
          if (groups[gi].size() < kMaxMembers) join = gi;
          continue;
        }
        if (groups[join].size() + groups[gi].size() >= kMaxMembers) continue;
        for (size_t m : groups[gi]) group_of[g.nodes[m].outputs[0]] = join;
        groups[join].insert(groups[join].end(), groups[gi].begin(), groups[gi].end());
        std::sort(groups[join].begin(), groups[join].end());
        groups[gi].clear();
        open[gi] = false;
      }
    }
    for (int v : n.inputs)  // a read from outside closes the group
      if (v >= 0 && group_of[v] >= 0 && group_of[v] != join) open[group_of[v]] = false;
    if (!fusible(g, n)) continue;
    if (join < 0) {
      join = static_cast<int>(groups.size());
      groups.emplace_back();
      open.push_back(true);
    }
    groups[join].push_back(k);
    group_of[n.outputs[0]] = join;
  }

  const std::vector<int> uses = g.use_counts();
  int fused = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& members = groups[gi];
    if (members.empty()) continue;  // merged into another
    auto program = std::make_shared<FusedProgram>();
    std::vector<int> inputs, outputs;
    std::map<int, int16_t> reg;  // value -> register
    const Shape out_shape = g.values[g.nodes[members.back()].outputs[0]].sizes;
    auto member_value = [&](int v) { return v >= 0 && group_of[v] == static_cast<int>(gi); };
    for (size_t k : members)
      for (int v : g.nodes[k].inputs)
        if (!member_value(v) && !reg.count(v)) {
          reg[v] = static_cast<int16_t>(inputs.size());
          inputs.push_back(v);
          program->inputs.push_back(*read_of(g.values[v].sizes, out_shape));
        }
    if (inputs.size() + members.size() > static_cast<size_t>(kMaxFusedRegs)) continue;  // left unfused
    int16_t next = static_cast<int16_t>(inputs.size());
    for (size_t k : members) {
      const Node& n = g.nodes[k];
      FusedInstr c = *instruction(n);
      c.a = reg.at(n.inputs[0]);
      if (n.inputs.size() > 1) c.b = reg.at(n.inputs[1]);
      c.dst = next++;
      reg[n.outputs[0]] = c.dst;
      program->code.push_back(c);
      program->ops.push_back(n.id);
    }
    // The outputs: member values read after the group (by other nodes or the caller); the last
    // member's first, so the last instruction writes to memory directly.
    std::vector<int> reads(g.values.size(), 0);
    for (size_t k : members)
      for (int v : g.nodes[k].inputs)
        if (member_value(v)) ++reads[v];
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
      const int v = g.nodes[*it].outputs[0];
      if (uses[v] > reads[v]) outputs.push_back(v);
    }
    if (outputs.empty()) continue;  // nothing reads it (dead code elimination off)
    for (int v : outputs) program->outs.push_back(reg.at(v));
    program->n_regs = next;
    Node f;
    f.kind = Node::fused;
    f.id = g.nodes[members.back()].id;
    f.inputs = inputs;
    f.outputs = outputs;
    f.program = std::move(program);
    for (size_t k : members) g.nodes[k].outputs.clear();
    g.nodes[members.back()] = std::move(f);
    if (members.size() > 1) fused += static_cast<int>(members.size());
  }
  return fused;
}

void compact(Graph& g) {
  std::vector<Node> nodes;
  for (Node& n : g.nodes)
    if (!is_dead(n)) nodes.push_back(std::move(n));
  g.nodes = std::move(nodes);
  // Keep the values the nodes and outputs read or write; renumber.
  std::vector<int> keep(g.values.size(), 0);
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].kind == Value::input) keep[i] = 1;
  for (const Node& n : g.nodes) {
    for (int v : n.inputs)
      if (v >= 0) keep[v] = 1;
    for (int v : n.outputs) keep[v] = 1;
  }
  for (int v : g.outputs) keep[v] = 1;
  std::vector<int> id(g.values.size(), -1);
  std::vector<Value> values;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (keep[i]) {
      id[i] = static_cast<int>(values.size());
      values.push_back(std::move(g.values[i]));
    }
  g.values = std::move(values);
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (int& v : g.nodes[k].inputs)
      if (v >= 0) v = id[v];
    for (int& v : g.nodes[k].outputs) {
      v = id[v];
      g.values[v].index = static_cast<int>(k);
    }
  }
  for (int& v : g.outputs) v = id[v];
}

}  // namespace nabla::compiler
