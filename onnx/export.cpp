// ONNX export (onnx/export.h): the module runs once in eval mode under the exporter (a tracer,
// onnx/exporter.h), whose lowerings (onnx/lower_*.cpp) turn each traced op into ONNX nodes; then the
// passes and the ModelProto (onnx/serialize.cpp), written atomically.
#include "onnx/export.h"

#include <filesystem>

#include "core/graph.h"
#include "io/file.h"
#include "onnx/exporter.h"

namespace nabla::onnx {

using internal::Exporter;

namespace {

// Restores each module's training flag (parents first, so a child's own flag wins).
class TrainingFlags {
 public:
  explicit TrainingFlags(nn::Module& m) {
    for (auto& [name, mod] : m.named_modules()) flags_.emplace_back(mod, mod->is_training());
  }
  ~TrainingFlags() {
    for (auto& [mod, on] : flags_) mod->train(on);
  }

 private:
  std::vector<std::pair<std::shared_ptr<nn::Module>, bool>> flags_;
};

std::string export_impl(nn::Module& module, const std::vector<Tensor>& example_inputs, const ExportOptions& options,
                        std::string* data, const std::string& data_name) {
  NABLA_CHECK(ValueError, options.opset_version >= 13 && options.opset_version <= 17,
              "onnx::export_model: opset_version must be 13 to 17, got ", options.opset_version);
  NABLA_CHECK(ValueError, example_inputs.size() == 1 || example_inputs.size() == 2,
              "onnx::export_model: expected 1 or 2 example inputs (what Module::operator() takes), got ",
              example_inputs.size());
  NABLA_CHECK(ValueError, options.input_names.empty() || options.input_names.size() == example_inputs.size(),
              "onnx::export_model: ", options.input_names.size(), " input_names for ", example_inputs.size(),
              " example inputs");
  NABLA_CHECK(ValueError, options.output_names.size() <= 1, "onnx::export_model: the module has 1 output, got ",
              options.output_names.size(), " output_names");
  for (const auto& [name, axes] : options.dynamic_axes) {
    bool known = name == (options.output_names.empty() ? "output" : options.output_names[0]);
    for (size_t i = 0; i < example_inputs.size(); ++i)
      known = known || name == (options.input_names.empty()
                                    ? (example_inputs.size() == 1 ? std::string("input") : "input_" + std::to_string(i))
                                    : options.input_names[i]);
    NABLA_CHECK(ValueError, known, "onnx::export_model: dynamic_axes names '", name,
                "', which is no input or output name");
  }

  TrainingFlags restore(module);
  module.eval();
  Exporter ex(options.opset_version, options.do_constant_folding);
  for (const auto& [name, t] : module.named_parameters()) ex.add_named(t, name);
  for (const auto& [name, t] : module.named_buffers()) ex.add_named(t, name);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    const Tensor& t = example_inputs[i];
    NABLA_CHECK(ValueError, t.defined(), "onnx::export_model: example input ", i, " is undefined");
    // Floating inputs take part in autograd, so the output of an op the tracer does not know
    // carries a grad_fn that names it.
    Tensor x = t.detach();
    if (is_floating(x.dtype())) x.requires_grad_(true);
    std::string name = !options.input_names.empty() ? options.input_names[i]
                       : example_inputs.size() == 1 ? std::string("input")
                                                    : "input_" + std::to_string(i);
    auto it = options.dynamic_axes.find(name);
    ex.add_input(x, name, it == options.dynamic_axes.end() ? std::map<int64_t, std::string>{} : it->second);
    xs.push_back(x);
  }
  // Module paths for messages: forward hooks mark where each module call starts and ends, in
  // autograd sequence numbers (the nodes of the ops it ran) and on the tracer's stack.
  std::vector<nn::RemovableHandle> handles;
  for (auto& [name, mod] : module.named_modules()) {
    std::string path = name;
    handles.push_back(mod->register_forward_pre_hook([&ex, path](nn::Module&, std::vector<Tensor>&) {
      ex.calls.push_back({path, autograd::next_sequence_nr()});
    }));
    handles.push_back(mod->register_forward_hook([&ex, path](nn::Module&, const std::vector<Tensor>&, Tensor&) {
      for (auto it = ex.calls.rbegin(); it != ex.calls.rend(); ++it)
        if (it->path == path && it->end_seq == std::numeric_limits<uint64_t>::max()) {
          it->end_seq = autograd::next_sequence_nr();
          break;
        }
    }));
  }
  struct RemoveHooks {
    std::vector<nn::RemovableHandle>& h;
    ~RemoveHooks() {
      for (auto& x : h) x.remove();
    }
  } remove_hooks{handles};

  Tensor y;
  {
    // Recording on (also inside a caller's NoGradGuard or InferenceMode): untraced ops must leave
    // their grad_fn.
    autograd::AutoGradMode grad(true);
    trace::TracerGuard guard(&ex);
    y = xs.size() == 1 ? module(xs[0]) : module(xs[0], xs[1]);
  }
  NABLA_CHECK(ValueError, y.defined(), "onnx::export_model: the module returned an undefined tensor");
  std::vector<std::string> out_names{options.output_names.empty() ? std::string("output") : options.output_names[0]};
  return ex.serialize(out_names, {y}, options, data, data_name);
}
}  // namespace

std::string export_model_to_string(nn::Module& module, const std::vector<Tensor>& example_inputs,
                                   const ExportOptions& options) {
  NABLA_CHECK(ValueError, !options.external_data,
              "onnx::export_model_to_string: external_data needs a file: use export_model");
  return export_impl(module, example_inputs, options, nullptr, "");
}

void export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options) {
  // Weights over 2 GiB go to <file>.data whatever external_data says.
  std::string data;
  const std::string data_path = path + ".data";
  const std::string data_name = std::filesystem::path(data_path).filename().string();
  std::string bytes = export_impl(module, example_inputs, options, &data, data_name);
  if (!data.empty())
    io::atomic_write(data_path, [&](std::FILE* f) { io::write_all(f, data.data(), data.size(), data_path); });
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

}  // namespace nabla::onnx
