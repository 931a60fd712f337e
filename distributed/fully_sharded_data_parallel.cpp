#include "distributed/fully_sharded_data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/graph.h"
#include "core/ops.h"
#include "core/tensor_impl.h"
#include "distributed/distributed.h"
#include "distributed/fsdp_internal.h"
#include "distributed/sharded_clip.h"

namespace nabla::nn::parallel {

namespace dist = nabla::distributed;

namespace {

constexpr const char* kWho = "FullyShardedDataParallel";

// The flat buffer's memory: given back while the unit is sharded (the Storage object, which the
// module's parameter views and the tensors autograd saved share, stays), taken again to gather.
void release(const Tensor& full) {
  StorageImpl* st = full.impl()->storage.get();
  if (st->data) {
    st->allocator->deallocate(st->data, st->nbytes);
    st->data = nullptr;
  }
}
void acquire(const Tensor& full) {
  StorageImpl* st = full.impl()->storage.get();
  if (!st->data) st->data = st->allocator->allocate(st->nbytes);
}

// Makes `p` (a leaf; its handle stays the module's) a view of `flat` at `offset`, in flat's dtype
// (mixed precision's param_dtype).
void rebind(const Tensor& p, const Tensor& flat, int64_t offset) {
  TensorImpl* t = p.impl();
  t->storage = flat.impl()->storage;
  t->offset = offset;
  t->dtype = flat.dtype();
  t->strides = contiguous_strides(t->sizes);
  t->refresh();
}

}  // namespace

StateDict FullyShardedDataParallel::whole_tensors() {
  StateDict out;
  for (const auto& [name, p] : module_->named_parameters())
    if (!p.requires_grad()) {
      const std::string& key = name;  // (clang 14 cannot capture a structured binding)
      auto f = std::find_if(frozen_.begin(), frozen_.end(), [&](const Frozen& x) { return x.name == key; });
      out.insert(name, f != frozen_.end() ? f->master : p.detach());
    }
  for (const auto& [name, b] : module_->named_buffers()) out.insert(name, b);
  return out;
}

void FullyShardedDataParallel::refresh_frozen() {
  autograd::NoGradGuard no_grad;
  for (Frozen& f : frozen_) f.param.detach().copy_(f.master);
}

WrapPolicy wrap_modules_named(std::vector<std::string> names) {
  return [names = std::move(names)](const std::string&, const Module& m) {
    return std::find(names.begin(), names.end(), m.name()) != names.end();
  };
}

// ---- construction ---------------------------------------------------------------------------------

FullyShardedDataParallel::FullyShardedDataParallel(std::shared_ptr<Module> module, FSDPOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  NABLA_CHECK(ValueError, module_ != nullptr, kWho, ": got no module");
  group_ = options_.process_group ? options_.process_group : &dist::default_group();
  rank_ = group_->rank();
  world_ = group_->size();
  autograd::NoGradGuard no_grad;

  // The units: the policy's picks (outermost first), then the root; parameters go to the
  // innermost unit holding them, so units are filled deepest first.
  std::unordered_map<const TensorImpl*, std::string> full_name;
  for (const auto& [name, p] : module_->named_parameters()) full_name.emplace(p.impl(), name);
  struct Pick {
    std::string name;
    Module* module;
    size_t depth;
  };
  std::vector<Pick> picks;
  if (options_.auto_wrap_policy)
    for (const auto& [name, m] : module_->named_modules(/*include_self=*/false))
      if (options_.auto_wrap_policy(name, *m))
        picks.push_back({name, m.get(), static_cast<size_t>(std::count(name.begin(), name.end(), '.'))});
  std::stable_sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) { return a.depth > b.depth; });
  picks.push_back({"", module_.get(), 0});
  std::unordered_set<const TensorImpl*> taken;
  for (const Pick& pick : picks) {
    // One flat parameter per param_group value, in the order the values first appear (a module
    // with none still gets a unit: its hooks order the others).
    std::vector<std::unique_ptr<Unit>> flats;
    std::vector<int> groups;
    auto unit_of = [&](int g) -> Unit& {
      auto it = std::find(groups.begin(), groups.end(), g);
      if (it != groups.end()) return *flats[static_cast<size_t>(it - groups.begin())];
      groups.push_back(g);
      flats.push_back(std::make_unique<Unit>());
      Unit& u = *flats.back();
      u.name = pick.name;
      u.module = pick.module;
      u.root = pick.module == module_.get();
      u.group = g;
      return u;
    };
    for (const auto& [name, p] : pick.module->named_parameters()) {
      if (!p.requires_grad() || !taken.insert(p.impl()).second) continue;
      const std::string& full = full_name.at(p.impl());
      Unit& u = unit_of(options_.param_group ? options_.param_group(full, p) : 0);
      u.params.push_back(p);
      u.names.push_back(full);
    }
    if (flats.empty()) unit_of(0);
    for (auto& u : flats) units_.push_back(std::move(u));
  }
  // Everything is checked before anything changes (a refused wrapper leaves the module as it was).
  for (const auto& up : units_) {
    const Unit& u = *up;
    for (size_t k = 0; k < u.params.size(); ++k) {
      const Tensor &p = u.params[k], &first = u.params.front();
      NABLA_CHECK(DTypeError, p.dtype() == first.dtype() && p.device() == first.device(), kWho, ": unit '", u.name,
                  "' mixes ", first.dtype(), " on ", first.device(), " ('", u.names.front(), "') with ", p.dtype(),
                  " on ", p.device(), " ('", u.names[k], "'); a unit's parameters share one dtype and device");
    }
  }
  // Frozen parameters and buffers stay whole: rank 0's everywhere.
  const auto& mp = options_.mixed_precision;
  NABLA_CHECK(DTypeError,
              (!mp.param_dtype || is_floating(*mp.param_dtype)) && (!mp.reduce_dtype || is_floating(*mp.reduce_dtype)),
              kWho, ": mixed precision's param_dtype and reduce_dtype must be floating dtypes");
  if (options_.sync_module_states && world_ > 1) {
    for (const Tensor& p : module_->parameters())
      if (!p.requires_grad()) group_->broadcast(p.detach(), 0).wait();
    for (const Tensor& b : module_->buffers()) group_->broadcast(b, 0).wait();
  }
  // Mixed precision: frozen floating parameters compute in param_dtype too; their values keep a
  // master copy in their own dtype (for the state dict and checkpoints).
  if (mp.param_dtype)
    for (const auto& [name, p] : module_->named_parameters())
      if (!p.requires_grad() && p.is_floating_point() && p.dtype() != *mp.param_dtype) {
        Tensor master = p.detach().clone();
        rebind(p, p.detach().to(*mp.param_dtype), 0);
        frozen_.push_back({name, p, master});
      }
  check_same_units(*group_, units_, kWho);
  for (auto& up : units_) {
    Unit& u = *up;
    if (u.params.empty()) continue;
    const Tensor& first = u.params.front();
    for (size_t k = 0; k < u.params.size(); ++k) {
      u.offsets.push_back(u.numel);
      u.numel += u.params[k].numel();
    }
    u.shard_numel = std::max<int64_t>(1, (u.numel + world_ - 1) / world_);
    u.padded = u.shard_numel * world_;
    Tensor flat = zeros({u.padded}, TensorOptions(first.dtype()).device(first.device()));
    for (size_t k = 0; k < u.params.size(); ++k)
      flat.narrow(0, u.offsets[k], u.params[k].numel()).copy_(u.params[k].reshape({-1}));
    if (options_.sync_module_states && world_ > 1) group_->broadcast(flat, 0).wait();
    u.shard = flat.narrow(0, rank_ * u.shard_numel, u.shard_numel).clone();
    u.shard.requires_grad_(true);
    // The gathered buffer: in the parameters' dtype, or mixed precision's param_dtype.
    const auto& mp = options_.mixed_precision;
    const DType compute = mp.param_dtype && is_floating(first.dtype()) ? *mp.param_dtype : first.dtype();
    u.full = compute == first.dtype() ? flat : flat.to(compute);
    u.reduce_dtype = mp.reduce_dtype ? *mp.reduce_dtype : compute;
    for (size_t k = 0; k < u.params.size(); ++k) rebind(u.params[k], u.full, u.offsets[k]);
    u.gathered = true;
    u.expect.assign(u.params.size(), 0);
    u.ready.assign(u.params.size(), 0);
    for (size_t k = 0; k < u.params.size(); ++k)
      u.hook_ids.push_back(
          u.params[k].register_post_accumulate_grad_hook([this, &u, k](Tensor& grad) { on_grad(u, k, grad); }));
    if (!u.root) {
      u.pre = u.module->register_forward_pre_hook([this, &u](Module&, std::vector<Tensor>&) { pre_forward(u); });
      u.post = u.module->register_forward_hook(
          [this, &u](Module&, const std::vector<Tensor>&, Tensor& out) { post_forward(u, out); });
    }
    reshard(u);
  }
}

FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (auto& up : units_) {
    Unit& u = *up;
    for (size_t k = 0; k < u.hook_ids.size(); ++k) u.params[k].remove_hook(u.hook_ids[k]);
    u.pre.remove();
    u.post.remove();
    for (dist::Work* w : {&u.gather_work, &u.rs_work}) try {
        w->wait();
      } catch (const std::exception&) {
        // reported where the collective was waited for
      }
    // The module outlives the wrapper: its parameters keep memory of their own (NaN where this
    // rank holds no data: read the weights through state_dict() before the wrapper goes).
    if (u.full.defined() && !u.full.impl()->storage->data) {
      acquire(u.full);
      autograd::NoGradGuard g;
      u.full.fill_(std::numeric_limits<double>::quiet_NaN());
    }
  }
}

std::vector<Tensor> FullyShardedDataParallel::parameters() const {
  std::vector<Tensor> out;
  for (const auto& u : units_)
    if (u->shard.defined()) out.push_back(u->shard);
  return out;
}

std::vector<Tensor> FullyShardedDataParallel::parameters(int group) const {
  std::vector<Tensor> out;
  for (const auto& u : units_)
    if (u->shard.defined() && u->group == group) out.push_back(u->shard);
  return out;
}

std::vector<FullyShardedDataParallel::UnitInfo> FullyShardedDataParallel::units() const {
  std::vector<UnitInfo> out;
  for (const auto& u : units_) out.push_back({u->name, u->group, u->names, u->numel, u->padded, u->shard_numel});
  return out;
}

// ---- gathering and freeing ------------------------------------------------------------------------

void FullyShardedDataParallel::wait(dist::Work& w) {
  const auto t0 = std::chrono::steady_clock::now();
  w.wait();
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  w = dist::Work();
}

void FullyShardedDataParallel::gather(Unit& u) {
  if (!u.shard.defined() || u.gathered || u.pending) return;
  acquire(u.full);
  std::vector<Tensor> outputs;
  for (int r = 0; r < world_; ++r) outputs.push_back(u.full.narrow(0, r * u.shard_numel, u.shard_numel));
  // (Mixed precision: the shard in param_dtype, which the group holds until the all_gather is done.)
  const Tensor shard = u.shard.detach();
  u.gather_work = group_->all_gather(outputs, shard.dtype() == u.full.dtype() ? shard : shard.to(u.full.dtype()));
  u.pending = true;
  ++stats_.all_gathers;
}

void FullyShardedDataParallel::ensure_gathered(Unit& u) {
  if (!u.shard.defined() || u.gathered) return;
  gather(u);
  wait(u.gather_work);
  u.pending = false;
  u.gathered = true;
  // The all_gather's copies bumped the version counter, but the values are those the tensors
  // autograd saved had: the counter goes back, so a real in-place change is still caught.
  u.full.impl()->storage->version = u.version;
}

void FullyShardedDataParallel::reshard(Unit& u) {
  if (!u.shard.defined()) return;
  if (u.pending) {  // an all_gather still writes into the buffer
    wait(u.gather_work);
    u.pending = false;
  }
  u.version = u.full.impl()->storage->version;
  release(u.full);
  u.gathered = false;
}

void FullyShardedDataParallel::gather_all() {
  for (auto& u : units_) ensure_gathered(*u);
}

// The values of the gathered flat buffers (changed through the module's parameters) back into
// every rank's shards, then every unit freed.
void FullyShardedDataParallel::write_back_all() {
  autograd::NoGradGuard no_grad;
  for (auto& up : units_) {
    Unit& u = *up;
    if (!u.shard.defined()) continue;
    // (Mixed precision: the gathered values are rounded; the shards keep their own precision.)
    if (u.full.dtype() == u.shard.dtype())
      u.shard.detach().copy_(u.full.narrow(0, rank_ * u.shard_numel, u.shard_numel));
    reshard(u);
  }
}

// ---- forward --------------------------------------------------------------------------------------

Tensor FullyShardedDataParallel::forward(Tensor x) {
  NABLA_CHECK(ValueError, !summoned_, kWho,
              ": forward under full_parameters(); call the module itself there (every parameter is gathered)");
  check_no_partial_backward(units_, units_done_, units_expecting_, kWho);
  backward_active_ = false;  // (a backward that never reached every unit is over)
  for (auto& u : units_)
    if (u->root) ensure_gathered(*u);
  Tensor out;
  try {
    out = (*module_)(std::move(x));
  } catch (...) {
    for (auto& u : units_) reshard(*u);
    throw;
  }
  recording_order_ = false;
  start_iteration(out);
  return out;
}

void FullyShardedDataParallel::pre_forward(Unit& u) {
  if (summoned_) return;  // under full_parameters(): everything is gathered, nothing is freed
  ensure_gathered(u);
  if (backward_active_) return;  // a recomputation (activation checkpointing) during backward
  if (recording_order_) {
    if (std::find(order_.begin(), order_.end(), &u) == order_.end()) order_.push_back(&u);
  } else if (options_.forward_prefetch) {
    auto it = std::find(order_.begin(), order_.end(), &u);
    if (it != order_.end() && it + 1 != order_.end()) gather(**(it + 1));
  }
}

void FullyShardedDataParallel::post_forward(Unit& u, Tensor& output) {
  if (summoned_) return;
  if (output.defined() && output.requires_grad() && autograd::GradMode::is_enabled())
    output.register_hook([this, &u](const Tensor&) {
      pre_backward(u);
      return Tensor();
    });
  // (A recomputation during backward keeps the unit: the recomputed graph's backward needs it, and
  // the unit is freed once its gradients are in.)
  if (options_.reshard_after_forward && !backward_active_) reshard(u);
}

// Which parameters the backward from `output` will reach: their gradients are awaited, the others
// count as zeros.
void FullyShardedDataParallel::start_iteration(const Tensor& output) {
  units_expecting_ = units_done_ = 0;
  backward_active_ = false;
  if (!output.defined() || !output.grad_fn() || !autograd::GradMode::is_enabled()) {
    for (auto& u : units_)
      if (u->root) reshard(*u);
    return;
  }
  std::unordered_set<const autograd::Node*> seen{output.grad_fn()};
  std::vector<autograd::Node*> stack{output.grad_fn()};
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next_edges)
      if (e.valid() && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  for (auto& up : units_) {
    Unit& u = *up;
    u.waiting = 0;
    for (size_t k = 0; k < u.params.size(); ++k) {
      autograd::Edge e = autograd::gradient_edge(u.params[k]);
      u.expect[k] = e.valid() && seen.count(e.fn.get());
      u.ready[k] = 0;
      u.waiting += u.expect[k];
    }
    if (u.waiting > 0) ++units_expecting_;
  }
  for (auto& u : units_)
    if (u->root && u->waiting == 0) reshard(*u);
  output.register_hook([this](const Tensor&) {
    for (auto& u : units_)
      if (u->root) pre_backward(*u);
    return Tensor();
  });
}

// ---- backward -------------------------------------------------------------------------------------

void FullyShardedDataParallel::pre_backward(Unit& u) {
  backward_active_ = true;
  if (u.waiting == 0) return;  // nothing of this unit is left to differentiate
  ensure_gathered(u);
  if (!options_.backward_prefetch || order_.empty()) return;
  if (u.root) {
    gather(*order_.back());
  } else {
    auto it = std::find(order_.begin(), order_.end(), &u);
    if (it != order_.end() && it != order_.begin()) gather(**(it - 1));
  }
}

void FullyShardedDataParallel::on_grad(Unit& u, size_t k, Tensor& grad) {
  if (units_expecting_ == 0 || !u.expect[k] || u.ready[k]) return;  // not a backward FSDP's forward set up
  autograd::NoGradGuard no_grad;
  if (!u.flat_grad.defined()) u.flat_grad = zeros({u.padded}, TensorOptions(u.reduce_dtype).device(u.full.device()));
  u.flat_grad.narrow(0, u.offsets[k], u.params[k].numel()).copy_(grad.reshape({-1}));
  grad = Tensor();  // the unit's flat gradient holds it now
  u.ready[k] = 1;
  if (--u.waiting > 0) return;
  // Every gradient of the unit is in: each rank's slice, averaged over the ranks.
  std::vector<Tensor> inputs;
  for (int r = 0; r < world_; ++r) inputs.push_back(u.flat_grad.narrow(0, r * u.shard_numel, u.shard_numel));
  u.rs_out = empty({u.shard_numel}, TensorOptions(u.reduce_dtype).device(u.full.device()));
  u.rs_work = group_->reduce_scatter(u.rs_out, inputs, dist::ReduceOp::avg);
  ++stats_.reduce_scatters;
  reshard(u);
  if (++units_done_ == units_expecting_) finish_backward();
}

void FullyShardedDataParallel::finish_backward() {
  autograd::NoGradGuard no_grad;
  std::exception_ptr first;
  for (auto& up : units_) {
    Unit& u = *up;
    if (!u.rs_out.defined()) continue;
    try {
      wait(u.rs_work);
      const Tensor& g = u.shard.grad();
      const Tensor r = u.rs_out.dtype() == u.shard.dtype() ? u.rs_out : u.rs_out.to(u.shard.dtype());
      if (g.defined()) u.shard.mutable_grad().add_(r);
      else u.shard.set_grad(r);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    u.rs_out = Tensor();
    u.flat_grad = Tensor();
  }
  for (auto& u : units_) reshard(*u);  // a unit prefetched but never used
  units_expecting_ = units_done_ = 0;
  backward_active_ = false;
  if (first) std::rethrow_exception(first);
}

// ---- whole-model state ----------------------------------------------------------------------------

// Each unit's flat parameter whole in the shards' precision (one all_gather per unit).
Tensor FullyShardedDataParallel::whole_flat(Unit& u) {
  Tensor flat = empty({u.padded}, TensorOptions(u.shard.dtype()).device(u.shard.device()));
  std::vector<Tensor> outputs;
  for (int r = 0; r < world_; ++r) outputs.push_back(flat.narrow(0, r * u.shard_numel, u.shard_numel));
  group_->all_gather(outputs, u.shard.detach()).wait();
  ++stats_.all_gathers;
  return flat;
}

StateDict FullyShardedDataParallel::state_dict() {
  autograd::NoGradGuard no_grad;
  std::unordered_map<std::string, Tensor> trained;  // name -> its values, from the shards
  for (auto& up : units_) {
    Unit& u = *up;
    if (!u.shard.defined()) continue;
    Tensor flat = whole_flat(u);
    for (size_t k = 0; k < u.params.size(); ++k)
      trained[u.names[k]] = flat.narrow(0, u.offsets[k], u.params[k].numel()).view(u.params[k].sizes()).clone();
  }
  // The module's order and names; its trained parameters' data is not read (it may be freed).
  StateDict out;
  for (const Frozen& f : frozen_) trained[f.name] = f.master.clone();
  for (const auto& [name, p] : module_->named_parameters()) {
    auto it = trained.find(name);
    out.insert(name, it != trained.end() ? it->second : p.detach().clone());
  }
  for (const auto& [name, t] : module_->state_dict())
    if (!out.contains(name)) out.insert(name, t.clone());
  return out;
}

void FullyShardedDataParallel::load_state_dict(const StateDict& state) {
  gather_all();
  try {
    module_->load_state_dict(state);  // checks names and shapes; the frozen parameters and buffers
  } catch (...) {
    for (auto& u : units_) reshard(*u);
    throw;
  }
  // The trained parameters in the shards' own precision, from the state dict's values (and the
  // frozen ones' masters).
  autograd::NoGradGuard no_grad;
  for (Frozen& f : frozen_) f.master.copy_(*state.find(f.name));
  for (auto& up : units_) {
    Unit& u = *up;
    if (!u.shard.defined()) continue;
    Tensor flat = zeros({u.padded}, TensorOptions(u.shard.dtype()).device(u.shard.device()));
    for (size_t k = 0; k < u.params.size(); ++k)
      flat.narrow(0, u.offsets[k], u.params[k].numel()).copy_(state.find(u.names[k])->reshape({-1}));
    u.shard.detach().copy_(flat.narrow(0, rank_ * u.shard_numel, u.shard_numel));
    reshard(u);
  }
}

FullyShardedDataParallel::FullParameters::FullParameters(FullyShardedDataParallel& f) : f_(f) {
  NABLA_CHECK(ValueError, !f_.summoned_, kWho, ": full_parameters() is already active");
  f_.gather_all();
  f_.summoned_ = true;
}
FullyShardedDataParallel::FullParameters::~FullParameters() {
  f_.summoned_ = false;
  f_.write_back_all();
}

// ---- gradient clipping ----------------------------------------------------------------------------

double FullyShardedDataParallel::clip_grad_norm_(double max_norm, double norm_type) {
  std::vector<Tensor> grads;
  for (const auto& u : units_)
    if (u->shard.defined()) grads.push_back(u->shard.grad());
  return dist::clip_sharded_grad_norm_(*group_, grads, max_norm, norm_type, kWho);
}

}  // namespace nabla::nn::parallel
