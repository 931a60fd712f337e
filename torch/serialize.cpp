#include "torch/serialize.h"

#include "torch/archive.h"

#include <string>

#include "core/error.h"
#include "core/ops.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace torch {

namespace {

constexpr const char* kKindKey = "nabla.torch";

void write_file(const nabla::nn::StateDict& tensors, const std::string& path, const char* kind) {
  nabla::safetensors::save_file(tensors, path, {{kKindKey, kind}});
}

// The file's tensors, after checking that torch::save wrote it for a value of `kind` (or, with
// `or_archive`, that an OutputArchive did). A null kind takes any of torch::save's files.
nabla::nn::StateDict read_file(const std::string& path, const char* kind, bool or_archive = false) {
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
  NABLA_CHECK(nabla::ValueError, !found.empty(), "torch::load: ", path,
              " holds a safetensors file that torch::save did not write");
  NABLA_CHECK(nabla::ValueError, !kind || found == kind || (or_archive && found == "archive"), "torch::load: ", path,
              " holds a ", found, ", not a ", kind);
  return std::move(file.tensors);
}

// The entries of `d` whose names start with prefix + ".", without the prefix.
nabla::nn::StateDict with_prefix(const nabla::nn::StateDict& d, const std::string& prefix) {
  nabla::nn::StateDict out;
  const std::string p = prefix + ".";
  for (const auto& item : d)
    if (item.key().compare(0, p.size(), p) == 0) out.insert(item.key().substr(p.size()), item.value());
  return out;
}

}  // namespace

// ---- archives ---------------------------------------------------------------------------------------
void serialize::OutputArchive::write(const std::string& key, const Tensor& tensor, bool /*is_buffer*/) {
  tensors_.insert_or_assign(key, tensor.defined() ? tensor.detach() : tensor);
}

void serialize::OutputArchive::write(const std::string& key, const IValue& value) {
  if (value.isTensor()) return write(key, value.toTensor());
  NABLA_CHECK(nabla::ValueError, value.isDouble() || value.isInt() || value.isBool(),
              "torch::serialize::OutputArchive::write: an IValue of kind ", value.tagKind(),
              " cannot be archived (Tensor, Double, Int and Bool can)");
  if (value.isDouble()) write(key, nabla::scalar_tensor(value.toDouble(), kFloat64));
  else if (value.isInt()) write(key, nabla::scalar_tensor(value.toInt(), kInt64));
  else write(key, nabla::scalar_tensor(value.toBool(), kBool));
}

void serialize::OutputArchive::write(const std::string& key, const OutputArchive& nested) {
  for (const auto& item : nested.tensors_) write(key + "." + item.key(), item.value());
}

void serialize::OutputArchive::save_to(const std::string& filename) const { write_file(tensors_, filename, "archive"); }

void serialize::InputArchive::load_from(const std::string& filename) {
  tensors_ = read_file(filename, nullptr);
  source_ = filename;
}

void serialize::InputArchive::read(const std::string& key, Tensor& tensor, bool is_buffer) {
  NABLA_CHECK(nabla::IndexError, try_read(key, tensor, is_buffer), "torch::serialize::InputArchive: no key '", key,
              "' in ", source_);
}

bool serialize::InputArchive::try_read(const std::string& key, Tensor& tensor, bool /*is_buffer*/) {
  if (!tensors_.contains(key)) return false;
  tensor = tensors_[key];
  return true;
}

void serialize::InputArchive::read(const std::string& key, IValue& value) {
  Tensor t;
  read(key, t);
  if (t.dim() == 0 && t.dtype() == kFloat64) value = t.item<double>();
  else if (t.dim() == 0 && t.dtype() == kInt64) value = t.item<int64_t>();
  else if (t.dim() == 0 && t.dtype() == kBool) value = t.item<bool>();
  else value = t;
}

bool serialize::InputArchive::try_read(const std::string& key, InputArchive& nested) {
  nested.tensors_ = with_prefix(tensors_, key);
  nested.source_ = "'" + key + "' of " + source_;
  return !nested.tensors_.empty();
}

void serialize::InputArchive::read(const std::string& key, InputArchive& nested) {
  NABLA_CHECK(nabla::IndexError, try_read(key, nested), "torch::serialize::InputArchive: no archive '", key, "' in ",
              source_);
}

serialize::OutputArchive& serialize::operator<<(OutputArchive& archive, const nabla::nn::Module& module) {
  for (const auto& item : module.state_dict()) archive.write(item.key(), item.value());
  return archive;
}
serialize::OutputArchive& serialize::operator<<(OutputArchive& archive, const nabla::optim::Optimizer& optimizer) {
  for (const auto& item : optimizer.state_dict()) archive.write(item.key(), item.value());
  return archive;
}
serialize::OutputArchive& serialize::operator<<(OutputArchive& archive, const Tensor& tensor) {
  archive.write("0", tensor);
  return archive;
}
serialize::InputArchive& serialize::operator>>(InputArchive& archive, nabla::nn::Module& module) {
  module.load_state_dict(archive.tensors());
  return archive;
}
serialize::InputArchive& serialize::operator>>(InputArchive& archive, nabla::optim::Optimizer& optimizer) {
  optimizer.load_state_dict(archive.tensors());
  return archive;
}
serialize::InputArchive& serialize::operator>>(InputArchive& archive, Tensor& tensor) {
  archive.read("0", tensor);
  return archive;
}

void save(const Tensor& tensor, const std::string& path) {
  nabla::nn::StateDict d;
  d.insert("tensor", tensor.detach());
  write_file(d, path, "tensor");
}

void save(const std::vector<Tensor>& tensors, const std::string& path) {
  nabla::nn::StateDict d;
  for (size_t i = 0; i < tensors.size(); ++i) d.insert(std::to_string(i), tensors[i].detach());
  write_file(d, path, "tensors");
}

void save(const nabla::nn::Module& module, const std::string& path) { write_file(module.state_dict(), path, "module"); }

void save(const nabla::optim::Optimizer& optimizer, const std::string& path) {
  write_file(optimizer.state_dict(), path, "optimizer");
}

void load(Tensor& tensor, const std::string& path) {
  nabla::nn::StateDict d = read_file(path, "tensor");
  NABLA_CHECK(nabla::ValueError, d.size() == 1 && d.contains("tensor"), "torch::load: ", path,
              " holds no single tensor");
  tensor = d["tensor"];
}

void load(std::vector<Tensor>& tensors, const std::string& path) {
  nabla::nn::StateDict d = read_file(path, "tensors");
  tensors.clear();
  for (size_t i = 0; i < d.size(); ++i) {
    const std::string key = std::to_string(i);
    NABLA_CHECK(nabla::ValueError, d.contains(key), "torch::load: ", path, " lacks tensor ", key);
    tensors.push_back(d[key]);
  }
}

void load(nabla::nn::Module& module, const std::string& path) {
  module.load_state_dict(read_file(path, "module", /*or_archive=*/true));
}

void load(nabla::optim::Optimizer& optimizer, const std::string& path) {
  optimizer.load_state_dict(read_file(path, "optimizer", /*or_archive=*/true));
}

}  // namespace torch
