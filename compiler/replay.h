// Running a captured graph (compiler/README.md): each node by its op's replay rule (replay.cpp) or,
// for a fused program, by the CPU's fused kernel (cpu/fused.cpp); values freed after their last
// read, so memory peaks where the graph's live values do.
#pragma once

#include <array>
#include <vector>

#include "graph.h"

namespace nabla::compiler {

// A replay rule: the op's outputs from its inputs (an undefined tensor for an absent optional
// one), its node (the attributes) and its first output's recorded value (dtype, device).
using ReplayFn = std::vector<Tensor> (*)(const Node& node, const std::vector<Tensor>& inputs, const Value* out);
const std::array<ReplayFn, kOpCount>& replay_table();
inline bool has_replay(OpId op) { return replay_table()[static_cast<size_t>(op)] != nullptr; }

// The plan of one graph's execution: when each value is last read.
struct Schedule {
  std::vector<int> last_use;  // per value: the index of the last node reading it (-1: none)
  std::vector<bool> output;   // per value: returned by the call
  int64_t peak_bytes = 0;     // the planned peak of computed values alive at once
};
Schedule plan(const Graph& g);

// Runs g on the call's inputs and returns its outputs. Errors name the node's original op.
std::vector<Tensor> run(const Graph& g, const Schedule& s, const std::vector<Tensor>& inputs);

}  // namespace nabla::compiler
