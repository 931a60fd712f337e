// nabla::compile: capture a module's forward once per signature, optimise the graph, replay it.
//
//   auto fast = nabla::compile(model);       // a shared_ptr<Module> or a NABLA_MODULE handle
//   model->eval();
//   nabla::InferenceMode guard;
//   Tensor y = fast(x);                      // first call: eager, recorded; later calls: replayed
//
// As torch.compile does, the first call with a given signature (the inputs' shapes, dtypes,
// devices and requires_grad, every module's training flag, whether the call records autograd)
// runs the forward eagerly while the op front-ends report each call (core/trace.h); the record
// becomes a graph (compiler/graph.h), the passes rewrite it, and later calls with that signature
// replay it, freeing each intermediate after its last read. A new signature records again (up
// to `cache_size` of them).
//
// An inference call (nothing requires grad, or grad mode off) gets every pass: constant folding,
// batch norm folded into convolutions, common subexpressions, dead code, activations moved after
// max pooling, float32 elementwise chains fused into one pass over memory; its replay records no
// autograd. A call that records autograd (training, or a compiled forward inside a larger eager
// graph) replays op by op through the front-ends, which record each op's backward exactly as
// eager does, so `backward()` gives eager's gradients; only CSE and dead-code elimination apply
// (compiling the backward itself and the optimizer step is the next stage).
//
// What runs eagerly instead, with one warning naming the reason (and `stats().last_fallback`):
// a call under autocast, and a forward that uses something a replay could not repeat exactly: an
// op with no trace hook or no replay rule yet, a read on the host (`.item()`), an in-place write,
// a random op (dropout in training mode), an op whose output shape depends on the values
// (nonzero, unique), batch norm in training mode. Such a signature is remembered, so later calls
// go straight to eager.
//
// The module's parameters and buffers stay the user's tensors: a replay reads them as they are,
// and what a pass computed from them (folded batch norms, constants) is recomputed when any of
// them changes (their version counters: an optimizer step, load_state_dict, a copy_). Replacing a
// parameter or child by another object (model surgery) after compiling is not seen: compile again.
// Deliberate differences from torch.compile are listed in README.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../nn/module.h"

namespace nabla {

struct CompileOptions {
  // The passes, each on its own switch (for tests and debugging).
  bool fold_constants = true;
  bool fold_batch_norm = true;
  bool eliminate_common_subexpressions = true;
  bool eliminate_dead_code = true;
  bool fuse_elementwise = true;
  bool sink_activations_through_pools = true;
  size_t cache_size = 8;  // signatures kept; the least recently used one goes first
  bool warn = true;       // print each fallback's reason once to stderr
};

struct CompileStats {
  int64_t captures = 0;         // calls that recorded a new signature
  int64_t replays = 0;          // calls that ran a compiled graph
  int64_t eager_calls = 0;      // calls that ran the module eagerly (fallbacks, autocast)
  int64_t specializations = 0;  // times the passes ran (captures, and tensors the folds read changing)
  size_t cache_entries = 0;
  int64_t nodes_captured = 0;  // in the last captured graph, before and after the passes
  int64_t nodes_compiled = 0;
  int64_t planned_peak_bytes = 0;  // the last compiled graph's intermediates alive at once, at most
  std::string last_fallback;       // why the last eager call ran eagerly ("" when none has)
};

class CompiledModule {
 public:
  CompiledModule(std::shared_ptr<nn::Module> module, CompileOptions options = {});

  Tensor operator()(const Tensor& x);
  Tensor operator()(const Tensor& a, const Tensor& b);
  Tensor forward(const Tensor& x) { return (*this)(x); }
  Tensor forward(const Tensor& a, const Tensor& b) { return (*this)(a, b); }

  // A snapshot (the module may be called from several threads: the cache is shared, the replays
  // run in parallel).
  CompileStats stats() const;
  // The most recently used compiled signature's graph as captured and as compiled, op by op with
  // shapes ("" before any capture).
  std::string dump() const;
  nn::Module& module() const;
  const std::shared_ptr<nn::Module>& module_ptr() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

CompiledModule compile(std::shared_ptr<nn::Module> module, CompileOptions options = {});
// A module held by value (`auto net = nn::Sequential(...)`) or by reference: it must outlive the
// compiled module (one owned by a shared_ptr is shared instead).
CompiledModule compile(nn::Module& module, CompileOptions options = {});
// A function of one or two tensors, compiled as a module whose forward calls it. Tensors it
// captures (a lambda's weights) are read at each replay, as parameters are.
CompiledModule compile(std::function<Tensor(const Tensor&)> fn, CompileOptions options = {});
CompiledModule compile(std::function<Tensor(const Tensor&, const Tensor&)> fn, CompileOptions options = {});
template <class M>
requires std::derived_from<M, nn::Module> CompiledModule compile(std::shared_ptr<M> module,
                                                                 CompileOptions options = {}) {
  return compile(std::static_pointer_cast<nn::Module>(std::move(module)), std::move(options));
}
template <class M>
CompiledModule compile(const nn::ModuleHolder<M>& module, CompileOptions options = {}) {
  return compile(std::static_pointer_cast<nn::Module>(module.ptr()), std::move(options));
}

}  // namespace nabla
