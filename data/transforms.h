// Transforms: functions on one example's data, composed into a pipeline and applied by a dataset.
//
//   auto augment = data::Compose({data::RandomAffine(10, {0.1, 0.1}), data::Normalize({0.1307}, {0.3081})});
//   auto train = data::TransformDataset(data::MNIST("data/mnist"), augment);
//
// Images are float (C, H, W) tensors (what the built-in datasets return, and what ToTensor makes of
// a decoded u8 (H, W, C) image); the geometric transforms work on any (..., H, W) tensor.
//
// Random transforms draw from a Generator: the one passed as t(x, gen), or else
// data::sample_generator(), which the DataLoader seeds per batch from (seed, epoch, position), so
// augmentation is the same in every run and with any number of workers.
#pragma once

#include <array>
#include <concepts>
#include <functional>
#include <memory>
#include <vector>

#include "../core/generator.h"
#include "../core/tensor.h"
#include "dataset.h"
#include "random.h"

namespace nabla::data {

// A transform of any kind: a callable taking (const Tensor&, Generator&) or (const Tensor&) and
// returning a Tensor. A default-constructed Transform is the identity.
class Transform {
 public:
  Transform() = default;
  template <class F>
  requires(!std::same_as<std::remove_cvref_t<F>, Transform> &&
           (std::is_invocable_r_v<Tensor, const F&, const Tensor&, Generator&> ||
            std::is_invocable_r_v<Tensor, const F&, const Tensor&>)) Transform(F f) {
    if constexpr (std::is_invocable_r_v<Tensor, const F&, const Tensor&, Generator&>)
      fn_ = [f = std::move(f)](const Tensor& x, Generator& g) -> Tensor { return f(x, g); };
    else fn_ = [f = std::move(f)](const Tensor& x, Generator&) -> Tensor { return f(x); };
  }
  Tensor operator()(const Tensor& x) const { return (*this)(x, sample_generator()); }
  Tensor operator()(const Tensor& x, Generator& gen) const { return fn_ ? fn_(x, gen) : x; }
  explicit operator bool() const { return static_cast<bool>(fn_); }

 private:
  std::function<Tensor(const Tensor&, Generator&)> fn_;
};

// Applies transforms in order.
struct Compose {
  std::vector<Transform> transforms;
  Compose(std::vector<Transform> ts) : transforms(std::move(ts)) {}
  Compose(std::initializer_list<Transform> ts) : transforms(ts) {}
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Tensor operator()(const Tensor& x) const { return (*this)(x, sample_generator()); }
};

// u8 (H, W, C) or (H, W) -> float32 (C, H, W) in [0, 1] (divided by 255).
struct ToTensor {
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Generator&) const { return (*this)(x); }
};

// (x - mean[c]) / std[c] for each channel c of a float (..., C, H, W) tensor (a (H, W) tensor is one
// channel). One value applies to every channel.
struct Normalize {
  std::vector<double> mean, std;
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Generator&) const { return (*this)(x); }
};

// A random (h, w) window, after padding each side by `padding` pixels of value `fill`. With
// pad_if_needed, images smaller than the window are padded up to it (else that is an error).
struct RandomCrop {
  int64_t height, width;
  int64_t padding = 0;
  double fill = 0;
  bool pad_if_needed = false;
  explicit RandomCrop(int64_t size, int64_t padding = 0) : height(size), width(size), padding(padding) {}
  RandomCrop(int64_t height, int64_t width, int64_t padding) : height(height), width(width), padding(padding) {}
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Tensor operator()(const Tensor& x) const { return (*this)(x, sample_generator()); }
};

// Mirrors the image left-right with probability p.
struct RandomHorizontalFlip {
  double p = 0.5;
  explicit RandomHorizontalFlip(double p = 0.5) : p(p) {}
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Tensor operator()(const Tensor& x) const { return (*this)(x, sample_generator()); }
};

// How resampling computes a pixel from its neighbours. bicubic is the Keys cubic convolution, as
// PyTorch's interpolate(mode="bicubic", align_corners=False): a = -0.5 with antialias (PIL's and
// torchvision's antialiased kernel, the footprint widened by the scale when shrinking), a = -0.75
// without it (clamped at the borders); u8 results are rounded and clamped to [0, 255].
enum class Interpolation { nearest, bilinear, bicubic };

// A random rotation about the image center (degrees drawn from [degrees[0], degrees[1]], positive
// is counter-clockwise), scaling (factor from [scale[0], scale[1]]) and shift (at most translate[0]
// of the width horizontally and translate[1] of the height vertically, in whole pixels, as
// torchvision draws them). Pixels that come from outside the image are `fill`.
struct RandomAffine {
  std::array<double, 2> degrees;
  std::array<double, 2> translate = {0, 0};
  std::array<double, 2> scale = {1, 1};
  double fill = 0;
  Interpolation interpolation = Interpolation::bilinear;
  explicit RandomAffine(double degrees, std::array<double, 2> translate = {0, 0}, std::array<double, 2> scale = {1, 1})
      : degrees{-degrees, degrees}, translate(translate), scale(scale) {}
  RandomAffine(std::array<double, 2> degrees, std::array<double, 2> translate, std::array<double, 2> scale)
      : degrees(degrees), translate(translate), scale(scale) {}
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Tensor operator()(const Tensor& x) const { return (*this)(x, sample_generator()); }
};

// Resize to (height, width), or, built from one size, so that the smaller side becomes `size` and
// the aspect ratio is kept (the other side int(size * long / short), as torchvision). Bilinear by
// default; antialiased when shrinking unless antialias is false (torchvision 0.14's Resize on
// tensors does not antialias by default, its PIL path and torchvision >= 0.17 do; see resize()).
struct Resize {
  int64_t height = 0, width = 0;  // width 0: `height` is the smaller side's new length
  bool antialias = true;
  Interpolation interpolation = Interpolation::bilinear;
  explicit Resize(int64_t size, Interpolation interpolation = Interpolation::bilinear, bool antialias = true)
      : height(size), antialias(antialias), interpolation(interpolation) {}
  Resize(int64_t height, int64_t width, Interpolation interpolation = Interpolation::bilinear, bool antialias = true)
      : height(height), width(width), antialias(antialias), interpolation(interpolation) {}
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Generator&) const { return (*this)(x); }
};

// A random window of the image (its area a fraction in [scale[0], scale[1]] of the image's, its
// aspect ratio w/h log-uniform in [ratio[0], ratio[1]]; ten tries, then the central window clamped to
// the ratio range: torchvision's RandomResizedCrop.get_params), resized to (height, width).
struct RandomResizedCrop {
  int64_t height, width;
  std::array<double, 2> scale = {0.08, 1.0};
  std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  Interpolation interpolation = Interpolation::bilinear;
  bool antialias = true;
  explicit RandomResizedCrop(int64_t size, std::array<double, 2> scale = {0.08, 1.0},
                             std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0})
      : height(size), width(size), scale(scale), ratio(ratio) {}
  RandomResizedCrop(int64_t height, int64_t width, std::array<double, 2> scale, std::array<double, 2> ratio)
      : height(height), width(width), scale(scale), ratio(ratio) {}
  // The window (top, left, h, w) for an H x W image.
  std::array<int64_t, 4> get_params(int64_t H, int64_t W, Generator& gen) const;
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Tensor operator()(const Tensor& x) const { return (*this)(x, sample_generator()); }
};

// The central (h, w) window; an image smaller than it is padded with zeros.
struct CenterCrop {
  int64_t height, width;
  explicit CenterCrop(int64_t size) : height(size), width(size) {}
  CenterCrop(int64_t height, int64_t width) : height(height), width(width) {}
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Generator&) const { return (*this)(x); }
};

// ---- the same operations as functions ---------------------------------------------------------------
Tensor to_tensor(const Tensor& image);
Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std);
// The (height, width) window whose top-left corner is (top, left) of x (..., H, W); parts outside
// the image are `fill`.
Tensor crop(const Tensor& x, int64_t top, int64_t left, int64_t height, int64_t width, double fill = 0);
Tensor center_crop(const Tensor& x, int64_t height, int64_t width);
// Resizes the last two dims of x (..., H, W) to (out_h, out_w) as PyTorch's
// interpolate(x, (out_h, out_w), mode, align_corners=False, antialias) does (nearest: PyTorch's
// "nearest", which takes floor(i * H / out_h)). float32, float64 and u8 (computed in float, then
// rounded and clamped, as torchvision's Resize on a u8 tensor); bilinear is resize_bilinear.
// antialias applies to bilinear and bicubic and is ignored for nearest.
Tensor resize(const Tensor& x, int64_t out_h, int64_t out_w, Interpolation interpolation = Interpolation::bilinear,
              bool antialias = true);
// The (height, width) that Resize(size) gives an H x W image: the smaller side becomes `size`.
std::array<int64_t, 2> resized_size(int64_t H, int64_t W, int64_t size);
// crop(x, top, left, height, width) resized to (out_h, out_w).
Tensor resized_crop(const Tensor& x, int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_h,
                    int64_t out_w, Interpolation interpolation = Interpolation::bilinear, bool antialias = true);
Tensor hflip(const Tensor& x);
// Rotates by `angle` degrees (counter-clockwise) about the image center, scales by `scale`, then
// shifts by (tx, ty) pixels; float (..., H, W) tensors (u8 is computed in float and rounded).
// Nearest or bilinear (bicubic is a ValueError, as torchvision's affine on tensors).
Tensor affine(const Tensor& x, double angle, double tx, double ty, double scale = 1, double fill = 0,
              Interpolation interpolation = Interpolation::bilinear);

// A dataset whose examples are another's with `transform` applied to the data (and
// `target_transform` to the target).
class TransformDataset : public Dataset {
 public:
  TransformDataset(DatasetPtr dataset, Transform transform, Transform target_transform = {});
  template <class D>
  requires(!std::convertible_to<D, DatasetPtr>)
      TransformDataset(D&& dataset, Transform transform, Transform target_transform = {})
      : TransformDataset(share(std::forward<D>(dataset)), std::move(transform), std::move(target_transform)) {}
  int64_t size() const override { return dataset_->size(); }
  Example get(int64_t index) const override;
  const DatasetPtr& dataset() const { return dataset_; }

 private:
  DatasetPtr dataset_;
  Transform transform_, target_transform_;
};

}  // namespace nabla::data
