// nabla-inspect: lists the tensors of a checkpoint (PyTorch, safetensors, NumPy) with their dtype,
// shape, size and a checksum, and the other values a checkpoint holds. See --help.
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "core/zip.h"
#include "tensor_files.h"

namespace {

const char* kHelp = R"(usage: nabla-inspect [--json] [--values] FILE

Lists the tensors in a file of weights: each tensor's name, dtype, shape, size in bytes and a
CRC-32 checksum of its values, then the other values the file holds (an epoch, a learning rate, the
options of an optimizer...) and a total. Nothing in the file is executed: PyTorch files are read by
nabla's restricted unpickler, which refuses anything but tensors, numbers, strings and containers.

Files it reads:
  .pt .pth .bin .ckpt   what PyTorch's torch.save writes: a state dict, a training checkpoint,
                        a Hugging Face pytorch_model.bin (zip format, or the legacy format of
                        files saved before PyTorch 1.6); any other name is recognized by its bytes
  .safetensors          Hugging Face safetensors
  .npy .npz             NumPy arrays (np.save, np.savez, np.savez_compressed)

Columns:
  name     the dotted path of the tensor, as model.load_state_dict expects it
           ("layer1.0.conv1.weight"; nested checkpoints: "model.fc.bias", "optimizer.state.0.exp_avg")
  dtype    as the file stores it (float32, bfloat16, int8, ...)
  shape    [dim0, dim1, ...]; [] for a single number
  bytes    the size of its values in the file's dtype
  crc32    a checksum of its values in order (little-endian, the file's dtype): equal for equal
           tensors whatever the file format or layout, so two files can be compared by eye or diff

Options:
  --json      one JSON object instead of the table ({"format", "tensors": [{name, dtype, shape,
              bytes, crc32}], "others": {name: value}, "metadata": {...}})
  --values    also print the first values of each tensor
  -h, --help  this help

Examples:
  nabla-inspect resnet18.pth
  nabla-inspect model.safetensors --json | jq '.tensors[] | select(.dtype == "float16")'
  nabla-inspect checkpoint.pt        # model and optimizer tensors, epoch, loss, ...

Exit status: 0, 1 when the file cannot be read (the reason is printed), 2 on a usage mistake.
)";

std::string shape_str(const nabla::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.sizes()[d]);
  return s + "]";
}

std::string with_commas(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n < 1024) std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(n));
  else if (n < (1u << 20)) std::snprintf(buf, sizeof(buf), "%.1f KB", n / 1024.0);
  else if (n < (1u << 30)) std::snprintf(buf, sizeof(buf), "%.1f MB", n / 1048576.0);
  else std::snprintf(buf, sizeof(buf), "%.2f GB", n / 1073741824.0);
  return buf;
}

std::string first_values(const nabla::Tensor& t) {
  using namespace nabla;
  Tensor f = t.detach().to(kCPU).flatten();
  int64_t n = std::min<int64_t>(f.numel(), 6);
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    char buf[40];
    if (f.is_floating_point()) std::snprintf(buf, sizeof(buf), "%.6g", f[i].item<double>());
    else std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(f[i].item<int64_t>()));
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + (f.numel() > n ? ", ..." : "");
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false, values = false;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a == "--json") as_json = true;
    else if (a == "--values") values = true;
    else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "nabla-inspect: unknown option '%s' (try --help)\n", a.c_str());
      return 2;
    } else if (path.empty()) path = a;
    else {
      std::fprintf(stderr, "nabla-inspect: one file at a time (got '%s' and '%s')\n", path.c_str(), a.c_str());
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "nabla-inspect: no file given\nusage: nabla-inspect [--json] [--values] FILE (try --help)\n");
    return 2;
  }
  try {
    nabla_tools::TensorFile f = nabla_tools::read_tensor_file(path);
    uint64_t total_bytes = 0, total_numel = 0;
    struct Row {
      std::string name, dtype, shape, bytes, crc, values;
    };
    std::vector<Row> rows;
    nlohmann::ordered_json j;
    j["file"] = path;
    j["format"] = f.format;
    j["tensors"] = nlohmann::ordered_json::array();
    for (const auto& t : f.tensors) {
      std::vector<unsigned char> b = nabla_tools::file_bytes(t);
      char crc[16];
      std::snprintf(crc, sizeof(crc), "%08x", nabla::zip::crc32(b.data(), b.size()));
      total_bytes += b.size();
      total_numel += static_cast<uint64_t>(t.tensor.numel());
      rows.push_back({t.name.empty() ? "(array)" : t.name, t.dtype, shape_str(t.tensor), std::to_string(b.size()), crc,
                      values ? first_values(t.tensor) : ""});
      nlohmann::ordered_json e;
      e["name"] = t.name;
      e["dtype"] = t.dtype;
      e["shape"] = std::vector<int64_t>(t.tensor.sizes().begin(), t.tensor.sizes().end());
      e["bytes"] = b.size();
      e["crc32"] = crc;
      j["tensors"].push_back(e);
    }
    j["others"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : f.others) j["others"][k] = v;
    j["metadata"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : f.metadata) j["metadata"][k] = v;
    if (as_json) {
      std::printf("%s\n", j.dump(1).c_str());
      return 0;
    }
    std::printf("%s: %s, %zu tensor%s, %s elements, %s\n", path.c_str(), f.format.c_str(), f.tensors.size(),
                f.tensors.size() == 1 ? "" : "s", with_commas(total_numel).c_str(), human_bytes(total_bytes).c_str());
    size_t w[5] = {4, 5, 5, 5, 5};
    for (const Row& r : rows) {
      w[0] = std::max(w[0], r.name.size());
      w[1] = std::max(w[1], r.dtype.size());
      w[2] = std::max(w[2], r.shape.size());
      w[3] = std::max(w[3], r.bytes.size());
    }
    if (!rows.empty()) {
      std::printf("%-*s  %-*s  %-*s  %*s  %s\n", int(w[0]), "name", int(w[1]), "dtype", int(w[2]), "shape", int(w[3]),
                  "bytes", "crc32");
      for (const Row& r : rows) {
        std::printf("%-*s  %-*s  %-*s  %*s  %s", int(w[0]), r.name.c_str(), int(w[1]), r.dtype.c_str(), int(w[2]),
                    r.shape.c_str(), int(w[3]), r.bytes.c_str(), r.crc.c_str());
        if (values) std::printf("  %s", r.values.c_str());
        std::printf("\n");
      }
    }
    if (!f.others.empty()) {
      std::printf("other values:\n");
      for (const auto& [k, v] : f.others) std::printf("  %s = %s\n", k.empty() ? "(the file)" : k.c_str(), v.c_str());
    }
    if (!f.metadata.empty()) {
      std::printf("metadata:\n");
      for (const auto& [k, v] : f.metadata) std::printf("  %s = %s\n", k.c_str(), v.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nabla-inspect: error: %s\n", e.what());
    return 1;
  }
}
