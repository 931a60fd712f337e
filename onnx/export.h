// ONNX export: torch.onnx.export for nabla modules.
//
//   auto net = mnist_cnn();                                   // any nn::Module
//   onnx::export_model(*net, {torch_like_input}, "cnn.onnx",
//                      {.input_names = {"image"}, .output_names = {"logits"},
//                       .dynamic_axes = {{"image", {{0, "batch"}}}, {"logits", {{0, "batch"}}}}});
//
// The model runs once on the example inputs in eval mode with a tracer installed (core/trace.h);
// every op it executes becomes ONNX nodes, parameters and buffers become initializers named as in
// the state dict ("fc1.weight"), and the file is written atomically. The module's training flags
// are restored afterwards. Ops with no ONNX mapping stop the export with an error naming the op
// and the module it ran in; onnx/README.md lists what is covered.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../core/tensor.h"
#include "../nn/module.h"

namespace nabla::onnx {

struct ExportOptions {
  // The ai.onnx opset the graph declares: 13 to 17.
  int64_t opset_version = 17;
  // Graph input names, one per example input ("input", or "input_0", "input_1", ... by default).
  std::vector<std::string> input_names;
  // The graph output's name ("output" by default).
  std::vector<std::string> output_names;
  // Dims left symbolic, by input or output name: {{"input", {{0, "batch"}}}}. A dynamic dim of an
  // input is followed through the graph: reshapes keep it (as 0 or -1 in the shape) instead of
  // baking in the example's size, and outputs that inherit it get the same name.
  std::map<std::string, std::map<int64_t, std::string>> dynamic_axes;
  // Folds eval-mode batch norms into the convolution before them (when that conv's output feeds
  // nothing else), as PyTorch's exporter does.
  bool do_constant_folding = true;
  // Writes the weights (initializers of 1 KiB and more) to <path>.data next to the model, ONNX's
  // external data. Models whose weights exceed 2 GiB (protobuf's limit) always do.
  bool external_data = false;
};

// Writes the ONNX model of `module` (traced on `example_inputs`, one or two tensors) to `path`.
void export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options = {});
template <class M>
void export_model(const std::shared_ptr<M>& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options = {}) {
  export_model(static_cast<nn::Module&>(*module), example_inputs, path, options);
}

// The serialized ModelProto, without writing a file.
std::string export_model_to_string(nn::Module& module, const std::vector<Tensor>& example_inputs,
                                   const ExportOptions& options = {});

}  // namespace nabla::onnx
