// The backward engine: walks the recorded graph from the outputs to the leaves, iteratively (no
// recursion, so a 10,000-op chain is fine), in decreasing creation order, which is a reverse
// topological order; gradients reaching a node from several paths are summed before it runs.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <span>

#include "autograd/autograd.h"
#include "autograd/engine_internal.h"
#include "core/autocast.h"
#include "core/impl.h"

namespace nabla::autograd {

namespace {

std::atomic<uint64_t> g_task_counter{0};

struct Capture {
  Node* node;
  uint32_t input_nr;
  size_t slot;
};

bool has_nonfinite(const Tensor& t) {
  if (!t.defined() || !(is_floating(t.dtype()) || is_complex(t.dtype())) || t.numel() == 0) return false;
  NoGradGuard ng;
  return !all(isfinite(t)).item<bool>();
}

Tensor ones_for(const Tensor& t, size_t i) {
  NABLA_CHECK(AutogradError, t.numel() == 1,
              "backward: a gradient can be created implicitly only for one-element outputs; "
              "output ",
              i, " has shape ", t.sizes(), ", so pass its gradient explicitly");
  return ones_like(t);
}

// Scratch space of one backward pass, kept per thread (and per nesting level, for a backward
// called from a hook) so that passes in steady state do not allocate.
struct Workspace {
  std::vector<std::pair<Edge, Tensor>> roots;
  std::vector<Node*> nodes, stack, ready;
};
thread_local std::vector<std::unique_ptr<Workspace>> tl_workspaces;
thread_local size_t tl_depth = 0;

// Edges where a pass stops (grad_into_edges): the gradient flowing along edges[i] is summed into
// grads[i], and the node the edge leads to is neither visited nor run.
struct Sinks {
  std::span<const Edge> edges;
  std::vector<Tensor>& grads;
  // The sink `e` is, or -1. A linear scan: a checkpointed block has a handful of boundary edges.
  ptrdiff_t find(const Edge& e) const {
    for (size_t i = 0; i < edges.size(); ++i)
      if (edges[i].fn.get() == e.fn.get() && edges[i].input_nr == e.input_nr) return static_cast<ptrdiff_t>(i);
    return -1;
  }
  void add(ptrdiff_t i, const Tensor& g) const { grads[i] = grads[i].defined() ? grads[i] + g : g; }
};

// One backward pass. captures: (node, input) pairs whose incoming gradient is wanted instead of
// being accumulated (autograd::grad); when non-empty, AccumulateGrad nodes do not run. sinks: see
// Sinks (null for backward and grad). run() seeds the roots, discovers the graph and counts each
// node's incoming edges, prunes it to the captured inputs (autograd::grad), then runs ready nodes
// latest-created first, delivering each one's gradients along its edges.
class Pass {
 public:
  Pass(Workspace& ws, bool retain_graph, bool create_graph, std::vector<Capture>* captures,
       std::vector<Tensor>* captured, const Sinks* sinks)
      : ws_(ws),
        task_(++g_task_counter),
        retain_graph_(retain_graph),
        create_graph_(create_graph),
        captures_(captures),
        captured_(captured),
        sinks_(sinks) {}

  void run(std::span<const Tensor> outputs, std::span<const Tensor> grad_outputs) {
    seed_roots(outputs, grad_outputs);
    discover();
    if (captures_) prune_to_captures();
    for (auto& [edge, g] : ws_.roots) {
      Tensor& slot = edge.fn->engine_buffer[edge.input_nr];
      slot = slot.defined() ? slot + g : g;
    }
    for (Node* n : ws_.nodes)
      if (n->engine_deps == 0) push(n);
    AutoGradMode mode(create_graph_);
    while (!ws_.ready.empty()) {
      std::pop_heap(ws_.ready.begin(), ws_.ready.end(), later_first);
      Node* n = ws_.ready.back();
      ws_.ready.pop_back();
      run_node(n);
    }
    // Drop gradients left in nodes that did not run (autograd::grad prunes).
    for (Node* n : ws_.nodes) n->engine_buffer.clear();
    ws_.nodes.clear();
  }

 private:
  static bool later_first(Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); }
  void push(Node* n) {
    ws_.ready.push_back(n);
    std::push_heap(ws_.ready.begin(), ws_.ready.end(), later_first);
  }

  // The outputs' gradient edges with their seed gradients (ones where none is given).
  void seed_roots(std::span<const Tensor> outputs, std::span<const Tensor> grad_outputs) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor& out = outputs[i];
      NABLA_CHECK(AutogradError, out.defined(), "backward: output ", i, " is an undefined tensor");
      NABLA_CHECK(AutogradError, out.requires_grad(), "backward: element ", i,
                  " of the outputs does not require grad and has no grad_fn (nothing it depends on "
                  "requires grad, or it was computed under NoGradGuard)");
      Tensor g = grad_outputs.empty() || !grad_outputs[i].defined() ? ones_for(out, i) : grad_outputs[i];
      NABLA_CHECK(ShapeError, g.sizes() == out.sizes(), "backward: gradient ", i, " has shape ", g.sizes(),
                  " but its output has shape ", out.sizes());
      Edge edge = gradient_edge(out);
      if (sinks_) {
        if (ptrdiff_t k = sinks_->find(edge); k >= 0) {
          sinks_->add(k, g);
          continue;
        }
      }
      ws_.roots.emplace_back(std::move(edge), g);
    }
  }

  // Finds every node reachable from the roots and counts the edges that lead into each.
  void discover() {
    auto visit = [&](Node* n) {
      if (n->engine_task == task_) return;
      n->engine_task = task_;
      n->engine_deps = 0;
      n->engine_needed = captures_ == nullptr;
      n->engine_buffer.clear();
      n->engine_buffer.resize(n->num_inputs());
      ws_.nodes.push_back(n);
      ws_.stack.push_back(n);
    };
    for (auto& [edge, g] : ws_.roots) visit(edge.fn.get());
    while (!ws_.stack.empty()) {
      Node* n = ws_.stack.back();
      ws_.stack.pop_back();
      for (const Edge& e : n->next_edges) {
        if (!e.valid() || (sinks_ && sinks_->find(e) >= 0)) continue;
        Node* c = e.fn.get();
        visit(c);
        ++c->engine_deps;
      }
    }
  }

  // autograd::grad: only the nodes on a path to a captured input run.
  void prune_to_captures() {
    for (const Capture& c : *captures_)
      if (c.node->engine_task == task_) c.node->engine_needed = true;
    // Nodes were discovered parents-first; a child's flag is final when its parents are checked
    // in reverse discovery order only for trees, so iterate to a fixed point (graphs are small).
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto it = ws_.nodes.rbegin(); it != ws_.nodes.rend(); ++it) {
        Node* n = *it;
        if (n->engine_needed) continue;
        for (const Edge& e : n->next_edges) {
          if (e.valid() && e.fn->engine_needed) {
            n->engine_needed = true;
            changed = true;
            break;
          }
        }
      }
    }
  }

  // Runs one node whose incoming gradients are complete: its hooks, captures, its backward.
  void run_node(Node* n) {
    intrusive_ptr<Node> hold(n);
    GradList inputs = std::move(n->engine_buffer);
    n->engine_buffer.clear();
    // Tensor hooks first: autograd::grad captures the gradient they return, as PyTorch does.
    for (auto& [nr, id, hook] : n->pre_hooks) {
      if (nr < inputs.size() && inputs[nr].defined()) {
        Tensor r = hook(inputs[nr]);
        if (r.defined()) inputs[nr] = r;
      }
    }
    if (captures_) {
      for (const Capture& c : *captures_)
        if (c.node == n && inputs[c.input_nr].defined()) {
          Tensor& dst = (*captured_)[c.slot];
          dst = dst.defined() ? dst + inputs[c.input_nr] : inputs[c.input_nr];
        }
    }
    if (!n->engine_needed) return;
    const bool is_accumulate = n->num_outputs() == 0 && is_accumulate_grad(*n);
    if (captures_ && is_accumulate) return;
    bool any = false;
    for (const Tensor& t : inputs) any = any || t.defined();
    GradList outs;
    if (any) {
      if (inputs.size() > 1) {
        for (size_t i = 0; i < inputs.size(); ++i)
          if (!inputs[i].defined()) {
            const OutputMeta& m = n->out_meta[i];
            inputs[i] = zeros(m.shape, dtype(m.dtype).device(m.device));
          }
      }
      outs = n->apply(std::move(inputs));
      if (!retain_graph_) n->release_saved();
    } else {
      outs.resize(n->num_outputs());
    }
    if (is_accumulate) return;
    NABLA_CHECK(AutogradError, outs.size() == n->num_outputs(), "backward: ", n->name(), " returned ", outs.size(),
                " gradients but its forward op had ", n->num_outputs(), " inputs");
    deliver(n, outs);
  }

  // Hands node n's input gradients to the nodes its edges lead to (or to the sinks).
  void deliver(Node* n, GradList& outs) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.valid()) continue;
      Node* c = e.fn.get();
      const ptrdiff_t sink = sinks_ ? sinks_->find(e) : -1;
      Tensor g = std::move(outs[i]);
      if (g.defined()) {
        if (anomaly_ && has_nonfinite(g)) {
          throw AutogradError(
              internal::str("anomaly detected: ", n->name(), " returned NaN or Inf values in its gradient for input ",
                            i, (n->anomaly ? " of the forward op '" + n->anomaly->forward_op + "'" : std::string()),
                            (n->anomaly && !n->anomaly->forward_trace.empty()
                                 ? ". The forward op was called from:\n" + n->anomaly->forward_trace
                                 : std::string(". "))));
        }
        const OutputMeta& m = c->out_meta[e.input_nr];
        if (g.sizes() != m.shape)
          throw AutogradError(internal::str("backward: ", n->name(), " returned a gradient of shape ", g.sizes(),
                                            " for input ", i, ", which has shape ", m.shape));
        if (g.dtype() != m.dtype) g = g.to(m.dtype);
        if (g.device() != m.device) g = g.to(m.device);
        if (sink >= 0) {
          sinks_->add(sink, g);
        } else {
          Tensor& slot = c->engine_buffer[e.input_nr];
          slot = slot.defined() ? slot + g : g;
        }
      }
      if (sink < 0 && --c->engine_deps == 0 && c->engine_needed) push(c);
    }
  }

  Workspace& ws_;
  const uint64_t task_;
  const bool retain_graph_, create_graph_;
  std::vector<Capture>* captures_;
  std::vector<Tensor>* captured_;
  const Sinks* sinks_;
  const bool anomaly_ = AnomalyMode::is_enabled();
};

void run_backward(std::span<const Tensor> outputs, std::span<const Tensor> grad_outputs, bool retain_graph,
                  bool create_graph, std::vector<Capture>* captures, std::vector<Tensor>* captured,
                  const Sinks* sinks = nullptr) {
  NABLA_CHECK(AutogradError, grad_outputs.empty() || grad_outputs.size() == outputs.size(), "backward: got ",
              grad_outputs.size(), " gradients for ", outputs.size(), " outputs");
  // Backward formulas run in the forward's dtypes: autocast is off in the engine (core/autocast.h).
  autocast_internal::Suspend no_autocast;
  // The workspace of this nesting level (a backward may run inside a hook of another).
  if (tl_workspaces.size() <= tl_depth) tl_workspaces.push_back(std::make_unique<Workspace>());
  Workspace& ws = *tl_workspaces[tl_depth];
  struct Depth {
    Depth() { ++tl_depth; }
    ~Depth() { --tl_depth; }
  } depth_guard;
  ws.roots.clear();
  ws.nodes.clear();
  ws.stack.clear();
  ws.ready.clear();
  struct Cleanup {  // drop the references the workspace holds, keep its capacity
    Workspace& w;
    ~Cleanup() {
      w.roots.clear();
      w.ready.clear();
    }
  } cleanup{ws};
  Pass(ws, retain_graph, create_graph, captures, captured, sinks).run(outputs, grad_outputs);
}

}  // namespace

std::vector<Tensor> grad_into_edges(std::span<const Tensor> outputs, std::span<const Tensor> grad_outputs,
                                    std::span<const Edge> sinks, bool create_graph) {
  std::vector<Tensor> grads(sinks.size());
  Sinks s{sinks, grads};
  // The graph is the caller's to drop; without create_graph it is freed as the pass goes.
  run_backward(outputs, grad_outputs, /*retain_graph=*/create_graph, create_graph, nullptr, nullptr, &s);
  return grads;
}

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              std::optional<bool> retain_graph, bool create_graph) {
  run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, nullptr, nullptr);
}

void backward(const Tensor& output, const Tensor& grad_output, bool retain_graph, bool create_graph) {
  run_backward(std::span<const Tensor>(&output, 1),
               grad_output.defined() ? std::span<const Tensor>(&grad_output, 1) : std::span<const Tensor>(),
               retain_graph, create_graph, nullptr, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Capture> captures;
  std::vector<intrusive_ptr<Node>> keep;  // accumulators created here stay alive for the pass
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    NABLA_CHECK(AutogradError, t.defined() && t.requires_grad(), "grad: input ", i,
                " does not require grad (call requires_grad_() on it before the forward pass)");
    Edge e = gradient_edge(t);
    keep.push_back(e.fn);
    captures.push_back({e.fn.get(), e.input_nr, i});
  }
  std::vector<Tensor> result(inputs.size());
  run_backward(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, &captures, &result);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (result[i].defined()) {
      // Leaf hooks apply to captured gradients too.
      TensorImpl* impl = inputs[i].impl();
      if (!impl->grad_fn && impl->meta)
        for (auto& [id, hook] : impl->meta->hooks) {
          Tensor r = hook(result[i]);
          if (r.defined()) result[i] = r;
        }
      continue;
    }
    NABLA_CHECK(AutogradError, allow_unused, "grad: input ", i,
                " was not used to compute the outputs (pass allow_unused=true to get an undefined "
                "gradient for it)");
  }
  return result;
}

}  // namespace nabla::autograd
