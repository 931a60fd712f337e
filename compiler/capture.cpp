// The recorder (compiler/capture.h): a trace::Tracer that builds the graph as the forward runs.
#include "compiler/capture.h"

#include <unordered_map>

#include "compiler/replay.h"
#include "core/graph.h"
#include "core/trace.h"

namespace nabla::compiler {

namespace {

// Ops whose replay would not be the eager call's: random draws (the generator's state), in-place
// writes, and ops whose output shape depends on the values.
const char* refused(OpId op) {
  switch (op) {
    case OpId::rand:
    case OpId::randn:
    case OpId::randint:
    case OpId::randperm:
    case OpId::rand_like:
    case OpId::randn_like:
    case OpId::bernoulli:
    case OpId::multinomial: return "draws random numbers (replaying it would not advance the generator as eager does)";
    case OpId::fill:
    case OpId::zero:
    case OpId::copy: return "writes a tensor in place";
    case OpId::nonzero:
    case OpId::unique:
    case OpId::unique_consecutive:
    case OpId::masked_select:
    case OpId::bincount: return "has an output shape that depends on the values";
    default: return nullptr;
  }
}

class Recorder final : public trace::Tracer {
 public:
  Graph g;
  std::string fallback;

  void add_named(const Tensor& t, const std::string& name) {
    if (t.defined()) names_.emplace(t.impl(), name);
  }
  void add_input(const Tensor& t, int index) {
    Value v = value_like(t, Value::input);
    v.index = index;
    dep_.resize(g.values.size() + 1);
    dep_[bind(t, g.add_value(std::move(v)))] = true;
  }

  // The value a tensor read by a traced op holds.
  int value_of(const Tensor& t) {
    if (!t.defined()) return -1;
    if (auto it = ids_.find(t.impl()); it != ids_.end()) {
      const Value& v = g.values[it->second];
      if (v.kind != Value::param && t.version() != versions_[it->second])
        fail(internal::str("a tensor of shape ", t.sizes(), " was modified in place after an op made it (in-place ops ",
                           "are not captured)"));
      return it->second;
    }
    // The same data as a value (x.detach(), an untraced view that changes nothing) is that value.
    if (auto it = by_data_.find(t.data_ptr()); it != by_data_.end()) {
      const Value& v = g.values[it->second];
      if (v.kind == Value::computed && v.sizes == t.sizes() && v.dtype == t.dtype() &&
          tensors_[it->second].strides() == t.strides())
        return it->second;
    }
    if (autograd::Node* fn = t.grad_fn())
      fail(internal::str("op '", fn->name(), "' has no trace hook (it produced a tensor of shape ", t.sizes(),
                         " that a later op reads), so its call cannot be replayed"));
    // A tensor the module holds (a parameter, a buffer, any other it keeps), or a constant the
    // forward made (a 0-d operand of x * 0.5): read at each replay, as eager reads it.
    Value v = value_like(t, Value::param);
    v.tensor = t;
    v.version = t.version();
    if (auto it = names_.find(t.impl()); it != names_.end()) v.name = it->second;
    return bind(t, g.add_value(std::move(v)));
  }

  void record(OpId op, const std::vector<Tensor>& in, const std::vector<Tensor>& out, const OpAttrs& attrs) override {
    if (!fallback.empty()) return;
    if (const char* why = refused(op)) return fail(internal::str("op '", op_name(op), "' ", why));
    if (!has_replay(op)) return fail(internal::str("op '", op_name(op), "' has no compiled form yet"));
    if (op == OpId::batch_norm && std::get<BatchNormAttrs>(attrs).training)
      return fail("op 'batch_norm' runs in training mode (it updates its running statistics in place)");
    Node n;
    n.id = op;
    n.attrs = attrs;
    bool dep = false;
    for (const Tensor& t : in) {
      n.inputs.push_back(value_of(t));
      dep = dep || (n.inputs.back() >= 0 && dep_[n.inputs.back()]);
    }
    if (!fallback.empty()) return;
    for (const Tensor& t : out) {
      auto it = ids_.find(t.impl());
      if (it != ids_.end() &&
          std::any_of(in.begin(), in.end(), [&](const Tensor& x) { return x.impl() == t.impl(); })) {
        // An op that returns its input (x.to(its own dtype), a view that changes nothing): the
        // graph computes nothing for it, but the value stays that input.
        if (out.size() == 1) return;
      }
      Value v = value_like(t, Value::computed);
      v.index = static_cast<int>(g.nodes.size());
      n.outputs.push_back(bind(t, g.add_value(std::move(v))));
      dep_[n.outputs.back()] = dep;
    }
    g.nodes.push_back(std::move(n));
  }

  void on_history(const Tensor& t) override {
    // An autograd node for a tensor the graph computed from the module's tensors alone (which the
    // traced op's own front-end does not give: its call ran on the inputs' history) means an op
    // without a hook made it from such a value: forget it, so a read names that op. (A traced op
    // on the inputs gets its node right after its record, which is no sign of anything.)
    auto it = ids_.find(t.impl());
    if (it != ids_.end() && g.values[it->second].kind == Value::computed && !dep_[it->second]) ids_.erase(it);
  }
  void on_host_read(const Tensor& t, const char* what) override {
    fail(internal::str("the forward reads a tensor of shape ", t.sizes(), " on the host (", what,
                       "): the graph would keep the number the first call saw"));
  }

  void on_value_check(const Tensor& t, const std::function<void(const Tensor&)>& check) override {
    if (!fallback.empty()) return;
    Node n;
    n.kind = Node::value_check;
    n.inputs.push_back(value_of(t));
    n.check = check;
    if (fallback.empty()) g.nodes.push_back(std::move(n));
  }

  // A hooked op without a replay rule is recorded as the ops it is made of (an LSTM as its
  // matrix products and gates); one refused outright stays one call, and fails the capture.
  bool records_parts(OpId op) const override { return !has_replay(op) && refused(op) == nullptr; }

  void on_random_draw() override {
    fail(
        "the forward draws random numbers (randn_like, dropout in training, ...): a replay would not advance "
        "the generator as eager does");
  }

  void fail(std::string why) {
    if (fallback.empty()) fallback = std::move(why);
  }

  void check_unmodified(const Tensor& t) {
    const int id = known(t);
    if (id >= 0 && t.version() != versions_[id])
      fail(internal::str("the output of shape ", t.sizes(), " was modified in place after an op made it"));
  }
  int known(const Tensor& t) const {
    auto it = ids_.find(t.impl());
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  Value value_like(const Tensor& t, Value::Kind kind) {
    Value v;
    v.kind = kind;
    v.sizes = t.sizes();
    v.dtype = t.dtype();
    v.device = t.device();
    return v;
  }
  int bind(const Tensor& t, int id) {
    ids_[t.impl()] = id;
    if (static_cast<size_t>(id) >= tensors_.size()) {
      tensors_.resize(id + 1);
      versions_.resize(id + 1);
      dep_.resize(id + 1);
    }
    tensors_[id] = t;  // kept alive, so no other tensor takes its address during the capture
    versions_[id] = t.version();
    if (g.values[id].kind == Value::computed && t.numel() > 0) by_data_.emplace(t.data_ptr(), id);
    return id;
  }

  std::unordered_map<const TensorImpl*, int> ids_;
  std::unordered_map<const void*, int> by_data_;
  std::unordered_map<const TensorImpl*, std::string> names_;
  std::vector<Tensor> tensors_;
  std::vector<uint32_t> versions_;
  std::vector<bool> dep_;  // per value: computed from the call's inputs
};

}  // namespace

Capture capture_module(nn::Module& module, const std::vector<Tensor>& inputs, bool autograd) {
  Recorder rec;
  for (const auto& [name, t] : module.named_parameters()) rec.add_named(t, name);
  for (const auto& [name, t] : module.named_buffers()) rec.add_named(t, name);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Floating inputs take part in autograd during the capture, so the output of an op the tracer
    // does not see carries a grad_fn that names it (as onnx::export_model does). An input that
    // requires grad is used as it is, so the result's gradient reaches it.
    Tensor x = inputs[i];
    if (!x.requires_grad()) {
      x = x.detach();
      if (is_floating(x.dtype())) x.requires_grad_(true);
    }
    rec.add_input(x, static_cast<int>(i));
    xs.push_back(x);
  }
  Tensor y;
  {
    autograd::AutoGradMode grad(true);
    trace::TracerGuard guard(&rec);
    y = xs.size() == 1 ? module(xs[0]) : module(xs[0], xs[1]);
  }
  Capture c;
  if (y.defined()) c.eager_outputs.push_back(autograd ? y : y.detach());
  if (rec.fallback.empty()) {
    const int v = y.defined() ? rec.known(y) : -1;
    if (v < 0) {
      // The output is not a traced op's: an untraced op made it, or it is an input or a constant.
      if (y.defined() && y.grad_fn())
        rec.fail(internal::str("op '", y.grad_fn()->name(), "' has no trace hook (it made the output)"));
      else rec.fail("the output is not computed by traced ops");
    } else {
      rec.check_unmodified(y);
    }
    // A tensor the module holds that the forward changed in place (a buffer updated by an op the
    // tracer does not see) would not change in a replay.
    for (const Value& val : rec.g.values)
      if (val.kind == Value::param && val.tensor.version() != val.version)
        rec.fail(internal::str("the forward modifies ", val.name.empty() ? "a tensor" : "'" + val.name + "'",
                               " of shape ", val.sizes, " in place"));
    if (rec.fallback.empty()) rec.g.outputs.push_back(v);
  }
  c.fallback = std::move(rec.fallback);
  c.graph = std::move(rec.g);
  return c;
}

}  // namespace nabla::compiler
