// Activation checkpointing, as torch.utils.checkpoint: trade compute for memory. A checkpointed
// function keeps only its inputs and outputs after the forward pass (not the activations its ops
// saved for backward) and runs again during backward to rebuild them.
//
//   // x: (B, 512); block: Linear-GELU-Linear, its weights are leaves that get their gradients
//   Tensor y = autograd::checkpoint([block](const Tensor& t) { return (*block)(t); }, x);
//   std::vector<Tensor> ab = autograd::checkpoint(
//       [w](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * w, in[1].tanh()}; }, {a, b});
//
// What it does:
//  - forward: runs fn with grad mode on, finds the edges where its recorded graph meets the rest
//    (the inputs, the parameters and other tensors fn captures, each leaf's accumulator), then drops
//    that graph: the outputs get one Checkpoint node whose edges are those, and it keeps the inputs.
//    (PyTorch's reentrant variant runs the forward under no_grad, so its node cannot know the
//    parameters and a nested backward() must accumulate into them; its non-reentrant variant
//    records and drops saved tensors through saved-tensor hooks, which nabla lacks. Recording and
//    dropping holds one block's activations at a time during the forward, as the recomputation
//    does in backward, and lets parameter gradients flow through the normal engine, so
//    autograd::grad, hooks and parameters shared with the rest of the model all work.)
//  - backward: restores the generator states of the forward (preserve_rng_state), runs fn again on
//    the same inputs, back-propagates the incoming gradients through the recomputed graph up to
//    those edges, puts the caller's generator states back and returns the gradients for the edges.
//  - create_graph (double backward) is supported: the recomputed graph then stays attached to the
//    inputs and parameters, so the gradients have history.
//  - Grad mode off, or nothing fn computes requires grad: fn simply runs.
// fn is kept until backward and runs again there: capture by value what it needs (a reference to a
// local that is gone by then dangles). fn must be deterministic (given the generator state) and
// must not modify its inputs in place; a recomputation that differs from the forward is reported.
// The graph is found by creation number, so fn must record its ops on the calling thread (as every
// nabla op does).
#pragma once

#include <functional>
#include <vector>

#include "../core/tensor.h"

namespace nabla::autograd {

struct CheckpointOptions {
  // Save the default generators' states (the CPU's, and that of each other device type among the
  // inputs) before the forward and replay them for the recomputation, so dropout draws the same
  // masks; the generators are put back afterwards, so the caller's random stream is unchanged.
  bool preserve_rng_state = true;
};

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Runs fn(inputs) without keeping its activations; returns its outputs (at least one). Inputs may
// include undefined tensors and tensors that do not require grad; outputs that do not require grad
// come back as fn returned them.
std::vector<Tensor> checkpoint(CheckpointFn fn, std::vector<Tensor> inputs, CheckpointOptions opts = {});

// The same for a function of one tensor.
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input, CheckpointOptions opts = {});

}  // namespace nabla::autograd
