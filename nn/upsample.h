// PixelShuffle, PixelUnshuffle and Upsample (torch.nn.Upsample): interpolate (nn/functional.h) with its options held, for use
// inside models, e.g. Upsample({.scale_factor = {2}, .mode = "bilinear"}) in a decoder.
#pragma once

#include <string>

#include "functional.h"
#include "module.h"

namespace nabla::nn {

// PixelShuffle(r): (*, C r^2, H, W) -> (*, C, H r, W r); PixelUnshuffle(r) the inverse.
class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor) : upscale_factor(upscale_factor) {}
  Tensor forward(Tensor x) override { return functional::pixel_shuffle(x, upscale_factor); }
  std::string extra_repr() const override { return "upscale_factor=" + std::to_string(upscale_factor); }
  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor) : downscale_factor(downscale_factor) {}
  Tensor forward(Tensor x) override { return functional::pixel_unshuffle(x, downscale_factor); }
  std::string extra_repr() const override { return "downscale_factor=" + std::to_string(downscale_factor); }
  int64_t downscale_factor;
};

class Upsample : public Module {
 public:
  explicit Upsample(functional::InterpolateOptions options) : options(std::move(options)) {}
  Tensor forward(Tensor x) override { return functional::interpolate(x, options); }
  std::string extra_repr() const override {
    std::string r;
    auto list = [](const auto& v, auto fmt) {
      if (v.size() == 1) return fmt(v[0]);
      std::string s = "(";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt(v[i]);
      return s + ")";
    };
    if (!options.size.empty()) r = "size=" + list(options.size, [](int64_t n) { return std::to_string(n); });
    else r = "scale_factor=" + list(options.scale_factor, [](double f) { return repr_double(f); });
    r += ", mode='" + options.mode + "'";
    if (options.align_corners) r += std::string(", align_corners=") + (*options.align_corners ? "True" : "False");
    return r;
  }
  functional::InterpolateOptions options;
};

}  // namespace nabla::nn
