#include "nn/serialize.h"

namespace nabla::nn {

void save_weights(const Module& module, const std::string& path, const safetensors::Metadata& metadata) {
  safetensors::save_file(module.state_dict(), path, metadata);
}

LoadStateDictResult load_weights(Module& module, const std::string& path, bool strict) {
  return module.load_state_dict(safetensors::load_file(path).tensors, strict);
}

LoadStateDictResult load_torch_weights(Module& module, const std::string& path, bool strict) {
  return module.load_state_dict(torch_io::load(path).flatten_tensors(), strict);
}

void save_torch_weights(const Module& module, const std::string& path) { torch_io::save(path, module.state_dict()); }

}  // namespace nabla::nn
