#include "torch/serialize.h"

#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace torch {

namespace {

constexpr const char* kKindKey = "nabla.torch";

void write(const nabla::nn::StateDict& tensors, const std::string& path, const char* kind) {
  nabla::safetensors::save_file(tensors, path, {{kKindKey, kind}});
}

// The file's tensors, after checking that torch::save wrote it for a value of `kind`.
nabla::nn::StateDict read(const std::string& path, const char* kind) {
  nabla::safetensors::File file;
  try {
    file = nabla::safetensors::load_file(path);
  } catch (const nabla::Error& e) {
    throw nabla::IOError(nabla::internal::str(
        "torch::load: ", path, " is not a file that torch::save wrote (nabla's torch::save writes safetensors; ",
        "libtorch's TorchScript archives are not read): ", e.what()));
  }
  auto it = file.metadata.find(kKindKey);
  const std::string found = it == file.metadata.end() ? "" : it->second;
  NABLA_CHECK(nabla::ValueError, found == kind, "torch::load: ", path, " holds ",
              found.empty() ? std::string("a safetensors file that torch::save did not write") : "a " + found,
              ", not a ", kind);
  return std::move(file.tensors);
}

}  // namespace

void save(const Tensor& tensor, const std::string& path) {
  nabla::nn::StateDict d;
  d.insert("tensor", tensor.detach());
  write(d, path, "tensor");
}

void save(const std::vector<Tensor>& tensors, const std::string& path) {
  nabla::nn::StateDict d;
  for (size_t i = 0; i < tensors.size(); ++i) d.insert(std::to_string(i), tensors[i].detach());
  write(d, path, "tensors");
}

void save(const nabla::nn::Module& module, const std::string& path) { write(module.state_dict(), path, "module"); }

void save(const nabla::optim::Optimizer& optimizer, const std::string& path) {
  write(optimizer.state_dict(), path, "optimizer");
}

void load(Tensor& tensor, const std::string& path) {
  nabla::nn::StateDict d = read(path, "tensor");
  NABLA_CHECK(nabla::ValueError, d.size() == 1 && d.contains("tensor"), "torch::load: ", path,
              " holds no single tensor");
  tensor = d["tensor"];
}

void load(std::vector<Tensor>& tensors, const std::string& path) {
  nabla::nn::StateDict d = read(path, "tensors");
  tensors.clear();
  for (size_t i = 0; i < d.size(); ++i) {
    const std::string key = std::to_string(i);
    NABLA_CHECK(nabla::ValueError, d.contains(key), "torch::load: ", path, " lacks tensor ", key);
    tensors.push_back(d[key]);
  }
}

void load(nabla::nn::Module& module, const std::string& path) { module.load_state_dict(read(path, "module")); }

void load(nabla::optim::Optimizer& optimizer, const std::string& path) {
  optimizer.load_state_dict(read(path, "optimizer"));
}

}  // namespace torch
