// WAV files: a reader that checks every size against the file before it allocates, and an atomic
// writer. See wav.h for what is read and how hostile files are refused.
#include "io/wav.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "io/file.h"

namespace nabla::wav {

using internal::str;

static_assert(std::endian::native == std::endian::little, "the WAV reader assumes a little-endian host");

namespace {

constexpr uint16_t kPcm = 1, kFloat = 3, kExtensible = 0xFFFE;
// The 14 bytes after the format code in KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT.
constexpr uint8_t kGuidTail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw IOError(str("wav: '", path, "' is not a readable WAV file: ", what));
}

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
std::string chunk_name(const uint8_t* id) { return io::quote_name(std::string(reinterpret_cast<const char*>(id), 4)); }

// A file opened for reading, closed on every path out.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw IOError(str("wav: cannot open '", path, "': ", std::strerror(errno)));
    struct stat st {};
    if (::fstat(::fileno(f_), &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fclose(f_);
      throw IOError(str("wav: '", path, "' is not a regular file"));
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~Reader() { std::fclose(f_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  uint64_t size() const { return size_; }
  // Reads n bytes at `offset` (the caller has checked that they lie inside the file).
  void read_at(uint64_t offset, void* dst, size_t n, const char* what) {
    if (::fseeko(f_, static_cast<off_t>(offset), SEEK_SET) != 0 || std::fread(dst, 1, n, f_) != n)
      bad(path_, str("cannot read ", what, " (", n, " bytes at offset ", offset, "): the file changed or ",
                     std::ferror(f_) ? std::strerror(errno) : "ended early"));
  }
  void read_next(void* dst, size_t n) {
    if (std::fread(dst, 1, n, f_) != n) bad(path_, "the samples end early (the file changed while read)");
  }

 private:
  std::string path_;
  std::FILE* f_;
  uint64_t size_ = 0;
};

struct Layout {
  Info info;
  uint64_t data_offset = 0;
  uint64_t block_align = 0;
};

Info parse_fmt(const std::string& path, const uint8_t* b, uint32_t size) {
  uint16_t tag = le16(b);
  const uint16_t channels = le16(b + 2), block_align = le16(b + 12), bits = le16(b + 14);
  const uint32_t rate = le32(b + 4);
  if (tag == kExtensible) {
    if (size < 40)
      bad(path, str("the WAVE_FORMAT_EXTENSIBLE fmt chunk has ", size, " bytes (it needs 40, with the sub-format)"));
    const uint16_t cb = le16(b + 16);
    if (cb < 22) bad(path, str("the WAVE_FORMAT_EXTENSIBLE fmt chunk's extension has ", cb, " bytes (it needs 22)"));
    tag = le16(b + 24);
    if (std::memcmp(b + 26, kGuidTail, sizeof kGuidTail) != 0 || (tag != kPcm && tag != kFloat)) {
      std::string guid;
      for (int i = 24; i < 40; ++i) {
        guid += "0123456789abcdef"[b[i] >> 4];
        guid += "0123456789abcdef"[b[i] & 15];
      }
      bad(path, str("WAVE_FORMAT_EXTENSIBLE sub-format GUID ", guid,
                    " is neither PCM nor IEEE float (the only ones nabla reads)"));
    }
  }
  if (tag != kPcm && tag != kFloat)
    bad(path, str("format tag ", tag, " (",
                  tag == 6   ? "A-law"
                  : tag == 7 ? "mu-law"
                  : tag == 2 ? "ADPCM"
                             : "compressed",
                  ") is not supported: nabla reads PCM (1), IEEE float (3) and WAVE_FORMAT_EXTENSIBLE of either"));
  if (channels == 0) bad(path, "the fmt chunk declares 0 channels");
  if (rate == 0) bad(path, "the fmt chunk declares a sample rate of 0");
  if (tag == kPcm && bits != 8 && bits != 16 && bits != 24 && bits != 32)
    bad(path, str("PCM with ", bits, " bits per sample (nabla reads 8, 16, 24 and 32)"));
  if (tag == kFloat && bits != 32 && bits != 64)
    bad(path, str("IEEE float with ", bits, " bits per sample (nabla reads 32 and 64)"));
  if (static_cast<uint64_t>(block_align) != static_cast<uint64_t>(channels) * bits / 8)
    bad(path, str("block_align ", block_align, " does not match ", channels, " channels * ", bits,
                  " bits / 8 = ", static_cast<uint64_t>(channels) * bits / 8));
  Info info;
  info.sample_rate = rate;
  info.num_channels = channels;
  info.bits_per_sample = bits;
  info.encoding = tag == kFloat ? Encoding::pcm_f : bits == 8 ? Encoding::pcm_u : Encoding::pcm_s;
  return info;
}

// Walks the chunks: fmt and data must be present, unknown chunks are skipped (odd sizes have a pad
// byte), the RIFF size is not trusted. A data chunk that claims more than the file holds is cut to
// the file; any other chunk that does is truncated, an error unless fmt and data came before it.
Layout parse(Reader& r, const std::string& path) {
  const uint64_t size = r.size();
  if (size < 12) bad(path, str("it has ", size, " bytes, fewer than a RIFF header's 12"));
  uint8_t head[12];
  r.read_at(0, head, 12, "the RIFF header");
  if (std::memcmp(head, "RIFX", 4) == 0 || std::memcmp(head, "RF64", 4) == 0)
    bad(path, str(chunk_name(head), " files (big-endian or 64-bit RIFF) are not supported"));
  if (std::memcmp(head, "RIFF", 4) != 0) bad(path, str("it starts with ", chunk_name(head), ", not 'RIFF'"));
  if (std::memcmp(head + 8, "WAVE", 4) != 0)
    bad(path, str("the RIFF form type is ", chunk_name(head + 8), ", not 'WAVE'"));
  Layout l;
  bool have_fmt = false, have_data = false;
  uint64_t data_bytes = 0;
  uint64_t pos = 12;
  while (pos + 8 <= size) {
    uint8_t ch[8];
    r.read_at(pos, ch, 8, "a chunk header");
    const uint32_t declared = le32(ch + 4);
    const uint64_t body = pos + 8, remaining = size - body;
    if (std::memcmp(ch, "data", 4) == 0) {
      if (!have_data) {
        have_data = true;
        l.data_offset = body;
        data_bytes = std::min<uint64_t>(declared, remaining);
      }
      if (declared > remaining) break;  // cut short, or a streamed header: the data runs to the end
    } else if (declared > remaining) {
      if (have_fmt && have_data) break;  // trailing metadata cut off: the samples are all there
      bad(path, str("chunk ", chunk_name(ch), " at offset ", pos, " declares ", declared, " bytes but only ", remaining,
                    " remain (the file is truncated)"));
    } else if (std::memcmp(ch, "fmt ", 4) == 0) {
      if (have_fmt) bad(path, str("a second fmt chunk at offset ", pos));
      if (declared < 16) bad(path, str("the fmt chunk has ", declared, " bytes (it needs at least 16)"));
      uint8_t fmt[40] = {};
      r.read_at(body, fmt, std::min<uint32_t>(declared, 40), "the fmt chunk");
      l.info = parse_fmt(path, fmt, declared);
      have_fmt = true;
    }
    pos = body + declared + (declared & 1);
  }
  if (!have_fmt) bad(path, "it has no fmt chunk");
  if (!have_data) bad(path, "it has no data chunk");
  l.block_align = static_cast<uint64_t>(l.info.num_channels) * static_cast<uint64_t>(l.info.bits_per_sample) / 8;
  l.info.num_frames = static_cast<int64_t>(data_bytes / l.block_align);
  return l;
}

DType native_dtype(const Info& i) {
  if (i.encoding == Encoding::pcm_f) return i.bits_per_sample == 64 ? kFloat64 : kFloat32;
  return i.bits_per_sample == 8 ? kUInt8 : kInt32;
}

// Converts n packed 16- or 24-bit samples to int32 (24-bit: shifted to the full 32-bit scale).
void widen(const uint8_t* src, int32_t* dst, int64_t n, int64_t bits) {
  if (bits == 16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<int16_t>(le16(src + 2 * i));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* p = src + 3 * i;
      dst[i] = static_cast<int32_t>((static_cast<uint32_t>(p[0]) << 8) | (static_cast<uint32_t>(p[1]) << 16) |
                                    (static_cast<uint32_t>(p[2]) << 24));
    }
  }
}

void put16(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}
void put_id(std::vector<uint8_t>& b, const char* id) { b.insert(b.end(), id, id + 4); }

// The header of a WAV file of `data_bytes` samples.
std::vector<uint8_t> header(int64_t channels, int64_t rate, Encoding enc, int64_t bits, uint64_t data_bytes,
                            int64_t frames) {
  const bool extensible = channels > 2 || bits > 16;
  const bool fact = enc == Encoding::pcm_f;
  const uint16_t tag = enc == Encoding::pcm_f ? kFloat : kPcm;
  const uint32_t block = static_cast<uint32_t>(channels * bits / 8);
  const uint32_t fmt_size = extensible ? 40 : enc == Encoding::pcm_f ? 18 : 16;
  std::vector<uint8_t> h;
  put_id(h, "RIFF");
  put32(h, static_cast<uint32_t>(4 + 8 + fmt_size + (fact ? 12 : 0) + 8 + data_bytes + (data_bytes & 1)));
  put_id(h, "WAVE");
  put_id(h, "fmt ");
  put32(h, fmt_size);
  put16(h, extensible ? kExtensible : tag);
  put16(h, static_cast<uint32_t>(channels));
  put32(h, static_cast<uint32_t>(rate));
  // Bytes per second, informational (readers ignore it): saturated where the rate is absurd.
  put32(h, static_cast<uint32_t>(std::min<uint64_t>(static_cast<uint64_t>(rate) * block, 0xFFFFFFFFu)));
  put16(h, block);
  put16(h, static_cast<uint32_t>(bits));
  if (extensible) {
    put16(h, 22);
    put16(h, static_cast<uint32_t>(bits));                    // valid bits
    put32(h, channels == 1 ? 0x4 : channels == 2 ? 0x3 : 0);  // speaker mask: unassigned beyond stereo
    put16(h, tag);
    h.insert(h.end(), kGuidTail, kGuidTail + sizeof kGuidTail);
  } else if (fmt_size == 18) {
    put16(h, 0);
  }
  if (fact) {
    put_id(h, "fact");
    put32(h, 4);
    put32(h, static_cast<uint32_t>(std::min<int64_t>(frames, std::numeric_limits<uint32_t>::max())));
  }
  put_id(h, "data");
  put32(h, static_cast<uint32_t>(data_bytes));
  return h;
}

// Packs n samples of src (the native dtype for enc/bits) into dst, little-endian.
void pack(const Tensor& src, int64_t begin, int64_t n, Encoding enc, int64_t bits, uint8_t* dst,
          const std::string& path) {
  if (enc == Encoding::pcm_u) {
    std::memcpy(dst, src.data_ptr<uint8_t>() + begin, static_cast<size_t>(n));
  } else if (enc == Encoding::pcm_f) {
    if (src.dtype() == kFloat64 && bits == 64) std::memcpy(dst, src.data_ptr<double>() + begin, 8 * n);
    else if (src.dtype() == kFloat32 && bits == 32) std::memcpy(dst, src.data_ptr<float>() + begin, 4 * n);
    else if (bits == 32)
      for (int64_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(src.data_ptr<double>()[begin + i]);
        std::memcpy(dst + 4 * i, &v, 4);
      }
    else
      for (int64_t i = 0; i < n; ++i) {
        const double v = src.data_ptr<float>()[begin + i];
        std::memcpy(dst + 8 * i, &v, 8);
      }
  } else {
    const int32_t* s = src.data_ptr<int32_t>() + begin;
    if (bits == 32) {
      std::memcpy(dst, s, 4 * n);
    } else if (bits == 16) {
      for (int64_t i = 0; i < n; ++i) {
        if (s[i] < -32768 || s[i] > 32767)
          throw ValueError(str("wav::write: '", path, "': sample ", begin + i, " is ", s[i],
                               ", outside 16-bit PCM's [-32768, 32767]"));
        const auto v = static_cast<uint16_t>(static_cast<int16_t>(s[i]));
        dst[2 * i] = static_cast<uint8_t>(v);
        dst[2 * i + 1] = static_cast<uint8_t>(v >> 8);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = std::min<int64_t>((static_cast<int64_t>(s[i]) + 128) >> 8, (1 << 23) - 1);
        const auto u = static_cast<uint32_t>(v);
        dst[3 * i] = static_cast<uint8_t>(u);
        dst[3 * i + 1] = static_cast<uint8_t>(u >> 8);
        dst[3 * i + 2] = static_cast<uint8_t>(u >> 16);
      }
    }
  }
}

}  // namespace

const char* encoding_name(Encoding e) {
  switch (e) {
    case Encoding::pcm_s: return "PCM_S";
    case Encoding::pcm_u: return "PCM_U";
    case Encoding::pcm_f: return "PCM_F";
  }
  return "?";
}

Encoding parse_encoding(const std::string& name, const char* who) {
  std::string u;
  for (char c : name) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u == "PCM_S") return Encoding::pcm_s;
  if (u == "PCM_U") return Encoding::pcm_u;
  if (u == "PCM_F") return Encoding::pcm_f;
  throw ValueError(str(who, ": encoding must be \"PCM_S\", \"PCM_U\" or \"PCM_F\" (WAV), got ", io::quote_name(name)));
}

Info read_info(const std::string& path) {
  Reader r(path);
  return parse(r, path).info;
}

Samples read(const std::string& path, int64_t frame_offset, int64_t num_frames) {
  NABLA_CHECK(ValueError, frame_offset >= 0, "wav::read: frame_offset must be >= 0, got ", frame_offset);
  NABLA_CHECK(ValueError, num_frames >= -1, "wav::read: num_frames must be >= 0 or -1 (all), got ", num_frames);
  Reader r(path);
  const Layout l = parse(r, path);
  const int64_t total = l.info.num_frames, ch = l.info.num_channels, bits = l.info.bits_per_sample;
  const int64_t start = std::min(frame_offset, total);
  const int64_t n = num_frames < 0 ? total - start : std::min(num_frames, total - start);
  // n * block_align <= the data chunk's bytes in the file: the allocation is bounded by the file.
  Tensor out = empty({n, ch}, TensorOptions().dtype(native_dtype(l.info)));
  const uint64_t offset = l.data_offset + static_cast<uint64_t>(start) * l.block_align;
  const uint64_t bytes = static_cast<uint64_t>(n) * l.block_align;
  if (bits != 16 && bits != 24) {
    if (bytes) r.read_at(offset, out.data_ptr(), bytes, "the samples");
  } else if (bytes) {
    // Packed 16/24-bit samples through a 48 KiB buffer, widened to int32.
    const int64_t bps = bits / 8, chunk = 16384;
    std::vector<uint8_t> buf(static_cast<size_t>(chunk * bps));
    int32_t* dst = out.data_ptr<int32_t>();
    const int64_t count = n * ch;
    r.read_at(offset, buf.data(), 0, "the samples");
    for (int64_t done = 0; done < count; done += chunk) {
      const int64_t k = std::min(chunk, count - done);
      r.read_next(buf.data(), static_cast<size_t>(k * bps));
      widen(buf.data(), dst + done, k, bits);
    }
  }
  return {out, l.info};
}

Tensor to_float(const Tensor& samples, const Info& info) {
  const Tensor src = samples.contiguous();
  if (src.dtype() == kFloat32) return src;
  Tensor out = empty(src.sizes(), TensorOptions().dtype(kFloat32));
  float* dst = out.data_ptr<float>();
  const int64_t n = src.numel();
  if (src.dtype() == kFloat64) {
    const double* s = src.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
  } else if (src.dtype() == kUInt8) {
    const uint8_t* s = src.data_ptr<uint8_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>((static_cast<int>(s[i]) - 128) / 128.0);
  } else {
    NABLA_CHECK(DTypeError, src.dtype() == kInt32,
                "wav::to_float: samples must be uint8, int32, float32 or float64, got ", src.dtype());
    const double scale = info.bits_per_sample == 16 ? 1.0 / 32768.0 : 1.0 / 2147483648.0;
    const int32_t* s = src.data_ptr<int32_t>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i] * scale);
  }
  return out;
}

void write(const std::string& path, const Tensor& samples, int64_t sample_rate, Encoding encoding,
           int64_t bits_per_sample) {
  const char* enc = encoding_name(encoding);
  NABLA_CHECK(ShapeError, samples.dim() == 2, "wav::write: samples must be (frames, channels), got ", samples.sizes());
  const int64_t frames = samples.size(0), ch = samples.size(1), bits = bits_per_sample;
  NABLA_CHECK(ShapeError, ch >= 1 && ch <= 65535, "wav::write: a WAV file holds 1 to 65535 channels, got ",
              samples.sizes());
  NABLA_CHECK(ValueError, sample_rate >= 1 && sample_rate <= std::numeric_limits<uint32_t>::max(),
              "wav::write: sample_rate ", sample_rate, " is out of range (1 to 4294967295)");
  const bool ok_bits = encoding == Encoding::pcm_u   ? bits == 8
                       : encoding == Encoding::pcm_s ? (bits == 16 || bits == 24 || bits == 32)
                                                     : (bits == 32 || bits == 64);
  NABLA_CHECK(ValueError, ok_bits, "wav::write: ", enc, " with ", bits,
              " bits per sample is not a WAV format (PCM_U: 8; PCM_S: 16, 24, 32; PCM_F: 32, 64)");
  const DType want = encoding == Encoding::pcm_u ? kUInt8 : encoding == Encoding::pcm_s ? kInt32 : samples.dtype();
  NABLA_CHECK(DTypeError,
              samples.dtype() == want &&
                  (encoding != Encoding::pcm_f || samples.dtype() == kFloat32 || samples.dtype() == kFloat64),
              "wav::write: ", enc, " takes ",
              encoding == Encoding::pcm_u   ? "uint8"
              : encoding == Encoding::pcm_s ? "int32"
                                            : "float32 or float64",
              " samples, got ", samples.dtype(), " (audio::save converts)");
  const uint64_t data_bytes = static_cast<uint64_t>(frames) * static_cast<uint64_t>(ch * bits / 8);
  NABLA_CHECK(ValueError, data_bytes <= std::numeric_limits<uint32_t>::max() - 128, "wav::write: ", samples.sizes(),
              " samples of ", bits, " bits take ", data_bytes, " bytes, more than a WAV file can hold (4 GiB)");
  const Tensor src = samples.cpu().contiguous();
  const std::vector<uint8_t> head = header(ch, sample_rate, encoding, bits, data_bytes, frames);
  io::atomic_write(path, [&](std::FILE* f) {
    io::write_all(f, head.data(), head.size(), path);
    const int64_t count = frames * ch, chunk = 16384, bps = bits / 8;
    std::vector<uint8_t> buf(static_cast<size_t>(chunk * bps));
    for (int64_t done = 0; done < count; done += chunk) {
      const int64_t k = std::min(chunk, count - done);
      pack(src, done, k, encoding, bits, buf.data(), path);
      io::write_all(f, buf.data(), static_cast<size_t>(k * bps), path);
    }
    if (data_bytes & 1) io::write_all(f, "", 1, path);
  });
}

}  // namespace nabla::wav
