// torch::save / torch::load of tensors, modules and optimizers, in nabla's format.
//
//   torch::save(model, "model.pt");        // a module (handle, shared_ptr or object): its state_dict
//   torch::load(model, "model.pt");        // into a module of the same structure
//   torch::save(optimizer, "opt.pt");      // an optimizer's state (moments, step counts, options)
//   torch::save(tensor, "t.pt");  torch::save(std::vector<torch::Tensor>{a, b}, "ab.pt");
//
// The files are safetensors (whatever the name's extension), with the kind of value in the
// metadata ("nabla.torch": "tensor", "tensors", "module" or "optimizer"): nabla's own format, not
// libtorch's TorchScript archives, which these functions neither write nor read (a state dict that
// Python's torch.save wrote is read by nabla::nn::load_torch_weights). Loading a file of another
// kind, or one that is not such a file, throws an nabla::Error naming the path and both kinds; a
// module or optimizer also loads from a file an OutputArchive (archive.h) saved.
#pragma once

#include <concepts>
#include <memory>
#include <string>
#include <vector>

#include "../nn/module.h"
#include "../optim/optimizer.h"
#include "optim.h"
#include "types.h"

namespace torch {

void save(const Tensor& tensor, const std::string& path);
void save(const std::vector<Tensor>& tensors, const std::string& path);
void save(const nabla::nn::Module& module, const std::string& path);
void save(const nabla::optim::Optimizer& optimizer, const std::string& path);
template <class M>
requires std::derived_from<M, nabla::nn::Module>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  save(static_cast<const nabla::nn::Module&>(*module), path);
}
template <class M>
void save(const nabla::nn::ModuleHolder<M>& module, const std::string& path) {
  save(static_cast<const nabla::nn::Module&>(*module), path);
}

// A torch:: optimizer, also through a torch::optim::Optimizer& (libtorch's base class).
template <class O>
requires std::derived_from<O, optim::Optimizer>
void save(const O& optimizer, const std::string& path) { save(optimizer.nabla_optimizer(), path); }

void load(Tensor& tensor, const std::string& path);
void load(std::vector<Tensor>& tensors, const std::string& path);
void load(nabla::nn::Module& module, const std::string& path);  // strict: every key, every shape
void load(nabla::optim::Optimizer& optimizer, const std::string& path);
template <class M>
requires std::derived_from<M, nabla::nn::Module>
void load(const std::shared_ptr<M>& module, const std::string& path) {
  load(static_cast<nabla::nn::Module&>(*module), path);
}
template <class M>
void load(const nabla::nn::ModuleHolder<M>& module, const std::string& path) {
  load(static_cast<nabla::nn::Module&>(*module), path);
}

template <class O>
requires std::derived_from<O, optim::Optimizer>
void load(O& optimizer, const std::string& path) { load(optimizer.nabla_optimizer(), path); }

}  // namespace torch
