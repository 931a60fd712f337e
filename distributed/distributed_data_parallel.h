// nn::parallel::DistributedDataParallel (DDP): data-parallel training over a process group, as
// torch.nn.parallel.DistributedDataParallel. Part of nabla::distributed (it needs the collectives).
//
//   dist::init_process_group();
//   auto model = std::make_shared<Net>();
//   nn::parallel::DistributedDataParallel ddp(model);   // rank 0's parameters and buffers everywhere
//   optim::SGD opt(ddp.parameters(), {.lr = 0.1});
//   for (auto& batch : loader) {                       // each rank its own share (DistributedSampler)
//     opt.zero_grad();
//     nn::functional::cross_entropy(ddp(batch.data), batch.target).backward();  // grads averaged
//     opt.step();                                      // every rank takes the same step
//   }
//
// How backward flows: the parameters are grouped into buckets of about bucket_cap_mb, in reverse
// registration order (the order backward usually produces their gradients). A hook on each
// parameter copies its gradient (added to what .grad already holds, so accumulation over no_sync
// steps is averaged too) into its bucket; when a bucket is complete its all_reduce (avg) starts
// asynchronously, in bucket order on every rank, while backward goes on. The hook of the last
// gradient waits for all buckets and writes the averages into every parameter's .grad.
//
// no_sync(): a guard under which forward/backward only accumulate locally; the next synchronized
// backward averages the accumulated gradients. find_unused_parameters: forward walks the graph from
// the output and counts parameters it cannot reach as ready (contributing their current .grad or
// zeros); without it, a parameter that gets no gradient makes the next forward throw, naming it.
// broadcast_buffers: a forward first copies rank 0's buffers (batch-norm statistics) to all when
// the forward before it was a synchronized one (grad mode on, outside no_sync) or when it is the
// first, as PyTorch's require_forward_param_sync decides: in gradient accumulation the forward after
// a no_sync forward does not broadcast, nor does one after a forward under NoGradGuard, and until
// the next broadcast each rank's statistics follow its own batches. A forward under no_sync still
// broadcasts if the one before it was synchronized. Coalesced as PyTorch does: CPU buffers of every
// dtype as the bytes of one flat tensor (one broadcast), CUDA buffers one flat tensor per dtype.
// Under the nccl backend the module's parameters and buffers are CUDA tensors on the group's device.
// state_dict() is the wrapped module's, without a "module." prefix (PyTorch adds one).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../nn/module.h"
#include "process_group.h"

namespace nabla::nn::parallel {

struct DDPOptions {
  double bucket_cap_mb = 25;  // as PyTorch
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  distributed::ProcessGroup* process_group = nullptr;  // null: the default group
};

class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(Tensor x);
  Tensor operator()(Tensor x) { return forward(std::move(x)); }

  // While the returned guard lives, backward passes do not synchronize (gradient accumulation).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.require_sync_) {
      ddp.require_sync_ = false;
    }
    ~NoSyncGuard() { ddp_.require_sync_ = prev_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  Module& module() { return *module_; }
  std::shared_ptr<Module> module_ptr() const { return module_; }
  std::vector<Tensor> parameters() const { return module_->parameters(); }
  StateDict state_dict() const { return module_->state_dict(); }
  LoadStateDictResult load_state_dict(const StateDict& s, bool strict = true) {
    return module_->load_state_dict(s, strict);
  }
  void train(bool on = true) { module_->train(on); }
  void eval() { module_->train(false); }
  // What this rank's communication has cost since construction or reset_comm_wait(): how many
  // collectives DDP launched and how long the rank was blocked on them. For benchmarks and logging.
  struct CommStats {
    int64_t synced_backwards = 0;    // backward passes that averaged the gradients (none under no_sync)
    int64_t bucket_all_reduces = 0;  // gradient all-reduces: one per bucket per synced backward
    int64_t buffer_broadcasts = 0;   // forward's buffer broadcasts: 1 for CPU buffers, 1 per dtype on a GPU
    // Blocked at the end of backward on the all-reduces (what overlapping with backward did not hide).
    double grad_wait_seconds = 0;
    double buffer_wait_seconds = 0;  // blocked in forward on the buffer broadcasts
  };
  const CommStats& comm_stats() const { return stats_; }
  // Seconds blocked on communication: the gradient all-reduces' wait plus the buffer broadcasts'.
  double comm_wait_seconds() const { return stats_.grad_wait_seconds + stats_.buffer_wait_seconds; }
  double buffer_wait_seconds() const { return stats_.buffer_wait_seconds; }  // the broadcasts' part
  void reset_comm_wait() { stats_ = CommStats{}; }                           // every count and time back to 0
  // The buckets (parameter indices in registration order), for tests and logging.
  std::vector<std::vector<size_t>> bucket_layout() const;

 private:
  struct Bucket;
  Tensor on_grad(size_t param, const Tensor& g);
  void mark_ready(size_t param, const Tensor& contribution);
  void launch_ready_buckets();
  void finalize(size_t current);
  void start_iteration(const Tensor& output);
  void check_same_parameters();
  void sync_buffers();  // rank 0's buffers to every rank, one broadcast per dtype

  std::shared_ptr<Module> module_;
  DDPOptions options_;
  distributed::ProcessGroup* group_;
  Device comm_device_ = Device::cpu();  // where the group's collectives take tensors
  std::vector<std::string> names_;
  std::vector<Tensor> params_;  // those requiring grad, registration order
  std::vector<size_t> hooks_;
  std::vector<std::unique_ptr<Bucket>> buckets_;  // bucket 0 holds the last-registered parameters
  std::vector<size_t> bucket_of_, offset_in_bucket_;
  // The iteration in progress.
  std::vector<bool> ready_;
  size_t num_ready_ = 0;
  size_t next_bucket_to_launch_ = 0;
  bool sync_this_iteration_ = false;
  bool expecting_grads_ = false;
  bool require_sync_ = true;
  // Whether the next forward broadcasts the buffers: the last forward ran with grad mode on and
  // outside no_sync (PyTorch's require_forward_param_sync); true before the first.
  bool require_forward_param_sync_ = true;
  std::vector<Tensor> buffer_flats_;  // sync_buffers' flat tensors, one per dtype, kept between steps
  CommStats stats_;
};

}  // namespace nabla::nn::parallel
