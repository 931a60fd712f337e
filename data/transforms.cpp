#include "data/transforms.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "data/image.h"
#include "data/impl.h"

namespace nabla::data {

namespace {
void check_image(const char* op, const Tensor& x) {
  NABLA_CHECK(ValueError, x.defined(), op, ": the image is undefined");
  NABLA_CHECK(ShapeError, x.dim() >= 2, op, ": expected an image (..., H, W), got shape ", x.sizes());
}
}  // namespace

// ---- functions ----------------------------------------------------------------------------------
Tensor to_tensor(const Tensor& image) {
  NABLA_CHECK(ValueError, image.defined(), "ToTensor: the image is undefined");
  NABLA_CHECK(DTypeError, image.dtype() == kUInt8, "ToTensor: expected a u8 image (H, W, C) or (H, W), got ",
              image.dtype());
  NABLA_CHECK(ShapeError, image.dim() == 2 || image.dim() == 3,
              "ToTensor: expected a u8 image (H, W, C) or (H, W), got shape ", image.sizes());
  Tensor src = image.cpu().contiguous();
  const int64_t H = src.size(0), W = src.size(1), C = src.dim() == 3 ? src.size(2) : 1;
  Tensor out = empty({C, H, W}, kFloat32);
  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[static_cast<size_t>(v)] = static_cast<float>(v) / 255.0f;
  const uint8_t* s = src.data_ptr<uint8_t>();
  float* d = out.data_ptr<float>();
  // (H, W, C) -> (C, H, W)
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < H * W; ++p) d[c * H * W + p] = lut[s[p * C + c]];
  return out.to(image.device());
}

Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std) {
  NABLA_CHECK(ValueError, x.defined(), "Normalize: the image is undefined");
  NABLA_CHECK(DTypeError, x.is_floating_point(), "Normalize: expected a floating-point image, got ", x.dtype(),
              " (apply ToTensor first)");
  NABLA_CHECK(ShapeError, x.dim() >= 2, "Normalize: expected an image (..., C, H, W) or (H, W), got shape ", x.sizes());
  const int64_t C = x.dim() == 2 ? 1 : x.size(-3);
  const size_t n = mean.size();
  NABLA_CHECK(ValueError, n == std.size() && n > 0, "Normalize: mean has ", n, " values but std has ", std.size());
  NABLA_CHECK(ShapeError, n == 1 || static_cast<int64_t>(n) == C, "Normalize: ", n,
              " means and stds for an image with ", C, " channels (shape ", x.sizes(), ")");
  for (size_t c = 0; c < n; ++c)
    NABLA_CHECK(ValueError, std[c] != 0 && std::isfinite(std[c]) && std::isfinite(mean[c]), "Normalize: channel ", c,
                " has mean ", mean[c], " and std ", std[c], " (std must be finite and nonzero)");
  if (n == 1) return x.sub(mean[0]).div(std[0]);
  Tensor m = tensor(mean, TensorOptions(x.dtype()).device(x.device())).view({C, 1, 1});
  Tensor s = tensor(std, TensorOptions(x.dtype()).device(x.device())).view({C, 1, 1});
  return x.sub(m).div(s);
}

Tensor crop(const Tensor& x, int64_t top, int64_t left, int64_t height, int64_t width, double fill) {
  check_image("crop", x);
  NABLA_CHECK(ValueError, height > 0 && width > 0, "crop: the window must be non-empty, got ", height, "x", width);
  const int64_t hd = x.dim() - 2, wd = x.dim() - 1, H = x.size(hd), W = x.size(wd);
  if (top >= 0 && left >= 0 && top + height <= H && left + width <= W)
    return x.narrow(hd, top, height).narrow(wd, left, width).contiguous();
  Shape shape = x.sizes();
  shape[static_cast<size_t>(hd)] = height;
  shape[static_cast<size_t>(wd)] = width;
  Tensor out = full(shape, fill, TensorOptions(x.dtype()).device(x.device()));
  // The part of the window inside the image.
  int64_t r0 = std::max<int64_t>(top, 0), r1 = std::min(top + height, H);
  int64_t c0 = std::max<int64_t>(left, 0), c1 = std::min(left + width, W);
  if (r0 < r1 && c0 < c1)
    out.narrow(hd, r0 - top, r1 - r0)
        .narrow(wd, c0 - left, c1 - c0)
        .copy_(x.narrow(hd, r0, r1 - r0).narrow(wd, c0, c1 - c0));
  return out;
}

Tensor center_crop(const Tensor& x, int64_t height, int64_t width) {
  check_image("CenterCrop", x);
  const int64_t H = x.size(-2), W = x.size(-1);
  // torchvision's placement: round((H - h) / 2) inside; an image smaller than the window is padded
  // by floor((h - H) / 2) at the top (left) and the rest at the bottom (right).
  auto offset = [](int64_t in, int64_t out) {
    return out > in ? -((out - in) / 2) : static_cast<int64_t>(std::nearbyint(static_cast<double>(in - out) / 2.0));
  };
  return crop(x, offset(H, height), offset(W, width), height, width);
}

Tensor hflip(const Tensor& x) {
  check_image("hflip", x);
  return x.flip({x.dim() - 1});
}

namespace {
template <class T, class Acc>
void affine_planes(const T* src, T* dst, int64_t planes, int64_t H, int64_t W, const double inv[6], Acc fill,
                   Interpolation mode) {
  // inv maps an output pixel (x, y) to its source: sx = inv[0] x + inv[1] y + inv[2], sy = inv[3] x + inv[4] y + inv[5].
  auto store = [](Acc v) -> T {
    if constexpr (std::is_same_v<T, uint8_t>) return static_cast<uint8_t>(std::clamp<Acc>(std::nearbyint(v), 0, 255));
    else return static_cast<T>(v);
  };
  for (int64_t p = 0; p < planes; ++p) {
    const T* s = src + p * H * W;
    T* d = dst + p * H * W;
    auto at = [&](int64_t yy, int64_t xx) -> Acc {
      return (yy >= 0 && yy < H && xx >= 0 && xx < W) ? static_cast<Acc>(s[yy * W + xx]) : fill;
    };
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t x = 0; x < W; ++x) {
        double sx = inv[0] * x + inv[1] * y + inv[2];
        double sy = inv[3] * x + inv[4] * y + inv[5];
        if (mode == Interpolation::nearest) {
          d[y * W + x] =
              store(at(static_cast<int64_t>(std::floor(sy + 0.5)), static_cast<int64_t>(std::floor(sx + 0.5))));
          continue;
        }
        double fx0 = std::floor(sx), fy0 = std::floor(sy);
        auto x0 = static_cast<int64_t>(fx0), y0 = static_cast<int64_t>(fy0);
        Acc ax = static_cast<Acc>(sx - fx0), ay = static_cast<Acc>(sy - fy0);
        Acc top = at(y0, x0) * (1 - ax) + at(y0, x0 + 1) * ax;
        Acc bottom = at(y0 + 1, x0) * (1 - ax) + at(y0 + 1, x0 + 1) * ax;
        d[y * W + x] = store(top * (1 - ay) + bottom * ay);
      }
    }
  }
}
}  // namespace

Tensor affine(const Tensor& x, double angle, double tx, double ty, double scale, double fill,
              Interpolation interpolation) {
  check_image("affine", x);
  NABLA_CHECK(
      ValueError, interpolation != Interpolation::bicubic,
      "affine: bicubic interpolation is not supported (use nearest or bilinear), as torchvision's affine on tensors");
  NABLA_CHECK(ValueError,
              std::isfinite(angle) && std::isfinite(tx) && std::isfinite(ty) && std::isfinite(scale) && scale > 0,
              "affine: angle, shift and scale must be finite and the scale positive, got angle ", angle, " shift (", tx,
              ", ", ty, ") scale ", scale);
  const int64_t H = x.size(-2), W = x.size(-1);
  // Output p_out = c + t + scale * R p_in' (p_in' = p_in - c), with R the counter-clockwise rotation
  // on screen (y pointing down): R = [[cos, sin], [-sin, cos]]. Its inverse gives the source pixel.
  const double rad = angle * std::numbers::pi / 180.0, cs = std::cos(rad), sn = std::sin(rad);
  const double cx = (static_cast<double>(W) - 1) / 2, cy = (static_cast<double>(H) - 1) / 2;
  // p_in = c + R^T (p_out - c - t) / scale
  double inv[6];
  inv[0] = cs / scale;
  inv[1] = -sn / scale;
  inv[3] = sn / scale;
  inv[4] = cs / scale;
  inv[2] = cx - inv[0] * (cx + tx) - inv[1] * (cy + ty);
  inv[5] = cy - inv[3] * (cx + tx) - inv[4] * (cy + ty);
  Device dev = x.device();
  Tensor src = x.cpu().contiguous();
  Tensor out = empty(src.sizes(), src.dtype());
  const int64_t planes = H * W == 0 ? 0 : src.numel() / (H * W);
  switch (src.dtype()) {
    case kFloat32:
      affine_planes<float, float>(src.data_ptr<float>(), out.data_ptr<float>(), planes, H, W, inv,
                                  static_cast<float>(fill), interpolation);
      break;
    case kFloat64:
      affine_planes<double, double>(src.data_ptr<double>(), out.data_ptr<double>(), planes, H, W, inv, fill,
                                    interpolation);
      break;
    case kUInt8:
      affine_planes<uint8_t, float>(src.data_ptr<uint8_t>(), out.data_ptr<uint8_t>(), planes, H, W, inv,
                                    static_cast<float>(fill), interpolation);
      break;
    default: throw DTypeError(internal::str("affine: expected a float32, float64 or u8 image, got ", src.dtype()));
  }
  return out.to(dev);
}

// ---- resize: the nearest and bicubic filters' taps (data/image.cpp resamples with them) ----------
namespace {
using internal::AxisTaps;

// PyTorch's "nearest": floor(i * (in / out)) computed in float, and its shortcuts for the same size
// and for doubling.
AxisTaps nearest_taps(int64_t in, int64_t out) {
  AxisTaps a{1, std::vector<int64_t>(static_cast<size_t>(out)), std::vector<double>(static_cast<size_t>(out), 1.0)};
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    int64_t j = out == in       ? i
                : out == 2 * in ? i >> 1
                                : static_cast<int64_t>(std::floor(static_cast<float>(i) * scale));
    a.index[static_cast<size_t>(i)] = std::min(j, in - 1);
  }
  return a;
}

// Keys' cubic convolution kernel with parameter a, for |x| < 1 and 1 <= |x| < 2.
double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

// Without antialias, as PyTorch's upsample_bicubic2d (align_corners=False): the source position
// (i + 0.5) * scale - 0.5, four taps around it with a = -0.75, indices clamped to the image.
AxisTaps bicubic_taps(int64_t in, int64_t out) {
  constexpr double A = -0.75;
  AxisTaps a{4, std::vector<int64_t>(static_cast<size_t>(out * 4)), std::vector<double>(static_cast<size_t>(out * 4))};
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t i = 0; i < out; ++i) {
    double real = scale * (static_cast<double>(i) + 0.5) - 0.5;
    double x0 = std::floor(real), t = real - x0;
    const double w[4] = {cubic2(t + 1, A), cubic1(t, A), cubic1(1 - t, A), cubic2(2 - t, A)};
    for (int64_t k = 0; k < 4; ++k) {
      a.index[static_cast<size_t>(i * 4 + k)] = std::clamp<int64_t>(static_cast<int64_t>(x0) - 1 + k, 0, in - 1);
      a.weight[static_cast<size_t>(i * 4 + k)] = w[k];
    }
  }
  return a;
}

// With antialias, as PyTorch's _upsample_bicubic2d_aa (and PIL's BICUBIC): the kernel with a = -0.5
// stretched by the scale when shrinking (support 2 * scale), the taps inside the image only, their
// weights normalized to sum to 1.
AxisTaps bicubic_aa_taps(int64_t in, int64_t out) {
  constexpr double A = -0.5;
  auto filter = [](double x) {
    x = std::abs(x);
    return x < 1 ? cubic1(x, A) : x < 2 ? cubic2(x, A) : 0.0;
  };
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double support = scale >= 1 ? 2.0 * scale : 2.0, invscale = scale >= 1 ? 1.0 / scale : 1.0;
  AxisTaps a;
  a.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.index.assign(static_cast<size_t>(out * a.taps), 0);
  a.weight.assign(static_cast<size_t>(out * a.taps), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    double center = scale * (static_cast<double>(i) + 0.5);
    int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t xsize =
        std::min<int64_t>(std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - xmin, a.taps);
    double* w = &a.weight[static_cast<size_t>(i * a.taps)];
    int64_t* idx = &a.index[static_cast<size_t>(i * a.taps)];
    double total = 0;
    for (int64_t k = 0; k < xsize; ++k) {
      w[k] = filter((static_cast<double>(k + xmin) - center + 0.5) * invscale);
      total += w[k];
    }
    for (int64_t k = 0; k < a.taps; ++k) {
      idx[k] = std::min(xmin + std::min(k, std::max<int64_t>(xsize - 1, 0)), in - 1);  // unused taps: weight 0
      if (k < xsize && total != 0) w[k] /= total;
    }
  }
  return a;
}

AxisTaps axis_taps(int64_t in, int64_t out, Interpolation mode, bool antialias) {
  if (mode == Interpolation::bilinear) return internal::bilinear_taps(in, out, antialias);
  if (mode == Interpolation::nearest) return nearest_taps(in, out);
  return antialias ? bicubic_aa_taps(in, out) : bicubic_taps(in, out);
}

}  // namespace

Tensor resize(const Tensor& x, int64_t out_h, int64_t out_w, Interpolation interpolation, bool antialias) {
  internal::check_resize(x, out_h, out_w, "resize");
  return internal::resample(x, out_h, out_w, axis_taps(x.size(-1), out_w, interpolation, antialias),
                            axis_taps(x.size(-2), out_h, interpolation, antialias), "resize");
}

// ---- transform objects --------------------------------------------------------------------------
Tensor Compose::operator()(const Tensor& x, Generator& gen) const {
  Tensor y = x;
  for (const auto& t : transforms) y = t(y, gen);
  return y;
}

Tensor ToTensor::operator()(const Tensor& x) const { return to_tensor(x); }

Normalize::Normalize(std::vector<double> m, std::vector<double> s) : mean(std::move(m)), std(std::move(s)) {
  NABLA_CHECK(ValueError, !mean.empty() && mean.size() == std.size(), "Normalize: mean has ", mean.size(),
              " values but std has ", std.size());
  for (size_t c = 0; c < std.size(); ++c)
    NABLA_CHECK(ValueError, std[c] != 0 && std::isfinite(std[c]), "Normalize: std[", c, "] is ", std[c],
                " (it must be finite and nonzero)");
}

Tensor Normalize::operator()(const Tensor& x) const { return normalize(x, mean, std); }

Tensor RandomCrop::operator()(const Tensor& x, Generator& gen) const {
  check_image("RandomCrop", x);
  NABLA_CHECK(ValueError, height > 0 && width > 0 && padding >= 0,
              "RandomCrop: size must be positive and padding non-negative, got ", height, "x", width, " padding ",
              padding);
  const int64_t H = x.size(-2), W = x.size(-1);
  int64_t pad_y = padding, pad_x = padding;
  // As torchvision: an image smaller than the window gets the shortfall added on each side.
  if (pad_if_needed && H + 2 * pad_y < height) pad_y += height - (H + 2 * pad_y);
  if (pad_if_needed && W + 2 * pad_x < width) pad_x += width - (W + 2 * pad_x);
  const int64_t Hp = H + 2 * pad_y, Wp = W + 2 * pad_x;
  NABLA_CHECK(ShapeError, Hp >= height && Wp >= width, "RandomCrop: the image is ", H, "x", W, " (", Hp, "x", Wp,
              " padded), smaller than the crop ", height, "x", width, "; set pad_if_needed or more padding");
  Rng rng = Rng::from(gen);
  int64_t top = rng.randint(0, Hp - height + 1);
  int64_t left = rng.randint(0, Wp - width + 1);
  return crop(x, top - pad_y, left - pad_x, height, width, fill);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x, Generator& gen) const {
  check_image("RandomHorizontalFlip", x);
  Rng rng = Rng::from(gen);
  return rng.uniform() < p ? hflip(x) : x;
}

Tensor RandomAffine::operator()(const Tensor& x, Generator& gen) const {
  check_image("RandomAffine", x);
  NABLA_CHECK(ValueError,
              degrees[0] <= degrees[1] && scale[0] <= scale[1] && scale[0] > 0 && translate[0] >= 0 &&
                  translate[1] >= 0 && translate[0] <= 1 && translate[1] <= 1,
              "RandomAffine: expected degrees lo <= hi, translate fractions in [0, 1] and 0 < scale lo <= hi, got "
              "degrees [",
              degrees[0], ", ", degrees[1], "] translate (", translate[0], ", ", translate[1], ") scale [", scale[0],
              ", ", scale[1], "]");
  const double H = static_cast<double>(x.size(-2)), W = static_cast<double>(x.size(-1));
  Rng rng = Rng::from(gen);
  // Always four draws, so the stream does not depend on which parameters are ranges.
  double angle = rng.uniform(degrees[0], degrees[1]);
  double max_dx = translate[0] * W, max_dy = translate[1] * H;
  double tx = std::round(rng.uniform(-max_dx, max_dx));
  double ty = std::round(rng.uniform(-max_dy, max_dy));
  double s = rng.uniform(scale[0], scale[1]);
  if (degrees[0] == degrees[1]) angle = degrees[0];
  if (scale[0] == scale[1]) s = scale[0];
  return affine(x, angle, tx, ty, s, fill, interpolation);
}

std::array<int64_t, 2> resized_size(int64_t H, int64_t W, int64_t size) {
  NABLA_CHECK(ValueError, size > 0 && H > 0 && W > 0, "Resize: size must be positive, got ", size, " for an image of ",
              H, "x", W);
  // torchvision's _compute_resized_output_size: the long side is int(size * long / short).
  auto longer = [&](int64_t lng, int64_t shrt) {
    return std::max<int64_t>(
        1, static_cast<int64_t>(static_cast<double>(size) * static_cast<double>(lng) / static_cast<double>(shrt)));
  };
  if (H <= W) return {size, longer(W, H)};
  return {longer(H, W), size};
}

Tensor Resize::operator()(const Tensor& x) const {
  check_image("Resize", x);
  NABLA_CHECK(ValueError, height > 0 && width >= 0, "Resize: size must be positive, got ", height, "x", width);
  int64_t oh = height, ow = width;
  if (width == 0) {
    auto hw = resized_size(x.size(-2), x.size(-1), height);
    oh = hw[0];
    ow = hw[1];
  }
  // As torchvision: an image already of the size is returned as it is.
  if (oh == x.size(-2) && ow == x.size(-1)) return x;
  return resize(x, oh, ow, interpolation, antialias);
}

std::array<int64_t, 4> RandomResizedCrop::get_params(int64_t H, int64_t W, Generator& gen) const {
  NABLA_CHECK(ValueError, H > 0 && W > 0, "RandomResizedCrop: cannot crop an empty image of ", H, "x", W);
  NABLA_CHECK(ValueError,
              scale[0] <= scale[1] && scale[0] >= 0 && ratio[0] <= ratio[1] && ratio[0] > 0 &&
                  std::isfinite(scale[1]) && std::isfinite(ratio[1]),
              "RandomResizedCrop: expected 0 <= scale lo <= hi and 0 < ratio lo <= hi, got scale [", scale[0], ", ",
              scale[1], "] ratio [", ratio[0], ", ", ratio[1], "]");
  const double area = static_cast<double>(H) * static_cast<double>(W);
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  Rng rng = Rng::from(gen);
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target_area = area * rng.uniform(scale[0], scale[1]);
    double aspect = std::exp(rng.uniform(log_lo, log_hi));
    // Python's round(): halves to even, as std::nearbyint in the default rounding mode.
    auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= W && 0 < h && h <= H) {
      int64_t top = rng.randint(0, H - h + 1);
      int64_t left = rng.randint(0, W - w + 1);
      return {top, left, h, w};
    }
  }
  // Fallback: the central window, its ratio clamped to the range.
  const double in_ratio = static_cast<double>(W) / static_cast<double>(H);
  int64_t w = W, h = H;
  if (in_ratio < ratio[0]) h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / ratio[0]));
  else if (in_ratio > ratio[1]) w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * ratio[1]));
  return {(H - h) / 2, (W - w) / 2, h, w};
}

Tensor RandomResizedCrop::operator()(const Tensor& x, Generator& gen) const {
  check_image("RandomResizedCrop", x);
  NABLA_CHECK(ValueError, height > 0 && width > 0, "RandomResizedCrop: size must be positive, got ", height, "x",
              width);
  auto [top, left, h, w] = get_params(x.size(-2), x.size(-1), gen);
  return resized_crop(x, top, left, h, w, height, width, interpolation, antialias);
}

Tensor resized_crop(const Tensor& x, int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_h,
                    int64_t out_w, Interpolation interpolation, bool antialias) {
  return resize(crop(x, top, left, height, width), out_h, out_w, interpolation, antialias);
}

Tensor CenterCrop::operator()(const Tensor& x) const { return center_crop(x, height, width); }

// ---- TransformDataset ---------------------------------------------------------------------------
TransformDataset::TransformDataset(DatasetPtr dataset, Transform transform, Transform target_transform)
    : dataset_(std::move(dataset)), transform_(std::move(transform)), target_transform_(std::move(target_transform)) {
  NABLA_CHECK(ValueError, dataset_ != nullptr, "TransformDataset: the dataset is null");
}

Example TransformDataset::get(int64_t index) const {
  Example e = dataset_->get(index);
  Generator& gen = sample_generator();
  if (transform_) e.data = transform_(e.data, gen);
  if (target_transform_ && e.target.defined()) e.target = target_transform_(e.target, gen);
  return e;
}

}  // namespace nabla::data
