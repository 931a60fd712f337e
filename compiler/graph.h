// The graph nabla::compile captures and replays (compiler/README.md): values (the call's inputs,
// the module's parameters and buffers, constants, and what each op produced) and nodes (one traced
// op call each, by its OpId and typed attributes, or a fused elementwise program), in the order the
// forward ran them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../core/op_schema.h"
#include "../core/tensor.h"
#include "fused.h"

namespace nabla::compiler {

struct Value {
  enum Kind : uint8_t {
    input,     // the i-th tensor of the call
    param,     // a tensor the module holds (parameter, buffer or any other it read): the user's own,
               // read at each replay, its version recorded at capture
    constant,  // made by the compiler (a folded batch norm's weights) or by a creation op
    computed,  // an output of a node
  };
  Kind kind = computed;
  Shape sizes;
  DType dtype = DType::f32;
  Device device;
  Tensor tensor;         // param, constant: the tensor
  uint32_t version = 0;  // param: its storage version at capture
  int index = -1;        // input: which; computed: the producing node
  std::string name;      // param: its state-dict name where it has one
};

struct Node {
  // op: a traced op call; fused: a fused elementwise program; value_check: a check of its input's values
  // that the eager op made (an index in range), run again in each replay (core/trace.h).
  enum Kind : uint8_t { op, fused, value_check } kind = op;
  OpId id{};
  OpAttrs attrs;
  std::vector<int> inputs;                      // value ids; -1: an absent optional input (a conv without bias)
  std::vector<int> outputs;                     // value ids
  std::shared_ptr<const FusedProgram> program;  // kind == fused
  std::function<void(const Tensor&)> check;     // kind == value_check
  // A node computes nothing any more (removed by compact()); checks stay.
  bool dead() const { return kind != value_check && outputs.empty(); }
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> outputs;  // the values the call returns

  int add_value(Value v) {
    values.push_back(std::move(v));
    return static_cast<int>(values.size()) - 1;
  }
  // How many nodes read each value (graph outputs count once more).
  std::vector<int> use_counts() const;
  // The graph op by op: `%7 = conv2d(%0, weight, %3) [1, 32, 26, 26] f32 {stride [1, 1], ...}`.
  std::string dump() const;
};

// A description of a value for dumps and messages: "%12 [8, 32, 26, 26] float32".
std::string describe_value(const Graph& g, int v);

}  // namespace nabla::compiler
