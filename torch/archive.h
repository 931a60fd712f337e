// torch::serialize::OutputArchive / InputArchive: libtorch's keyed archives, in nabla's format.
//
//   torch::serialize::OutputArchive archive;
//   archive << model;                                     // the module's parameters and buffers
//   archive.write("epoch", torch::IValue(int64_t{3}));
//   archive.write("ema", ema_tensor);
//   archive.save_to("checkpoint.pt");
//   torch::serialize::InputArchive in;
//   in.load_from("checkpoint.pt");
//   in >> model;  torch::IValue epoch;  in.read("epoch", epoch);
//
// An archive is a set of named tensors (nested archives' names are dotted, "optimizer.0.exp_avg");
// IValues of kind Double, Int and Bool are kept as 0-d tensors of float64, int64 and bool (and read
// back as that kind), a Tensor IValue as the tensor. save_to writes safetensors, as torch::save
// does; load_from reads any file torch::save or save_to wrote (not libtorch's TorchScript archives).
#pragma once

#include <concepts>
#include <memory>
#include <string>
#include <vector>

#include "../core/ordered_dict.h"
#include "../nn/module.h"
#include "../optim/optimizer.h"
#include "ivalue.h"
#include "optim.h"
#include "types.h"

namespace torch::serialize {

class OutputArchive {
 public:
  void write(const std::string& key, const Tensor& tensor, bool is_buffer = false);
  void write(const std::string& key, const IValue& value);
  void write(const std::string& key, const OutputArchive& nested);
  void save_to(const std::string& filename) const;
  const nabla::StateDict& tensors() const { return tensors_; }

 private:
  nabla::StateDict tensors_;
};

class InputArchive {
 public:
  void load_from(const std::string& filename);
  void read(const std::string& key, Tensor& tensor, bool is_buffer = false);  // throws when absent
  bool try_read(const std::string& key, Tensor& tensor, bool is_buffer = false);
  void read(const std::string& key, IValue& value);
  bool try_read(const std::string& key, InputArchive& nested);
  void read(const std::string& key, InputArchive& nested);
  std::vector<std::string> keys() const { return tensors_.keys(); }
  const nabla::StateDict& tensors() const { return tensors_; }

 private:
  friend class OutputArchive;
  nabla::StateDict tensors_;
  std::string source_ = "an empty archive";
};

// archive << module / tensor / optimizer, archive >> ... (modules load strictly).
OutputArchive& operator<<(OutputArchive& archive, const nabla::nn::Module& module);
OutputArchive& operator<<(OutputArchive& archive, const nabla::optim::Optimizer& optimizer);
OutputArchive& operator<<(OutputArchive& archive, const Tensor& tensor);  // as key "0", libtorch's
InputArchive& operator>>(InputArchive& archive, nabla::nn::Module& module);
InputArchive& operator>>(InputArchive& archive, nabla::optim::Optimizer& optimizer);
InputArchive& operator>>(InputArchive& archive, Tensor& tensor);
template <class M>
requires std::derived_from<M, nabla::nn::Module> OutputArchive& operator<<(OutputArchive& a,
                                                                           const std::shared_ptr<M>& m) {
  return a << static_cast<const nabla::nn::Module&>(*m);
}
template <class M>
OutputArchive& operator<<(OutputArchive& a, const nabla::nn::ModuleHolder<M>& m) {
  return a << static_cast<const nabla::nn::Module&>(*m);
}
template <class M>
requires std::derived_from<M, nabla::nn::Module> InputArchive& operator>>(InputArchive& a,
                                                                          const std::shared_ptr<M>& m) {
  return a >> static_cast<nabla::nn::Module&>(*m);
}
template <class M>
InputArchive& operator>>(InputArchive& a, const nabla::nn::ModuleHolder<M>& m) {
  return a >> static_cast<nabla::nn::Module&>(*m);
}

// A torch:: optimizer, also through a torch::optim::Optimizer& (libtorch's base class).
template <class O>
requires std::derived_from<O, optim::Optimizer> OutputArchive& operator<<(OutputArchive& a, const O& optimizer) {
  return a << optimizer.nabla_optimizer();
}
template <class O>
requires std::derived_from<O, optim::Optimizer> InputArchive& operator>>(InputArchive& a, O& optimizer) {
  return a >> optimizer.nabla_optimizer();
}

}  // namespace torch::serialize
