// Graph passes after the trace: batch norms folded into the convolutions before them, and what no
// output reads dropped.
#include <unordered_map>

#include "onnx/exporter.h"

namespace nabla::onnx::internal {

// Conv -> BatchNormalization, where the conv's output feeds nothing else and every per-channel
// tensor is an initializer: the conv's weight and bias absorb the normalization.
void Exporter::fold_batch_norms(const std::set<std::string>& graph_outputs) {
  std::unordered_map<std::string, size_t> init_index;
  for (size_t i = 0; i < inits.size(); ++i) init_index[inits[i].name] = i;
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
    bool all_const =
        init_index.count(conv.inputs[1]) > 0 && (conv.inputs.size() < 3 || init_index.count(conv.inputs[2]) > 0);
    for (size_t k = 1; k < 5; ++k) all_const = all_const && init_index.count(bn.inputs[k]) > 0;
    if (!all_const) continue;
    auto get = [&](const std::string& n) { return inits[init_index[n]].data.to(kFloat64); };
    const Tensor& w0 = inits[init_index[conv.inputs[1]]].data;
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
    inits.push_back({wname, wf});
    inits.push_back({bname, bf});
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
  for (auto& i : inits)
    if (needed.count(i.name)) live.push_back(std::move(i));
  inits = std::move(live);
}

}  // namespace nabla::onnx::internal
