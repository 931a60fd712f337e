// nabla's autograd API: backward and grad over any tensors, grad-mode guards, anomaly mode,
// custom differentiable functions, and gradcheck/gradgradcheck.
#pragma once

#include <optional>
#include <vector>

#include "../core/graph.h"
#include "../core/tensor.h"

namespace nabla::autograd {

// Computes the gradients of `outputs` (weighted by `grad_outputs`; omitted entries mean ones for
// one-element outputs) and accumulates them into the .grad() of the leaves they depend on.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// The same for one output (what Tensor::backward calls).
void backward(const Tensor& output, const Tensor& grad_output, bool retain_graph, bool create_graph);

// Returns d(outputs)/d(inputs) weighted by grad_outputs, without touching any .grad().
// retain_graph defaults to create_graph. With allow_unused, inputs the outputs do not depend on
// get an undefined Tensor; without it, that is an error.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace nabla::autograd
