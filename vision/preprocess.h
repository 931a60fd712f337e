// The preprocessing each model's torchvision weights expect: torchvision 0.14's
// `Weights.DEFAULT.transforms()` (ImageClassification), as a table and as a transform.
//
//   vision::WeightsTransforms t = vision::weights_transforms("resnet50");   // resize 232, crop 224, bilinear
//   Tensor x = t.load("photo.jpg");          // normalized float32 (3, 224, 224)
//   Tensor y = t(data::load_image("photo.jpg", 3));                   // the same from a decoded image
//
// The steps, as ImageClassification.forward: resize so the smaller side is `resize_size` (the
// image's u8 pixels resampled in float, then rounded to u8), take the central crop_size x crop_size
// window, divide by 255, normalize by mean/std.
//
// Antialiasing: torchvision 0.14 applies these transforms to a tensor WITHOUT antialiasing (its
// F.resize defaults to antialias=False for tensors; torchvision >= 0.17 defaults to True), while the
// weights were trained and evaluated on PIL images, which are always antialiased. `antialias` is
// true by default here (PIL's and current torchvision's behaviour, what the published accuracies
// were measured with); set it false for torchvision 0.14's tensor path bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../data/transforms.h"

namespace nabla::vision {

struct WeightsTransforms {
  std::string weights{};  // torchvision's DEFAULT weights of the model: "IMAGENET1K_V2"
  std::string file{};     // their file name on download.pytorch.org: "resnet50-11ad3fa6.pth"
  int64_t resize_size = 256;
  int64_t crop_size = 224;
  data::Interpolation interpolation = data::Interpolation::bilinear;
  std::vector<double> mean{0.485, 0.456, 0.406};
  std::vector<double> std{0.229, 0.224, 0.225};
  bool antialias = true;

  // u8 (H, W, 3) as data::load_image(path, 3) decodes it -> float32 (3, crop, crop); a float
  // (3, H, W) or (N, 3, H, W) image with values in [0, 1] -> float (..., 3, crop, crop) (resampled in
  // float, without rounding to u8).
  Tensor operator()(const Tensor& image) const;
  Tensor operator()(const Tensor& image, Generator&) const { return (*this)(image); }
  // Decodes a JPEG, PNG or BMP file as RGB (gray and RGBA converted) and applies the transforms.
  Tensor load(const std::string& path) const;
};

// The transforms of `model`'s DEFAULT torchvision weights (a name of model_names()); ValueError
// listing the known names otherwise.
WeightsTransforms weights_transforms(const std::string& model);

}  // namespace nabla::vision
