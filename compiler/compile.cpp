// The compiled module (compiler/compile.h): the signature cache, the fallbacks, re-specialization.
#include "compiler/compile.h"

#include <algorithm>
#include <iostream>
#include <list>
#include <mutex>
#include <set>

#include "compiler/capture.h"
#include "compiler/passes.h"
#include "compiler/replay.h"
#include "core/autocast.h"
#include "core/graph.h"

namespace nabla {

using namespace compiler;

namespace {

struct InputSig {
  Shape sizes;
  DType dtype;
  Device device;
  bool requires_grad;
  bool operator==(const InputSig&) const = default;
};

struct Signature {
  std::vector<InputSig> inputs;
  std::vector<bool> training;  // every module's flag, in modules() order
  bool autograd = false;       // the call records autograd (grad mode on, something requires grad)
  bool operator==(const Signature&) const = default;
};

// A compiled graph with its schedule: shared with the replays running it, so re-specializing
// (which makes a new one) never changes a graph a replay on another thread is reading.
struct Compiled {
  Graph graph;
  Schedule schedule;
};

struct Entry {
  Signature sig;
  Graph captured;                            // as recorded
  std::shared_ptr<const Compiled> compiled;  // after the passes
  std::string fallback;                      // non-empty: this signature runs eagerly
};

// Tensors the graph holds that it did not compute and that are not the module's parameters or
// buffers: a constant the forward made (arange, zeros), a tensor the module keeps unregistered, or
// the result of an op the tracer does not see that ran where autograd did not record (inside
// another op, on integers). Only the last depends on the inputs; a replay on other values tells.
const Value* unexplained_tensor(const Graph& g) {
  for (const Value& v : g.values) {
    if (v.kind != Value::param || !v.name.empty()) continue;
    int64_t n = 1;
    for (int64_t d : v.sizes) n *= d;
    if (n > 1) return &v;
  }
  return nullptr;
}

// The inputs with their elements in another order (the same values, so a valid input stays valid;
// reversed and rotated by a third, without touching any random generator).
std::vector<Tensor> shuffled(const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) {
    const int64_t n = t.numel();
    if (n < 2) {
      out.push_back(t);
      continue;
    }
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[i] = (n - 1 - i + n / 3) % n;
    Tensor perm = tensor(idx, {n}).to(t.device());
    out.push_back(t.detach().reshape({-1}).index_select(0, perm).reshape(t.sizes()));
  }
  return out;
}

}  // namespace

struct CompiledModule::Impl {
  std::shared_ptr<nn::Module> module;
  std::vector<nn::Module*> modules;  // the tree at compile time, for the training flags
  std::vector<Tensor> params;
  CompileOptions options;
  CompileStats stats;
  std::list<Entry> cache;  // most recently used first
  std::set<std::string> warned;
  // Guards the cache and the stats: a compiled module may be called from several threads (the
  // replays run outside the lock; a capture holds it, so concurrent first calls wait).
  mutable std::mutex mu;

  void warn(const std::string& why) {
    stats.last_fallback = why;
    if (options.warn && warned.insert(why).second)
      std::cerr << "nabla::compile: warning: running " << module->name() << " eagerly: " << why << "\n";
  }

  void specialize(Entry& e) {
    auto c = std::make_shared<Compiled>();
    c->graph = e.captured;
    Graph& g = c->graph;
    // A call that records autograd replays op by op through the front-ends, which record each op's
    // backward as eager does: only the passes that keep every op's gradient apply.
    const bool infer = !e.sig.autograd;
    if (options.eliminate_common_subexpressions) eliminate_common_subexpressions(g);
    if (infer && options.fold_constants) fold_constants(g);
    if (infer && options.fold_batch_norm) fold_batch_norm(g);
    if (options.eliminate_dead_code) eliminate_dead_code(g);
    if (infer && options.sink_activations_through_pools) sink_activations_through_pools(g);
    if (infer && options.fuse_elementwise) fuse_elementwise(g);
    compact(g);
    c->schedule = plan(g);
    // The versions the folds saw: a later change re-specializes.
    for (Value& v : e.captured.values)
      if (v.kind == Value::param) v.version = v.tensor.version();
    ++stats.specializations;
    stats.nodes_captured = static_cast<int64_t>(e.captured.nodes.size());
    stats.nodes_compiled = static_cast<int64_t>(g.nodes.size());
    stats.planned_peak_bytes = c->schedule.peak_bytes;
    e.compiled = std::move(c);
  }

  // A graph holding tensors it cannot account for (unexplained_tensor) is replayed once on the
  // inputs shuffled and compared with eager on them: a difference means an op the capture did
  // not see computed one of them from the inputs.
  void verify(Entry& e, const std::vector<Tensor>& in) {
    const Value* v = unexplained_tensor(e.captured);
    if (!v) return;
    const std::string what = internal::str("a tensor of shape ", v->sizes, " ", v->dtype);
    std::vector<Tensor> other = shuffled(in);
    Tensor want, got;
    try {
      autograd::NoGradGuard ng;
      want = other.size() == 1 ? (*module)(other[0]) : (*module)(other[0], other[1]);
      got = compiler::run(e.captured, plan(e.captured), other)[0];
    } catch (const Error& err) {
      e.fallback = internal::str("the graph holds ", what,
                                 " it did not compute, and checking it on other input values ", "failed: ", err.what());
      return;
    }
    const bool same = want.sizes() == got.sizes() && want.dtype() == got.dtype() &&
                      (!is_floating(want.dtype()) ? want.equal(got) : allclose(want, got, 1e-4, 1e-5, true));
    if (!same)
      e.fallback = internal::str("an op the trace does not see computed ", what,
                                 " from the inputs (a replay on other input values differs from eager)");
  }

  bool changed(const Entry& e) const {
    for (const Value& v : e.captured.values)
      if (v.kind == Value::param && v.tensor.version() != v.version) return true;
    return false;
  }

  Tensor forward(const std::vector<Tensor>& in) { return in.size() == 1 ? (*module)(in[0]) : (*module)(in[0], in[1]); }

  Tensor call(const std::vector<Tensor>& in) {
    for (size_t i = 0; i < in.size(); ++i)
      NABLA_CHECK(ValueError, in[i].defined(), "compile: input ", i, " of ", module->name(), " is undefined");
    if (autocast_internal::active()) {
      {
        std::lock_guard lock(mu);
        ++stats.eager_calls;
        warn("autocast is on (compiling under autocast is not implemented yet)");
      }
      return forward(in);
    }
    Signature sig;
    if (autograd::GradMode::is_enabled()) {
      sig.autograd = std::any_of(in.begin(), in.end(), [](const Tensor& t) { return t.requires_grad(); });
      for (size_t i = 0; i < params.size() && !sig.autograd; ++i) sig.autograd = params[i].requires_grad();
    }
    for (const Tensor& t : in) sig.inputs.push_back({t.sizes(), t.dtype(), t.device(), t.requires_grad()});
    for (nn::Module* m : modules) sig.training.push_back(m->is_training());
    std::shared_ptr<const Compiled> compiled;
    {
      std::unique_lock lock(mu);
      auto it = std::find_if(cache.begin(), cache.end(), [&](const Entry& e) { return e.sig == sig; });
      if (it == cache.end()) return capture(std::move(sig), in);
      cache.splice(cache.begin(), cache, it);  // most recently used first
      Entry& e = cache.front();
      if (!e.fallback.empty()) {
        stats.last_fallback = e.fallback;
        ++stats.eager_calls;
        lock.unlock();
        return forward(in);
      }
      if (changed(e)) specialize(e);
      ++stats.replays;
      compiled = e.compiled;
    }
    return compiler::run(compiled->graph, compiled->schedule, in)[0];
  }

  // A new signature (under the lock): recorded, and this call's result is the eager one.
  Tensor capture(Signature sig, const std::vector<Tensor>& in) {
    Capture c;
    try {
      c = capture_module(*module, in, sig.autograd);
    } catch (const Error& e) {
      // The capture runs the forward with the inputs requiring grad (so that ops without a trace
      // hook show in their history); a forward that refuses that (x.to(kInt64) of an input) runs
      // eagerly, and an error eager raises too is the call's.
      Tensor y = forward(in);
      c.fallback = internal::str("the forward fails when traced: ", e.what());
      c.eager_outputs = {y};
    }
    ++stats.captures;
    Entry e;
    e.sig = std::move(sig);
    e.fallback = c.fallback;
    e.captured = std::move(c.graph);
    if (e.fallback.empty()) verify(e, in);
    if (e.fallback.empty()) specialize(e);
    else warn(e.fallback);
    cache.push_front(std::move(e));
    if (cache.size() > std::max<size_t>(options.cache_size, 1)) cache.pop_back();
    stats.cache_entries = cache.size();
    return c.eager_outputs.empty() ? Tensor() : c.eager_outputs[0];
  }
};

CompiledModule::CompiledModule(std::shared_ptr<nn::Module> module, CompileOptions options)
    : impl_(std::make_shared<Impl>()) {
  NABLA_CHECK(ValueError, module != nullptr, "compile: the module is null");
  impl_->module = std::move(module);
  for (const auto& m : impl_->module->modules()) impl_->modules.push_back(m.get());
  impl_->params = impl_->module->parameters();
  impl_->options = std::move(options);
}

Tensor CompiledModule::operator()(const Tensor& x) { return impl_->call({x}); }
Tensor CompiledModule::operator()(const Tensor& a, const Tensor& b) { return impl_->call({a, b}); }
CompileStats CompiledModule::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}
nn::Module& CompiledModule::module() const { return *impl_->module; }
const std::shared_ptr<nn::Module>& CompiledModule::module_ptr() const { return impl_->module; }

std::string CompiledModule::dump() const {
  std::lock_guard lock(impl_->mu);
  for (const Entry& e : impl_->cache) {
    if (!e.fallback.empty()) return "runs eagerly: " + e.fallback + "\n";
    return internal::str("captured (", e.captured.nodes.size(), " nodes):\n", e.captured.dump(), "compiled (",
                         e.compiled->graph.nodes.size(), " nodes, planned peak ", e.compiled->schedule.peak_bytes,
                         " bytes of intermediates):\n", e.compiled->graph.dump());
  }
  return "";
}

CompiledModule compile(std::shared_ptr<nn::Module> module, CompileOptions options) {
  return CompiledModule(std::move(module), std::move(options));
}

namespace {
// A function as a module (compile(fn)).
class FunctionModule : public nn::Module {
 public:
  FunctionModule(std::function<Tensor(const Tensor&)> f1, std::function<Tensor(const Tensor&, const Tensor&)> f2)
      : nn::Module("Function"), f1_(std::move(f1)), f2_(std::move(f2)) {}
  Tensor forward(Tensor x) override {
    NABLA_CHECK(ValueError, f1_ != nullptr, "compile: the function takes two tensors, called with one");
    return f1_(x);
  }
  Tensor forward(Tensor a, Tensor b) override {
    NABLA_CHECK(ValueError, f2_ != nullptr, "compile: the function takes one tensor, called with two");
    return f2_(a, b);
  }

 private:
  std::function<Tensor(const Tensor&)> f1_;
  std::function<Tensor(const Tensor&, const Tensor&)> f2_;
};
}  // namespace

CompiledModule compile(std::function<Tensor(const Tensor&)> fn, CompileOptions options) {
  NABLA_CHECK(ValueError, fn != nullptr, "compile: the function is empty");
  return CompiledModule(std::make_shared<FunctionModule>(std::move(fn), nullptr), std::move(options));
}
CompiledModule compile(std::function<Tensor(const Tensor&, const Tensor&)> fn, CompileOptions options) {
  NABLA_CHECK(ValueError, fn != nullptr, "compile: the function is empty");
  return CompiledModule(std::make_shared<FunctionModule>(nullptr, std::move(fn)), std::move(options));
}

CompiledModule compile(nn::Module& module, CompileOptions options) {
  std::shared_ptr<nn::Module> owned = module.weak_from_this().lock();
  if (!owned) owned = std::shared_ptr<nn::Module>(std::shared_ptr<void>(), &module);  // not owned: not freed
  return CompiledModule(std::move(owned), std::move(options));
}

}  // namespace nabla
