#include "distributed/zero_redundancy_optimizer.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <numeric>
#include <variant>

#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "distributed/sharded_clip.h"
#include "io/safetensors.h"

namespace nabla::optim {

namespace {

constexpr const char* kWho = "ZeroRedundancyOptimizer";

// "state.<i>.<field>" -> i, or -1 for any other key.
int64_t state_index(const std::string& key) {
  if (key.compare(0, 6, "state.") != 0) return -1;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos || dot == 6 || dot - 6 > 11) return -1;
  int64_t i = 0;
  for (size_t c = 6; c < dot; ++c) {
    if (key[c] < '0' || key[c] > '9') return -1;
    i = i * 10 + (key[c] - '0');
  }
  return i;
}

// Waits for every Work (even after one failed: each must finish before its tensors go), then
// rethrows the first error.
void wait_all(std::vector<distributed::Work>& works) {
  std::exception_ptr first;
  for (auto& w : works) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  works.clear();
  if (first) std::rethrow_exception(first);
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::unique_ptr<Optimizer> local, ZeroOptions options)
    : Optimizer(kWho), local_(std::move(local)), options_(options) {
  NABLA_CHECK(ValueError, local_ != nullptr, kWho, ": got no optimizer to wrap");
  NABLA_CHECK(ValueError, local_->name() != "LBFGS", kWho,
              ": LBFGS can't be sharded (its step evaluates the closure over all parameters)");
  NABLA_CHECK(ValueError, options_.bucket_cap_mb >= 0 && std::isfinite(options_.bucket_cap_mb), kWho,
              ": bucket_cap_mb must be a finite size >= 0, got ", options_.bucket_cap_mb);
  for (const auto& [key, t] : local_->state_dict())
    NABLA_CHECK(ValueError, state_index(key) < 0, kWho, ": the wrapped ", local_->name(), " already has state ('", key,
                "'); wrap a fresh optimizer and load the state into the "
                "ZeroRedundancyOptimizer");
  group_ = options_.process_group ? options_.process_group : &distributed::default_group();
  rank_ = group_->rank();
  world_ = group_->size();
  for (size_t g = 0; g < local_->num_param_groups(); ++g) {
    add_group_params(local_->params(g));
    if (auto lr = local_->initial_lr(g)) set_initial_lr(g, *lr);
  }
  params_ = all_params();
  for (size_t i = 0; i < params_.size(); ++i) index_.emplace(params_[i].impl(), i);

  // The partition (torch.distributed.optim.ZeroRedundancyOptimizer._partition_parameters): group by
  // group, by size (largest first, stable), each to the rank holding the fewest elements so far.
  owner_.assign(params_.size(), 0);
  std::vector<int64_t> held(static_cast<size_t>(world_), 0);
  size_t base = 0;
  for (size_t g = 0; g < num_param_groups(); ++g) {
    const size_t n = params(g).size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), base);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
    for (size_t i : order) {
      const int r = static_cast<int>(std::min_element(held.begin(), held.end()) - held.begin());
      owner_[i] = r;
      held[static_cast<size_t>(r)] += params_[i].numel();
    }
    base += n;
  }

  // The broadcast buckets: rank by rank, its parameters in global order; consecutive small ones of
  // one dtype and device share a flat bucket of at most bucket_cap_mb.
  const double cap = options_.bucket_cap_mb * 1024 * 1024;
  for (int r = 0; r < world_; ++r) {
    Bucket* open = nullptr;
    double open_bytes = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] != r) continue;
      const Tensor& p = params_[i];
      const double nb = static_cast<double>(p.nbytes());
      if (nb >= cap || !p.is_contiguous()) {  // in place, alone
        buckets_.push_back(Bucket{r, {i}, p.numel(), true});
        open = nullptr;
        continue;
      }
      const Tensor& first = open ? params_[open->params.front()] : p;
      if (!open || open_bytes + nb > cap || first.dtype() != p.dtype() || first.device() != p.device()) {
        buckets_.push_back(Bucket{r, {}, 0, false});
        open = &buckets_.back();
        open_bytes = 0;
      }
      open->params.push_back(i);
      open->numel += p.numel();
      open_bytes += nb;
    }
  }
}

distributed::ProcessGroup& ZeroRedundancyOptimizer::group() const { return *group_; }

std::vector<Tensor> ZeroRedundancyOptimizer::local_params() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] == rank_) out.push_back(params_[i]);
  return out;
}

void ZeroRedundancyOptimizer::visit_state(const Tensor& param, bool create, const FieldFn& fn) const {
  if (create) {
    auto it = index_.find(param.impl());
    if (it == index_.end() || owner_[it->second] != rank_) return;
  }
  local_->visit_state(param, create, fn);
}

void ZeroRedundancyOptimizer::step() {
  consolidated_.reset();
  // Hide the gradients of the other ranks' parameters for the wrapped step.
  std::vector<std::pair<size_t, Tensor>> hidden;
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] != rank_ && params_[i].grad().defined()) {
      hidden.emplace_back(i, params_[i].grad());
      params_[i].set_grad(Tensor());
    }
  auto restore = [&] {
    for (auto& [i, g] : hidden) params_[i].set_grad(g);
  };
  try {
    local_->step();
  } catch (...) {
    restore();
    throw;
  }
  restore();
  broadcast_params();
}

void ZeroRedundancyOptimizer::broadcast_params() {
  autograd::NoGradGuard no_grad;
  // Two buckets in flight: while the group's thread sends one, this thread packs the next or
  // unpacks the last (a bucket's buffer goes back to the caching allocator once unpacked).
  struct InFlight {
    const Bucket* bucket;
    Tensor flat;
    distributed::Work work;
  };
  std::deque<InFlight> flight;
  auto finish = [&] {
    InFlight f = std::move(flight.front());
    flight.pop_front();
    f.work.wait();
    if (f.bucket->in_place || f.bucket->rank == rank_) return;
    int64_t at = 0;
    for (size_t i : f.bucket->params) {
      Tensor& p = params_[i];
      p.copy_(f.flat.narrow(0, at, p.numel()).view(p.sizes()));
      at += p.numel();
    }
  };
  try {
    for (const Bucket& b : buckets_) {
      Tensor flat;
      if (b.in_place) {
        flat = params_[b.params.front()];
      } else {
        const Tensor& first = params_[b.params.front()];
        flat = empty({b.numel}, TensorOptions(first.dtype()).device(first.device()));
        if (b.rank == rank_) {
          int64_t at = 0;
          for (size_t i : b.params) {
            const Tensor& p = params_[i];
            flat.narrow(0, at, p.numel()).copy_(p.reshape({-1}));
            at += p.numel();
          }
        }
      }
      flight.push_back(InFlight{&b, flat, group().broadcast(flat, b.rank)});
      if (flight.size() > 2) finish();
    }
    while (!flight.empty()) finish();
  } catch (...) {
    // Every broadcast must end before its buffer goes; the first error is the one reported.
    std::vector<distributed::Work> rest;
    for (InFlight& f : flight) rest.push_back(f.work);
    flight.clear();
    try {
      wait_all(rest);
    } catch (...) {}
    throw;
  }
}

// ---- state dicts ----------------------------------------------------------------------------------

StateDict ZeroRedundancyOptimizer::state_dict() const {
  NABLA_CHECK(ValueError, consolidated_.has_value(), kWho, ".state_dict: rank ", rank_,
              " holds no consolidated state: call consolidate_state_dict(", rank_,
              ") on every rank first (after the last step), or local_state_dict() for this rank's shard");
  return *consolidated_;
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  NABLA_CHECK(ValueError, to >= 0 && to < world_, kWho, ".consolidate_state_dict: rank ", to,
              " is not in the group of ", world_);
  consolidated_.reset();
  const StateDict local = local_state_dict();
  StateDict states;  // what travels: the states of this rank's parameters
  for (const auto& [key, t] : local)
    if (state_index(key) >= 0) states.insert(key, t);
  std::vector<char> bytes = safetensors::serialize(states);

  // Every rank's size, then the bytes padded to the largest, gathered to `to`.
  const Device comm = group().backend() == "nccl" && !params_.empty() ? params_.front().device() : Device(kCPU);
  Tensor size = tensor(std::vector<int64_t>{static_cast<int64_t>(bytes.size())}, dtype(kInt64)).to(comm);
  std::vector<Tensor> sizes;
  for (int r = 0; r < world_; ++r) sizes.push_back(empty({1}, TensorOptions(kInt64).device(comm)));
  group().all_gather(sizes, size).wait();
  std::vector<int64_t> n(static_cast<size_t>(world_));
  int64_t longest = 0;
  for (int r = 0; r < world_; ++r) {
    n[static_cast<size_t>(r)] = sizes[static_cast<size_t>(r)].to(kCPU).item<int64_t>();
    longest = std::max(longest, n[static_cast<size_t>(r)]);
  }
  Tensor mine = zeros({longest}, dtype(kUInt8));
  std::copy(bytes.begin(), bytes.end(), static_cast<char*>(mine.data_ptr()));
  mine = mine.to(comm);
  std::vector<Tensor> gathered;
  if (rank_ == to)
    for (int r = 0; r < world_; ++r) gathered.push_back(empty({longest}, TensorOptions(kUInt8).device(comm)));
  group().gather(gathered, mine, to).wait();
  if (rank_ != to) return;

  // The wrapped optimizer's layout: param_groups first, then each parameter's fields in its State's
  // order, parameter by parameter.
  std::vector<StateDict> shards(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) {
    Tensor g = gathered[static_cast<size_t>(r)].to(kCPU);
    shards[static_cast<size_t>(r)] =
        safetensors::deserialize(static_cast<const char*>(g.data_ptr()), static_cast<size_t>(n[static_cast<size_t>(r)]),
                                 "the optimizer state of rank " + std::to_string(r))
            .tensors;
  }
  std::vector<std::string> fields;
  local_->visit_default_state([&](const char* name, FieldRef) { fields.emplace_back(name); });
  StateDict out;
  for (const auto& [key, t] : local)
    if (state_index(key) < 0) out.insert(key, t);
  for (size_t i = 0; i < params_.size(); ++i) {
    const StateDict& shard = shards[static_cast<size_t>(owner_[i])];
    const std::string prefix = "state." + std::to_string(i) + ".";
    for (const std::string& f : fields)
      if (const Tensor* t = shard.find(prefix + f)) out.insert(prefix + f, t->to(params_[i].device()));
  }
  consolidated_ = std::move(out);
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& sd) {
  // This rank keeps its parameters' states (the base class checks them and everything else). The
  // others' are checked here as the base class would, so that every rank accepts or refuses the
  // same state dict.
  std::map<std::string, bool> is_tensor;  // field -> holds a tensor (else a number)
  local_->visit_default_state(
      [&](const char* name, FieldRef ref) { is_tensor[name] = std::holds_alternative<Tensor*>(ref); });
  StateDict mine;
  for (const auto& [key, t] : sd) {
    const int64_t i = state_index(key);
    if (i < 0 || static_cast<size_t>(i) >= params_.size() || owner_[static_cast<size_t>(i)] == rank_) {
      mine.insert(key, t);
      continue;
    }
    const Tensor& p = params_[static_cast<size_t>(i)];
    auto field = is_tensor.find(key.substr(key.find('.', 6) + 1));
    if (field == is_tensor.end()) {
      mine.insert(key, t);  // reported as unexpected
    } else if (field->second) {
      NABLA_CHECK(ShapeError, t.defined() && t.sizes() == p.sizes(), name(), ".load_state_dict: '", key, "' has shape ",
                  t.defined() ? internal::str(t.sizes()) : std::string("(undefined)"), " but parameter ", i,
                  " has shape ", p.sizes());
    } else {
      NABLA_CHECK(ValueError, t.defined() && t.numel() == 1 && std::isfinite(t.item<double>()), name(),
                  ".load_state_dict: '", key, "' must hold one finite number");
    }
  }
  Optimizer::load_state_dict(mine);
  consolidated_.reset();
}

// ---- gradient clipping ----------------------------------------------------------------------------

double ZeroRedundancyOptimizer::clip_grad_norm_(double max_norm, double norm_type) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] == rank_) grads.push_back(params_[i].grad());
  return distributed::clip_sharded_grad_norm_(group(), grads, max_norm, norm_type, kWho);
}

}  // namespace nabla::optim
