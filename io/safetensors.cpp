#include "io/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/graph.h"
#include "core/ops.h"
#include "io/file.h"

namespace nabla::safetensors {

namespace {

using json = nlohmann::json;

struct DTypeInfo {
  const char* name;
  size_t size;
  std::optional<DType> dtype;  // nullopt: valid in the format, not supported by nabla
};

// Every dtype of the format (safetensors' Dtype enum); nabla loads those it has.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1, DType::boolean},  {"U8", 1, DType::u8},     {"I8", 1, std::nullopt},  {"F8_E5M2", 1, std::nullopt},
    {"F8_E4M3", 1, std::nullopt}, {"I16", 2, std::nullopt}, {"U16", 2, std::nullopt}, {"F16", 2, DType::f16},
    {"BF16", 2, DType::bf16},     {"I32", 4, DType::i32},   {"U32", 4, std::nullopt}, {"F32", 4, DType::f32},
    {"F64", 8, DType::f64},       {"I64", 8, DType::i64},   {"U64", 8, std::nullopt}, {"C64", 8, DType::c64},
};

const DTypeInfo* find_dtype(const std::string& s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

const char* format_name(DType d) {
  for (const auto& info : kDTypes)
    if (info.dtype && *info.dtype == d) return info.name;
  throw DTypeError(internal::str("safetensors: cannot save dtype ", d));
}

using io::quote_name;

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw IOError("safetensors: " + what + ": " + msg);
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void write_u64_le(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

// Reverses the bytes of each element (only on big-endian hosts: the format is little-endian).
void to_from_little_endian(void* data, size_t nbytes, size_t elem) {
  if constexpr (std::endian::native == std::endian::little) return;
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i + elem <= nbytes; i += elem) std::reverse(p + i, p + i + elem);
}

// A safetensors header nests three levels deep ({"name": {"shape": [...]}}); anything much deeper
// is hostile. The JSON library parses iteratively, but dump() and other recursive code would
// overflow the stack on a header of a few hundred KB of '[', so the depth is bounded
// before the parser sees the text.
constexpr int kMaxJsonDepth = 64;

// Throws unless every bracket in the JSON text nests at most kMaxJsonDepth deep (strings skipped).
void check_nesting(const char* hdr, uint64_t n, const std::string& what) {
  int depth = 0;
  bool in_string = false;
  for (uint64_t i = 0; i < n; ++i) {
    char c = hdr[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        fail(what, "invalid header: JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep at byte " +
                       std::to_string(8 + i) + " (a safetensors header needs 3)");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// A JSON value from the file, for an error message: numbers, booleans and null as they are,
// strings quoted and cut short, arrays and objects only named (never dumped whole: they are
// untrusted and may be huge or deeply nested).
std::string brief(const json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " values";
  if (v.is_object()) return "an object";
  if (v.is_string()) return quote_name(v.get_ref<const std::string&>());
  return v.dump();
}

// Validates the header as the reference implementation does; returns the entries sorted by offset.
std::vector<TensorInfo> parse_header(const char* hdr, uint64_t n, uint64_t data_len, const std::string& what,
                                     Metadata* metadata) {
  if (n == 0 || hdr[0] != '{') fail(what, "invalid header: it must be a JSON object starting with '{'");
  check_nesting(hdr, n, what);
  // Parse with a callback that rejects duplicate keys in any object (serde does the same).
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto cb = [&](int, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::object_start: keys.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default: break;
    }
    return true;
  };
  json h;
  try {
    h = json::parse(hdr, hdr + n, cb);
  } catch (const json::exception& e) { fail(what, std::string("invalid header: not valid JSON (") + e.what() + ")"); }
  if (!duplicate.empty()) fail(what, "invalid header: duplicate name " + quote_name(duplicate));
  if (!h.is_object()) fail(what, "invalid header: it must be a JSON object");

  std::vector<TensorInfo> infos;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail(what, "invalid header: __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail(what, "invalid header: __metadata__ value of " + quote_name(m.key()) + " is not a string");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& msg) {
      fail(what, "invalid header entry for tensor " + quote_name(name) + ": " + msg);
    };
    if (!v.is_object()) bad("expected an object with dtype, shape and data_offsets");
    if (!v.contains("dtype") || !v["dtype"].is_string()) bad("missing or non-string dtype");
    if (!v.contains("shape") || !v["shape"].is_array()) bad("missing or non-array shape");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      bad("data_offsets must be an array [begin, end]");
    TensorInfo info;
    info.name = name;
    info.dtype = v["dtype"].get<std::string>();
    const DTypeInfo* dt = find_dtype(info.dtype);
    if (!dt) bad("unknown dtype " + quote_name(info.dtype));
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned()) bad("shape entries must be non-negative integers, got " + brief(d));
      uint64_t s = d.get<uint64_t>();
      if (s > static_cast<uint64_t>(INT64_MAX)) bad("shape entry " + d.dump() + " is too large");  // d is a number here
      info.shape.push_back(static_cast<int64_t>(s));
    }
    const json& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad("data_offsets must be non-negative integers, got [" + brief(off[0]) + ", " + brief(off[1]) + "]");
    info.begin = off[0].get<uint64_t>();
    info.end = off[1].get<uint64_t>();
    if (info.end < info.begin)
      bad("invalid offsets: end " + std::to_string(info.end) + " < begin " + std::to_string(info.begin));
    // numel * element size, with overflow checks.
    uint64_t bytes = dt->size;
    for (int64_t s : info.shape)
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(s), &bytes)) bad("shape overflows the size of a tensor");
    if (bytes != info.end - info.begin)
      bad("its dtype " + info.dtype + " and shape need " + std::to_string(bytes) + " bytes but data_offsets [" +
          std::to_string(info.begin) + ", " + std::to_string(info.end) + "] hold " +
          std::to_string(info.end - info.begin));
    infos.push_back(std::move(info));
  }
  std::stable_sort(infos.begin(), infos.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const TensorInfo& t : infos) {
    if (t.begin != pos)
      fail(what, "invalid offsets for tensor " + quote_name(t.name) + ": it starts at byte " + std::to_string(t.begin) +
                     " but the previous tensor ends at " + std::to_string(pos) +
                     (t.begin > pos ? " (a gap)" : " (an overlap)"));
    pos = t.end;
  }
  if (pos != data_len)
    fail(what, "the tensors cover " + std::to_string(pos) + " bytes but the file holds " + std::to_string(data_len) +
                   " bytes after the header (truncated or padded file)");
  return infos;
}

Tensor make_tensor(const TensorInfo& info, const std::string& what) {
  const DTypeInfo* dt = find_dtype(info.dtype);
  if (!dt->dtype)
    fail(what, "tensor " + quote_name(info.name) + " has dtype " + info.dtype + ", which nabla does not support");
  return empty(info.shape, dtype(*dt->dtype));
}

void finish_tensor(Tensor& t) {
  to_from_little_endian(t.data_ptr(), t.nbytes(), t.element_size());
  if (t.dtype() == DType::boolean) {  // any non-zero byte is true; a bool must hold 0 or 1
    auto* p = static_cast<unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = p[i] != 0;
  }
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

struct Prepared {
  std::string header;                                   // padded
  std::vector<std::pair<std::string, Tensor>> tensors;  // host, contiguous, in data order
};

Prepared prepare(const nn::StateDict& tensors, const Metadata& metadata) {
  autograd::NoGradGuard ng;
  Prepared p;
  for (const auto& [name, t] : tensors) {
    NABLA_CHECK(ValueError, name != "__metadata__", "safetensors: '__metadata__' cannot be a tensor name");
    NABLA_CHECK(ValueError, t.defined(), "safetensors: tensor '", name, "' is undefined");
    format_name(t.dtype());
    p.tensors.emplace_back(name, t.detach().to(kCPU).contiguous());
  }
  // Larger elements first, so every tensor starts at a multiple of its element size.
  std::stable_sort(p.tensors.begin(), p.tensors.end(),
                   [](const auto& a, const auto& b) { return a.second.element_size() > b.second.element_size(); });
  // The header as nlohmann's dump() writes it, built in one pass (an ordered_json object finds
  // each key it inserts by a linear search: 100,000 metadata entries took 12 s).
  auto quoted = [](const std::string& s, const std::string& what) {
    try {
      return json(s).dump();
    } catch (const json::exception&) {
      std::string shown;
      for (unsigned char c : s.substr(0, 200)) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), c < 0x20 || c >= 0x7f ? "\\x%02x" : "%c", c);
        shown += buf;
      }
      throw ValueError(internal::str("safetensors: the ", what, " '", shown, s.size() > 200 ? "...'" : "'",
                                     " is not valid UTF-8, which the header's JSON strings must be"));
    }
  };
  std::string& h = p.header;
  h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      h += (first ? "" : ",") + quoted(k, "metadata key") + ":" +
           quoted(v, "value of metadata key " + quoted(k, "metadata key"));
      first = false;
    }
    h += "}";
  }
  uint64_t pos = 0;
  for (const auto& [name, t] : p.tensors) {
    if (h.size() > 1) h += ",";
    h += quoted(name, "tensor name") + ":{\"dtype\":\"" + format_name(t.dtype()) + "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) h += (d ? "," : "") + std::to_string(t.sizes()[d]);
    h += "],\"data_offsets\":[" + std::to_string(pos) + "," + std::to_string(pos + t.nbytes()) + "]}";
    pos += t.nbytes();
  }
  h += "}";
  p.header.append((8 - p.header.size() % 8) % 8, ' ');
  NABLA_CHECK(ValueError, p.header.size() <= kMaxHeaderSize, "safetensors: the header would be ", p.header.size(),
              " bytes, over the format's limit of ", kMaxHeaderSize);
  return p;
}

// Bytes of a host tensor in little-endian order (a copy only on big-endian hosts).
const void* le_bytes(const Tensor& t, std::vector<char>& scratch) {
  if constexpr (std::endian::native == std::endian::little) return t.data_ptr();
  scratch.assign(static_cast<const char*>(t.data_ptr()), static_cast<const char*>(t.data_ptr()) + t.nbytes());
  to_from_little_endian(scratch.data(), scratch.size(), t.element_size());
  return scratch.data();
}

}  // namespace

std::vector<char> serialize(const nn::StateDict& tensors, const Metadata& metadata) {
  Prepared p = prepare(tensors, metadata);
  size_t total = 8 + p.header.size();
  for (const auto& [n, t] : p.tensors) total += t.nbytes();
  std::vector<char> out(total);
  write_u64_le(reinterpret_cast<unsigned char*>(out.data()), p.header.size());
  std::memcpy(out.data() + 8, p.header.data(), p.header.size());
  size_t pos = 8 + p.header.size();
  std::vector<char> scratch;
  for (const auto& [n, t] : p.tensors) {
    if (t.nbytes()) std::memcpy(out.data() + pos, le_bytes(t, scratch), t.nbytes());
    pos += t.nbytes();
  }
  return out;
}

void save_file(const nn::StateDict& tensors, const std::string& path, const Metadata& metadata) {
  Prepared p = prepare(tensors, metadata);
  io::atomic_write(path, [&](std::FILE* f) {
    unsigned char len[8];
    write_u64_le(len, p.header.size());
    io::write_all(f, len, 8, path);
    io::write_all(f, p.header.data(), p.header.size(), path);
    std::vector<char> scratch;
    for (const auto& [n, t] : p.tensors) io::write_all(f, le_bytes(t, scratch), t.nbytes(), path);
  });
}

File deserialize(const char* data, size_t size, const std::string& what) {
  if (size < 8) fail(what, "file too small for a header length (" + std::to_string(size) + " bytes, need at least 8)");
  uint64_t n = read_u64_le(reinterpret_cast<const unsigned char*>(data));
  if (n > kMaxHeaderSize)
    fail(what, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderSize));
  if (n > size - 8)
    fail(what, "header length " + std::to_string(n) + " is larger than the rest of the file (" +
                   std::to_string(size - 8) + " bytes)");
  File out;
  std::vector<TensorInfo> infos = parse_header(data + 8, n, size - 8 - n, what, &out.metadata);
  const char* base = data + 8 + n;
  for (const TensorInfo& info : infos) {
    Tensor t = make_tensor(info, what);
    if (t.nbytes()) std::memcpy(t.data_ptr(), base + info.begin, t.nbytes());
    finish_tensor(t);
    out.tensors.insert(info.name, t);
  }
  return out;
}

namespace {
// Opens `path` and reads and validates its header; leaves the stream after the header.
std::vector<TensorInfo> open_and_parse(const std::string& path, std::unique_ptr<std::FILE, FileCloser>& f,
                                       uint64_t& data_start, Metadata* metadata) {
  std::string what = "'" + path + "'";
  f.reset(std::fopen(path.c_str(), "rb"));
  if (!f) throw IOError("safetensors: cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) fail(what, "not a regular file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) fail(what, "file too small for a header length (" + std::to_string(size) + " bytes, need at least 8)");
  unsigned char len[8];
  if (std::fread(len, 1, 8, f.get()) != 8) fail(what, "cannot read the header length");
  uint64_t n = read_u64_le(len);
  if (n > kMaxHeaderSize)
    fail(what, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderSize));
  if (n > size - 8)
    fail(what, "header length " + std::to_string(n) + " is larger than the rest of the file (" +
                   std::to_string(size - 8) + " bytes)");
  std::string hdr(static_cast<size_t>(n), '\0');
  if (n && std::fread(hdr.data(), 1, hdr.size(), f.get()) != hdr.size()) fail(what, "cannot read the header");
  data_start = 8 + n;
  return parse_header(hdr.data(), n, size - 8 - n, what, metadata);
}
}  // namespace

std::vector<TensorInfo> read_header(const std::string& path, Metadata* metadata) {
  std::unique_ptr<std::FILE, FileCloser> f;
  uint64_t start = 0;
  return open_and_parse(path, f, start, metadata);
}

File load_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f;
  uint64_t start = 0;
  File out;
  std::vector<TensorInfo> infos = open_and_parse(path, f, start, &out.metadata);
  std::string what = "'" + path + "'";
  // The entries are contiguous and sorted, so the data is read front to back without seeking.
  for (const TensorInfo& info : infos) {
    Tensor t = make_tensor(info, what);
    if (t.nbytes() && std::fread(t.data_ptr(), 1, t.nbytes(), f.get()) != t.nbytes())
      fail(what,
           "short read in the data of tensor " + quote_name(info.name) + " (was the file truncated while loading?)");
    finish_tensor(t);
    out.tensors.insert(info.name, t);
  }
  return out;
}

}  // namespace nabla::safetensors
