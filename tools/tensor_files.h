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
#include <string_view>
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
  std::string format;                                         // "PyTorch zip archive", "safetensors", ...
  std::vector<NamedTensor> tensors;                           // in the file's order
  std::vector<std::pair<std::string, std::string>> others;    // non-tensor values: dotted name, Python repr
  std::vector<std::pair<std::string, std::string>> metadata;  // safetensors' __metadata__
  bool is_torch = false;
  nabla::torch_io::Value torch;  // the whole value, for torch files
  uint64_t file_size = 0;
};

// The limits that keep a hostile file from taking more than a small multiple of its size (the
// tools' --max-mb sets them all to one number of bytes):
//   the pickle's values      torch_io::LoadOptions::max_value_bytes: 64 MiB + 2 x the file's size
//   the dotted names         Value::flatten's max_bytes (names, strings, 64 bytes a leaf, counting
//                            shared subtrees once per path): 64 MiB + 16 x the file's size
//   values written out       a safetensors output holds every tensor's values in order, so a view
//                            (torch.zeros(1).expand(10**9)) is written in full: at most
//                            64 MiB + 4 x the input's size
struct Limits {
  uint64_t max_bytes = 0;  // 0: the defaults above
  uint64_t values(uint64_t file_size) const;
  uint64_t names(uint64_t file_size) const;
  uint64_t written(uint64_t file_size) const;
};

// Throws nabla::Error (IOError for unreadable files) naming the file.
TensorFile read_tensor_file(const std::string& path, const Limits& limits = {});

// Writes a .pt/.pth/.bin/.ckpt (torch.save's zip format; a torch file's whole value is written as
// it was, views as views) or a .safetensors file (tensors by dotted name, each one's values in
// order; other values go to the metadata as their Python repr). Returns notes about what the
// format could not keep. A safetensors output that would hold more than limits.written() bytes of
// values (views of few stored values, expanded) is refused before anything is written.
std::vector<std::string> write_tensor_file(const std::string& path, const TensorFile& file, const Limits& limits = {});

// A CRC-32 of the tensor's elements in order, as little-endian bytes of the file dtype (int8/int16
// narrowed), computed without making the tensor contiguous: a dimension of stride 0 (an expanded
// view) is the CRC of its block repeated (zlib's crc32_combine), so torch.zeros(1).expand(10**9)
// costs microseconds. Views that overlap themselves in other ways (as_strided) and would need more
// than twice their storage's elements read are not summed (computed == false).
struct Checksum {
  bool computed = false;
  uint32_t crc = 0;
  uint64_t bytes = 0;  // of the elements in order, in the file dtype
};
Checksum checksum(const NamedTensor& t);
// numel x the file dtype's element size.
uint64_t value_bytes(const NamedTensor& t);

// Text from a file made safe to print on a terminal: control characters (C0, DEL, C1), invalid
// UTF-8 and the bidirectional overrides become \xNN or \uNNNN escapes (and backslash \\ when
// `escape_backslash`, so that a name's escapes cannot be mistaken for its text).
std::string terminal_safe(std::string_view s, bool escape_backslash = true);
// `s` as a JSON string literal (quoted). Invalid UTF-8 becomes U+FFFD (*replaced is set), control
// characters, C1 controls, U+2028/U+2029 and bidirectional overrides are \u escapes.
void append_json_string(std::string& out, std::string_view s, bool* replaced);

// Extension checks.
bool is_torch_name(const std::string& path);
bool is_safetensors_name(const std::string& path);

}  // namespace nabla_tools
