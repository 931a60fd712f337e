// safetensors: the tensor file format of HuggingFace (read in Python with safetensors.torch.load_file).
//
// Layout: an 8-byte little-endian unsigned header length N, then N bytes of JSON (padded with spaces
// to a multiple of 8), then the tensor bytes, contiguous and little-endian:
//   {"__metadata__": {"k": "v"}, "fc1.weight": {"dtype": "F32", "shape": [128, 784],
//    "data_offsets": [0, 401408]}, ...}
// data_offsets are [begin, end) within the byte buffer after the header.
//
// The reader checks everything the reference implementation does and throws IOError naming the
// file and the rule on any violation: the file holds at least 8 bytes; N <= 100,000,000; the header
// fits in the file, starts with '{' and is a JSON object of valid UTF-8; each entry has a known
// dtype, a shape of non-negative integers and two offsets begin <= end; names are unique; the
// entries, sorted by offset, cover the buffer exactly (no gap, no overlap, nothing left over); and
// each byte count equals numel * element size (computed without overflow). Nothing is allocated
// before the sizes are validated against the file's size, so a hostile file cannot ask for a huge
// allocation.
//
//   safetensors::save_file(model->state_dict(), "model.safetensors", {{"epoch", "3"}});
//   auto f = safetensors::load_file("model.safetensors");   // f.tensors["fc1.weight"], f.metadata
//   nn::save_weights(*model, "model.safetensors");           // the same, for a module (nn/serialize.h)
//   nn::load_weights(*model, "model.safetensors");           // strict load_state_dict (nn/serialize.h)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../core/ordered_dict.h"

namespace nabla::safetensors {

inline constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference implementation's limit

using Metadata = std::map<std::string, std::string>;

struct File {
  nn::StateDict tensors;  // in the order of their data in the file
  Metadata metadata;
};

// Tensors may be on any device and have any layout (they are copied to contiguous host memory).
// Supported dtypes: F64, F32, F16, BF16, I64, I32, U8, BOOL. The write is atomic.
void save_file(const nn::StateDict& tensors, const std::string& path, const Metadata& metadata = {});
// The whole file as bytes (for tests and for sending over the wire).
std::vector<char> serialize(const nn::StateDict& tensors, const Metadata& metadata = {});

File load_file(const std::string& path);
// Parses an in-memory file; `what` names it in errors.
File deserialize(const char* data, size_t size, const std::string& what = "<buffer>");
// Only the header: names, dtypes and shapes of a file's tensors as empty-storage descriptions.
struct TensorInfo {
  std::string name;
  std::string dtype;  // as written in the file: "F32", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};
std::vector<TensorInfo> read_header(const std::string& path, Metadata* metadata = nullptr);

}  // namespace nabla::safetensors
