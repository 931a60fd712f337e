// A registry op as a module, for the suites that run ops through a module-level API (ONNX export,
// compile): forward(x) runs the op on x and the sample's other inputs, kept as parameters and buffers
// (so an exporter sees initializers, a compiler the module's tensors), and remembers the output of
// its last call (`last_output`, detached and contiguous).
#pragma once

#include <string>
#include <vector>

#include "tests/ops/opinfo.h"

namespace nabla::testing {

struct OpModule : nn::Module {
  OpModule(const OpInfo& op, const Inputs& in) : nn::Module("OpModule"), op_(op) {
    for (size_t i = 1; i < in.size(); ++i) {
      const std::string n = "in" + std::to_string(i);
      if (!in[i].defined()) rest_.push_back(in[i]);
      else if (in[i].is_floating_point()) rest_.push_back(register_parameter(n, in[i].detach(), false));
      else rest_.push_back(register_buffer(n, in[i]));
    }
  }
  Tensor forward(Tensor x) override {
    Inputs in{x};
    in.insert(in.end(), rest_.begin(), rest_.end());
    Outputs out = op_.fn(in);
    last_output = out.empty() ? Tensor() : out[0].detach().contiguous();
    return out.empty() ? Tensor() : out[0];
  }
  const OpInfo& op_;
  std::vector<Tensor> rest_;
  Tensor last_output;
};

}  // namespace nabla::testing
