// nabla-inspect: lists the tensors of a checkpoint (PyTorch, safetensors, NumPy) with their dtype,
// shape, size and a checksum, and the other values a checkpoint holds. See --help.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/tensor_files.h"

namespace {

const char* kHelp = R"(usage: nabla-inspect [--json] [--values] [--max-mb N] FILE

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
           tensors whatever the file format or layout, so two files can be compared by eye or diff.
           Views are summed as they are, without copying: an expanded tensor (stride 0, as
           torch.zeros(1).expand(10**9) saves) costs nothing; "-" for a view that overlaps itself
           otherwise (as_strided) and would read more than twice its storage

Names and values are printed with terminal control characters, invalid UTF-8 and bidirectional
overrides escaped (\x1b, \xff, \u202e), and a backslash in a name as \\.

Options:
  --json        one JSON object instead of the table ({"format", "tensors": [{name, dtype, shape,
                bytes, crc32}], "others": {name: value}, "metadata": {...}}); text that is not
                valid UTF-8 shows its invalid bytes as U+FFFD (a note on stderr says so), crc32 is
                null where the table shows "-"
  --values      also print the first values of each tensor
  --max-mb N    what a file's structure may take beyond its tensors' data: N MB for its pickled
                values and for its dotted names (by default 64 MB + twice the file's size for the
                values, 64 MB + 16 times for the names: a hostile file of shared subtrees can name
                far more than it holds)
  -h, --help    this help

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
  // The first elements in order, without flattening (which would copy an expanded view whole).
  Tensor c = t.detach().to(kCPU);
  const int64_t n = std::min<int64_t>(c.numel(), 6);
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> index(static_cast<size_t>(c.dim()));
    for (int64_t d = c.dim(), rest = i; d-- > 0;) {
      index[static_cast<size_t>(d)] = rest % c.sizes()[d];
      rest /= c.sizes()[d];
    }
    Tensor x = c;
    for (int64_t d = 0; d < c.dim(); ++d) x = x.select(0, index[static_cast<size_t>(d)]);
    char buf[40];
    if (x.is_floating_point()) std::snprintf(buf, sizeof(buf), "%.6g", x.item<double>());
    else std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(x.item<int64_t>()));
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + (c.numel() > n ? ", ..." : "");
}

// Writes `s` to stdout.
void put(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false, values = false;
  nabla_tools::Limits limits;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a == "--json") as_json = true;
    else if (a == "--values") values = true;
    else if (a == "--max-mb") {
      char* end = nullptr;
      const double mb = i + 1 < argc ? std::strtod(argv[i + 1], &end) : 0;
      if (i + 1 >= argc || *end != '\0' || !(mb >= 1 && mb <= 1e9)) {
        std::fprintf(stderr, "nabla-inspect: --max-mb expects a number of MB from 1 to 1e9 (try --help)\n");
        return 2;
      }
      limits.max_bytes = static_cast<uint64_t>(mb * 1048576.0);
      ++i;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "nabla-inspect: unknown option '%s' (try --help)\n", nabla_tools::terminal_safe(a).c_str());
      return 2;
    } else if (path.empty()) path = a;
    else {
      std::fprintf(stderr, "nabla-inspect: one file at a time (got '%s' and '%s')\n",
                   nabla_tools::terminal_safe(path).c_str(), nabla_tools::terminal_safe(a).c_str());
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "nabla-inspect: no file given\nusage: nabla-inspect [--json] [--values] FILE (try --help)\n");
    return 2;
  }
  using nabla_tools::terminal_safe;
  try {
    nabla_tools::TensorFile f = nabla_tools::read_tensor_file(path, limits);
    uint64_t total_bytes = 0, total_numel = 0;
    std::vector<nabla_tools::Checksum> sums;
    sums.reserve(f.tensors.size());
    for (const auto& t : f.tensors) {
      sums.push_back(nabla_tools::checksum(t));
      total_bytes += sums.back().bytes;
      total_numel += static_cast<uint64_t>(t.tensor.numel());
    }
    auto crc_text = [&](size_t i) {
      if (!sums[i].computed) return std::string("-");
      char crc[16];
      std::snprintf(crc, sizeof(crc), "%08x", sums[i].crc);
      return std::string(crc);
    };
    if (as_json) {
      // Written as it goes (a file may hold a million values; an ordered JSON object inserts in
      // linear time, which made 100,000 of them take seconds).
      bool replaced = false;
      std::string out = "{\n \"file\": ";
      nabla_tools::append_json_string(out, path, &replaced);
      out += ",\n \"format\": ";
      nabla_tools::append_json_string(out, f.format, &replaced);
      out += ",\n \"tensors\": [";
      for (size_t i = 0; i < f.tensors.size(); ++i) {
        const auto& t = f.tensors[i];
        out += i ? ",\n  {\"name\": " : "\n  {\"name\": ";
        nabla_tools::append_json_string(out, t.name, &replaced);
        out += ", \"dtype\": ";
        nabla_tools::append_json_string(out, t.dtype, &replaced);
        out +=
            ", \"shape\": " + shape_str(t.tensor) + ", \"bytes\": " + std::to_string(sums[i].bytes) + ", \"crc32\": ";
        out += sums[i].computed ? "\"" + crc_text(i) + "\"" : "null";
        out += "}";
        if (out.size() > (1 << 20)) put(out), out.clear();
      }
      out += f.tensors.empty() ? "],\n \"others\": {" : "\n ],\n \"others\": {";
      auto object = [&](const std::vector<std::pair<std::string, std::string>>& kv) {
        for (size_t i = 0; i < kv.size(); ++i) {
          out += i ? ",\n  " : "\n  ";
          nabla_tools::append_json_string(out, kv[i].first, &replaced);
          out += ": ";
          nabla_tools::append_json_string(out, kv[i].second, &replaced);
          if (out.size() > (1 << 20)) put(out), out.clear();
        }
        out += kv.empty() ? "}" : "\n }";
      };
      object(f.others);
      out += ",\n \"metadata\": {";
      object(f.metadata);
      out += "\n}\n";
      put(out);
      if (replaced)
        std::fprintf(stderr,
                     "nabla-inspect: note: some names or values are not valid UTF-8; the JSON shows their invalid "
                     "bytes as U+FFFD\n");
      return 0;
    }
    std::printf("%s: %s, %zu tensor%s, %s elements, %s\n", terminal_safe(path).c_str(), f.format.c_str(),
                f.tensors.size(), f.tensors.size() == 1 ? "" : "s", with_commas(total_numel).c_str(),
                human_bytes(total_bytes).c_str());
    std::vector<std::string> names;
    names.reserve(f.tensors.size());
    size_t w[4] = {4, 5, 5, 5};
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      const auto& t = f.tensors[i];
      names.push_back(t.name.empty() ? "(array)" : terminal_safe(t.name));
      w[0] = std::max(w[0], names.back().size());
      w[1] = std::max(w[1], t.dtype.size());
      w[2] = std::max(w[2], shape_str(t.tensor).size());
      w[3] = std::max(w[3], std::to_string(sums[i].bytes).size());
    }
    if (!f.tensors.empty()) {
      std::printf("%-*s  %-*s  %-*s  %*s  %s\n", int(w[0]), "name", int(w[1]), "dtype", int(w[2]), "shape", int(w[3]),
                  "bytes", "crc32");
      for (size_t i = 0; i < f.tensors.size(); ++i) {
        const auto& t = f.tensors[i];
        std::printf("%-*s  %-*s  %-*s  %*s  %s", int(w[0]), names[i].c_str(), int(w[1]), terminal_safe(t.dtype).c_str(),
                    int(w[2]), shape_str(t.tensor).c_str(), int(w[3]), std::to_string(sums[i].bytes).c_str(),
                    crc_text(i).c_str());
        if (values) std::printf("  %s", first_values(t.tensor).c_str());
        std::printf("\n");
      }
    }
    if (!f.others.empty()) {
      std::printf("other values:\n");
      for (const auto& [k, v] : f.others)
        std::printf("  %s = %s\n", k.empty() ? "(the file)" : terminal_safe(k).c_str(),
                    terminal_safe(v, false).c_str());
    }
    if (!f.metadata.empty()) {
      std::printf("metadata:\n");
      for (const auto& [k, v] : f.metadata)
        std::printf("  %s = %s\n", terminal_safe(k).c_str(), terminal_safe(v, false).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nabla-inspect: error: %s\n", terminal_safe(e.what(), false).c_str());
    return 1;
  }
}
