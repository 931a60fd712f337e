// Recording the autograd graph: grad mode, nodes, saved tensors, edges, and AccumulateGrad.
#include "core/graph.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string_view>

#include "core/impl.h"
#include "core/trace.h"

namespace nabla::autograd {

namespace {
thread_local bool tl_grad_enabled = true;
thread_local bool tl_inference = false;
thread_local uint64_t tl_sequence_nr = 0;
std::atomic<bool> g_anomaly{false};
}  // namespace

bool GradMode::is_enabled() { return tl_grad_enabled; }
void GradMode::set_enabled(bool e) { tl_grad_enabled = e; }
void set_grad_enabled(bool e) { tl_grad_enabled = e; }
bool is_grad_enabled() { return tl_grad_enabled; }

InferenceMode::InferenceMode(bool enabled) : prev_grad_(tl_grad_enabled), prev_inference_(tl_inference) {
  if (enabled) {
    tl_grad_enabled = false;
    tl_inference = true;
  }
}
InferenceMode::~InferenceMode() {
  tl_grad_enabled = prev_grad_;
  tl_inference = prev_inference_;
}
bool InferenceMode::is_enabled() { return tl_inference; }

bool AnomalyMode::is_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool e) { g_anomaly.store(e); }

namespace {
// The call stack, demangled, without nabla's own frames at the top.
std::string capture_trace() {
  void* frames[48];
  int n = ::backtrace(frames, 48);
  std::unique_ptr<char*, decltype(&std::free)> syms(::backtrace_symbols(frames, n), &std::free);
  std::string out;
  if (!syms) return out;
  int shown = 0;
  for (int i = 0; i < n && shown < 12; ++i) {
    std::string line = syms.get()[i];
    std::string name = line;
    auto open = line.find('('), plus = line.find('+', open);
    if (open != std::string::npos && plus != std::string::npos && plus > open + 1) {
      std::string mangled = line.substr(open + 1, plus - open - 1);
      int status = 0;
      std::unique_ptr<char, decltype(&std::free)> dem(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                      &std::free);
      if (status == 0 && dem) name = dem.get();
      else name = mangled;
    }
    // Skip the recording machinery itself.
    if (name.find("nabla::autograd::") != std::string::npos ||
        name.find("nabla::autograd::capture") != std::string::npos)
      continue;
    out += "  #" + std::to_string(shown++) + " " + name + "\n";
  }
  return out;
}

// "LeakyReluBackward" -> "leaky_relu"
std::string forward_name(const char* node_name) {
  std::string s(node_name), out;
  auto pos = s.rfind("Backward");
  if (pos != std::string::npos) s = s.substr(0, pos);
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (i > 0) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

Node::Node() : sequence_nr_(tl_sequence_nr++) {}
uint64_t next_sequence_nr() { return tl_sequence_nr; }

// Deleting a long chain of nodes recursively (each node's last reference lives in its parent's
// edge) would overflow the stack; children that would die with this node are queued instead and
// deleted by the outermost destructor, one at a time.
namespace {
thread_local std::vector<Node*> tl_delete_queue;
thread_local bool tl_draining = false;
}  // namespace

Node::~Node() {
  for (Edge& e : next_edges)
    if (e.fn && e.fn->use_count() == 1) tl_delete_queue.push_back(e.fn.release());
  if (tl_draining) return;
  tl_draining = true;
  while (!tl_delete_queue.empty()) {
    Node* n = tl_delete_queue.back();
    tl_delete_queue.pop_back();
    n->decref();  // the last reference: deletes n, which may queue its own children
  }
  tl_draining = false;
}

void throw_graph_freed(const char* node_name) {
  throw AutogradError(
      internal::str("backward: trying to backward through the graph a second time (", node_name,
                    " already freed its saved tensors). Saved values are freed when backward() or autograd::grad() "
                    "runs; pass retain_graph=true to the first call if you need to backward through the graph again"));
}

// ---- saved tensors ------------------------------------------------------------------------------

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.version();
  // An output is stored without its grad_fn (that would be a cycle: node -> tensor -> node). Its
  // detached copy keeps which output of the node it is (output_nr), for unpack.
  data_ = is_output ? t.detach() : t;
  if (is_output) {
    data_.impl()->requires_grad = false;
    data_.impl()->output_nr = t.impl()->output_nr;
  }
}

Tensor SavedTensor::unpack(const Node& owner) const {
  if (!data_.defined()) return data_;
  if (data_.version() != version_)
    throw AutogradError(
        internal::str("backward: one of the tensors needed for gradient computation has been modified by an in-place "
                      "operation: the ",
                      internal::describe(data_), " saved by ", owner.name(), " is at version ", data_.version(),
                      "; expected version ", version_,
                      ". Use the out-of-place op (e.g. x = x + 1 instead of x += 1) or clone() before modifying it"));
  if (!is_output_) return data_;
  // Reattach the output's history (as the same output of the node) so double backward sees it.
  Tensor t = data_.detach();
  t.impl()->grad_fn = intrusive_ptr<Node>(const_cast<Node*>(&owner));
  t.impl()->output_nr = data_.impl()->output_nr;
  return t;
}

// ---- names ----------------------------------------------------------------------------------------

std::string Node::torch_name() const {
  std::string n = name();
  constexpr std::string_view suffix = "Backward";
  if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) n += '0';
  return n;
}

std::ostream& operator<<(std::ostream& os, const Node* node) {
  if (!node) return os << "None";
  return os << '<' << node->torch_name() << '>';
}
std::ostream& operator<<(std::ostream& os, const Node& node) { return os << &node; }

// ---- AccumulateGrad -----------------------------------------------------------------------------

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(intrusive_ptr<AutogradMeta> meta) : meta_(std::move(meta)) {}
  const char* name() const override { return "AccumulateGrad"; }

  GradList apply(GradList&& grads) override {
    Tensor g = std::move(grads[0]);
    if (!g.defined()) return {};
    for (auto& [id, hook] : meta_->hooks) {
      Tensor r = hook(g);
      if (r.defined()) g = r;
    }
    const OutputMeta& m = out_meta[0];
    NABLA_CHECK(ShapeError, g.sizes() == m.shape, "backward: gradient of shape ", g.sizes(),
                " does not match its leaf tensor of shape ", m.shape);
    Tensor& grad = meta_->grad;
    if (GradMode::is_enabled()) {
      // create_graph: keep the gradient's own history and accumulate out of place.
      grad = grad.defined() ? grad + g : g;
    } else if (!grad.defined()) {
      // Steal the buffer when nothing else can see it; otherwise keep a private copy.
      bool private_buffer = g.use_count() == 1 && g.impl()->storage->use_count() == 1 && g.is_contiguous() &&
                            !g.impl()->grad_fn && g.dtype() == m.dtype;
      grad = private_buffer ? g.detach() : g.detach().to(m.dtype).clone();
    } else {
      grad.add_(g);
    }
    for (auto& [id, hook] : meta_->post_accumulate_hooks) hook(grad);
    return {};
  }

 private:
  intrusive_ptr<AutogradMeta> meta_;
};

bool is_accumulate_grad(const Node& n) { return dynamic_cast<const AccumulateGrad*>(&n) != nullptr; }

// ---- edges and recording ------------------------------------------------------------------------

static AutogradMeta& meta_of(TensorImpl* impl) {
  if (!impl->meta) impl->meta = make_intrusive<AutogradMeta>();
  return *impl->meta;
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->view_history_is_stale()) nabla::internal::refresh_view_history(t);
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return Edge{};
  if (!impl->grad_accumulator) {
    meta_of(impl);
    auto acc = make_intrusive<AccumulateGrad>(impl->meta);
    acc->out_meta.push_back(OutputMeta{impl->sizes, impl->dtype, impl->device()});
    impl->grad_accumulator = acc;
  }
  return Edge{impl->grad_accumulator, 0};
}

namespace {
void finish_node(Node* node) {
  if (AnomalyMode::is_enabled()) {
    node->anomaly = std::make_unique<Node::AnomalyInfo>(Node::AnomalyInfo{forward_name(node->name()), capture_trace()});
  }
}
void set_output(Node* node, Tensor& out, uint32_t nr) {
  TensorImpl* impl = out.impl();
  impl->grad_fn = intrusive_ptr<Node>(node);
  impl->output_nr = nr;
  impl->requires_grad = false;
  node->out_meta.push_back(OutputMeta{impl->sizes, impl->dtype, impl->device()});
  // Outside a traced op's own call (which runs with tracing suspended), history given to a tensor
  // means an op without a trace hook made it: the tracer must not take it for what it computed so
  // far (core/trace.h, Tracer::on_history).
  if (trace::Tracer* t = trace::tl_current) [[unlikely]]
    t->on_history(out);
}
}  // namespace

void connect(Node* node, std::initializer_list<const Tensor*> inputs, std::initializer_list<Tensor*> outputs) {
  for (const Tensor* t : inputs) node->next_edges.push_back(t->defined() ? gradient_edge(*t) : Edge{});
  uint32_t nr = 0;
  for (Tensor* t : outputs) set_output(node, *t, nr++);
  finish_node(node);
}

void connect(Node* node, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  for (const Tensor& t : inputs) node->next_edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  uint32_t nr = 0;
  for (Tensor& t : outputs) set_output(node, t, nr++);
  finish_node(node);
}

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (grad.sizes() == Shape(shape.begin(), shape.end())) return grad;
  int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  NABLA_CHECK(ShapeError, lead >= 0, "sum_to: cannot reduce a gradient of shape ", grad.sizes(), " to ", shape);
  Shape dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && grad.sizes()[lead + i] != 1) dims.push_back(lead + static_cast<int64_t>(i));
  Tensor r = dims.empty() ? grad : grad.sum(dims, /*keepdim=*/true);
  return r.view(shape);
}

}  // namespace nabla::autograd
