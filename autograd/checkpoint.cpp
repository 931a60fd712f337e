// Activation checkpointing (see checkpoint.h): the forward records fn's graph only to find where it
// meets the rest of the graph, then drops it; backward recomputes it and back-propagates through it
// with the engine's grad_into_edges.
//
// Why not a nested backward() inside the node's backward, as PyTorch's reentrant variant does: the
// engine keeps a pass's bookkeeping (dependency counts, gradient buffers) in the nodes, and the
// recomputed graph ends in nodes the outer pass owns (the parameters' accumulators, the inputs'
// grad_fns). A nested backward() would walk into them, overwrite that bookkeeping and run them a
// second time. grad_into_edges stops at those edges instead and hands their gradients back to the
// outer pass, which routes them like any node's: parameters used inside and outside the block get
// one accumulation each, autograd::grad sees them, hooks run once.
#include "autograd/checkpoint.h"
#include "core/autocast.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "autograd/engine_internal.h"
#include "core/generator.h"
#include "core/graph.h"

namespace nabla::autograd {

namespace {

constexpr const char* kDeterministic =
    "; the checkpointed function must compute the same thing when it runs again in backward "
    "(deterministic given the random generator state, inputs not modified in place)";

bool same_edge(const Edge& a, const Edge& b) { return a.fn.get() == b.fn.get() && a.input_nr == b.input_nr; }

// The edges where the graph fn recorded (the nodes created in [first, end), leaf accumulators
// excepted) meets the rest: into the history of its inputs and of the tensors it captured, or into
// a leaf's accumulator (its inputs' and its parameters'). Unique, in discovery order.
std::vector<Edge> boundary_edges(const std::vector<Tensor>& outputs, uint64_t first, uint64_t end) {
  auto recorded = [&](const Node* n) {
    return n->sequence_nr() >= first && n->sequence_nr() < end && !is_accumulate_grad(*n);
  };
  std::vector<Edge> boundary;
  std::unordered_set<const Node*> seen;
  std::vector<Node*> stack;
  auto reach = [&](const Edge& e) {
    if (!e.valid()) return;
    Node* n = e.fn.get();
    if (recorded(n)) {
      if (seen.insert(n).second) stack.push_back(n);
    } else if (std::none_of(boundary.begin(), boundary.end(), [&](const Edge& b) { return same_edge(b, e); })) {
      boundary.push_back(e);
    }
  };
  for (const Tensor& o : outputs)
    if (o.defined() && o.requires_grad()) reach(gradient_edge(o));
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) reach(e);
  }
  return boundary;
}

// Runs fn and checks that it returned at least one tensor.
std::vector<Tensor> call(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs = fn(inputs);
  NABLA_CHECK(ValueError, std::any_of(outs.begin(), outs.end(), [](const Tensor& t) { return t.defined(); }),
              "checkpoint: the function returned no tensors (", outs.size(),
              " outputs, none defined); it must return at least one");
  return outs;
}

// The default generators whose state a checkpoint saves: the CPU's and those of the inputs' devices.
std::vector<Device> rng_devices(const std::vector<Tensor>& inputs) {
  std::vector<Device> devices{kCPU};
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    Device d(t.device().type);
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  return devices;
}

std::vector<Generator::State> rng_states(const std::vector<Device>& devices) {
  std::vector<Generator::State> states;
  for (Device d : devices) states.push_back(default_generator(d).get_state());
  return states;
}

void set_rng_states(const std::vector<Device>& devices, const std::vector<Generator::State>& states) {
  for (size_t i = 0; i < devices.size(); ++i) default_generator(devices[i]).set_state(states[i]);
}

// While alive, the generators are at the forward's states; the caller's come back at the end.
class ReplayRng {
 public:
  ReplayRng(const std::vector<Device>& devices, const std::vector<Generator::State>& forward)
      : devices_(devices), caller_(rng_states(devices)) {
    set_rng_states(devices, forward);
  }
  ~ReplayRng() { set_rng_states(devices_, caller_); }
  ReplayRng(const ReplayRng&) = delete;
  ReplayRng& operator=(const ReplayRng&) = delete;

 private:
  const std::vector<Device>& devices_;
  std::vector<Generator::State> caller_;
};

class CheckpointNode final : public Node {
 public:
  const char* name() const override { return "CheckpointBackward"; }
  std::string torch_name() const override { return "CheckpointFunctionBackward"; }  // torch.utils.checkpoint's
  GradList apply(GradList&& grads) override;
  void release_saved() override {
    fn_ = nullptr;
    inputs_.clear();
    released_ = true;
  }

  CheckpointFn fn_;
  std::vector<SavedTensor> inputs_;
  size_t num_fn_outputs_ = 0;
  std::vector<size_t> output_pos_;   // which of fn's outputs node output j is
  std::vector<Device> rng_devices_;  // empty: preserve_rng_state off
  std::vector<Generator::State> rng_states_;
  autocast_internal::State autocast_;  // the forward's autocast state, for the recomputation

 private:
  bool released_ = false;
};

GradList CheckpointNode::apply(GradList&& grads) {
  if (released_) throw_graph_freed(name());
  std::vector<Tensor> inputs;
  for (const SavedTensor& s : inputs_) inputs.push_back(s.unpack(*this));
  // The engine runs nodes with grad mode on exactly when the pass builds a graph (create_graph).
  const bool create_graph = GradMode::is_enabled();

  // Recompute, recording, with the forward's random state.
  std::vector<Tensor> outs;
  uint64_t first = 0, end = 0;
  {
    std::optional<ReplayRng> rng;
    if (!rng_devices_.empty()) rng.emplace(rng_devices_, rng_states_);
    AutoGradMode record(true);
    autocast_internal::Restore forward_autocast(autocast_);
    first = next_sequence_nr();
    outs = call(fn_, inputs);
    end = next_sequence_nr();
  }
  NABLA_CHECK(AutogradError, outs.size() == num_fn_outputs_, "checkpoint: recomputing the function in backward gave ",
              outs.size(), " outputs, the forward gave ", num_fn_outputs_, kDeterministic);

  // Back-propagate the gradients that arrived through the recomputed outputs.
  std::vector<Tensor> roots, root_grads;
  for (size_t j = 0; j < output_pos_.size(); ++j) {
    if (!grads[j].defined()) continue;
    const Tensor& o = outs[output_pos_[j]];
    const OutputMeta& m = out_meta[j];
    NABLA_CHECK(AutogradError, o.defined() && o.requires_grad() && o.sizes() == m.shape && o.dtype() == m.dtype,
                "checkpoint: output ", output_pos_[j], " of the function was a ", m.dtype, " tensor of shape ", m.shape,
                " requiring grad in the forward, but recomputing it in backward gave ",
                o.defined() ? internal::str(o.requires_grad() ? "a " : "a non-differentiable ", o.dtype(),
                                            " tensor of shape ", o.sizes())
                            : std::string("an undefined tensor"),
                kDeterministic);
    roots.push_back(o);
    root_grads.push_back(grads[j]);
  }
  GradList result(next_edges.size());
  if (roots.empty()) return result;
  // The pass below must stop at this node's edges (the outer pass owns what lies beyond them).
  for (const Edge& e : boundary_edges(roots, first, end))
    NABLA_CHECK(AutogradError,
                std::any_of(next_edges.begin(), next_edges.end(), [&](const Edge& b) { return same_edge(b, e); }),
                "checkpoint: recomputing the function in backward reached a tensor (with grad_fn ", e.fn->name(),
                ") that the forward did not use", kDeterministic);
  std::vector<Tensor> g =
      grad_into_edges(roots, root_grads, std::span<const Edge>(next_edges.data(), next_edges.size()), create_graph);
  for (size_t i = 0; i < g.size(); ++i) result[i] = std::move(g[i]);
  return result;
}

}  // namespace

std::vector<Tensor> checkpoint(CheckpointFn fn, std::vector<Tensor> inputs, CheckpointOptions opts) {
  NABLA_CHECK(ValueError, static_cast<bool>(fn), "checkpoint: the function is empty");
  if (!GradMode::is_enabled()) return call(fn, inputs);

  std::vector<Device> devices;
  std::vector<Generator::State> states;
  if (opts.preserve_rng_state) {
    devices = rng_devices(inputs);
    states = rng_states(devices);
  }
  // Record fn's graph to find its boundary; the graph (and every activation it saved) is freed when
  // `outs` no longer holds the recorded outputs, at the end of this function.
  const uint64_t first = next_sequence_nr();
  std::vector<Tensor> outs = call(fn, inputs);
  const uint64_t end = next_sequence_nr();
  std::vector<Edge> boundary = boundary_edges(outs, first, end);
  if (boundary.empty()) return outs;  // nothing fn computed requires grad: it simply ran

  auto* node = new CheckpointNode();
  intrusive_ptr<Node> hold(node);
  std::vector<Tensor> aliases;  // the differentiable outputs, without the recorded history
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined() || !outs[k].requires_grad()) continue;
    aliases.push_back(outs[k].detach());
    node->output_pos_.push_back(k);
  }
  connect(node, std::vector<Tensor>{}, aliases);
  for (Edge& e : boundary) node->next_edges.push_back(std::move(e));
  for (size_t j = 0; j < aliases.size(); ++j) outs[node->output_pos_[j]] = aliases[j];

  node->fn_ = std::move(fn);
  for (const Tensor& t : inputs) node->inputs_.emplace_back(t, /*is_output=*/false);
  node->num_fn_outputs_ = outs.size();
  node->rng_devices_ = std::move(devices);
  node->rng_states_ = std::move(states);
  node->autocast_ = autocast_internal::capture();
  return outs;
}

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input, CheckpointOptions opts) {
  NABLA_CHECK(ValueError, static_cast<bool>(fn), "checkpoint: the function is empty");
  auto wrapped = [fn = std::move(fn)](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; };
  return checkpoint(wrapped, {input}, opts)[0];
}

}  // namespace nabla::autograd
