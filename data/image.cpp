#include "data/image.h"

// jpeglib.h needs <cstdio> (FILE, size_t) before it.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <cstdio>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "data/impl.h"
#include "io/file.h"

// Decoders: PNG through libpng and JPEG through libjpeg-turbo (both hardened and fuzzed upstream);
// stb_image only for BMP. (stb_image's JPEG decoder wrote out of bounds on a hostile DHT segment
// and its PNG path had undefined behaviour under fuzzing; with STBI_ONLY_BMP that code
// is not compiled at all.) stb_image_write encodes PNG/BMP/JPEG, from nabla's own tensors.
// stb is compiled into this file with static linkage, so nabla neither needs libstb at link time
// nor exports stbi_* symbols that could clash with a program's own copy.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#endif
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_MAX_DIMENSIONS (1 << 20)
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace nabla::data {

namespace {

std::string quoted(const std::string& name) { return "'" + name + "'"; }

std::vector<char> read_image_file(const std::string& path, const ImageLimits& limits) {
  std::vector<char> bytes = io::read_file(path, limits.max_file_bytes);
  NABLA_CHECK(IOError, !bytes.empty(), "load_image: ", quoted(path), " is empty");
  return bytes;
}

enum class Format { png, jpeg, bmp };

// The format a file's first bytes announce; an IOError naming the file when it is none nabla reads.
Format sniff_format(std::span<const uint8_t> b, const std::string& name) {
  NABLA_CHECK(IOError, !b.empty(), "load_image: ", quoted(name), " is empty");
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return Format::png;
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return Format::jpeg;
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return Format::bmp;
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(b.size(), 8); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%s%02X", i ? " " : "", b[i]);
    start += hex;
  }
  throw IOError(internal::str("load_image: ", quoted(name),
                              " is not a readable PNG, JPEG or BMP image (it starts with bytes ", start,
                              ", which are none of their signatures)"));
}

const char* format_name(Format f) { return f == Format::png ? "PNG" : f == Format::jpeg ? "JPEG" : "BMP"; }

void check_size(int64_t w, int64_t h, const ImageLimits& limits, Format f, const std::string& name) {
  NABLA_CHECK(IOError, w > 0 && h > 0, "load_image: ", quoted(name), " (", format_name(f),
              ") declares an empty image (", w, "x", h, ")");
  NABLA_CHECK(IOError, w <= limits.max_width && h <= limits.max_height && w * h <= limits.max_pixels,
              "load_image: ", quoted(name), " is ", w, "x", h, " pixels, over the limit of ", limits.max_width, "x",
              limits.max_height, " and ", limits.max_pixels, " pixels (see ImageLimits)");
}

[[noreturn]] void decode_error(Format f, const std::string& name, const char* reason) {
  throw IOError(internal::str("load_image: cannot decode ", quoted(name), " (", format_name(f),
                              "): ", reason && *reason ? reason : "the file is corrupt"));
}

// Converts 8-bit pixels between channel counts as stb_image does: gray is replicated to RGB,
// RGB -> gray is (77 r + 150 g + 29 b) >> 8, a missing alpha is 255, a dropped alpha is ignored.
void convert_channels(const uint8_t* src, int from, uint8_t* dst, int to, int64_t pixels) {
  auto y = [](const uint8_t* p) { return static_cast<uint8_t>((p[0] * 77 + p[1] * 150 + p[2] * 29) >> 8); };
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(pixels) * static_cast<size_t>(to));
    return;
  }
  for (int64_t i = 0; i < pixels; ++i, src += from, dst += to) {
    const bool gray_in = from <= 2;
    const uint8_t alpha = from == 2 ? src[1] : from == 4 ? src[3] : 255;
    if (to <= 2) {
      dst[0] = gray_in ? src[0] : y(src);
      if (to == 2) dst[1] = alpha;
    } else {
      dst[0] = src[0];
      dst[1] = gray_in ? src[0] : src[1];
      dst[2] = gray_in ? src[0] : src[2];
      if (to == 4) dst[3] = alpha;
    }
  }
}

// The decoded image in `want` channels (0: as decoded); `native` holds `channels` per pixel.
Tensor finish(std::vector<uint8_t>& native, int channels, int64_t w, int64_t h, int want) {
  if (want == 0) want = channels;
  Tensor out = empty({h, w, want}, kUInt8);
  convert_channels(native.data(), channels, out.data_ptr<uint8_t>(), want, w * h);
  return out;
}

// ---- PNG (libpng) -----------------------------------------------------------------------------
// libpng reports errors by longjmp to the setjmp in the function that called it. The functions that
// call libpng (png_header, png_pixels) hold no object with a destructor, so the jump skips none.
struct PngDecoder {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char message[256] = "";
  ~PngDecoder() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* d = static_cast<PngDecoder*>(png_get_error_ptr(png));
  std::snprintf(d->message, sizeof d->message, "%s", msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}  // benign (bad ancillary chunks): ignored as stb and PIL do

void png_read_memory(png_structp png, png_bytep out, size_t n) {
  auto* d = static_cast<PngDecoder*>(png_get_io_ptr(png));
  if (n > d->size - d->pos) png_error(png, "the file ends before the image data is complete (truncated)");
  std::memcpy(out, d->data + d->pos, n);
  d->pos += n;
}

// Reads the chunks up to the image data and sets up 8-bit output in 1-4 channels.
bool png_header(PngDecoder& d, const ImageLimits& limits) {
  if (setjmp(png_jmpbuf(d.png))) return false;
  png_set_read_fn(d.png, &d, png_read_memory);
  png_set_user_limits(d.png, static_cast<png_uint_32>(std::min<int64_t>(limits.max_width, 0x7fffffff)),
                      static_cast<png_uint_32>(std::min<int64_t>(limits.max_height, 0x7fffffff)));
  png_set_chunk_malloc_max(d.png, 8 << 20);  // ancillary chunks (text, ICC profiles) of at most 8 MB
  png_read_info(d.png, d.info);
  const int color = png_get_color_type(d.png, d.info), depth = png_get_bit_depth(d.png, d.info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(d.png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(d.png);
  if (png_get_valid(d.png, d.info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(d.png);
  if (depth == 16) png_set_strip_16(d.png);  // the high byte, as stb_image
  png_set_interlace_handling(d.png);
  png_read_update_info(d.png, d.info);
  return true;
}

bool png_pixels(PngDecoder& d, png_bytep* rows) {
  if (setjmp(png_jmpbuf(d.png))) return false;
  png_read_image(d.png, rows);
  return true;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

// Every chunk must fit in the file. libpng allocates a buffer of a chunk's declared length before
// reading it (its size limit for ancillary chunks is only a warning on read), so a 90-byte file
// declaring a 755 MB text chunk made it allocate 755 MB (found by the image fuzzer). The whole file
// is in memory here: a chunk longer than what follows it is truncation, refused before libpng runs.
void check_png_chunks(std::span<const uint8_t> b, const std::string& name) {
  size_t pos = 8;  // after the signature
  while (b.size() - pos >= 8) {
    const uint32_t length = be32(b.data() + pos);
    const std::string type(reinterpret_cast<const char*>(b.data() + pos + 4), 4);
    const size_t left = b.size() - pos - 8;  // the data and the 4-byte CRC
    if (length > left || left - length < 4) {
      std::string printable;
      for (char c : type) printable += std::isalpha(static_cast<unsigned char>(c)) ? c : '?';
      throw IOError(internal::str("load_image: cannot decode ", quoted(name), " (PNG): its ", printable,
                                  " chunk at byte ", pos, " declares ", length, " bytes of data, but only ",
                                  left >= 4 ? left - 4 : 0, " follow it (truncated or corrupt)"));
    }
    if (type == "IEND") return;
    pos += 12 + length;
  }
}

ImageInfo png_decode(std::span<const uint8_t> bytes, const ImageLimits& limits, const std::string& name, int want,
                     Tensor* out) {
  // The size from IHDR (the first chunk) is checked before libpng allocates anything.
  NABLA_CHECK(IOError, bytes.size() >= 33 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0,
              "load_image: ", quoted(name),
              " looks like a PNG file but does not start with an IHDR chunk (truncated or corrupt)");
  check_size(be32(bytes.data() + 16), be32(bytes.data() + 20), limits, Format::png, name);
  check_png_chunks(bytes, name);
  PngDecoder d;
  d.data = bytes.data();
  d.size = bytes.size();
  d.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d, png_on_error, png_on_warning);
  if (d.png) d.info = png_create_info_struct(d.png);
  if (!d.png || !d.info) throw IOError(internal::str("load_image: cannot decode ", quoted(name), ": out of memory"));
  if (!png_header(d, limits))
    throw IOError(internal::str("load_image: ", quoted(name),
                                " looks like a PNG file but its header is corrupt or unsupported: ", d.message));
  const int64_t w = png_get_image_width(d.png, d.info), h = png_get_image_height(d.png, d.info);
  const int channels = png_get_channels(d.png, d.info);
  check_size(w, h, limits, Format::png, name);
  if (channels < 1 || channels > 4 || png_get_rowbytes(d.png, d.info) != static_cast<size_t>(w * channels))
    decode_error(Format::png, name, "unexpected row layout");
  if (out) {
    std::vector<uint8_t> pixels(static_cast<size_t>(w * h * channels));
    std::vector<png_bytep> rows(static_cast<size_t>(h));
    for (int64_t y = 0; y < h; ++y) rows[static_cast<size_t>(y)] = pixels.data() + y * w * channels;
    if (!png_pixels(d, rows.data())) decode_error(Format::png, name, d.message);
    *out = finish(pixels, channels, w, h, want);
  }
  return {w, h, channels};
}

// ---- JPEG (libjpeg-turbo) ---------------------------------------------------------------------
// As for PNG: libjpeg's errors longjmp to jpeg_header / jpeg_pixels, which hold no object with a
// destructor. A premature end of the file, a warning for libjpeg (it pads with gray), is an error
// here, and so is a progressive file with more than kMaxJpegScans scans (a known way to make
// decoding take minutes: libjpeg-turbo's own fuzzers use the same bound).
constexpr int kMaxJpegScans = 500;

struct JpegDecoder {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jump{};
  bool created = false;
  char message[JMSG_LENGTH_MAX + 64] = "";
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegDecoder& jpeg_decoder(j_common_ptr c) { return *static_cast<JpegDecoder*>(c->client_data); }

void jpeg_on_error(j_common_ptr c) {
  JpegDecoder& d = jpeg_decoder(c);
  (*c->err->format_message)(c, d.message);
  std::longjmp(d.jump, 1);
}

void jpeg_on_message(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
    JpegDecoder& d = jpeg_decoder(c);
    std::snprintf(d.message, sizeof d.message, "the file ends before the image data is complete (truncated)");
    std::longjmp(d.jump, 1);
  }
  // Other warnings (corrupt data that libjpeg recovers from) are tolerated, as stb and PIL do.
}

void jpeg_on_progress(j_common_ptr c) {
  auto* dinfo = reinterpret_cast<j_decompress_ptr>(c);
  if (dinfo->input_scan_number > kMaxJpegScans) {
    JpegDecoder& d = jpeg_decoder(c);
    std::snprintf(d.message, sizeof d.message, "more than %d scans (a hostile progressive file?)", kMaxJpegScans);
    std::longjmp(d.jump, 1);
  }
}

bool jpeg_header(JpegDecoder& d, std::span<const uint8_t> bytes, long max_memory) {
  d.cinfo.err = jpeg_std_error(&d.err);
  d.err.error_exit = jpeg_on_error;
  d.err.emit_message = jpeg_on_message;
  d.cinfo.client_data = &d;
  if (setjmp(d.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  d.cinfo.client_data = &d;  // (jpeg_create_decompress clears the struct but keeps err and client_data)
  d.cinfo.mem->max_memory_to_use = max_memory;
  d.progress.progress_monitor = jpeg_on_progress;
  d.cinfo.progress = &d.progress;
  jpeg_mem_src(&d.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d.cinfo, TRUE);
  return true;
}

bool jpeg_pixels(JpegDecoder& d, J_COLOR_SPACE space, uint8_t* out, size_t row_bytes) {
  if (setjmp(d.jump)) return false;
  d.cinfo.out_color_space = space;
  jpeg_start_decompress(&d.cinfo);
  while (d.cinfo.output_scanline < d.cinfo.output_height) {
    JSAMPROW row = out + d.cinfo.output_scanline * row_bytes;
    jpeg_read_scanlines(&d.cinfo, &row, 1);
  }
  return true;  // (the rest of the file after the last scan line is not read, as in stb)
}

ImageInfo jpeg_decode(std::span<const uint8_t> bytes, const ImageLimits& limits, const std::string& name, int want,
                      Tensor* out) {
  JpegDecoder d;
  // Room for a progressive file's coefficients (2 bytes per sample, up to 4 samples a pixel) and
  // libjpeg's buffers; more is refused instead of allocated.
  const long max_memory = static_cast<long>(std::min<int64_t>(limits.max_pixels, int64_t(1) << 34) * 8 + (64 << 20));
  if (!jpeg_header(d, bytes, max_memory))
    throw IOError(internal::str("load_image: ", quoted(name),
                                " looks like a JPEG file but its header is corrupt or unsupported: ", d.message));
  const int64_t w = d.cinfo.image_width, h = d.cinfo.image_height;
  check_size(w, h, limits, Format::jpeg, name);
  const J_COLOR_SPACE in = d.cinfo.jpeg_color_space;
  const bool cmyk = in == JCS_CMYK || in == JCS_YCCK;
  if (in != JCS_GRAYSCALE && in != JCS_YCbCr && in != JCS_RGB && !cmyk)
    throw IOError(
        internal::str("load_image: ", quoted(name), " is a JPEG file with ", d.cinfo.num_components,
                      " colour components in a colour space nabla does not read (gray, YCbCr, RGB, CMYK, YCCK)"));
  const int channels = in == JCS_GRAYSCALE ? 1 : 3;  // as decoded below (CMYK becomes RGB)
  if (out) {
    // Gray output straight from the luma when gray is asked for, as stb_image does.
    const bool gray = in == JCS_GRAYSCALE || want == 1 || want == 2;
    const J_COLOR_SPACE space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_RGB;
    const int n = space == JCS_CMYK ? 4 : gray ? 1 : 3;
    std::vector<uint8_t> pixels(static_cast<size_t>(w * h * n));
    if (!jpeg_pixels(d, space, pixels.data(), static_cast<size_t>(w * n))) decode_error(Format::jpeg, name, d.message);
    int have = n;
    if (space == JCS_CMYK) {  // (Adobe's inverted) CMYK -> RGB as stb_image: x * k / 255 per channel
      auto blinn = [](unsigned x, unsigned k) {
        unsigned t = x * k + 128;
        return static_cast<uint8_t>((t + (t >> 8)) >> 8);
      };
      for (int64_t i = 0; i < w * h; ++i) {
        const uint8_t* p = &pixels[static_cast<size_t>(4 * i)];
        uint8_t* q = &pixels[static_cast<size_t>(3 * i)];  // in place: q never runs ahead of p
        const uint8_t c = p[0], m = p[1], yl = p[2], k = p[3];
        q[0] = blinn(c, k), q[1] = blinn(m, k), q[2] = blinn(yl, k);
      }
      have = 3;
    }
    *out = finish(pixels, have, w, h, want ? want : channels);
  }
  return {w, h, channels};
}

// ---- BMP (stb_image) --------------------------------------------------------------------------
int32_t le32(const uint8_t* p) {
  return static_cast<int32_t>(uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24));
}

ImageInfo bmp_decode(std::span<const uint8_t> bytes, const ImageLimits& limits, const std::string& name, int want,
                     Tensor* out) {
  NABLA_CHECK(IOError, bytes.size() >= 26, "load_image: ", quoted(name),
              " looks like a BMP file but is too short for its header (", bytes.size(), " bytes)");
  int sw = 0, sh = 0, sc = 0;
  if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &sw, &sh, &sc))
    throw IOError(
        internal::str("load_image: ", quoted(name),
                      " looks like a BMP file but its header is corrupt or unsupported: ", stbi_failure_reason()));
  // The size, read here (stb's info call reports the height of a top-down file, a valid BMP, as
  // negative; its decoder reads it right).
  const int32_t header_size = le32(bytes.data() + 14);
  int64_t w, h;
  if (header_size == 12) {  // OS/2 BITMAPCOREHEADER: unsigned 16-bit sizes
    w = bytes[18] | (bytes[19] << 8);
    h = bytes[20] | (bytes[21] << 8);
  } else {
    w = le32(bytes.data() + 18);
    h = le32(bytes.data() + 22);
    if (h < 0) h = -h;  // top-down rows (from a 32-bit value, so no overflow in int64)
  }
  check_size(w, h, limits, Format::bmp, name);
  if (out) {
    int dw = 0, dh = 0, dc = 0;
    std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
        stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &dw, &dh, &dc, want ? want : sc),
        stbi_image_free);
    if (!pixels) decode_error(Format::bmp, name, stbi_failure_reason());
    NABLA_CHECK(IOError, dw == w && dh == h, "load_image: ", quoted(name), " decoded to ", dw, "x", dh,
                " pixels but its header says ", w, "x", h);
    const int n = want ? want : sc;
    *out = empty({h, w, n}, kUInt8);
    std::memcpy(out->data_ptr(), pixels.get(), static_cast<size_t>(h * w * n));
  }
  return {w, h, sc};
}

ImageInfo decode(std::span<const uint8_t> bytes, const ImageLimits& limits, const std::string& name, int want,
                 Tensor* out) {
  NABLA_CHECK(IOError, bytes.size() <= static_cast<size_t>(INT_MAX), "load_image: ", quoted(name), " is too large (",
              bytes.size(), " bytes)");
  switch (sniff_format(bytes, name)) {
    case Format::png: return png_decode(bytes, limits, name, want, out);
    case Format::jpeg: return jpeg_decode(bytes, limits, name, want, out);
    case Format::bmp: break;
  }
  return bmp_decode(bytes, limits, name, want, out);
}

// Writes through stb's callback into a byte vector.
void append_bytes(void* ctx, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(ctx);
  auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + size);
}

std::string lower_extension(const std::string& path) {
  auto slash = path.find_last_of('/');
  auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext;
}

}  // namespace

ImageInfo image_info(const std::string& path, const ImageLimits& limits) {
  std::vector<char> bytes = read_image_file(path, limits);
  return decode({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, limits, path, 0, nullptr);
}

Tensor decode_image(std::span<const uint8_t> bytes, int channels, const ImageLimits& limits, const std::string& name) {
  NABLA_CHECK(ValueError, channels >= 0 && channels <= 4,
              "load_image: channels must be 0 (as stored), 1, 2, 3 or 4, got ", channels);
  Tensor out;
  decode(bytes, limits, name, channels, &out);
  return out;
}

Tensor load_image(const std::string& path, int channels, const ImageLimits& limits) {
  std::vector<char> bytes = read_image_file(path, limits);
  return decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, channels, limits, path);
}

Tensor load_image_gray(const std::string& path, const ImageLimits& limits) {
  return load_image(path, 1, limits).squeeze(2);
}

namespace {

// The bytes of u8 (H, W, C) or (H, W) encoded as `format` (png, bmp, jpeg); `op` and `name` for messages.
std::vector<uint8_t> encode(const Tensor& image, const std::string& format, int quality, const char* op,
                            const std::string& name) {
  NABLA_CHECK(DTypeError, image.dtype() == kUInt8, op, ": expected a u8 image, got ", image.dtype());
  NABLA_CHECK(ShapeError, (image.dim() == 2 || (image.dim() == 3 && image.size(2) >= 1 && image.size(2) <= 4)), op,
              ": expected an image (H, W) or (H, W, C) with C in 1..4, got shape ", image.sizes());
  NABLA_CHECK(ValueError,
              image.size(0) > 0 && image.size(1) > 0 && image.size(0) <= INT_MAX / 8 && image.size(1) <= INT_MAX / 8,
              op, ": cannot write an image of shape ", image.sizes());
  Tensor img = image.cpu().contiguous();
  int h = static_cast<int>(img.size(0)), w = static_cast<int>(img.size(1));
  int c = img.dim() == 3 ? static_cast<int>(img.size(2)) : 1;
  std::vector<uint8_t> bytes;
  int ok = 0;
  if (format == "png") ok = stbi_write_png_to_func(append_bytes, &bytes, w, h, c, img.data_ptr(), w * c);
  else if (format == "bmp") ok = stbi_write_bmp_to_func(append_bytes, &bytes, w, h, c, img.data_ptr());
  else if (format == "jpeg" || format == "jpg")
    ok = stbi_write_jpg_to_func(append_bytes, &bytes, w, h, c, img.data_ptr(), std::clamp(quality, 1, 100));
  else throw ValueError(internal::str(op, ": unknown image format '", format, "' (use png, bmp or jpeg)"));
  NABLA_CHECK(IOError, ok != 0 && !bytes.empty(), op, ": cannot encode ", name);
  return bytes;
}

}  // namespace

void save_image(const std::string& path, const Tensor& image, int quality) {
  std::string ext = lower_extension(path);
  std::string format = ext == ".png" ? "png" : ext == ".bmp" ? "bmp" : ext == ".jpg" || ext == ".jpeg" ? "jpeg" : "";
  if (format.empty())
    throw ValueError(internal::str("save_image: cannot tell the format of ", quoted(path),
                                   " from its extension (use .png, .bmp, .jpg or .jpeg)"));
  std::vector<uint8_t> bytes = encode(image, format, quality, "save_image", quoted(path));
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

std::string encode_image(const Tensor& image, const std::string& format, int quality) {
  std::vector<uint8_t> bytes = encode(image, format, quality, "encode_image", "the image");
  return std::string(bytes.begin(), bytes.end());
}

// ---- resize -------------------------------------------------------------------------------------
namespace internal {

AxisTaps bilinear_taps(int64_t in, int64_t out, bool antialias) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double filterscale = antialias ? std::max(scale, 1.0) : 1.0;
  const double support = 1.0 * filterscale;
  AxisTaps a;
  a.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.index.assign(static_cast<size_t>(out * a.taps), 0);
  a.weight.assign(static_cast<size_t>(out * a.taps), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    double center = (static_cast<double>(i) + 0.5) * scale;
    int64_t xmin = std::max<int64_t>(0, static_cast<int64_t>(std::floor(center - support + 0.5)));
    int64_t xmax = std::min<int64_t>(in, static_cast<int64_t>(std::floor(center + support + 0.5)));
    int64_t n = std::min(xmax - xmin, a.taps);
    double* w = &a.weight[static_cast<size_t>(i * a.taps)];
    int64_t* idx = &a.index[static_cast<size_t>(i * a.taps)];
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
      double t = std::abs((static_cast<double>(xmin + k) - center + 0.5) / filterscale);
      w[k] = t < 1.0 ? 1.0 - t : 0.0;
      total += w[k];
    }
    if (total > 0) {
      for (int64_t k = 0; k < n; ++k) w[k] /= total;
    } else {  // cannot happen for in, out >= 1; fall back to the nearest pixel
      n = 1;
      xmin = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in - 1);
      w[0] = 1.0;
    }
    for (int64_t k = 0; k < a.taps; ++k) idx[k] = std::min(xmin + std::min(k, n - 1), in - 1);  // unused taps: weight 0
  }
  return a;
}

namespace {
// Two separable passes over each (H, W) plane: along W into a float buffer, then along H. A pass
// whose size does not change is skipped (as PyTorch's antialiased kernels; every filter's taps are
// the identity there).
template <class T, class Acc>
void resample_planes(const T* src, T* dst, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                     const AxisTaps& tx, const AxisTaps& ty) {
  const bool do_x = OW != W, do_y = OH != H;
  std::vector<Acc> tmp(static_cast<size_t>(H * OW));
  std::vector<Acc> line(static_cast<size_t>(OW));
  for (int64_t p = 0; p < planes; ++p) {
    const T* s = src + p * H * W;
    T* d = dst + p * OH * OW;
    // Horizontal: (H, W) -> (H, OW).
    for (int64_t y = 0; y < H; ++y) {
      const T* row = s + y * W;
      Acc* trow = tmp.data() + y * OW;
      if (!do_x) {
        for (int64_t x = 0; x < OW; ++x) trow[x] = static_cast<Acc>(row[x]);
        continue;
      }
      for (int64_t x = 0; x < OW; ++x) {
        const int64_t* idx = &tx.index[static_cast<size_t>(x * tx.taps)];
        const double* w = &tx.weight[static_cast<size_t>(x * tx.taps)];
        Acc acc = 0;
        for (int64_t k = 0; k < tx.taps; ++k)
          if (w[k] != 0) acc += static_cast<Acc>(w[k]) * static_cast<Acc>(row[idx[k]]);
        trow[x] = acc;
      }
    }
    // Vertical: (H, OW) -> (OH, OW).
    for (int64_t y = 0; y < OH; ++y) {
      T* drow = d + y * OW;
      if (!do_y) {
        std::copy_n(tmp.data() + y * OW, OW, line.data());
      } else {
        std::fill(line.begin(), line.end(), Acc(0));
        const int64_t* idx = &ty.index[static_cast<size_t>(y * ty.taps)];
        const double* w = &ty.weight[static_cast<size_t>(y * ty.taps)];
        for (int64_t k = 0; k < ty.taps; ++k) {
          if (w[k] == 0) continue;
          const Acc wk = static_cast<Acc>(w[k]);
          const Acc* base = tmp.data() + idx[k] * OW;
          for (int64_t x = 0; x < OW; ++x) line[static_cast<size_t>(x)] += wk * base[x];
        }
      }
      for (int64_t x = 0; x < OW; ++x) {
        if constexpr (std::is_same_v<T, uint8_t>)
          drow[x] = static_cast<uint8_t>(std::clamp<Acc>(std::nearbyint(line[static_cast<size_t>(x)]), 0, 255));
        else drow[x] = static_cast<T>(line[static_cast<size_t>(x)]);
      }
    }
  }
}
}  // namespace

void check_resize(const Tensor& x, int64_t out_h, int64_t out_w, const char* op) {
  NABLA_CHECK(ValueError, x.defined(), op, ": the image is undefined");
  NABLA_CHECK(ShapeError, x.dim() >= 2, op, ": expected an image (..., H, W), got shape ", x.sizes());
  NABLA_CHECK(ValueError, out_h > 0 && out_w > 0, op, ": output size must be positive, got ", out_h, "x", out_w);
  NABLA_CHECK(ShapeError, x.size(-2) > 0 && x.size(-1) > 0, op, ": cannot resize an empty image of shape ", x.sizes());
}

Tensor resample(const Tensor& x, int64_t out_h, int64_t out_w, const AxisTaps& tx, const AxisTaps& ty, const char* op) {
  const int64_t H = x.size(-2), W = x.size(-1);
  Shape out_shape = x.sizes();
  out_shape[out_shape.size() - 2] = out_h;
  out_shape[out_shape.size() - 1] = out_w;
  Device dev = x.device();
  Tensor src = x.cpu().contiguous();
  Tensor out = empty(out_shape, src.dtype());
  const int64_t planes = src.numel() / (H * W);
  switch (src.dtype()) {
    case kFloat32:
      resample_planes<float, float>(src.data_ptr<float>(), out.data_ptr<float>(), planes, H, W, out_h, out_w, tx, ty);
      break;
    case kFloat64:
      resample_planes<double, double>(src.data_ptr<double>(), out.data_ptr<double>(), planes, H, W, out_h, out_w, tx,
                                      ty);
      break;
    case kUInt8:
      resample_planes<uint8_t, float>(src.data_ptr<uint8_t>(), out.data_ptr<uint8_t>(), planes, H, W, out_h, out_w, tx,
                                      ty);
      break;
    default: throw DTypeError(internal::str(op, ": expected a float32, float64 or u8 image, got ", src.dtype()));
  }
  return out.to(dev);
}

}  // namespace internal

Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w, bool antialias) {
  internal::check_resize(x, out_h, out_w, "resize_bilinear");
  return internal::resample(x, out_h, out_w, internal::bilinear_taps(x.size(-1), out_w, antialias),
                            internal::bilinear_taps(x.size(-2), out_h, antialias), "resize_bilinear");
}

}  // namespace nabla::data
