// Image files and pixel-level helpers: decode PNG (libpng), JPEG (libjpeg-turbo) and BMP
// (stb_image) files into u8 tensors, write PNG/BMP/JPEG files (stb_image_write), and resize images
// held in tensors.
//
//   Tensor img = data::load_image("digit.png", 1);          // u8 (H, W, 1)
//   Tensor gray = data::load_image_gray("digit.png");       // u8 (H, W)
//   Tensor x = data::resize_bilinear(gray.to(kFloat32).div(255), 28, 28);   // (28, 28)
//
// Decoding is guarded: the width and height are read from the header and checked against
// ImageLimits before any pixel memory is allocated, and an unreadable, truncated or corrupt file
// is an IOError naming the file and the decoder's reason.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "../core/tensor.h"

namespace nabla::data {

struct ImageLimits {
  int64_t max_width = 16384;
  int64_t max_height = 16384;
  int64_t max_pixels = int64_t(1) << 26;  // width * height (64 Mpixel)
  uint64_t max_file_bytes = uint64_t(1) << 30;
};

struct ImageInfo {
  int64_t width = 0, height = 0;
  int channels = 0;  // as stored: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA
};

// The size and channel count from the file's header, without decoding the pixels.
ImageInfo image_info(const std::string& path, const ImageLimits& limits = {});

// Decodes a PNG, JPEG or BMP file into u8 (H, W, C): C = channels (1: gray, 2: gray + alpha,
// 3: RGB, 4: RGBA; converted as needed), or the file's own count when channels is 0.
Tensor load_image(const std::string& path, int channels = 0, const ImageLimits& limits = {});
// A grayscale image as u8 (H, W).
Tensor load_image_gray(const std::string& path, const ImageLimits& limits = {});
// The same from bytes in memory; `name` names the source in error messages.
Tensor decode_image(std::span<const uint8_t> bytes, int channels = 0, const ImageLimits& limits = {},
                    const std::string& name = "<memory>");

// Writes u8 (H, W, C) with C in 1..4, or (H, W), as PNG, BMP or JPEG, chosen by the extension
// (.png, .bmp, .jpg/.jpeg; quality applies to JPEG). The file is replaced atomically.
void save_image(const std::string& path, const Tensor& image, int quality = 95);
// The bytes save_image would write, in memory: format is "png", "bmp" or "jpeg" ("jpg").
std::string encode_image(const Tensor& image, const std::string& format = "png", int quality = 95);

// Resizes the last two dims of x (..., H, W) to (out_h, out_w) by bilinear interpolation (pixel
// centers aligned, as PyTorch's align_corners=false). With antialias, downscaling averages over
// the whole footprint of each output pixel (a triangle filter widened by the scale, as PIL and
// torchvision's antialias=True do), so shrinking a large image does not alias. Works on float32,
// float64 and u8 (rounded and clamped back to u8) tensors.
Tensor resize_bilinear(const Tensor& x, int64_t out_h, int64_t out_w, bool antialias = true);

}  // namespace nabla::data
