#include "vision/preprocess.h"

#include <map>

#include "core/error.h"
#include "core/ops.h"
#include "data/image.h"

namespace nabla::vision {

namespace {
using data::Interpolation;

struct Entry {
  const char* weights;
  int64_t resize_size, crop_size;
  Interpolation interpolation;
  const char* file;
};

// torchvision 0.14's DEFAULT weights (torchvision/models/<arch>.py): every one is ImageNet-1K with
// crop 224 and mean/std (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225); the V2 recipes resize to
// 232 (convnext 236); efficientnet_b0 and swin_t resize bicubic.
const std::map<std::string, Entry>& table() {
  constexpr auto bl = Interpolation::bilinear, bc = Interpolation::bicubic;
  static const std::map<std::string, Entry> t = {
      {"resnet18", {"IMAGENET1K_V1", 256, 224, bl, "resnet18-f37072fd.pth"}},
      {"resnet34", {"IMAGENET1K_V1", 256, 224, bl, "resnet34-b627a593.pth"}},
      {"resnet50", {"IMAGENET1K_V2", 232, 224, bl, "resnet50-11ad3fa6.pth"}},
      {"resnet101", {"IMAGENET1K_V2", 232, 224, bl, "resnet101-cd907fc2.pth"}},
      {"resnet152", {"IMAGENET1K_V2", 232, 224, bl, "resnet152-f82ba261.pth"}},
      {"resnext50_32x4d", {"IMAGENET1K_V2", 232, 224, bl, "resnext50_32x4d-1a0047aa.pth"}},
      {"wide_resnet50_2", {"IMAGENET1K_V2", 232, 224, bl, "wide_resnet50_2-9ba9bcbe.pth"}},
      {"vgg11", {"IMAGENET1K_V1", 256, 224, bl, "vgg11-8a719046.pth"}},
      {"vgg11_bn", {"IMAGENET1K_V1", 256, 224, bl, "vgg11_bn-6002323d.pth"}},
      {"vgg13", {"IMAGENET1K_V1", 256, 224, bl, "vgg13-19584684.pth"}},
      {"vgg13_bn", {"IMAGENET1K_V1", 256, 224, bl, "vgg13_bn-abd245e5.pth"}},
      {"vgg16", {"IMAGENET1K_V1", 256, 224, bl, "vgg16-397923af.pth"}},
      {"vgg16_bn", {"IMAGENET1K_V1", 256, 224, bl, "vgg16_bn-6c64b313.pth"}},
      {"vgg19", {"IMAGENET1K_V1", 256, 224, bl, "vgg19-dcbb9e9d.pth"}},
      {"vgg19_bn", {"IMAGENET1K_V1", 256, 224, bl, "vgg19_bn-c79401a0.pth"}},
      {"alexnet", {"IMAGENET1K_V1", 256, 224, bl, "alexnet-owt-7be5be79.pth"}},
      {"squeezenet1_0", {"IMAGENET1K_V1", 256, 224, bl, "squeezenet1_0-b66bff10.pth"}},
      {"squeezenet1_1", {"IMAGENET1K_V1", 256, 224, bl, "squeezenet1_1-b8a52dc0.pth"}},
      {"densenet121", {"IMAGENET1K_V1", 256, 224, bl, "densenet121-a639ec97.pth"}},
      {"mobilenet_v2", {"IMAGENET1K_V2", 232, 224, bl, "mobilenet_v2-7ebf99e0.pth"}},
      {"mobilenet_v3_large", {"IMAGENET1K_V2", 232, 224, bl, "mobilenet_v3_large-5c1a4163.pth"}},
      {"mobilenet_v3_small", {"IMAGENET1K_V1", 256, 224, bl, "mobilenet_v3_small-047dcff4.pth"}},
      {"efficientnet_b0", {"IMAGENET1K_V1", 256, 224, bc, "efficientnet_b0_rwightman-3dd342df.pth"}},
      {"shufflenet_v2_x0_5", {"IMAGENET1K_V1", 256, 224, bl, "shufflenetv2_x0.5-f707e7126e.pth"}},
      {"shufflenet_v2_x1_0", {"IMAGENET1K_V1", 256, 224, bl, "shufflenetv2_x1-5666bf0f80.pth"}},
      {"regnet_y_400mf", {"IMAGENET1K_V2", 232, 224, bl, "regnet_y_400mf-e6988f5f.pth"}},
      {"convnext_tiny", {"IMAGENET1K_V1", 236, 224, bl, "convnext_tiny-983f1562.pth"}},
      {"vit_b_16", {"IMAGENET1K_V1", 256, 224, bl, "vit_b_16-c867db91.pth"}},
      {"swin_t", {"IMAGENET1K_V1", 232, 224, bc, "swin_t-704ceda3.pth"}},
  };
  return t;
}
}  // namespace

WeightsTransforms weights_transforms(const std::string& model) {
  const auto& t = table();
  auto it = t.find(model);
  if (it == t.end()) {
    std::string known;
    for (const auto& [name, e] : t) known += (known.empty() ? "" : ", ") + name;
    throw ValueError(internal::str("weights_transforms: unknown model '", model, "'; known models: ", known));
  }
  const Entry& e = it->second;
  WeightsTransforms w;
  w.weights = e.weights;
  w.file = e.file;
  w.resize_size = e.resize_size;
  w.crop_size = e.crop_size;
  w.interpolation = e.interpolation;
  return w;
}

Tensor WeightsTransforms::operator()(const Tensor& image) const {
  NABLA_CHECK(ValueError, image.defined(), "WeightsTransforms: the image is undefined");
  NABLA_CHECK(ValueError, resize_size > 0 && crop_size > 0,
              "WeightsTransforms: resize_size and crop_size must be positive, got ", resize_size, " and ", crop_size);
  Tensor x;  // (..., C, H, W)
  if (image.dtype() == kUInt8) {
    NABLA_CHECK(
        ShapeError, image.dim() == 3 && image.size(2) == 3,
        "WeightsTransforms: expected a u8 RGB image (H, W, 3) as data::load_image(path, 3) decodes it, got shape ",
        image.sizes());
    x = image.permute({2, 0, 1}).contiguous();  // (3, H, W), still u8: resized and rounded as torchvision does
  } else {
    NABLA_CHECK(DTypeError, image.is_floating_point(),
                "WeightsTransforms: expected a u8 (H, W, 3) or float (..., 3, H, W) image, got ", image.dtype());
    NABLA_CHECK(ShapeError, (image.dim() == 3 || image.dim() == 4) && image.size(-3) == 3,
                "WeightsTransforms: expected a float image (3, H, W) or (N, 3, H, W), got shape ", image.sizes());
    x = image;
  }
  NABLA_CHECK(ShapeError, x.size(-2) > 0 && x.size(-1) > 0, "WeightsTransforms: the image is empty, shape ",
              image.sizes());
  x = data::Resize(resize_size, interpolation, antialias)(x);
  x = data::center_crop(x, crop_size, crop_size);
  if (x.dtype() == kUInt8) x = x.to(kFloat32).div(255.0);
  return data::normalize(x, mean, std);
}

Tensor WeightsTransforms::load(const std::string& path) const { return (*this)(data::load_image(path, 3)); }

}  // namespace nabla::vision
