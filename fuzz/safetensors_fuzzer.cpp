// libFuzzer target: the three ways into a safetensors file must agree on arbitrary bytes.
//   - deserialize (from memory) and load_file (from a file) both load it, or both fail with the
//     same message (the file's name aside);
//   - read_header (only the header) fails exactly when they do, except for a well-formed file
//     whose dtype nabla cannot load (I8, U16, ...), which only the loaders reject;
//   - what loads is saved again (serialize) and must load back equal: names, order, dtypes,
//     shapes, bytes and metadata.
#include <cstring>

#include "fuzz/fuzz_util.h"
#include "nabla.h"

namespace {

using namespace nabla;

// The message without the name of the source ("'<path>'" or "<buffer>"), which comes first
// (the rest may quote the file's contents, which may hold the name too).
std::string without(std::string msg, const std::string& name) {
  if (size_t pos = msg.find(name); pos != std::string::npos) msg.replace(pos, name.size(), "<source>");
  return msg;
}

// Same names (in any order: serialize orders tensors by element size), dtypes, shapes, bytes, metadata.
bool same(const safetensors::File& a, const safetensors::File& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, x] : a.tensors) {
    const Tensor* y = b.tensors.find(name);
    if (!y || x.dtype() != y->dtype() || x.sizes() != y->sizes() ||
        std::memcmp(x.data_ptr(), y->data_ptr(), x.nbytes()) != 0)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nabla_fuzz::ScratchFile file("safetensors");
  const std::string& path = file.write(data, size);
  safetensors::File from_memory, from_file;
  std::string e_mem = nabla_fuzz::expect_clean(
      [&] { from_memory = safetensors::deserialize(reinterpret_cast<const char*>(data), size, "<buffer>"); });
  std::string e_file = nabla_fuzz::expect_clean([&] { from_file = safetensors::load_file(path); });
  std::string e_header = nabla_fuzz::expect_clean([&] { safetensors::read_header(path); });
  e_mem = without(e_mem, "<buffer>");
  e_file = without(e_file, "'" + path + "'");
  e_header = without(e_header, "'" + path + "'");
  if (e_mem != e_file) nabla_fuzz::finding("deserialize and load_file disagree", (e_mem + " | " + e_file).c_str());
  if (e_header != e_file && !(e_header.empty() && e_file.find("which nabla does not support") != std::string::npos))
    nabla_fuzz::finding("read_header and load_file disagree", (e_header + " | " + e_file).c_str());
  if (!e_file.empty()) return 0;
  if (!same(from_memory, from_file)) nabla_fuzz::finding("deserialize and load_file", "loaded different contents");
  std::vector<char> again = safetensors::serialize(from_file.tensors, from_file.metadata);
  if (!same(safetensors::deserialize(again.data(), again.size()), from_file))
    nabla_fuzz::finding("safetensors round trip", "serialize(load_file(file)) does not load back equal");
  return 0;
}
