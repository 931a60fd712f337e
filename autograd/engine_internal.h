// The engine's entry point for autograd's own features (checkpoint), not part of the user API.
#pragma once

#include <span>
#include <vector>

#include "../core/graph.h"

namespace nabla::autograd {

// Back-propagates `grad_outputs` from `outputs` and returns, for each edge in `sinks`, the sum of
// the gradients that flowed along it (undefined where none did). The nodes the sinks lead to are
// neither visited nor run, and no .grad() is touched, so this may run inside another backward pass
// that owns those nodes: the engine keeps a pass's bookkeeping in the nodes themselves, so a nested
// pass must not walk into the outer pass's part of the graph. Every path from `outputs` must end at
// a sink (reaching an AccumulateGrad that is not one would accumulate into its leaf). With
// create_graph the result has history and the graph is kept; otherwise the graph is freed.
std::vector<Tensor> grad_into_edges(std::span<const Tensor> outputs, std::span<const Tensor> grad_outputs,
                                    std::span<const Edge> sinks, bool create_graph);

}  // namespace nabla::autograd
