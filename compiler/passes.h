// The compiler's passes over a captured graph (compiler/README.md), each on its own switch
// (CompileOptions). Each returns how many nodes it changed.
#pragma once

#include "graph.h"

namespace nabla::compiler {

// Computes once what depends on the module's tensors only (parameters, buffers, constants): such
// nodes become constants. Their values are those of the tensors now; the compiled module redoes
// this when one of them changes (an optimizer step, load_state_dict).
int fold_constants(Graph& g);
// A batch norm in eval mode after a convolution whose output nothing else reads: folded into the
// convolution's weight and bias (computed in float64, rounded once), as ONNX Runtime and
// torch.fx's fuse_conv_bn_eval do. Results differ from eager by rounding.
int fold_batch_norm(Graph& g);
// Nodes with the same op, inputs and attributes: one of them.
int eliminate_common_subexpressions(Graph& g);
// Nodes whose outputs nothing reads.
int eliminate_dead_code(Graph& g);
// Runs of float32 elementwise ops on the CPU become fused programs (compiler/fused.h), one pass
// over memory each.
int fuse_elementwise(Graph& g);

// max_pool2d(relu(x)) -> relu(max_pool2d(x)) (also leaky_relu with a non-negative slope, hardtanh,
// clamp): a non-decreasing function commutes with a maximum, exactly (NaN included), and runs on a
// quarter of the elements after a 2x2 pool. Where the activation's result has no other reader.
int sink_activations_through_pools(Graph& g);

// Drops dead values and renumbers (after the passes), keeping inputs and params first.
void compact(Graph& g);

}  // namespace nabla::compiler
