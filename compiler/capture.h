// Capturing one call of a module as a graph (compiler/README.md): the forward runs eagerly under a
// trace::Tracer, each traced op becomes a node, and anything the graph could not replay exactly
// (an op with no replay rule, an op the tracer does not see, a host read, an in-place write, a
// random or data-dependent-shape op) becomes the reason the call falls back to eager.
#pragma once

#include <string>
#include <vector>

#include "../nn/module.h"
#include "graph.h"

namespace nabla::compiler {

struct Capture {
  Graph graph;
  std::vector<Tensor> eager_outputs;  // what the call returned (the first call's result)
  std::string fallback;               // non-empty: why this signature runs eagerly
};

// Runs module(inputs...) once, recording it. Errors the forward raises propagate. With `autograd`
// the result keeps its history (the call's caller will run backward through it).
Capture capture_module(nn::Module& module, const std::vector<Tensor>& inputs, bool autograd = false);

}  // namespace nabla::compiler
