// NumPy .npy files (format versions 1.0-3.0): what nabla saves, np.load reads, and back.
// The reader trusts nothing: magic, version, header length, the header dict's syntax, dtype,
// shape overflow and the data size must all check out, or it throws IOError naming the file.
#include "io/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>

#include "core/impl.h"
#include "io/file.h"

namespace nabla {

namespace {

const char kMagic[] = "\x93NUMPY";

const char* descr_of(DType d) {
  switch (d) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::i64: return "<i8";
    case DType::i32: return "<i4";
    case DType::u8: return "|u1";
    case DType::boolean: return "|b1";
    case DType::f16: return "<f2";
    case DType::c64: return "<c8";
    case DType::c128: return "<c16";
    case DType::bf16: break;
  }
  throw NotImplemented(internal::str("save_npy: NumPy has no ", d, " dtype (convert with .to(kFloat32) first)"));
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw IOError(internal::str("load_npy: '", path, "' is not a valid .npy file: ", what));
}

// A tiny parser for the header's Python dict literal.
struct HeaderParser {
  const std::string& s;
  const std::string& path;
  size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(path, internal::str("malformed header (expected '", c, "' at offset ", i, ")"));
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad(path, "malformed header (expected a string)");
    char q = s[i++];
    size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) bad(path, "malformed header (unterminated string)");
    return s.substr(start, i++ - start);
  }
  bool boolean() {
    ws();
    if (s.compare(i, 4, "True") == 0) {
      i += 4;
      return true;
    }
    if (s.compare(i, 5, "False") == 0) {
      i += 5;
      return false;
    }
    bad(path, "malformed header (expected True or False)");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (!eat(')')) {
      ws();
      size_t start = i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      if (start == i || i - start > 18) bad(path, "malformed shape in header");
      shape.push_back(std::stoll(s.substr(start, i - start)));
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }
};

}  // namespace

void save_npy(const Tensor& t_in, const std::string& path) {
  NABLA_CHECK(ValueError, t_in.defined(), "save_npy: tensor is undefined");
  const char* descr = descr_of(t_in.dtype());
  Tensor t = t_in.detach().to(kCPU).contiguous();
  // Python tuple syntax: (), (3,), (2, 3)
  std::string shape = "(";
  for (int64_t i = 0; i < t.dim(); ++i) shape += (i ? ", " : "") + std::to_string(t.sizes()[i]);
  shape += t.dim() == 1 ? ",)" : ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so magic + version + length + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  uint16_t hlen = static_cast<uint16_t>(header.size());
  if constexpr (std::endian::native != std::endian::little) throw NotImplemented("save_npy: big-endian hosts");
  io::atomic_write(path, [&](std::FILE* f) {
    io::write_all(f, kMagic, 6, path);
    const unsigned char ver[2] = {1, 0};
    io::write_all(f, ver, 2, path);
    const unsigned char len[2] = {static_cast<unsigned char>(hlen & 0xff), static_cast<unsigned char>(hlen >> 8)};
    io::write_all(f, len, 2, path);
    io::write_all(f, header.data(), header.size(), path);
    io::write_all(f, t.data_ptr(), t.nbytes(), path);
  });
}

Tensor load_npy(const std::string& path) {
  std::vector<char> buf = io::read_file(path);
  if (buf.size() < 10 || std::memcmp(buf.data(), kMagic, 6) != 0) bad(path, "missing the \\x93NUMPY magic string");
  int major = static_cast<unsigned char>(buf[6]);
  if (major < 1 || major > 3) bad(path, internal::str("unsupported format version ", major));
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(buf[8]) | (static_cast<size_t>(static_cast<unsigned char>(buf[9])) << 8);
    hstart = 10;
  } else {
    if (buf.size() < 12) bad(path, "truncated header");
    hlen = 0;
    for (int k = 3; k >= 0; --k) hlen = (hlen << 8) | static_cast<unsigned char>(buf[8 + k]);
    hstart = 12;
  }
  if (hlen > buf.size() - hstart) bad(path, internal::str("header length ", hlen, " runs past the end of the file"));
  std::string header(buf.data() + hstart, hlen);
  HeaderParser p{header, path};
  std::string descr;
  bool fortran = false, have_descr = false, have_order = false, have_shape = false;
  Shape shape;
  p.expect('{');
  while (!p.eat('}')) {
    std::string key = p.str();
    p.expect(':');
    if (key == "descr") {
      descr = p.str();
      have_descr = true;
    } else if (key == "fortran_order") {
      fortran = p.boolean();
      have_order = true;
    } else if (key == "shape") {
      shape = p.tuple();
      have_shape = true;
    } else {
      bad(path, internal::str("unexpected header key ", io::quote_name(key)));
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) bad(path, "header lacks descr, fortran_order or shape");
  if (descr.size() != 3 && descr != "<c16" && descr != ">c16")
    bad(path, internal::str("unsupported dtype ", io::quote_name(descr)));
  char order = descr[0];
  std::string code = descr.substr(1);
  DType dt;
  if (code == "f4") dt = DType::f32;
  else if (code == "f8") dt = DType::f64;
  else if (code == "i8") dt = DType::i64;
  else if (code == "i4") dt = DType::i32;
  else if (code == "u1") dt = DType::u8;
  else if (code == "b1") dt = DType::boolean;
  else if (code == "f2") dt = DType::f16;
  else if (code == "c8") dt = DType::c64;
  else if (code == "c16") dt = DType::c128;
  else bad(path, internal::str("unsupported dtype '", descr, "' (nabla reads f2, f4, f8, c8, c16, i4, i8, u1, b1)"));
  if (order != '<' && order != '>' && order != '|' && order != '=')
    bad(path, internal::str("bad byte order in '", descr, "'"));
  // The dims other than 0 must multiply to a size that fits, even when a 0 makes the array empty:
  // the tensor's strides are made from them.
  int64_t nonzero = 1;
  bool empty_array = false;
  for (int64_t s : shape) {
    if (s == 0) empty_array = true;
    else if (nonzero > std::numeric_limits<int64_t>::max() / s / 16)
      bad(path, internal::str("shape ", shape, " overflows: its sizes multiply to more than 2^63 bytes"));
    else nonzero *= s;
  }
  const int64_t numel = empty_array ? 0 : nonzero;
  size_t es = element_size(dt);
  size_t data_bytes = static_cast<size_t>(numel) * es;
  size_t data_start = hstart + hlen;
  if (buf.size() - data_start != data_bytes)
    bad(path, internal::str("shape ", shape, " of ", dtype_name(dt), " needs ", data_bytes,
                            " bytes of data but the file has ", buf.size() - data_start));
  // Fortran order: the data is the transpose's C order.
  Shape cshape = shape;
  if (fortran) std::reverse(cshape.begin(), cshape.end());
  Tensor t = internal::make_empty(cshape, dt, kCPU);
  std::memcpy(t.data_ptr(), buf.data() + data_start, data_bytes);
  bool swap = (order == '>' && std::endian::native == std::endian::little) ||
              (order == '<' && std::endian::native == std::endian::big);
  if (swap && es > 1) {
    // A complex element is two numbers, each swapped on its own.
    const size_t unit = is_complex(dt) ? es / 2 : es;
    const int64_t units = numel * static_cast<int64_t>(es / unit);
    char* d = static_cast<char*>(t.data_ptr());
    for (int64_t i = 0; i < units; ++i) std::reverse(d + i * unit, d + (i + 1) * unit);
  }
  if (dt == DType::boolean) {
    uint8_t* d = static_cast<uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < numel; ++i)
      if (d[i] > 1) bad(path, "bool data holds a byte other than 0 or 1");
  }
  if (fortran && t.dim() > 1) {
    Shape perm;
    for (int64_t i = t.dim() - 1; i >= 0; --i) perm.push_back(i);
    t = t.permute(perm).contiguous();
  }
  return t;
}

}  // namespace nabla
