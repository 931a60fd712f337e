// torch::nn::Module, torch::nn::ModuleHolder and TORCH_MODULE: libtorch's module handles.
//
//   struct NetImpl : torch::nn::Module {
//     NetImpl() { fc = register_module("fc", torch::nn::Linear(784, 10)); }
//     torch::Tensor forward(torch::Tensor x) { return fc(x); }
//     torch::nn::Linear fc{nullptr};
//   };
//   TORCH_MODULE(Net);  // Net: a shared handle to a NetImpl
//   Net net;            // makes a NetImpl; net->parameters(), net(x), Net n2 = nullptr
//
// torch::nn::Module is nabla::nn::Module: a torch:: module is an nabla module, so everything of
// nabla (its optimizers, nn::save_weights, DDP, the hooks) takes it. A handle is an
// nabla::nn::ModuleHolder whose call operator is libtorch's: net(args...) calls net->forward(args...)
// directly, whatever forward's signature (nabla's holder runs the forward hooks for a one-Tensor
// forward). register_module returns the handle it is given.
#pragma once

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

#include "../nn/module.h"

namespace torch::nn {

using Module = nabla::nn::Module;

template <class T>
class ModuleHolder : public nabla::nn::ModuleHolder<T> {
  using Base = nabla::nn::ModuleHolder<T>;

 public:
  using Base::Base;
  ModuleHolder() requires std::default_initializable<T> : Base(std::make_shared<T>()) {}
  ModuleHolder(const Base& other) : Base(other) {}  // NOLINT(google-explicit-constructor): register_module's result

  // libtorch's call: forward with these arguments (no hooks), returning what forward returns.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return (*this)->forward(std::forward<Args>(args)...);
  }
};

}  // namespace torch::nn

// TORCH_MODULE(Name): `Name` is a torch::nn::ModuleHolder of your class `NameImpl`, as in libtorch.
// `Name net;` makes a NameImpl() when NameImpl has a default constructor (a constrained template,
// so that a class without one gets no defaulted-but-deleted constructor and no warning).
#define TORCH_MODULE(Name)                                                              \
  class Name : public ::torch::nn::ModuleHolder<Name##Impl> {                           \
   public:                                                                              \
    using ::torch::nn::ModuleHolder<Name##Impl>::ModuleHolder;                          \
    template <class TorchModuleImpl = Name##Impl>                                       \
    requires std::default_initializable<TorchModuleImpl> Name()                         \
        : ::torch::nn::ModuleHolder<Name##Impl>(std::make_shared<TorchModuleImpl>()) {} \
    Name(const ::nabla::nn::ModuleHolder<Name##Impl>& h) /* NOLINT */                   \
        : ::torch::nn::ModuleHolder<Name##Impl>(h) {}                                   \
  }
