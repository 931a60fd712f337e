#include "examples/mnist/preprocess.h"

#include <algorithm>
#include <cmath>

namespace mnist {

using namespace nabla;

Prepared prepare_digit(const std::string& path) {
  autograd::NoGradGuard no_grad;
  Tensor img = data::load_image_gray(path).to(kFloat32).div(255.0).contiguous();  // (H, W) in [0, 1]
  const int64_t H = img.size(0), W = img.size(1);

  // A light border means a dark digit on paper: invert so the digit is bright, as in MNIST.
  Tensor border = cat({img[0], img[H - 1], img.select(1, 0), img.select(1, W - 1)});
  bool inverted = border.mean().item<double>() > 0.5;
  if (inverted) img = (1.0 - img).contiguous();

  // Remove the background level (paper is rarely pure white; the border's median, which strokes
  // touching the edge do not move) and stretch the digit to [0, 1].
  Tensor b = std::get<0>((inverted ? 1.0 - border : border).sort());
  double bg = b[b.numel() / 2].item<double>();
  double peak = img.max().item<double>();
  if (peak - bg < 0.15) throw ValueError("no digit found in '" + path + "' (the image is nearly uniform)");
  img = ((img - bg) / (peak - bg)).clamp(0.0, 1.0).contiguous();

  // Bounding box of the ink.
  const float* p = img.data_ptr<float>();
  int64_t top = H, bottom = -1, left = W, right = -1;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      if (p[y * W + x] > 0.25f) {
        top = std::min(top, y);
        bottom = std::max(bottom, y);
        left = std::min(left, x);
        right = std::max(right, x);
      }
  if (bottom < 0) throw ValueError("no digit found in '" + path + "' (no strokes above the background)");
  Tensor digit = img.narrow(0, top, bottom - top + 1).narrow(1, left, right - left + 1);

  // Fit the longer side into 20 pixels, keeping the aspect ratio (MNIST's normalization).
  int64_t h = digit.size(0), w = digit.size(1);
  double scale = 20.0 / static_cast<double>(std::max(h, w));
  int64_t nh = std::max<int64_t>(1, std::lround(h * scale)), nw = std::max<int64_t>(1, std::lround(w * scale));
  Tensor small = data::resize_bilinear(digit.contiguous(), nh, nw).clamp(0.0, 1.0).contiguous();

  // Place it in 28x28 with its center of mass at the center.
  const float* s = small.data_ptr<float>();
  double mass = 0, cy = 0, cx = 0;
  for (int64_t y = 0; y < nh; ++y)
    for (int64_t x = 0; x < nw; ++x) {
      mass += s[y * nw + x];
      cy += y * s[y * nw + x];
      cx += x * s[y * nw + x];
    }
  cy = mass > 0 ? cy / mass : (nh - 1) / 2.0;
  cx = mass > 0 ? cx / mass : (nw - 1) / 2.0;
  int64_t oy = std::clamp<int64_t>(std::lround(13.5 - cy), 0, 28 - nh);
  int64_t ox = std::clamp<int64_t>(std::lround(13.5 - cx), 0, 28 - nw);
  Tensor out = zeros({1, 28, 28});
  out[0].narrow(0, oy, nh).narrow(1, ox, nw).copy_(small);
  return {out, inverted};
}

}  // namespace mnist
