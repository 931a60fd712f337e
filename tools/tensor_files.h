// What nabla-inspect and nabla-convert share: any tensor file nabla reads, as a list of named
// tensors with the dtype the file stores them in, and the writers of the formats nabla writes.
//
//   .pt .pth .bin .ckpt (or any name)  torch.save files, zip or legacy (nn/torch_file.h)
//   .safetensors                       safetensors (nn/safetensors.h)
//   .npy                               one NumPy array (load_npy)
//   .npz                               NumPy's zip of arrays (np.savez, np.savez_compressed)
// Files with another extension are recognized by their first bytes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nabla.h"

namespace nabla_tools {

struct NamedTensor {
  std::string name;
  nabla::Tensor tensor;
  std::string dtype;  // as the file stores it: "float32", "int8", ...
};

struct TensorFile {
  std::string format;                 // "PyTorch zip archive", "safetensors", ...
  std::vector<NamedTensor> tensors;   // in the file's order
  std::vector<std::pair<std::string, std::string>> others;  // non-tensor values: dotted name, Python repr
  std::vector<std::pair<std::string, std::string>> metadata;  // safetensors' __metadata__
  bool is_torch = false;
  nabla::torch_io::Value torch;       // the whole value, for torch files
};

// Throws nabla::Error (IOError for unreadable files) naming the file.
TensorFile read_tensor_file(const std::string& path);

// Writes a .pt/.pth/.bin/.ckpt (torch.save's zip format; a torch file's whole value is written as
// it was) or a .safetensors file (tensors by dotted name; other values go to the metadata as their
// Python repr). Returns notes about what the format could not keep.
std::vector<std::string> write_tensor_file(const std::string& path, const TensorFile& file);

// The tensor's elements in order as little-endian bytes of the file dtype (int8/int16 narrowed).
std::vector<unsigned char> file_bytes(const NamedTensor& t);

// Extension checks.
bool is_torch_name(const std::string& path);
bool is_safetensors_name(const std::string& path);

}  // namespace nabla_tools
