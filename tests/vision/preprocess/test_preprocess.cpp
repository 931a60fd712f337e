// ImageNet preprocessing against torchvision: the resize kernels (bicubic with and without
// antialias, nearest) on small inputs with values PyTorch 1.13 computed, RandomResizedCrop's window
// rules, and, with python3-torchvision, each model's weights-transforms table and the whole pipeline
// (decode, resize, crop, normalize) on JPEG and PNG files made by
// tests/vision/make_preprocess_reference.py, within 1/255 per pixel after un-normalizing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "nabla.h"
#include "tests/common/python_torch.h"

namespace nabla::testing {
namespace {

using data::Interpolation;

void expect_near_values(const Tensor& got, std::vector<float> want, double tol) {
  Tensor g = got.to(kFloat32).contiguous().view({-1});
  ASSERT_EQ(g.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g.data_ptr<float>()[i], want[i], tol) << "element " << i;
}

// Reference values: torch.nn.functional.interpolate (PyTorch 1.13) on x = [0, 1, 4, 2, 8].
TEST(VisionPreprocess, BicubicMatchesPyTorch) {
  Tensor x = tensor({{0.f, 1.f, 4.f, 2.f, 8.f}});  // (1, 5)
  expect_near_values(data::resize(x, 1, 8, Interpolation::bicubic, false),
                     {-0.0928345f, 0.1875610f, 1.1957397f, 3.3948364f, 3.4454956f, 1.8604126f, 5.2596436f, 8.5570068f},
                     1e-5);
  expect_near_values(data::resize(x, 1, 8, Interpolation::bicubic, true),
                     {-0.0719557f, 0.2437493f, 1.1417236f, 3.3646240f, 3.4757080f, 1.9144287f, 5.5305400f, 8.4317341f},
                     1e-5);
  expect_near_values(data::resize(x, 1, 3, Interpolation::bicubic, false), {0.1481490f, 4.0f, 5.9999981f}, 1e-5);
  expect_near_values(data::resize(x, 1, 3, Interpolation::bicubic, true), {0.3846154f, 2.7674422f, 5.5384607f}, 1e-5);
  expect_near_values(data::resize(x, 1, 3, Interpolation::nearest), {0.f, 1.f, 2.f}, 0);
  expect_near_values(data::resize(x, 1, 8, Interpolation::nearest), {0.f, 0.f, 1.f, 1.f, 4.f, 2.f, 2.f, 8.f}, 0);
  // Both axes at once equal the two passes; the same size is the identity.
  Tensor img = arange(0, 35, 1, kFloat64).view({1, 5, 7}).sin();
  Tensor two = data::resize(data::resize(img, 5, 3, Interpolation::bicubic), 9, 3, Interpolation::bicubic);
  EXPECT_TRUE(allclose(data::resize(img, 9, 3, Interpolation::bicubic), two, 1e-12, 1e-12));
  EXPECT_TRUE(equal(data::resize(img, 5, 7, Interpolation::bicubic, false), img));
  EXPECT_TRUE(equal(data::resize(img, 5, 7, Interpolation::bicubic, true), img));
  // A constant image stays constant (the weights sum to 1).
  EXPECT_TRUE(allclose(data::resize(full({2, 13, 17}, 0.25), 6, 40, Interpolation::bicubic), full({2, 6, 40}, 0.25),
                       1e-6, 1e-6));
}

// torchvision's Resize on a u8 tensor: computed in float, clamped to [0, 255] (bicubic overshoots
// at a step) and rounded. Values from torchvision 0.14.
TEST(VisionPreprocess, BicubicU8IsClampedAndRounded) {
  Tensor u = tensor({{0, 0, 255, 255, 0, 0}}, kUInt8);
  EXPECT_TRUE(equal(data::resize(u, 1, 9, Interpolation::bicubic, false),
                    tensor({{0, 0, 37, 218, 255, 218, 37, 0, 0}}, kUInt8)));
  EXPECT_TRUE(equal(data::resize(u, 1, 9, Interpolation::bicubic, true),
                    tensor({{0, 0, 31, 224, 255, 224, 31, 0, 0}}, kUInt8)));
  // The float result overshoots where the u8 one is clamped.
  Tensor f = data::resize(u.to(kFloat32), 1, 9, Interpolation::bicubic, false);
  EXPECT_GT(f.max().item<float>(), 300.f);
  EXPECT_LT(f.min().item<float>(), -20.f);
}

TEST(VisionPreprocess, ResizeErrorsNameTheOp) {
  EXPECT_THROW(data::resize(zeros({4}), 2, 2, Interpolation::bicubic), ShapeError);
  EXPECT_THROW(data::resize(zeros({0, 4}), 2, 2, Interpolation::bicubic), ShapeError);
  EXPECT_THROW(data::resize(zeros({4, 4}), 0, 2, Interpolation::bicubic), ValueError);
  try {
    data::resize(zeros({4, 4}, kInt64), 2, 2, Interpolation::bicubic);
    FAIL() << "no error";
  } catch (const DTypeError& e) { EXPECT_NE(std::string(e.what()).find("resize"), std::string::npos) << e.what(); }
  EXPECT_THROW(data::affine(zeros({4, 4}), 10, 0, 0, 1, 0, Interpolation::bicubic), ValueError);
  // The smaller side becomes the size, the other int(size * long / short), as torchvision.
  EXPECT_EQ(data::resized_size(375, 500, 232), (std::array<int64_t, 2>{232, 309}));
  EXPECT_EQ(data::resized_size(301, 199, 256), (std::array<int64_t, 2>{387, 256}));
  EXPECT_EQ(data::Resize(256, Interpolation::bicubic)(zeros({3, 90, 120})).sizes(), (Shape{3, 256, 341}));
}

TEST(VisionPreprocess, RandomResizedCropWindows) {
  data::RandomResizedCrop rrc(32);
  Generator gen(7);
  for (int i = 0; i < 200; ++i) {
    auto [top, left, h, w] = rrc.get_params(50, 80, gen);
    ASSERT_TRUE(h > 0 && w > 0 && top >= 0 && left >= 0 && top + h <= 50 && left + w <= 80)
        << top << " " << left << " " << h << " " << w;
    double area = static_cast<double>(h * w) / (50.0 * 80.0), ratio = static_cast<double>(w) / static_cast<double>(h);
    // Rounding to whole pixels moves area and ratio a little past the drawn values.
    EXPECT_GE(area, 0.08 * 0.8);
    EXPECT_TRUE(ratio > 0.75 * 0.8 && ratio < 4.0 / 3.0 * 1.25) << ratio;
  }
  // The same generator state gives the same window; the output has the requested size.
  Generator a(3), b(3);
  EXPECT_EQ(rrc.get_params(50, 80, a), rrc.get_params(50, 80, b));
  EXPECT_EQ(rrc(zeros({3, 50, 80}), gen).sizes(), (Shape{3, 32, 32}));
  // No window of the ratio fits in ten tries: the central crop with the ratio clamped
  // (torchvision's fallback): a 10x200 image with ratios [1, 1] and scale [0.9, 1].
  data::RandomResizedCrop square(8, 8, {0.9, 1.0}, {1.0, 1.0});
  EXPECT_EQ(square.get_params(10, 200, gen), (std::array<int64_t, 4>{0, 95, 10, 10}));
  EXPECT_THROW(data::RandomResizedCrop(8, 8, {0.5, 0.1}, {1.0, 1.0})(zeros({1, 4, 4}), gen), ValueError);
}

TEST(VisionPreprocess, WeightsTransformsTableAndErrors) {
  vision::WeightsTransforms t = vision::weights_transforms("resnet50");
  EXPECT_EQ(t.resize_size, 232);
  EXPECT_EQ(t.weights, "IMAGENET1K_V2");
  EXPECT_EQ(vision::weights_transforms("efficientnet_b0").interpolation, Interpolation::bicubic);
  EXPECT_EQ(vision::weights_transforms("convnext_tiny").resize_size, 236);
  for (const auto& name : vision::model_names()) EXPECT_NO_THROW(vision::weights_transforms(name)) << name;
  try {
    vision::weights_transforms("resnet51");
    FAIL() << "no error";
  } catch (const ValueError& e) { EXPECT_NE(std::string(e.what()).find("resnet50"), std::string::npos) << e.what(); }
  EXPECT_EQ(t(zeros({300, 400, 3}, kUInt8)).sizes(), (Shape{3, 224, 224}));
  EXPECT_EQ(t(zeros({2, 3, 100, 120})).sizes(), (Shape{2, 3, 224, 224}));
  EXPECT_THROW(t(zeros({300, 400, 4}, kUInt8)), ShapeError);
  EXPECT_THROW(t(zeros({300, 400, 3}, kInt64)), DTypeError);
  EXPECT_THROW(t.load("/nonexistent/photo.jpg"), IOError);
}

// ---- against torchvision ----------------------------------------------------------------------

// The directory make_preprocess_reference.py wrote: NABLA_PREPROCESS_REFERENCES (ctest's setup
// test), else made here once.
std::string reference_dir() {
  if (const char* d = std::getenv("NABLA_PREPROCESS_REFERENCES"))
    if (std::filesystem::exists(std::string(d) + "/preprocess.pt")) return d;
  static std::string own = [] {
    auto d = std::filesystem::temp_directory_path() / ("nabla-preprocess-" + std::to_string(::getpid()));
    std::string cmd =
        "/usr/bin/python3 " + std::string(NABLA_TESTS_DIR) + "/vision/make_preprocess_reference.py --out " + d.string();
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    return d.string();
  }();
  return own;
}

const torch_io::Value& reference() {
  static torch_io::Value ref = torch_io::load(reference_dir() + "/preprocess.pt");
  return ref;
}

TEST(VisionPreprocess, TableIsTorchvisions) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  const auto& table = reference()["table"];
  for (const auto& name : vision::model_names()) {
    SCOPED_TRACE(name);
    const torch_io::Value* e = table.find(name);
    ASSERT_NE(e, nullptr) << "make_preprocess_reference.py's MODELS_ALL lacks " << name;
    vision::WeightsTransforms t = vision::weights_transforms(name);
    EXPECT_EQ(t.weights, (*e)[0].to_string());
    EXPECT_EQ(t.resize_size, (*e)[1].to_int());
    EXPECT_EQ(t.crop_size, (*e)[2].to_int());
    EXPECT_EQ(t.interpolation == Interpolation::bicubic ? "bicubic" : "bilinear", (*e)[3].to_string());
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_DOUBLE_EQ(t.mean[c], (*e)[4][c].to_double());
      EXPECT_DOUBLE_EQ(t.std[c], (*e)[5][c].to_double());
    }
  }
}

// nabla's decoders (libjpeg-turbo, libpng) give torchvision.io.read_image's pixels.
TEST(VisionPreprocess, DecodingIsTorchvisions) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  for (const auto& [name, pixels] : reference()["decoded"].entries()) {
    Tensor mine = data::load_image(reference_dir() + "/" + name.to_string(), 3).permute({2, 0, 1});
    Tensor theirs = pixels.to_tensor();
    ASSERT_EQ(mine.sizes(), theirs.sizes()) << name.to_string();
    int max_diff = (mine.to(kInt32) - theirs.to(kInt32)).abs().max().item<int>();
    std::printf("[preprocess] %s %lldx%lld: decoded max |diff| %d\n", name.to_string().c_str(),
                static_cast<long long>(theirs.size(2)), static_cast<long long>(theirs.size(1)), max_diff);
    EXPECT_EQ(max_diff, 0) << name.to_string();
  }
}

// x * std + mean, scaled to 0..255: the pixel values before normalization.
Tensor unnormalize(const Tensor& x, const vision::WeightsTransforms& t) {
  Tensor m = tensor(t.mean, kFloat32).view({3, 1, 1}), s = tensor(t.std, kFloat32).view({3, 1, 1});
  return x.mul(s).add(m).mul(255.0);
}

class VisionPipeline : public ::testing::TestWithParam<std::string> {};

// The whole pipeline on each image: with antialias = false it is torchvision 0.14's
// weights.transforms() on the decoded tensor; with the default antialias = true, the same steps
// with F.resize(antialias=True). Within 1/255 (a rounding to u8 that falls the other way).
TEST_P(VisionPipeline, MatchesTorchvision) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");
  const std::string model = GetParam();
  for (const auto& [name, per_model] : reference()["outputs"].entries()) {
    const std::string path = reference_dir() + "/" + name.to_string();
    const auto& ref = per_model[model];
    for (bool aa : {false, true}) {
      vision::WeightsTransforms t = vision::weights_transforms(model);
      t.antialias = aa;
      Tensor mine = t.load(path);
      Tensor theirs = ref[aa ? "tv_aa" : "tv"].to_tensor();
      ASSERT_EQ(mine.sizes(), theirs.sizes());
      Tensor d = (unnormalize(mine, t) - unnormalize(theirs, t)).abs();
      double max_diff = d.max().item<float>();
      double frac = d.gt(0.5).to(kFloat64).mean().item<double>();
      double pil = (unnormalize(mine, t) - unnormalize(ref["pil"].to_tensor(), t)).abs().max().item<float>();
      std::printf(
          "[preprocess] %s %s antialias=%d: max |diff| %.4f/255 (%.4f%% of values differ by 1/255); vs PIL %.2f/255\n",
          model.c_str(), name.to_string().c_str(), aa ? 1 : 0, max_diff, 100 * frac, pil);
      EXPECT_LE(max_diff, 1.0 + 1e-3) << model << " " << name.to_string() << " antialias " << aa;
      // Off by one level only where float rounding falls the other way: a handful of values, not a
      // systematic shift.
      EXPECT_LT(frac, 1e-3) << model << " " << name.to_string() << " antialias " << aa;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, VisionPipeline,
                         ::testing::Values("resnet18", "resnet50", "convnext_tiny", "efficientnet_b0", "swin_t"));

}  // namespace
}  // namespace nabla::testing
