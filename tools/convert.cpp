// nabla-convert: converts weights between PyTorch's .pt and safetensors (and from NumPy). See --help.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/tensor_files.h"

namespace {

const char* kHelp = R"(usage: nabla-convert [--max-mb N] IN OUT

Converts a file of weights from one format to another; the format of each file comes from its
extension:
  .pt .pth .bin .ckpt   PyTorch (torch.save; reads the zip and the legacy formats, writes zip)
  .safetensors          Hugging Face safetensors
  .npy .npz             NumPy (read only)

Tensor values are copied bit for bit; names are the dotted paths model.load_state_dict expects
("fc1.weight"; in a nested checkpoint "model.fc1.weight"). What a format cannot hold is reported:
  PyTorch -> safetensors   tensors that share memory are written as separate copies; numbers and
                           strings of a checkpoint (epoch, loss, ...) become metadata strings; int8
                           and int16 tensors become I32 (nabla has neither dtype)
  safetensors -> PyTorch   an OrderedDict state dict, as model.state_dict() in PyTorch; the
                           metadata is dropped
  PyTorch -> PyTorch       the whole value as it was (also from the legacy format to the zip one),
                           views as views (an expanded tensor stays the few values it holds)
  to safetensors           each tensor's values in order: a view is written out in full, up to
                           64 MB + 4 times the input's size in all (more is refused before
                           anything is written: torch.zeros(1).expand(10**9) would be 4 GB); names
                           and values must be valid UTF-8 (JSON strings)
The output is written atomically (a temporary file, then renamed). Nothing in the input is
executed: PyTorch files are read by nabla's restricted unpickler.

Options:
  --max-mb N  what the input's structure may take beyond its tensors' data (its pickled values,
              its dotted names: by default 64 MB + twice its size, and 64 MB + 16 times) and what
              a safetensors output may hold: N MB each

Examples:
  nabla-convert pytorch_model.bin model.safetensors
  nabla-convert model.safetensors model.pt      # then in Python: torch.load("model.pt", weights_only=True)
  nabla-convert old_legacy.pth new.pth          # re-save a pre-1.6 file in the zip format
  nabla-inspect model.pt && nabla-inspect model.safetensors   # the crc32 columns match

Exit status: 0, 1 when a file cannot be read or written (the reason is printed), 2 on a usage mistake.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  nabla_tools::Limits limits;
  using nabla_tools::terminal_safe;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a == "--max-mb") {
      char* end = nullptr;
      const double mb = i + 1 < argc ? std::strtod(argv[i + 1], &end) : 0;
      if (i + 1 >= argc || *end != '\0' || !(mb >= 1 && mb <= 1e9)) {
        std::fprintf(stderr, "nabla-convert: --max-mb expects a number of MB from 1 to 1e9 (try --help)\n");
        return 2;
      }
      limits.max_bytes = static_cast<uint64_t>(mb * 1048576.0);
      ++i;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "nabla-convert: unknown option '%s' (try --help)\n", terminal_safe(a).c_str());
      return 2;
    }
    files.push_back(a);
  }
  if (files.size() != 2) {
    std::fprintf(stderr,
                 "nabla-convert: expected IN and OUT, got %zu file name%s\nusage: nabla-convert IN OUT (try --help)\n",
                 files.size(), files.size() == 1 ? "" : "s");
    return 2;
  }
  const std::string &in = files[0], &out = files[1];
  if (!nabla_tools::is_torch_name(out) && !nabla_tools::is_safetensors_name(out)) {
    std::fprintf(stderr,
                 "nabla-convert: cannot tell the format of '%s' from its extension (use .pt, .pth, .bin, .ckpt or "
                 ".safetensors)\n",
                 terminal_safe(out).c_str());
    return 2;
  }
  try {
    nabla_tools::TensorFile f = nabla_tools::read_tensor_file(in, limits);
    for (const std::string& note : nabla_tools::write_tensor_file(out, f, limits))
      std::fprintf(stderr, "nabla-convert: note: %s\n", terminal_safe(note, false).c_str());
    std::printf("%s -> %s: %zu tensor%s\n", terminal_safe(in).c_str(), terminal_safe(out).c_str(), f.tensors.size(),
                f.tensors.size() == 1 ? "" : "s");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nabla-convert: error: %s\n", terminal_safe(e.what(), false).c_str());
    return 1;
  }
}
