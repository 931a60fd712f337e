// A module's weights to and from the tensor file formats of io/: safetensors (HuggingFace's) and
// PyTorch's torch.save files. The formats themselves (any tensors, any dict) are in
// io/safetensors.h and io/torch_file.h; these are the one-line shortcuts for a whole module.
//
//   nn::save_weights(*model, "model.safetensors");     // model.state_dict() as safetensors
//   nn::load_weights(*model, "model.safetensors");     // strict load_state_dict
//   nn::load_torch_weights(*model, "resnet18.pth");    // a state dict that torch.save wrote
#pragma once

#include <string>

#include "../io/safetensors.h"
#include "../io/torch_file.h"
#include "module.h"

namespace nabla::nn {

// Saves module.state_dict() as safetensors (atomically).
void save_weights(const Module& module, const std::string& path, const safetensors::Metadata& metadata = {});
// Loads a safetensors file into module.load_state_dict(strict).
LoadStateDictResult load_weights(Module& module, const std::string& path, bool strict = true);

// model->load_state_dict(torch_io::load(path).flatten_tensors(), strict), for a file holding a state dict.
LoadStateDictResult load_torch_weights(Module& module, const std::string& path, bool strict = true);
// torch_io::save(path, module.state_dict()).
void save_torch_weights(const Module& module, const std::string& path);

}  // namespace nabla::nn
