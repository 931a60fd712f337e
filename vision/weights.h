// Loading weights into a vision model, and the zoo by name.
//
//   auto model = vision::create_model("resnet50");              // any architecture of the zoo
//   vision::load_weights(*model, "resnet50-0676ba61.pth");      // torchvision's file, strict
//   vision::load_weights(*model, "resnet50.safetensors");       // or safetensors
//
// load_weights reads PyTorch's files (torch.save's zip format and the legacy format, through
// torch_io::load: a state dict, or a checkpoint dict whose only tensors are the state dict's) and
// safetensors files (told apart by their first bytes, not by the file name), then calls
// Module::load_state_dict: with strict = true (the default) missing and unexpected keys are an
// error, and shape mismatches always are; the ValueError lists every offending key at once, as
// PyTorch's load_state_dict does. Tensors of another floating dtype (a float16 checkpoint) are
// converted to the model's dtype. For DenseNet models the old key names of torchvision's DenseNet
// files ("denselayer1.norm.1.weight") are renamed first, as torchvision does, and so are the old
// MLP names of its ViT files ("mlp.linear_1.weight" -> "mlp.0.weight").
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../nn/module.h"

namespace nabla::vision {

struct LoadWeightsOptions {
  bool strict = true;
  // The tensors of a checkpoint dict under this key (e.g. "model" or "state_dict"); empty: the
  // whole file is the state dict.
  std::string key{};
};

nn::LoadStateDictResult load_weights(nn::Module& model, const std::string& path,
                                     const LoadWeightsOptions& options = {});

// The state dict of a file (PyTorch or safetensors, as load_weights reads it), without a model.
nn::StateDict read_weights(const std::string& path, const std::string& key = "");

// Number of elements of all parameters (what sum(p.numel() for p in model.parameters()) gives).
int64_t count_parameters(const nn::Module& model);

struct ModelOptions {
  int64_t num_classes = 1000;
  // The classifier's dropout probability, for the architectures that have the option (torchvision's
  // `dropout`); unset: the architecture's default.
  std::optional<double> dropout{};
  // The input size the model is built for, for the architectures fixed to one (vit_b_16: 224);
  // unset: torchvision's default. Ignored by the others.
  std::optional<int64_t> image_size{};
};
// An architecture of the zoo by its torchvision name ("resnet50", "mobilenet_v2", ...), with
// torchvision's default options and random weights. Throws ValueError listing the known names.
std::shared_ptr<nn::Module> create_model(const std::string& name, const ModelOptions& options = {});
// The names create_model accepts.
std::vector<std::string> model_names();

}  // namespace nabla::vision
