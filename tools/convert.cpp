// nabla-convert: converts weights between PyTorch's .pt and safetensors (and from NumPy). See --help.
#include <cstdio>
#include <string>

#include "tensor_files.h"

namespace {

const char* kHelp = R"(usage: nabla-convert IN OUT

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
  PyTorch -> PyTorch       the whole value as it was (also from the legacy format to the zip one)
The output is written atomically (a temporary file, then renamed). Nothing in the input is
executed: PyTorch files are read by nabla's restricted unpickler.

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
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "nabla-convert: unknown option '%s' (try --help)\n", a.c_str());
      return 2;
    }
    files.push_back(a);
  }
  if (files.size() != 2) {
    std::fprintf(stderr, "nabla-convert: expected IN and OUT, got %zu file name%s\nusage: nabla-convert IN OUT (try --help)\n",
                 files.size(), files.size() == 1 ? "" : "s");
    return 2;
  }
  const std::string &in = files[0], &out = files[1];
  if (!nabla_tools::is_torch_name(out) && !nabla_tools::is_safetensors_name(out)) {
    std::fprintf(stderr, "nabla-convert: cannot tell the format of '%s' from its extension (use .pt, .pth, .bin, .ckpt or .safetensors)\n",
                 out.c_str());
    return 2;
  }
  try {
    nabla_tools::TensorFile f = nabla_tools::read_tensor_file(in);
    for (const std::string& note : nabla_tools::write_tensor_file(out, f))
      std::fprintf(stderr, "nabla-convert: note: %s\n", note.c_str());
    std::printf("%s -> %s: %zu tensor%s\n", in.c_str(), out.c_str(), f.tensors.size(), f.tensors.size() == 1 ? "" : "s");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nabla-convert: error: %s\n", e.what());
    return 1;
  }
}
