// optim::ZeroRedundancyOptimizer: ZeRO stage 1, the optimizer's state sharded over the ranks, as
// torch.distributed.optim.ZeroRedundancyOptimizer. Part of nabla::distributed (it needs the
// collectives).
//
//   dist::init_process_group();
//   nn::parallel::DistributedDataParallel ddp(model);
//   auto opt = optim::ZeroRedundancyOptimizer::make<optim::AdamW>(ddp.parameters(), {.lr = 3e-4});
//   for (auto& batch : loader) {
//     opt.zero_grad();
//     loss_of(ddp(batch.data), batch.target).backward();  // DDP averages the gradients
//     opt.step();                                         // as a plain AdamW would, on 1/N of the state
//   }
//
// How a step flows. The parameters are partitioned over the ranks once, by PyTorch's rule: group by
// group, largest first, each to the rank that holds the fewest elements so far (ties to the lower
// rank). Every rank keeps the wrapped optimizer over all parameters, with every group's options (so
// set_lr, schedulers and param_groups() work as on a plain optimizer), but steps only its shard:
// step() hides the gradients of the other ranks' parameters during the wrapped step, so that the
// wrapped optimizer creates and updates state (Adam's moments, momentum buffers) only for this
// rank's parameters: about 1/N of it per rank. Then each rank broadcasts its updated parameters
// to the others (parameters smaller than bucket_cap_mb coalesced into flat buckets of at most that
// size, one broadcast each, two in flight at a time; larger ones broadcast in place), and every rank ends the step holding
// the parameters that one optimizer on the same gradients would hold. Parameters without a
// gradient (frozen, unused) are skipped as the wrapped optimizer skips them.
//
// State dicts (the layout of optim/optimizer.h, global parameter indices):
// - consolidate_state_dict(to): a collective (every rank calls it); afterwards state_dict() on rank
//   `to` returns the whole state as the wrapped optimizer over all parameters would have it, key for
//   key: it loads into a plain optimizer, or into a ZeroRedundancyOptimizer on any world size. Until
//   then, and after the next step, state_dict() throws (as PyTorch's does), so a checkpoint never
//   holds a stale or partial state by mistake.
// - local_state_dict(): this rank's shard (the param_groups and the states of its own parameters);
//   a per-rank checkpoint, resumable on the same world size.
// - load_state_dict(sd) takes either; each rank keeps the states of its own parameters.
//
// Gradient clipping: under DDP every rank holds every gradient, so nn::utils::clip_grad_norm_ over
// all parameters is correct; clip_grad_norm_() here computes the same total norm from each rank's
// shard (one all_reduce of a number) and scales only the gradients this rank steps. With a
// GradScaler, scaler.step(opt) / scaler.update() work as with a plain optimizer.
//
// Differences from PyTorch: the wrapped optimizer is given constructed (or through make<Opt>), not as
// a class and keyword arguments; parameters_as_bucket_view and overlap_with_ddp are not offered
// (small parameters are coalesced for the broadcast instead); LBFGS is refused (its step
// evaluates the closure over all parameters).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../optim/optimizer.h"
#include "process_group.h"

namespace nabla::optim {

struct ZeroOptions {
  distributed::ProcessGroup* process_group = nullptr;  // null: the default group
  // Parameters under this size are broadcast coalesced, in flat buckets of at most this size; larger
  // ones in place, one each. A bucket's buffer lives only while its broadcast is in flight, and at
  // most two are in flight: the step needs at most 2 x bucket_cap_mb more memory, and none after it.
  double bucket_cap_mb = 4;
};

class ZeroRedundancyOptimizer : public Optimizer {
 public:
  // Wraps `local`, a freshly constructed optimizer (no state yet) over the parameters. Every rank
  // passes the same parameters (shapes and dtypes) in the same order. Collective: no communication
  // happens here, but every rank must construct it, as it must call step().
  explicit ZeroRedundancyOptimizer(std::unique_ptr<Optimizer> local, ZeroOptions options = {});

  // optim::ZeroRedundancyOptimizer::make<optim::Adam>(params, {.lr = 1e-3}), or with parameter
  // groups: make<optim::SGD>({{.params = a}, {.params = b, .options = optim::SGDOptions{.lr = 1}}}, {.lr = 0.1}).
  template <class Opt>
  static ZeroRedundancyOptimizer make(std::vector<Tensor> params, typename Opt::options_type defaults = {},
                                      ZeroOptions options = {}) {
    return ZeroRedundancyOptimizer(std::make_unique<Opt>(std::move(params), defaults), options);
  }
  template <class Opt>
  static ZeroRedundancyOptimizer make(std::vector<typename Opt::ParamGroup> groups,
                                      typename Opt::options_type defaults = {}, ZeroOptions options = {}) {
    return ZeroRedundancyOptimizer(std::make_unique<Opt>(std::move(groups), defaults), options);
  }

  using Optimizer::step;
  // The wrapped optimizer's step on this rank's shard, then the broadcast of every rank's updated
  // parameters (a collective).
  void step() override;

  // The whole state, on the rank that called consolidate_state_dict last (see above).
  StateDict state_dict() const override;
  // A consolidated or a local state dict; validated completely before anything changes.
  void load_state_dict(const StateDict& state) override;
  using Optimizer::load_state_dict;
  // Gathers every rank's shard of the state to rank `to` (a collective).
  void consolidate_state_dict(int to = 0);
  StateDict local_state_dict() const { return Optimizer::state_dict(); }

  // The total gradient norm over every parameter (as nn::utils::clip_grad_norm_ over all of them on
  // any rank) from this rank's shard and one all_reduce; this rank's gradients scaled by
  // min(1, max_norm / (norm + 1e-6)). Returns the norm. A collective.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0);

  // The rank that steps each parameter (by global index, group by group), and this rank's share.
  const std::vector<int>& owners() const { return owner_; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  bool owns(size_t param_index) const { return owner_.at(param_index) == rank_; }
  std::vector<Tensor> local_params() const;
  Optimizer& local_optimizer() { return *local_; }
  // The broadcast buckets, in issue order: the rank that sends each and its parameters.
  struct Bucket {
    int rank;
    std::vector<size_t> params;  // global indices
    int64_t numel = 0;
    bool in_place = false;  // one parameter, broadcast as it is
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

 protected:
  void visit_options(size_t group, const FieldFn& fn) const override { local_->visit_options(group, fn); }
  void validate_group(size_t group) const override { local_->validate_group(group); }
  void visit_state(const Tensor& param, bool create, const FieldFn& fn) const override;
  void visit_default_state(const FieldFn& fn) const override { local_->visit_default_state(fn); }
  void clear_state() override { local_->clear_state(); }

 private:
  void broadcast_params();
  distributed::ProcessGroup& group() const;

  std::unique_ptr<Optimizer> local_;
  ZeroOptions options_;
  distributed::ProcessGroup* group_;
  int rank_, world_;
  std::vector<Tensor> params_;                           // global order
  std::unordered_map<const TensorImpl*, size_t> index_;  // parameter -> its global index
  std::vector<int> owner_;                               // by global index
  std::vector<Bucket> buckets_;
  std::optional<StateDict> consolidated_;  // on the rank consolidate_state_dict gathered to
};

}  // namespace nabla::optim
