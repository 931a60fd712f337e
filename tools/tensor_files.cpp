#include "tensor_files.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/zip.h"

namespace nabla_tools {

using namespace nabla;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string safetensors_dtype(const std::string& code) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"F64", "float64"}, {"F32", "float32"}, {"F16", "float16"}, {"BF16", "bfloat16"}, {"I64", "int64"},
      {"I32", "int32"},   {"I16", "int16"},   {"I8", "int8"},     {"U8", "uint8"},      {"BOOL", "bool"}};
  for (const auto& [c, n] : kNames)
    if (code == c) return n;
  return code;
}

enum class Kind { torch, safetensors, npy, npz };

Kind sniff(const std::string& path) {
  const std::string l = lower(path);
  if (ends_with(l, ".safetensors")) return Kind::safetensors;
  if (ends_with(l, ".npy")) return Kind::npy;
  if (ends_with(l, ".npz")) return Kind::npz;
  if (is_torch_name(l)) return Kind::torch;
  // Another name: the first bytes decide.
  unsigned char head[16] = {};
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(head), sizeof(head));
  if (std::memcmp(head, "\x93NUMPY", 6) == 0) return Kind::npy;
  if (head[8] == '{') return Kind::safetensors;
  if (head[0] == 'P' && head[1] == 'K') {
    zip::Source src(path);
    zip::Reader z(src);
    if (!z.entries().empty() && ends_with(z.entries()[0].name, ".npy")) return Kind::npz;
  }
  return Kind::torch;
}

TensorFile read_torch(const std::string& path) {
  TensorFile f;
  f.is_torch = true;
  unsigned char head[2] = {};
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(head), 2);
  f.format = head[0] == 'P' && head[1] == 'K' ? "PyTorch (torch.save zip archive)" : "PyTorch (legacy torch.save format)";
  f.torch = torch_io::load(path);
  for (auto& [name, v] : f.torch.flatten()) {
    if (v.is_tensor()) f.tensors.push_back({name, v.to_tensor(), torch_io::storage_type_name(v.storage_type())});
    else f.others.emplace_back(name, v.repr());
  }
  return f;
}

// One .npy member of an .npz, through a private temporary file (load_npy reads files).
Tensor npz_member(const zip::Reader& z, const zip::Entry& e) {
  std::vector<char> bytes = z.read(e, uint64_t(1) << 40);
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/nabla-npz-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw IOError("cannot create a temporary file in " + tmpl.substr(0, tmpl.rfind('/')));
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  try {
    if (!ok) throw IOError("cannot write the temporary file " + tmpl);
    Tensor t = load_npy(tmpl);
    ::unlink(tmpl.c_str());
    return t;
  } catch (const Error& err) {
    ::unlink(tmpl.c_str());
    throw IOError(z.source().what() + ": member '" + e.name + "': " + err.what());
  }
}

}  // namespace

bool is_torch_name(const std::string& path) {
  const std::string l = lower(path);
  for (const char* ext : {".pt", ".pth", ".bin", ".ckpt", ".tar"})
    if (ends_with(l, ext)) return true;
  return false;
}

bool is_safetensors_name(const std::string& path) { return ends_with(lower(path), ".safetensors"); }

TensorFile read_tensor_file(const std::string& path) {
  switch (sniff(path)) {
    case Kind::torch: return read_torch(path);
    case Kind::safetensors: {
      TensorFile f;
      f.format = "safetensors";
      safetensors::Metadata md;
      std::vector<safetensors::TensorInfo> infos = safetensors::read_header(path, &md);
      safetensors::File st = safetensors::load_file(path);
      for (const auto& info : infos) f.tensors.push_back({info.name, st.tensors[info.name], safetensors_dtype(info.dtype)});
      f.metadata.assign(md.begin(), md.end());
      return f;
    }
    case Kind::npy: {
      TensorFile f;
      f.format = "NumPy .npy";
      Tensor t = load_npy(path);
      f.tensors.push_back({"", t, dtype_name(t.dtype())});
      return f;
    }
    case Kind::npz: {
      TensorFile f;
      zip::Source src(path);
      zip::Reader z(src);
      f.format = "NumPy .npz";
      for (const zip::Entry& e : z.entries()) {
        Tensor t = npz_member(z, e);
        std::string name = ends_with(e.name, ".npy") ? e.name.substr(0, e.name.size() - 4) : e.name;
        f.tensors.push_back({name, t, dtype_name(t.dtype())});
      }
      return f;
    }
  }
  return {};
}

std::vector<std::string> write_tensor_file(const std::string& path, const TensorFile& file) {
  std::vector<std::string> notes;
  if (is_safetensors_name(path)) {
    nn::StateDict sd;
    for (const NamedTensor& t : file.tensors) {
      check<ValueError>(!t.name.empty(), "a tensor without a name cannot go into a safetensors file");
      if (t.dtype == "int8" || t.dtype == "int16")
        notes.push_back("'" + t.name + "' is " + t.dtype + ": saved as I32 (nabla has no " + t.dtype + " dtype)");
      sd.insert(t.name, t.tensor);
    }
    safetensors::Metadata md(file.metadata.begin(), file.metadata.end());
    for (const auto& [name, repr] : file.others) md.emplace(name, repr);
    if (!file.others.empty())
      notes.push_back(std::to_string(file.others.size()) + " non-tensor values kept as metadata strings");
    if (!md.count("format")) md["format"] = "pt";  // what Hugging Face's converters write
    safetensors::save_file(sd, path, md);
    return notes;
  }
  if (file.is_torch) {
    torch_io::save(path, file.torch);
    return notes;
  }
  // A state dict, OrderedDict as model.state_dict() is; a .npy's single tensor alone.
  if (file.tensors.size() == 1 && file.tensors[0].name.empty()) {
    torch_io::save(path, torch_io::Value(file.tensors[0].tensor));
    return notes;
  }
  torch_io::Value sd = torch_io::Value::dict({}, true);
  for (const NamedTensor& t : file.tensors) sd.set(t.name, torch_io::Value(t.tensor));
  for (const auto& [k, v] : file.metadata)
    if (k != "format") {  // "format": "pt" is what converters mark safetensors files with
      notes.push_back("the safetensors metadata is not kept (a .pt state dict has none)");
      break;
    }
  torch_io::save(path, sd);
  return notes;
}

std::vector<unsigned char> file_bytes(const NamedTensor& t) {
  Tensor c = t.tensor.detach().to(kCPU).contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  if ((t.dtype == "int8" || t.dtype == "int16") && c.dtype() == kInt32) {
    std::vector<unsigned char> out;
    const int32_t* v = c.data_ptr<int32_t>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      out.push_back(static_cast<unsigned char>(v[i] & 0xff));
      if (t.dtype == "int16") out.push_back(static_cast<unsigned char>((v[i] >> 8) & 0xff));
    }
    return out;
  }
  return std::vector<unsigned char>(p, p + c.nbytes());
}

}  // namespace nabla_tools
