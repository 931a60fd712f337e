#include "tools/tensor_files.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "io/zip.h"

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

uint64_t file_size_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string limit_hint(const Limits& limits) {
  return limits.max_bytes ? " (set by --max-mb)" : " (--max-mb raises it)";
}

TensorFile read_torch(const std::string& path, const Limits& limits) {
  TensorFile f;
  f.is_torch = true;
  f.file_size = file_size_of(path);
  unsigned char head[2] = {};
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(head), 2);
  f.format =
      head[0] == 'P' && head[1] == 'K' ? "PyTorch (torch.save zip archive)" : "PyTorch (legacy torch.save format)";
  torch_io::LoadOptions options;
  options.max_value_bytes = limits.values(f.file_size);
  try {
    f.torch = torch_io::load(path, options);
  } catch (const IOError& e) {
    if (std::strstr(e.what(), "LoadOptions::max_value_bytes")) throw IOError(e.what() + limit_hint(limits));
    throw;
  }
  std::vector<std::pair<std::string, torch_io::Value>> flat;
  try {
    flat = f.torch.flatten("", limits.names(f.file_size));
  } catch (const ValueError& e) { throw IOError("'" + path + "': " + e.what() + limit_hint(limits)); }
  for (auto& [name, v] : flat) {
    if (v.is_tensor())
      f.tensors.push_back({std::move(name), v.to_tensor(), torch_io::storage_type_name(v.storage_type())});
    else f.others.emplace_back(std::move(name), v.repr());
  }
  return f;
}

// ---- text -----------------------------------------------------------------------------------------

// The length of the valid UTF-8 sequence at s[i] (its code point in *cp), or 0.
size_t utf8_at(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || (c >= 0xe0 && c < 0xf0 && n != 3) || i + n > s.size()) return 0;
  uint32_t v = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3f);
  }
  // Overlong forms, surrogates and what lies past U+10FFFF are not UTF-8.
  if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)) || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

// Code points a terminal acts on or that reorder the text around them.
bool unsafe(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void append_hex(std::string& out, const char* fmt, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), fmt, v);
  out += buf;
}

// ---- checksums ------------------------------------------------------------------------------------

// A CRC-32 built from bytes and from the CRCs of blocks, in order.
class CrcBuilder {
 public:
  void bytes(const void* p, size_t n) {
    if (used_ + n > sizeof(buf_)) flush();
    if (n >= sizeof(buf_)) {
      crc_ = zip::crc32(p, n, crc_);
      return;
    }
    std::memcpy(buf_ + used_, p, n);
    used_ += n;
  }
  // A block of `len` bytes whose CRC is `crc`.
  void block(uint32_t crc, uint64_t len) {
    flush();
    crc_ = static_cast<uint32_t>(::crc32_combine(crc_, crc, static_cast<z_off_t>(len)));
  }
  uint32_t crc() {
    flush();
    return crc_;
  }

 private:
  void flush() {
    if (used_) crc_ = zip::crc32(buf_, used_, crc_);
    used_ = 0;
  }
  unsigned char buf_[1 << 16];
  size_t used_ = 0;
  uint32_t crc_ = 0;
};

// The CRC of a block (crc, len) repeated n times, by doubling.
uint32_t repeat_crc(uint32_t crc, uint64_t len, uint64_t n) {
  uint32_t out = 0;
  while (n) {
    if (n & 1) out = static_cast<uint32_t>(::crc32_combine(out, crc, static_cast<z_off_t>(len)));
    n >>= 1;
    if (n) {
      crc = static_cast<uint32_t>(::crc32_combine(crc, crc, static_cast<z_off_t>(len)));
      len *= 2;
    }
  }
  return out;
}

struct Walk {
  const unsigned char* base;  // the tensor's first element
  const Shape& sizes;
  const Shape& strides;
  size_t es;        // bytes of an element in memory
  int narrow;       // 0, or 1 / 2: int32 elements written as int8 / int16
  uint64_t out_es;  // bytes of an element in the file dtype

  void element(CrcBuilder& c, int64_t off) const {
    const unsigned char* p = base + off * static_cast<int64_t>(es);
    if (!narrow) return c.bytes(p, es);
    int32_t v;
    std::memcpy(&v, p, 4);
    unsigned char b[2] = {static_cast<unsigned char>(v & 0xff), static_cast<unsigned char>((v >> 8) & 0xff)};
    c.bytes(b, static_cast<size_t>(narrow));
  }
  // Elements from dim d on, at element offset `off`; returns their bytes.
  uint64_t run(CrcBuilder& c, size_t d, int64_t off) const {
    if (d == sizes.size()) {
      element(c, off);
      return out_es;
    }
    const int64_t n = sizes[d], st = strides[d];
    if (st == 0 && n > 1) {  // the same block n times
      CrcBuilder sub;
      const uint64_t len = run(sub, d + 1, off);
      c.block(repeat_crc(sub.crc(), len, static_cast<uint64_t>(n)), len * static_cast<uint64_t>(n));
      return len * static_cast<uint64_t>(n);
    }
    if (d + 1 == sizes.size() && st == 1 && !narrow) {  // a contiguous run
      c.bytes(base + off * static_cast<int64_t>(es), static_cast<size_t>(n) * es);
      return static_cast<uint64_t>(n) * out_es;
    }
    uint64_t total = 0;
    for (int64_t i = 0; i < n; ++i) total += run(c, d + 1, off + i * st);
    return total;
  }
};

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

uint64_t Limits::values(uint64_t) const { return max_bytes; }  // 0: the library's default
uint64_t Limits::names(uint64_t file_size) const {
  return max_bytes ? max_bytes : (uint64_t(64) << 20) + 16 * file_size;
}
uint64_t Limits::written(uint64_t file_size) const {
  return max_bytes ? max_bytes : (uint64_t(64) << 20) + 4 * file_size;
}

std::string terminal_safe(std::string_view s, bool escape_backslash) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_at(s, i, &cp);
    if (n == 0) {
      append_hex(out, "\\x%02x", static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (cp == '\\' && escape_backslash) out += "\\\\";
    else if (unsafe(cp)) append_hex(out, cp < 0x80 ? "\\x%02x" : "\\u%04x", cp);
    else out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

void append_json_string(std::string& out, std::string_view s, bool* replaced) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_at(s, i, &cp);
    if (n == 0) {
      out += "\\ufffd";
      if (replaced) *replaced = true;
      ++i;
      continue;
    }
    if (cp == '"') out += "\\\"";
    else if (cp == '\\') out += "\\\\";
    else if (cp == '\n') out += "\\n";
    else if (cp == '\t') out += "\\t";
    else if (unsafe(cp)) append_hex(out, "\\u%04x", cp);
    else out.append(s.substr(i, n));
    i += n;
  }
  out += '"';
}

uint64_t value_bytes(const NamedTensor& t) {
  const uint64_t es = t.dtype == "int8" ? 1 : t.dtype == "int16" ? 2 : t.tensor.element_size();
  return static_cast<uint64_t>(t.tensor.numel()) * es;
}

Checksum checksum(const NamedTensor& t) {
  Tensor c = t.tensor.detach().to(kCPU);
  Checksum out;
  out.bytes = value_bytes(t);
  if (c.numel() == 0) {
    out.computed = true;
    return out;
  }
  // The elements it reads: every dimension but those of stride 0, whose blocks are repeated.
  uint64_t reads = 1;
  for (int64_t d = 0; d < c.dim(); ++d)
    if (c.strides()[d] != 0)
      reads = reads > UINT64_MAX / static_cast<uint64_t>(c.sizes()[d]) ? UINT64_MAX
                                                                       : reads * static_cast<uint64_t>(c.sizes()[d]);
  const uint64_t stored = c.impl()->storage->nbytes / c.element_size();
  if (reads > 2 * stored + (1u << 20)) return out;  // an overlapping view (as_strided): not summed
  const int narrow = (t.dtype == "int8" || t.dtype == "int16") && c.dtype() == kInt32 ? (t.dtype == "int8" ? 1 : 2) : 0;
  // Dimensions of size 1 dropped, and neighbours that step as one merged: a contiguous tensor is
  // one run, summed in one call.
  Shape sizes, strides;
  for (int64_t d = 0; d < c.dim(); ++d) {
    if (c.sizes()[d] == 1) continue;
    if (!sizes.empty() && strides.back() == c.sizes()[d] * c.strides()[d]) {
      sizes.back() *= c.sizes()[d];
      strides.back() = c.strides()[d];
      continue;
    }
    sizes.push_back(c.sizes()[d]);
    strides.push_back(c.strides()[d]);
  }
  Walk w{static_cast<const unsigned char*>(c.data_ptr()),          sizes, strides, c.element_size(), narrow,
         narrow ? static_cast<uint64_t>(narrow) : c.element_size()};
  CrcBuilder b;
  w.run(b, 0, 0);
  out.crc = b.crc();
  out.computed = true;
  return out;
}

namespace {

// Where a view's elements lie in its storage: [first, last] element offsets (empty tensors: none).
uint64_t stored_elements(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.sizes()[d] - 1) * t.strides()[d];
  return static_cast<uint64_t>(last) + 1;
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Refuses a safetensors output whose values (each tensor's in order) would exceed the limit,
// naming the tensor that is expanded the most.
void check_written_bytes(const TensorFile& file, const Limits& limits) {
  uint64_t total = 0;
  const NamedTensor* worst = nullptr;
  uint64_t worst_ratio = 0;
  for (const NamedTensor& t : file.tensors) {
    const uint64_t bytes = value_bytes(t);
    total = total > UINT64_MAX - bytes ? UINT64_MAX : total + bytes;
    const uint64_t ratio = static_cast<uint64_t>(t.tensor.numel()) / std::max<uint64_t>(1, stored_elements(t.tensor));
    if (!worst || ratio > worst_ratio) worst = &t, worst_ratio = ratio;
  }
  const uint64_t limit = limits.written(file.file_size);
  if (total <= limit) return;
  std::string why;
  if (worst && worst_ratio > 1)
    why = "; '" + terminal_safe(worst->name).substr(0, 200) + "' is a view of shape " +
          shape_text(worst->tensor.sizes()) + " and strides " + shape_text(worst->tensor.strides()) + " over " +
          std::to_string(stored_elements(worst->tensor)) +
          (stored_elements(worst->tensor) == 1 ? " stored element" : " stored elements") +
          ", which safetensors holds in full (" + std::to_string(value_bytes(*worst)) +
          " bytes); a .pt output keeps views as they are";
  throw ValueError(
      "a safetensors file of these tensors would hold " + std::to_string(total) +
      " bytes of values, more than the limit of " + std::to_string(limit) +
      (limits.max_bytes ? " (set by --max-mb)" : " (64 MiB + 4 times the input's size; --max-mb raises it)") + why);
}

}  // namespace

TensorFile read_tensor_file(const std::string& path, const Limits& limits) {
  switch (sniff(path)) {
    case Kind::torch: return read_torch(path, limits);
    case Kind::safetensors: {
      TensorFile f;
      f.format = "safetensors";
      f.file_size = file_size_of(path);
      safetensors::Metadata md;
      std::vector<safetensors::TensorInfo> infos = safetensors::read_header(path, &md);
      safetensors::File st = safetensors::load_file(path);
      for (const auto& info : infos)
        f.tensors.push_back({info.name, st.tensors[info.name], safetensors_dtype(info.dtype)});
      f.metadata.assign(md.begin(), md.end());
      return f;
    }
    case Kind::npy: {
      TensorFile f;
      f.format = "NumPy .npy";
      f.file_size = file_size_of(path);
      Tensor t = load_npy(path);
      f.tensors.push_back({"", t, dtype_name(t.dtype())});
      return f;
    }
    case Kind::npz: {
      TensorFile f;
      zip::Source src(path);
      zip::Reader z(src);
      f.format = "NumPy .npz";
      f.file_size = src.size();
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

std::vector<std::string> write_tensor_file(const std::string& path, const TensorFile& file, const Limits& limits) {
  std::vector<std::string> notes;
  if (is_safetensors_name(path)) {
    check_written_bytes(file, limits);
    nn::StateDict sd;
    for (const NamedTensor& t : file.tensors) {
      NABLA_CHECK(ValueError, !t.name.empty(), "a tensor without a name cannot go into a safetensors file");
      bool bad = false;
      std::string ignored;
      append_json_string(ignored, t.name, &bad);
      NABLA_CHECK(ValueError, !bad, "the tensor name '", terminal_safe(t.name).substr(0, 200),
                  "' is not valid UTF-8, which safetensors names (JSON strings) must be; a .pt output keeps it");
      if (t.dtype == "int8" || t.dtype == "int16")
        notes.push_back("'" + t.name + "' is " + t.dtype + ": saved as I32 (nabla has no " + t.dtype + " dtype)");
      sd.insert(t.name, t.tensor);
    }
    safetensors::Metadata md(file.metadata.begin(), file.metadata.end());
    for (const auto& [name, repr] : file.others) {
      bool bad = false;
      std::string ignored;
      append_json_string(ignored, name, &bad);
      append_json_string(ignored, repr, &bad);
      NABLA_CHECK(ValueError, !bad, "the value '", terminal_safe(name).substr(0, 200),
                  "' (or its name) is not valid UTF-8, which safetensors metadata (JSON strings) must be; a .pt "
                  "output keeps it");
      md.emplace(name, repr);
    }
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

}  // namespace nabla_tools
