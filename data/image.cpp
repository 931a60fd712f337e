#include "data/image.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/io.h"
#include "core/ops.h"

// stb_image and stb_image_write are compiled into this file, with static linkage so that nabla
// neither needs libstb at link time nor exports stbi_* symbols that could clash with a program's
// own copy. Only the formats nabla documents are decoded, straight from memory.
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
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
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
  check<IOError>(!bytes.empty(), "load_image: ", quoted(path), " is empty");
  return bytes;
}

// The format a file's first bytes announce, if one nabla reads.
const char* sniff_format(std::span<const uint8_t> b) {
  if (b.size() >= 8 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G') return "PNG";
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return "JPEG";
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP";
  return nullptr;
}

ImageInfo info_from_memory(std::span<const uint8_t> bytes, const ImageLimits& limits, const std::string& name) {
  check<IOError>(!bytes.empty(), "load_image: ", quoted(name), " is empty");
  check<IOError>(bytes.size() <= static_cast<size_t>(INT_MAX), "load_image: ", quoted(name), " is too large (",
                 bytes.size(), " bytes)");
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c)) {
    if (const char* format = sniff_format(bytes))
      throw IOError(detail::str("load_image: ", quoted(name), " looks like a ", format,
                                " file but its header is corrupt or unsupported (or declares an image too large to decode)"));
    throw IOError(detail::str("load_image: ", quoted(name), " is not a readable PNG, JPEG or BMP image (",
                              stbi_failure_reason(), ")"));
  }
  check<IOError>(w > 0 && h > 0, "load_image: ", quoted(name), " declares an empty image (", w, "x", h, ")");
  check<IOError>(w <= limits.max_width && h <= limits.max_height &&
                     static_cast<int64_t>(w) * h <= limits.max_pixels,
                 "load_image: ", quoted(name), " is ", w, "x", h, " pixels, over the limit of ", limits.max_width, "x",
                 limits.max_height, " and ", limits.max_pixels, " pixels (see ImageLimits)");
  return {w, h, c};
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
  return info_from_memory({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, limits, path);
}

Tensor decode_image(std::span<const uint8_t> bytes, int channels, const ImageLimits& limits, const std::string& name) {
  check<ValueError>(channels >= 0 && channels <= 4, "load_image: channels must be 0 (as stored), 1, 2, 3 or 4, got ",
                    channels);
  ImageInfo info = info_from_memory(bytes, limits, name);
  int want = channels ? channels : info.channels;
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c, want), stbi_image_free);
  if (!pixels)
    throw IOError(detail::str("load_image: cannot decode ", quoted(name), ": ", stbi_failure_reason(),
                              " (the file is corrupt or truncated)"));
  check<IOError>(w == info.width && h == info.height, "load_image: ", quoted(name), " decoded to ", w, "x", h,
                 " pixels but its header says ", info.width, "x", info.height);
  Tensor out = empty({h, w, want}, kUInt8);
  std::memcpy(out.data_ptr(), pixels.get(), static_cast<size_t>(h) * w * want);
  return out;
}

Tensor load_image(const std::string& path, int channels, const ImageLimits& limits) {
  std::vector<char> bytes = read_image_file(path, limits);
  return decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, channels, limits, path);
}

Tensor load_image_gray(const std::string& path, const ImageLimits& limits) {
  return load_image(path, 1, limits).squeeze(2);
}

void save_image(const std::string& path, const Tensor& image, int quality) {
  check<DTypeError>(image.dtype() == kUInt8, "save_image: expected a u8 image, got ", image.dtype());
  check<ShapeError>((image.dim() == 2 || (image.dim() == 3 && image.size(2) >= 1 && image.size(2) <= 4)),
                    "save_image: expected an image (H, W) or (H, W, C) with C in 1..4, got shape ", image.sizes());
  check<ValueError>(image.size(0) > 0 && image.size(1) > 0 && image.size(0) <= INT_MAX / 8 && image.size(1) <= INT_MAX / 8,
                    "save_image: cannot write an image of shape ", image.sizes());
  Tensor img = image.cpu().contiguous();
  int h = static_cast<int>(img.size(0)), w = static_cast<int>(img.size(1));
  int c = img.dim() == 3 ? static_cast<int>(img.size(2)) : 1;
  std::string ext = lower_extension(path);
  std::vector<uint8_t> bytes;
  int ok = 0;
  if (ext == ".png")
    ok = stbi_write_png_to_func(append_bytes, &bytes, w, h, c, img.data_ptr(), w * c);
  else if (ext == ".bmp")
    ok = stbi_write_bmp_to_func(append_bytes, &bytes, w, h, c, img.data_ptr());
  else if (ext == ".jpg" || ext == ".jpeg")
    ok = stbi_write_jpg_to_func(append_bytes, &bytes, w, h, c, img.data_ptr(), std::clamp(quality, 1, 100));
  else
    throw ValueError(detail::str("save_image: cannot tell the format of ", quoted(path),
                                 " from its extension (use .png, .bmp, .jpg or .jpeg)"));
  check<IOError>(ok != 0 && !bytes.empty(), "save_image: cannot encode ", quoted(path));
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

// ---- resize -------------------------------------------------------------------------------------
namespace {

// For each output pixel along one axis: the first input pixel it reads and the normalized weights.
struct AxisWeights {
  std::vector<int64_t> start, count;
  std::vector<double> weights;  // out_size * max_count, row k for output k
  int64_t max_count = 0;
};

// PIL's resampling weights for the triangle (bilinear) filter, widened by the scale when
// antialiasing a reduction.
AxisWeights axis_weights(int64_t in, int64_t out, bool antialias) {
  AxisWeights a;
  double scale = static_cast<double>(in) / static_cast<double>(out);
  double filterscale = antialias ? std::max(scale, 1.0) : 1.0;
  double support = 1.0 * filterscale;
  a.max_count = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.start.resize(static_cast<size_t>(out));
  a.count.resize(static_cast<size_t>(out));
  a.weights.assign(static_cast<size_t>(out * a.max_count), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    double center = (static_cast<double>(i) + 0.5) * scale;
    int64_t xmin = std::max<int64_t>(0, static_cast<int64_t>(std::floor(center - support + 0.5)));
    int64_t xmax = std::min<int64_t>(in, static_cast<int64_t>(std::floor(center + support + 0.5)));
    int64_t n = std::min(xmax - xmin, a.max_count);
    double* w = &a.weights[static_cast<size_t>(i * a.max_count)];
    double total = 0;
    for (int64_t k = 0; k < n; ++k) {
      double t = std::abs((static_cast<double>(xmin + k) - center + 0.5) / filterscale);
      w[k] = t < 1.0 ? 1.0 - t : 0.0;
      total += w[k];
    }
    if (total > 0)
      for (int64_t k = 0; k < n; ++k) w[k] /= total;
    else {  // cannot happen for in, out >= 1; fall back to the nearest pixel
      n = 1;
      xmin = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in - 1);
      w[0] = 1.0;
    }
    a.start[static_cast<size_t>(i)] = xmin;
    a.count[static_cast<size_t>(i)] = n;
  }
  return a;
}

template <class T, class Acc>
void resize_planes(const T* src, T* dst, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, bool antialias) {
  AxisWeights wx = axis_weights(W, OW, antialias), wy = axis_weights(H, OH, antialias);
  std::vector<Acc> tmp(static_cast<size_t>(H * OW));
  for (int64_t p = 0; p < planes; ++p) {
    const T* s = src + p * H * W;
    T* d = dst + p * OH * OW;
    // Horizontal pass: (H, W) -> (H, OW).
    for (int64_t y = 0; y < H; ++y) {
      const T* row = s + y * W;
      Acc* trow = tmp.data() + y * OW;
      for (int64_t x = 0; x < OW; ++x) {
        const double* w = &wx.weights[static_cast<size_t>(x * wx.max_count)];
        const T* px = row + wx.start[static_cast<size_t>(x)];
        Acc acc = 0;
        for (int64_t k = 0; k < wx.count[static_cast<size_t>(x)]; ++k) acc += static_cast<Acc>(w[k]) * static_cast<Acc>(px[k]);
        trow[x] = acc;
      }
    }
    // Vertical pass: (H, OW) -> (OH, OW).
    for (int64_t y = 0; y < OH; ++y) {
      const double* w = &wy.weights[static_cast<size_t>(y * wy.max_count)];
      const Acc* base = tmp.data() + wy.start[static_cast<size_t>(y)] * OW;
      int64_t n = wy.count[static_cast<size_t>(y)];
      T* drow = d + y * OW;
      for (int64_t x = 0; x < OW; ++x) {
        Acc acc = 0;
        for (int64_t k = 0; k < n; ++k) acc += static_cast<Acc>(w[k]) * base[k * OW + x];
        if constexpr (std::is_same_v<T, uint8_t>)
          drow[x] = static_cast<uint8_t>(std::clamp<Acc>(std::nearbyint(acc), 0, 255));
        else
          drow[x] = static_cast<T>(acc);
      }
    }
  }
}

}  // namespace

Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w, bool antialias) {
  check<ShapeError>(x.dim() >= 2, "resize_bilinear: expected (..., H, W), got shape ", x.sizes());
  check<ValueError>(out_h > 0 && out_w > 0, "resize_bilinear: output size must be positive, got ", out_h, "x", out_w);
  const int64_t H = x.size(-2), W = x.size(-1);
  check<ShapeError>(H > 0 && W > 0, "resize_bilinear: cannot resize an empty image of shape ", x.sizes());
  Shape out_shape = x.sizes();
  out_shape[out_shape.size() - 2] = out_h;
  out_shape[out_shape.size() - 1] = out_w;
  Device dev = x.device();
  Tensor src = x.cpu().contiguous();
  Tensor out = empty(out_shape, src.dtype());
  const int64_t planes = H * W == 0 ? 0 : src.numel() / (H * W);
  switch (src.dtype()) {
    case kFloat32:
      resize_planes<float, float>(src.data_ptr<float>(), out.data_ptr<float>(), planes, H, W, out_h, out_w, antialias);
      break;
    case kFloat64:
      resize_planes<double, double>(src.data_ptr<double>(), out.data_ptr<double>(), planes, H, W, out_h, out_w, antialias);
      break;
    case kUInt8:
      resize_planes<uint8_t, float>(src.data_ptr<uint8_t>(), out.data_ptr<uint8_t>(), planes, H, W, out_h, out_w, antialias);
      break;
    default:
      throw DTypeError(detail::str("resize_bilinear: expected a float32, float64 or u8 tensor, got ", src.dtype()));
  }
  return out.to(dev);
}

}  // namespace nabla::data
