// libFuzzer target: image_info and decode_image (PNG via libpng, JPEG via libjpeg-turbo, BMP via
// stb_image) on arbitrary bytes, with limits of 1 Mpixel so that every input decodes quickly.
// The channel count asked for is the input's size modulo 5 (0: as stored). A decoded image must
// have the size image_info reported.
#include <span>

#include "fuzz/fuzz_util.h"
#include "nabla.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nabla;
  const data::ImageLimits limits{.max_width = 8192, .max_height = 8192, .max_pixels = int64_t(1) << 20};
  const int channels = static_cast<int>(size % 5);
  std::span<const uint8_t> bytes(data, size);
  Tensor img;
  std::string err = nabla_fuzz::expect_clean([&] { img = data::decode_image(bytes, channels, limits, "fuzz"); });
  if (!img.defined()) return 0;
  if (img.dim() != 3 || img.dtype() != kUInt8 || (channels && img.size(2) != channels))
    nabla_fuzz::finding("decode_image", "unexpected shape or dtype");
  static nabla_fuzz::ScratchFile file("image");
  const std::string& path = file.write(data, size);
  data::ImageInfo info;
  nabla_fuzz::expect_clean([&] { info = data::image_info(path, limits); });
  if (info.width != img.size(1) || info.height != img.size(0) || (!channels && info.channels != img.size(2)))
    nabla_fuzz::finding("image_info", "disagrees with the decoded image");
  return 0;
}
