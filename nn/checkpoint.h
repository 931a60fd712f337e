// Activation checkpointing for a chain of modules, as torch.utils.checkpoint.checkpoint_sequential
// (autograd::checkpoint does the work; this is about memory in training, not the training
// checkpoint files of optim/checkpoint.h).
//
//   auto net = std::make_shared<nn::Sequential>(...);       // 20 blocks
//   Tensor y = nn::checkpoint_sequential(*net, 4, x);        // keeps 4 segment inputs, not 20 layers' activations
//
// The modules are split into `segments` runs of equal length (the last takes the remainder). Every
// segment but the last is checkpointed; the last runs plainly, since backward needs its activations
// right away. Each module is called with its hooks, as Sequential::forward does.
#pragma once

#include <memory>
#include <vector>

#include "../autograd/checkpoint.h"
#include "container.h"

namespace nabla::nn {

Tensor checkpoint_sequential(const std::vector<std::shared_ptr<Module>>& modules, int segments, const Tensor& input,
                             autograd::CheckpointOptions opts = {});
Tensor checkpoint_sequential(const Sequential& seq, int segments, const Tensor& input,
                             autograd::CheckpointOptions opts = {});
Tensor checkpoint_sequential(const ModuleList& list, int segments, const Tensor& input,
                             autograd::CheckpointOptions opts = {});

}  // namespace nabla::nn
