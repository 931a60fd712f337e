// The autograd graph as the ops in core/ record it. Each differentiable op whose inputs take part
// in autograd records one Node: a backward function next to the forward, holding what it saved.
// The engine that walks the graph, gradcheck and anomaly mode live in autograd/.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "small_vector.h"
#include "tensor.h"

namespace nabla::autograd {

using GradList = SmallVector<Tensor, 4>;

// ---- grad mode (thread-local) -------------------------------------------------------------------
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};
// Disables recording for its scope (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
// Enables or disables recording for its scope.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};
// Inference mode: the fastest evaluation loops; nothing is recorded (as NoGradGuard). In-place ops
// still bump version counters, so a tensor saved for a backward outside the guard and modified
// inside it is still caught when that backward runs.
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  static bool is_enabled();

 private:
  bool prev_grad_, prev_inference_;
};
void set_grad_enabled(bool enabled);
bool is_grad_enabled();

// ---- anomaly mode -------------------------------------------------------------------------------
struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};
// While alive, nodes remember where their forward op was called, and a backward that produces
// NaN or Inf throws naming the node, the forward op and that call site.
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

// ---- nodes --------------------------------------------------------------------------------------
class Node;

// Where a gradient goes: input `input_nr` of node `fn` (null fn: nowhere).
struct Edge {
  intrusive_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn.get() != nullptr; }
};

// Shape, dtype and device of one forward output, to check and materialize its gradient.
struct OutputMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
};

using TensorHook = std::function<Tensor(const Tensor&)>;

class Node : public RefCounted, public Pooled {
 public:
  Node();
  ~Node() override;

  // Gradients of the forward outputs in, gradients of the forward inputs out (one per next_edge;
  // undefined where an input needs none).
  virtual GradList apply(GradList&& grad_outputs) = 0;
  // nabla's name of the node ("AddBackward"), as error messages and anomaly mode write it.
  virtual const char* name() const = 0;
  // The name PyTorch prints for it: the op's node with the number of PyTorch's first overload
  // ("AddBackward0"); nodes PyTorch names without one as they are ("AccumulateGrad", "CopySlices",
  // custom Functions). Differs from PyTorch: the number is always 0, where PyTorch numbers an op's
  // overloads (pow(Tensor, Tensor) gives PowBackward1, sum over dims SumBackward1).
  virtual std::string torch_name() const;
  // Frees what the node saved for backward (after a backward without retain_graph).
  virtual void release_saved() {}

  bool needs_input_grad(size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }
  size_t num_inputs() const { return out_meta.size(); }  // gradients it takes = forward outputs
  size_t num_outputs() const { return next_edges.size(); }
  uint64_t sequence_nr() const { return sequence_nr_; }

  SmallVector<Edge, 4> next_edges;      // one per forward input
  SmallVector<OutputMeta, 1> out_meta;  // one per forward output
  // Hooks on the gradient of forward output `first` (tensor.register_hook on non-leaves).
  std::vector<std::tuple<uint32_t, size_t, TensorHook>> pre_hooks;
  // Set in anomaly mode only: the forward op's name and where it was called.
  struct AnomalyInfo {
    std::string forward_op, forward_trace;
  };
  std::unique_ptr<AnomalyInfo> anomaly;

  // Bookkeeping of the backward pass in progress (autograd/engine.cpp); valid while
  // engine_task matches the running pass.
  uint64_t engine_task = 0;
  int32_t engine_deps = 0;
  bool engine_needed = false;
  GradList engine_buffer;

 private:
  uint64_t sequence_nr_;
};

// Prints a node as PyTorch's repr does: `std::cout << z.grad_fn()` writes "<AddBackward0>", and a null
// node (the grad_fn of a leaf) "None".
std::ostream& operator<<(std::ostream& os, const Node* node);
std::ostream& operator<<(std::ostream& os, const Node& node);

// The creation number the next node made on this thread will get: nodes made between two calls
// have numbers in that range (autograd::checkpoint finds the graph a function recorded this way).
uint64_t next_sequence_nr();

// Accumulates into a leaf's .grad(). Created once per leaf and cached on it.
class AccumulateGrad;
// Whether `n` is the node that accumulates into a leaf's .grad().
bool is_accumulate_grad(const Node& n);

// Per-tensor autograd state that most tensors never need: .grad, leaf hooks, retain_grad.
struct AutogradMeta : RefCounted {
  Tensor grad;
  bool retains_grad = false;
  size_t retain_hook_id = 0;
  std::vector<std::pair<size_t, TensorHook>> hooks;  // leaf hooks, run before accumulation
  // Leaf hooks run after accumulation, given .grad (Tensor::register_post_accumulate_grad_hook).
  std::vector<std::pair<size_t, std::function<void(Tensor& grad)>>> post_accumulate_hooks;
};

// ---- saving tensors for backward ----------------------------------------------------------------
// Holds a tensor a backward formula needs and the version it had, so an in-place change between
// forward and backward is reported instead of silently giving wrong gradients.
class SavedTensor {
 public:
  SavedTensor() = default;
  // is_output: the tensor is an output of the node saving it; it is then stored without its
  // grad_fn (which would be a reference cycle) and reattached when unpacked.
  SavedTensor(const Tensor& t, bool is_output);
  // The saved tensor; throws AutogradError if it was modified in place since it was saved.
  Tensor unpack(const Node& owner) const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint32_t version_ = 0;
  bool is_output_ = false;
};

// A node whose backward is a lambda: [captures](Node& self, GradList& grads) -> GradList.
// Captured SavedTensors are released with the lambda after a backward without retain_graph.
template <class F>
class FunctionNode final : public Node {
 public:
  FunctionNode(const char* name, F&& fn) : name_(name), fn_(std::move(fn)) {}
  GradList apply(GradList&& grads) override;
  const char* name() const override { return name_; }
  void release_saved() override {
    if constexpr (!std::is_empty_v<F>) fn_.reset();
  }

 private:
  const char* name_;
  std::optional<F> fn_;
};

[[noreturn]] void throw_graph_freed(const char* node_name);

template <class F>
GradList FunctionNode<F>::apply(GradList&& grads) {
  if (!fn_) throw_graph_freed(name_);
  return (*fn_)(static_cast<Node&>(*this), grads);
}

// ---- recording helpers used by op front-ends ----------------------------------------------------
// A leaf that requires grad, a tensor with history, or a view whose base gained history since.
inline bool takes_part_in_autograd(const TensorImpl& i) {
  return i.requires_grad || i.grad_fn || (i.view_history_is_stale() && i.view_base->grad_fn);
}
// True when grad mode is on and any input takes part in autograd.
inline bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && takes_part_in_autograd(*t->impl())) return true;
  return false;
}
template <class... T>
inline bool needs_grad(const T&... inputs) {
  return any_requires_grad({&inputs...});
}

// The edge a gradient for `t` must flow into (its grad_fn, its accumulator, or none).
Edge gradient_edge(const Tensor& t);
// Makes `node` the grad_fn of each output, records their metadata and its edges to the inputs.
void connect(Node* node, std::initializer_list<const Tensor*> inputs, std::initializer_list<Tensor*> outputs);
void connect(Node* node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);

// Records a FunctionNode: record("MulBackward", {&a, &b}, {&out}, [..](Node& n, GradList& grads) {...});
template <class F>
void record(const char* name, std::initializer_list<const Tensor*> inputs, std::initializer_list<Tensor*> outputs,
            F&& fn) {
  auto* node = new FunctionNode<std::decay_t<F>>(name, std::forward<F>(fn));
  intrusive_ptr<Node> hold(node);
  connect(node, inputs, outputs);
}
template <class F>
void record(const char* name, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, F&& fn) {
  auto* node = new FunctionNode<std::decay_t<F>>(name, std::forward<F>(fn));
  intrusive_ptr<Node> hold(node);
  connect(node, inputs, outputs);
}

inline SavedTensor save(const Tensor& t) { return SavedTensor(t, false); }
inline SavedTensor save_output(const Tensor& t) { return SavedTensor(t, true); }

// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace nabla::autograd

namespace nabla {
// The guards as libtorch spells them (torch::NoGradGuard, torch::InferenceMode): also nabla::.
using autograd::AutoGradMode;
using autograd::InferenceMode;
using autograd::is_grad_enabled;
using autograd::NoGradGuard;
using autograd::set_grad_enabled;
}  // namespace nabla
