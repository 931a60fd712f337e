// nn::SyncBatchNorm: batch normalization whose batch statistics cover every rank's batch, as
// torch.nn.SyncBatchNorm. Part of nabla::distributed (it needs the collectives).
//
//   dist::init_process_group();
//   auto model = std::make_shared<Net>();                       // with BatchNorm1d/2d inside
//   auto synced = nn::SyncBatchNorm::convert_sync_batchnorm(model);   // every BatchNorm now syncs
//   nn::parallel::DistributedDataParallel ddp(synced);
//
// Training, with a process group of more than one rank: per channel, the mean and the (biased)
// variance are those of the union of all ranks' batches, computed in two passes as single-process
// batch norm does:
//   [sum of x over (N, *), local count]  --all_reduce-->  global mean = sum / count
//   sum of (x - mean)^2 over (N, *)       --all_reduce-->  global var  = sum / count
// Both all-reduces are differentiable_all_reduce below: backward all-reduces the incoming
// gradient, so each rank's input gradient is the one single-process batch norm would give its
// rows. running_mean/running_var (unbiased with the global count) and num_batches_tracked follow
// BatchNorm exactly (momentum, or a cumulative average for momentum = nullopt). Ranks may have
// different batch sizes, even empty ones: every rank takes part in both collectives. Every rank
// must run the same modules in the same order (the collectives pair up by order).
// Evaluation mode, no initialized process group, or a group of one rank: exactly BatchNorm.
//
// Input: (N, C, *) with 2 to 5 dims. State dict names are BatchNorm's (weight, bias,
// running_mean, running_var, num_batches_tracked), so checkpoints load either way.
#pragma once

#include <memory>

#include "../nn/normalization.h"
#include "process_group.h"

namespace nabla::nn {

class SyncBatchNorm : public BatchNorm {
 public:
  // process_group: null is the default group (looked up at each forward, so the module can be
  // built before init_process_group; without one it behaves as BatchNorm).
  explicit SyncBatchNorm(int64_t num_features, BatchNormOptions options = {},
                         distributed::ProcessGroup* process_group = nullptr);
  // A SyncBatchNorm holding bn's own parameter and buffer tensors (shared, not copied), options and
  // mode: what convert_sync_batchnorm puts in place of bn.
  explicit SyncBatchNorm(const BatchNorm& bn, distributed::ProcessGroup* process_group = nullptr);
  Tensor forward(Tensor x) override;

  // Every BatchNorm1d/BatchNorm2d in `module`'s tree becomes a SyncBatchNorm holding the same
  // parameter and buffer tensors (shared, not copied) and options, in the same place of the tree,
  // so the state dict keeps its names. Returns the converted module: `module` itself, changed in
  // place, or a new SyncBatchNorm when `module` is a BatchNorm (which then stays as it was), as
  // PyTorch's classmethod.
  // A replaced BatchNorm that is still called (through a typed member the parent's forward uses,
  // such as ResNet's bn1, or a Sequential's own list of modules) forwards to its SyncBatchNorm
  // (BatchNorm::delegate), as (*bn)(x) or bn->forward(x).
  // Optimizers and DDP built before or after the conversion see the same tensors.
  static std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module,
                                                        distributed::ProcessGroup* process_group = nullptr);

  distributed::ProcessGroup* process_group;  // null: the default group

 protected:
  void check_input(const Tensor& x) const override;  // (N, C, *) with 2 to 5 dims

 private:
  distributed::ProcessGroup* active_group() const;  // null when the statistics stay local
};

namespace parallel {

// tensor summed (or averaged) over the ranks of `group` (null: the default group), returned as a
// new tensor; as torch.distributed.nn.all_reduce, it is differentiable: backward all-reduces the
// incoming gradient with the same op (each rank's input reaches every rank's output). Every rank
// must call it, and run its backward, in the same order. op: sum or avg.
Tensor differentiable_all_reduce(const Tensor& tensor, distributed::ReduceOp op = distributed::ReduceOp::sum,
                                 distributed::ProcessGroup* group = nullptr);

}  // namespace parallel
}  // namespace nabla::nn
