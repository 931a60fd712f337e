#include "examples/mnist/common.h"

#include <filesystem>

#include "core/backend.h"
#include "examples/mnist/args.h"

namespace mnist {

using namespace nabla;
namespace fs = std::filesystem;

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out;
}

Device pick_device(const std::string& spec) {
  if (spec == "cpu") return kCPU;
  if (spec == "cuda") {
    if (!cuda::is_available())
      throw Failure("--device cuda: no usable CUDA GPU here (" + cuda::unavailable_reason() +
                        "); use --device cpu or --device auto",
                    kExitUsage);
    return Device::cuda();
  }
  return cuda::is_available() ? Device::cuda() : kCPU;
}

std::string default_data_dir(const std::string& dataset) {
  return dataset == "fashion-mnist" ? "data/fashion-mnist" : "data/mnist";
}

std::string dataset_title(const std::string& dataset) { return dataset == "fashion-mnist" ? "Fashion-MNIST" : "MNIST"; }

std::shared_ptr<data::MNIST> load_split(const std::string& dataset, const std::string& dir, bool train) {
  const char* prefix = train ? "train" : "t10k";
  bool found = false;
  std::error_code ec;  // (an unreadable or odd path counts as not found)
  for (const char* suffix : {"", ".gz"})
    found = found || fs::exists(fs::path(dir) / (std::string(prefix) + "-images-idx3-ubyte" + suffix), ec);
  if (!found) {
    std::string fetch = dataset == "fashion-mnist" ? "apt-get install dataset-fashion-mnist && scripts/get-data.sh"
                                                   : "scripts/get-data.sh";
    throw Failure(dataset_title(dataset) + " files not found in '" + dir + "' (expected " + prefix +
                      "-images-idx3-ubyte and " + prefix +
                      "-labels-idx1-ubyte, plain or .gz).\n"
                      "Fetch them with:  " +
                      fetch + "\nor point --data at a folder that has them.",
                  kExitNoData);
  }
  data::Split split = train ? data::Split::train : data::Split::test;
  if (dataset == "fashion-mnist") return std::make_shared<data::FashionMNIST>(dir, split);
  return std::make_shared<data::MNIST>(dir, split);
}

std::map<std::string, std::string> read_checkpoint_info(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Failure(
        "checkpoint '" + path + "' " + (ec ? "cannot be read: " + ec.message() : std::string("does not exist")),
        kExitError);
  safetensors::Metadata md;
  safetensors::read_header(path, &md);
  std::map<std::string, std::string> info;
  for (const auto& [k, v] : md)
    if (k.rfind("user.mnist.", 0) == 0) info[k.substr(5)] = v;
  if (!info.count("mnist.model"))
    throw Failure("'" + path + "' is not a checkpoint written by `mnist train` (no mnist.model in its metadata)",
                  kExitError);
  return info;
}

ModelInfo load_trained_model(const std::string& checkpoint, Device device,
                             std::map<std::string, std::string>* info_out) {
  auto info = read_checkpoint_info(checkpoint);
  ModelInfo m = make_model(MetadataReader(info, checkpoint).choice("mnist.model", kModels));
  optim::Checkpoint ck{.model = m.module.get(), .rng = false};
  optim::load_checkpoint(checkpoint, ck);
  m.module->to(device);
  m.module->eval();
  if (info_out) *info_out = std::move(info);
  return m;
}

}  // namespace mnist
