#include "data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "io/file.h"

namespace nabla::data {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw IOError("IDX file '" + path + "': " + what);
}

// A file read either as is or through gzip decompression (chosen from its first two bytes).
class Source {
 public:
  explicit Source(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    if (::fstat(::fileno(file_), &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
    file_size_ = static_cast<uint64_t>(st.st_size);
    unsigned char magic[2] = {0, 0};
    size_t got = std::fread(magic, 1, 2, file_);
    if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
      std::fclose(file_);
      file_ = nullptr;
      gz_ = gzopen(path.c_str(), "rb");
      if (!gz_) fail(path, std::string("cannot open: ") + std::strerror(errno));
      gzbuffer(gz_, 1 << 17);
    } else {
      std::rewind(file_);
    }
  }
  ~Source() {
    if (file_) std::fclose(file_);
    if (gz_) gzclose(gz_);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  bool gzip() const { return gz_ != nullptr; }
  uint64_t file_size() const { return file_size_; }

  // Reads up to n bytes; fewer only at the end of the data. Throws on read or decompression errors.
  size_t read(void* buf, size_t n) {
    auto* p = static_cast<unsigned char*>(buf);
    size_t total = 0;
    while (total < n) {
      size_t chunk = std::min<size_t>(n - total, size_t(1) << 30);
      size_t got;
      if (gz_) {
        int r = gzread(gz_, p + total, static_cast<unsigned>(chunk));
        int err = Z_OK;
        const char* msg = gzerror(gz_, &err);
        if (r < 0 || (err != Z_OK && err != Z_BUF_ERROR)) {
          if (err == Z_ERRNO) fail(path_, std::string("read error: ") + std::strerror(errno));
          fail(path_, std::string("corrupt gzip data (") + (msg ? msg : "unknown zlib error") + ")");
        }
        if (err == Z_BUF_ERROR) fail(path_, "the gzip stream is truncated (unexpected end of file)");
        got = static_cast<size_t>(r);
      } else {
        got = std::fread(p + total, 1, chunk, file_);
        if (got < chunk && std::ferror(file_)) fail(path_, std::string("read error: ") + std::strerror(errno));
      }
      total += got;
      if (got < chunk) break;
    }
    return total;
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
  uint64_t file_size_ = 0;
};

struct ElementType {
  const char* name;
  int bytes;
  DType dtype;  // what read_idx returns
};

bool element_type(uint8_t code, ElementType& t) {
  switch (code) {
    case 0x08: t = {"u8", 1, kUInt8}; return true;
    case 0x09: t = {"i8", 1, kInt32}; return true;
    case 0x0B: t = {"i16", 2, kInt32}; return true;
    case 0x0C: t = {"i32", 4, kInt32}; return true;
    case 0x0D: t = {"f32", 4, kFloat32}; return true;
    case 0x0E: t = {"f64", 8, kFloat64}; return true;
    default: return false;
  }
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// The elements of one chunk, big-endian in `raw`, into `out` (the returned dtype). In place when
// raw and out are the same memory (types that keep their width).
void convert(const unsigned char* raw, uint8_t code, size_t n, void* out) {
  switch (code) {
    case 0x08:
      if (n > 0 && out != raw) std::memcpy(out, raw, n);
      break;
    case 0x09: {
      auto* o = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<int8_t>(raw[i]);
      break;
    }
    case 0x0B: {
      auto* o = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i)
        o[i] = static_cast<int16_t>(static_cast<uint16_t>((raw[2 * i] << 8) | raw[2 * i + 1]));
      break;
    }
    case 0x0C:
    case 0x0D: {
      auto* o = static_cast<uint32_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = be32(raw + 4 * i);
      break;
    }
    case 0x0E: {
      auto* o = static_cast<uint64_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = (uint64_t(be32(raw + 8 * i)) << 32) | be32(raw + 8 * i + 4);
      break;
    }
    default: break;
  }
}

// Deflate cannot expand data more than 1032 times (RFC 1951: a 258-byte match per 2 bits at best);
// a gzip file declaring more than that much data after its header is corrupt or a bomb.
constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace

namespace {

// The header, checked: everything read_idx knows before it reads the data.
struct Header {
  uint8_t code = 0;
  ElementType type{};
  std::vector<int64_t> dims;
  uint64_t data_bytes = 0, out_size = 0;
  std::string declared;  // "the header declares 60000 x 28 x 28 u8 (47040000 bytes of data)"
};

Header read_header(Source& src, const std::string& path, const IdxOptions& options) {
  const std::string kind = src.gzip() ? " (after gzip decompression)" : "";
  Header h;
  unsigned char magic[4];
  size_t got = src.read(magic, 4);
  if (got < 4)
    fail(path, "truncated: " + std::to_string(got) + " bytes" + kind + ", but an IDX header needs at least 4");
  if (magic[0] != 0 || magic[1] != 0) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08X", be32(magic));
    fail(path, std::string("bad magic number ") + hex + ": an IDX file starts with two zero bytes" +
                   (src.gzip() ? "" : " (or is gzip-compressed)"));
  }
  h.code = magic[2];
  ElementType& type = h.type;
  if (!element_type(magic[2], type)) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", magic[2]);
    fail(path, std::string("unknown element type ") + hex +
                   " in the magic number (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)");
  }
  const int ndim = magic[3];
  if (ndim == 0) fail(path, "the magic number declares 0 dims");
  if (ndim > options.max_dims)
    fail(path, "the magic number declares " + std::to_string(ndim) + " dims, more than the " +
                   std::to_string(options.max_dims) + " accepted");

  std::vector<unsigned char> header(static_cast<size_t>(4 * ndim));
  got = src.read(header.data(), header.size());
  if (got < header.size())
    fail(path, "truncated inside the header: " + std::to_string(ndim) + " dims need " + std::to_string(header.size()) +
                   " bytes after the magic number, the file has " + std::to_string(got) + kind);
  std::vector<int64_t>& dims = h.dims;
  dims.resize(static_cast<size_t>(ndim));
  uint64_t count = 1;
  bool overflow = false;
  for (int d = 0; d < ndim; ++d) {
    uint32_t v = be32(&header[static_cast<size_t>(4 * d)]);
    dims[static_cast<size_t>(d)] = v;
    overflow = overflow || __builtin_mul_overflow(count, uint64_t(v), &count);
  }
  const uint64_t out_size = element_size(type.dtype);  // i8 and i16 are widened to int32
  h.out_size = out_size;
  uint64_t data_bytes = 0, out_bytes = 0;
  overflow = overflow || __builtin_mul_overflow(count, uint64_t(type.bytes), &data_bytes) ||
             __builtin_mul_overflow(count, out_size, &out_bytes);
  if (overflow) fail(path, "the declared dims " + dims_str(dims) + " overflow: their product does not fit in 64 bits");
  // The limit bounds the memory read_idx takes: the returned tensor (the only large allocation).
  if (out_bytes > options.max_bytes)
    fail(path,
         "the declared dims " + dims_str(dims) + " of " + type.name + " need " + std::to_string(data_bytes) + " bytes" +
             (out_bytes != data_bytes ? " (" + std::to_string(out_bytes) + " as " + dtype_name(type.dtype) + ")" : "") +
             ", more than the limit of " + std::to_string(options.max_bytes) + " (IdxOptions::max_bytes)");
  const uint64_t header_bytes = 4 + header.size();
  h.data_bytes = data_bytes;
  h.declared =
      "the header declares " + dims_str(dims) + " " + type.name + " (" + std::to_string(data_bytes) + " bytes of data)";
  const std::string& declared = h.declared;
  if (!src.gzip()) {
    // The size is known: check it before allocating anything.
    uint64_t have = src.file_size() - header_bytes;
    if (have < data_bytes)
      fail(path,
           "truncated: " + declared + " but the file has only " + std::to_string(have) + " bytes after the header");
    if (have > data_bytes)
      fail(path, declared + " but the file has " + std::to_string(have - data_bytes) + " unexpected bytes after it");
  } else if (data_bytes / kMaxDeflateRatio > src.file_size()) {
    fail(path, declared + " but a gzip file of " + std::to_string(src.file_size()) +
                   " bytes cannot hold that much (deflate " + "expands data at most " +
                   std::to_string(kMaxDeflateRatio) + " times): corrupt, or a decompression bomb");
  }
  return h;
}

}  // namespace

IdxInfo read_idx_info(const std::string& path, const IdxOptions& options) {
  Source src(path);
  Header h = read_header(src, path, options);
  return {h.type.dtype, h.dims, h.type.name};
}

Tensor read_idx(const std::string& path, const IdxOptions& options) {
  Source src(path);
  const Header h = read_header(src, path, options);
  const std::vector<int64_t>& dims = h.dims;
  const ElementType& type = h.type;
  const uint64_t data_bytes = h.data_bytes, out_size = h.out_size;
  const std::string& declared = h.declared;
  size_t got = 0;

  // The data goes straight into the returned tensor as it is read (plain) or decompressed (gzip),
  // so the peak memory is the tensor itself: types that keep their width are converted in place,
  // i8 and i16 go through a small buffer.
  Tensor out = empty(IntArrayRef(dims), type.dtype);
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  const bool in_place = out_size == static_cast<uint64_t>(type.bytes);
  constexpr size_t kChunk = size_t(1) << 20;  // bytes of raw data per read
  std::vector<unsigned char> buffer(in_place ? 0 : kChunk);
  const auto elem = static_cast<size_t>(type.bytes);
  uint64_t filled = 0;  // raw bytes read so far
  while (filled < data_bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(data_bytes - filled, kChunk));  // a multiple of elem
    unsigned char* raw = in_place ? dst + filled : buffer.data();
    got = src.read(raw, want);
    const size_t whole = got / elem * elem;
    convert(raw, h.code, whole / elem, dst + filled / elem * out_size);
    filled += got;
    if (got < want) break;
  }
  if (filled < data_bytes) {
    if (!src.gzip()) fail(path, "truncated: the file shrank while being read");
    fail(path, "truncated: " + declared + " but the decompressed file has only " + std::to_string(filled) +
                   " bytes after the header");
  }
  if (src.gzip()) {
    unsigned char extra;
    if (src.read(&extra, 1) != 0) fail(path, declared + " but the decompressed file has more bytes after it");
  }
  return out;
}

void write_idx(const std::string& path, const Tensor& t, bool gzip) {
  NABLA_CHECK(ValueError, t.defined(), "write_idx: the tensor is undefined");
  uint8_t code;
  switch (t.dtype()) {
    case kUInt8: code = 0x08; break;
    case kInt32: code = 0x0C; break;
    case kFloat32: code = 0x0D; break;
    case kFloat64: code = 0x0E; break;
    default:
      throw DTypeError(
          internal::str("write_idx: cannot store ", t.dtype(), " in an IDX file (use u8, int32, float32 or float64)"));
  }
  NABLA_CHECK(ShapeError, t.dim() >= 1 && t.dim() <= 255, "write_idx: an IDX file holds 1 to 255 dims, got shape ",
              t.sizes());
  for (int64_t d = 0; d < t.dim(); ++d)
    NABLA_CHECK(ShapeError, t.size(d) <= int64_t(UINT32_MAX), "write_idx: dim ", d, " of ", t.sizes(),
                " does not fit in 32 bits");
  Tensor c = t.cpu().contiguous();
  const size_t es = c.element_size(), n = static_cast<size_t>(c.numel());
  std::vector<unsigned char> bytes(4 + 4 * static_cast<size_t>(c.dim()) + n * es);
  bytes[0] = 0, bytes[1] = 0, bytes[2] = code, bytes[3] = static_cast<unsigned char>(c.dim());
  for (int64_t d = 0; d < c.dim(); ++d) {
    uint32_t v = static_cast<uint32_t>(c.size(d));
    for (int k = 0; k < 4; ++k)
      bytes[4 + 4 * static_cast<size_t>(d) + static_cast<size_t>(k)] = static_cast<unsigned char>(v >> (24 - 8 * k));
  }
  const auto* src = static_cast<const unsigned char*>(c.data_ptr());
  unsigned char* dst = bytes.data() + 4 + 4 * c.dim();
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < es; ++k) dst[i * es + k] = src[i * es + (es - 1 - k)];  // little -> big endian
  if (gzip) {
    NABLA_CHECK(ValueError, bytes.size() < (size_t(1) << 31), "write_idx: gzip output is limited to 2 GiB of data");
    z_stream zs{};
    NABLA_CHECK(IOError, deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                "write_idx: cannot start zlib");
    std::vector<unsigned char> out(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 64);
    zs.next_in = bytes.data();
    zs.avail_in = static_cast<uInt>(bytes.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    int r = deflate(&zs, Z_FINISH);
    size_t written = zs.total_out;
    deflateEnd(&zs);
    NABLA_CHECK(IOError, r == Z_STREAM_END, "write_idx: gzip compression of '", path, "' failed");
    out.resize(written);
    bytes.swap(out);
  }
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

}  // namespace nabla::data
