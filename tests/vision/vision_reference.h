// The references of tests/vision/make_reference.py, read back in C++: the hash that both sides
// use to fill a model's state dict, and where the reference files live.
//
// References come from NABLA_VISION_REFERENCES (a directory ctest's setup test vision.make_references
// fills with every model in one Python process); a model missing there (running the test binary by
// hand) is made on the spot by one Python call into a directory of this process.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "nabla.h"
#include "tests/common/python_torch.h"

namespace nabla_test::vision {

using nabla::Tensor;

// u(seed, i) in [0, 1): make_reference.py's hash_uniform.
inline double hash_uniform(uint64_t seed, uint64_t i) {
  uint32_t x = static_cast<uint32_t>(i * 2654435761ull + static_cast<uint32_t>(seed * 2654435769ull));
  for (int r = 0; r < 2; ++r) {
    x ^= x >> 16;
    x *= 0x45D9F3Bu;
  }
  x ^= x >> 16;
  return static_cast<double>(x) / 4294967296.0;
}

// float32 mean + half * (2u - 1), as make_reference.py's hash_tensor.
inline Tensor hash_tensor(nabla::IntArrayRef shape, double mean, double half, uint64_t seed) {
  Tensor t = nabla::empty(shape);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(mean + half * (2.0 * hash_uniform(seed, static_cast<uint64_t>(i)) - 1.0));
  return t;
}

// The state dict the reference describes: floating tensors from the spec, integer buffers as saved.
inline nabla::nn::StateDict state_from_reference(const nabla::torch_io::Value& ref) {
  nabla::nn::StateDict sd;
  const auto& ints = ref["ints"];
  for (const auto& e : ref["spec"].items()) {
    std::vector<int64_t> shape;
    for (const auto& d : e[1].items()) shape.push_back(d.to_int());
    sd.insert(e[0].to_string(),
              hash_tensor(shape, e[2].to_double(), e[3].to_double(), static_cast<uint64_t>(e[4].to_int())));
  }
  for (const auto& [k, v] : ints.entries()) sd.insert(k.to_string(), v.to_tensor());
  return sd;
}

// The reference file of `model` ("resnet18" or "resnet18_train"), made if needed.
inline std::string reference_file(const std::string& model) {
  if (const char* dir = std::getenv("NABLA_VISION_REFERENCES")) {
    std::string p = std::string(dir) + "/" + model + ".pt";
    if (std::filesystem::exists(p)) return p;
  }
  static std::string own = [] {
    auto d = std::filesystem::temp_directory_path() / ("nabla-vision-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  std::string p = own + "/" + model + ".pt";
  if (!std::filesystem::exists(p)) {
    std::string cmd =
        "/usr/bin/python3 " + std::string(NABLA_TESTS_DIR) + "/vision/make_reference.py --out " + own + " " + model;
    int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("make_reference.py failed for " + model + ": " + cmd);
  }
  return p;
}

// max |a - b| / max |b|: the error relative to the reference's scale.
inline double relative_error(const Tensor& a, const Tensor& b) {
  Tensor d = (a.to(nabla::kFloat64) - b.to(nabla::kFloat64)).abs().max();
  double scale = b.to(nabla::kFloat64).abs().max().item<double>();
  return d.item<double>() / (scale > 0 ? scale : 1.0);
}

}  // namespace nabla_test::vision
