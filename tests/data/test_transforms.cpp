// Transforms and the bilinear resize, each on a known input.
#include <gtest/gtest.h>

#include <set>

#include "nabla.h"

using namespace nabla;
namespace data = nabla::data;

namespace {
// (1, 4, 4) float image 0..15.
Tensor grid4() { return arange(16, kFloat32).view({1, 4, 4}); }

void expect_close(const Tensor& a, const Tensor& b, double atol = 1e-5) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(a.to(kFloat64).allclose(b.to(kFloat64), 0, atol)) << "got\n" << a << "\nexpected\n" << b;
}
}  // namespace

TEST(DataTransforms, ToTensor) {
  // (H=1, W=2, C=3) -> (3, 1, 2) / 255
  Tensor img = tensor({{{0, 255, 51}, {102, 153, 204}}}, kUInt8);
  Tensor t = data::ToTensor()(img);
  EXPECT_EQ(t.dtype(), kFloat32);
  expect_close(t, tensor({{{0.f, 0.4f}}, {{1.f, 0.6f}}, {{0.2f, 0.8f}}}), 1e-7);
  EXPECT_EQ(data::to_tensor(zeros({3, 5}, kUInt8)).sizes(), (Shape{1, 3, 5}));
  EXPECT_THROW(data::to_tensor(zeros({3, 5}, kFloat32)), DTypeError);
  EXPECT_THROW(data::to_tensor(zeros({1, 3, 5, 1}, kUInt8)), ShapeError);
}

TEST(DataTransforms, Normalize) {
  Tensor x = tensor({{{0.5f, 1.f}}, {{0.f, 0.25f}}});  // (2, 1, 2)
  expect_close(data::Normalize({0.5, 0.25}, {0.5, 0.25})(x), tensor({{{0.f, 1.f}}, {{-1.f, 0.f}}}));
  expect_close(data::Normalize({0.1307}, {0.3081})(x), (x - 0.1307) / 0.3081);
  // A batch (B, C, H, W) broadcasts too.
  expect_close(data::normalize(x.unsqueeze(0), {0.5, 0.25}, {0.5, 0.25}).squeeze(0),
               tensor({{{0.f, 1.f}}, {{-1.f, 0.f}}}));
  EXPECT_THROW(data::Normalize({0.5, 0.5, 0.5}, {1, 1, 1})(x), ShapeError);
  EXPECT_THROW(data::Normalize({0.5}, {0}), ValueError);
  EXPECT_THROW(data::Normalize({0.5}, {1})(zeros({1, 2, 2}, kUInt8)), DTypeError);
}

TEST(DataTransforms, CropAndCenterCrop) {
  Tensor x = grid4();
  expect_close(data::crop(x, 1, 2, 2, 2), tensor({{{6.f, 7.f}, {10.f, 11.f}}}));
  // Outside the image: fill.
  expect_close(data::crop(x, -1, 3, 2, 2, -1), tensor({{{-1.f, -1.f}, {3.f, -1.f}}}));
  expect_close(data::CenterCrop(2)(x), tensor({{{5.f, 6.f}, {9.f, 10.f}}}));
  // torchvision's rounding: (4 - 1) / 2 = 1.5 rounds to 2 (half to even).
  expect_close(data::CenterCrop(1, 3)(x), tensor({{{8.f, 9.f, 10.f}}}));
  // Larger than the image: zero padding, floor of half the excess on the top/left.
  Tensor big = data::CenterCrop(3, 5)(arange(4, kFloat32).view({1, 2, 2}).add(1));
  expect_close(big, tensor({{{0.f, 1.f, 2.f, 0.f, 0.f}, {0.f, 3.f, 4.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f, 0.f}}}));
}

TEST(DataTransforms, RandomCropIsAWindowOfThePaddedImage) {
  Tensor x = grid4();
  Tensor padded = pad(x, {1, 1, 1, 1}, -1);  // (1, 6, 6)
  std::set<std::pair<int64_t, int64_t>> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Generator gen(seed);
    Tensor out = data::RandomCrop(4, 1)(x, gen);  // with fill -1 below
    data::RandomCrop rc(4, 1);
    rc.fill = -1;
    Generator g2(seed);
    out = rc(x, g2);
    ASSERT_EQ(out.sizes(), (Shape{1, 4, 4}));
    bool found = false;
    for (int64_t t = 0; t <= 2 && !found; ++t)
      for (int64_t l = 0; l <= 2 && !found; ++l)
        if (out.equal(padded.narrow(1, t, 4).narrow(2, l, 4))) {
          found = true;
          seen.insert({t, l});
        }
    EXPECT_TRUE(found) << "seed " << seed;
    // Same generator state, same crop.
    Generator g3(seed);
    EXPECT_TRUE(rc(x, g3).equal(out));
  }
  EXPECT_EQ(seen.size(), 9u);  // every offset occurs
  EXPECT_THROW(data::RandomCrop(5)(x), ShapeError);
  data::RandomCrop needs(6);
  needs.pad_if_needed = true;
  EXPECT_EQ(needs(x).sizes(), (Shape{1, 6, 6}));
}

TEST(DataTransforms, RandomHorizontalFlip) {
  Tensor x = grid4();
  Tensor flipped =
      tensor({{{3.f, 2.f, 1.f, 0.f}, {7.f, 6.f, 5.f, 4.f}, {11.f, 10.f, 9.f, 8.f}, {15.f, 14.f, 13.f, 12.f}}});
  expect_close(data::RandomHorizontalFlip(1.0)(x), flipped);
  expect_close(data::RandomHorizontalFlip(0.0)(x), x);
  int flips = 0;
  Generator gen(3);
  for (int i = 0; i < 1000; ++i) flips += data::RandomHorizontalFlip()(x, gen).equal(flipped);
  EXPECT_NEAR(flips, 500, 60);
}

TEST(DataTransforms, AffineRotatesAndShifts) {
  // A marker right of the center of a 3x3 image.
  Tensor x = zeros({1, 3, 3});
  x.index_put_({0, 1, 2}, 1.0);
  // 90 degrees counter-clockwise: right of center -> above center.
  Tensor up = zeros({1, 3, 3});
  up.index_put_({0, 0, 1}, 1.0);
  expect_close(data::affine(x, 90, 0, 0), up);
  expect_close(data::RandomAffine({90, 90}, {0, 0}, {1, 1})(x), up);
  expect_close(data::affine(x, -90, 0, 0, 1, 0, data::Interpolation::nearest),
               zeros({1, 3, 3}).index_put_({0, 2, 1}, 1.0));
  // A whole-pixel shift right by 1 and down by 1 moves the grid; pixels from outside are the fill.
  Tensor g = grid4();
  expect_close(
      data::affine(g, 0, 1, 1, 1, -1),
      tensor({{{-1.f, -1.f, -1.f, -1.f}, {-1.f, 0.f, 1.f, 2.f}, {-1.f, 4.f, 5.f, 6.f}, {-1.f, 8.f, 9.f, 10.f}}}));
  // Half-pixel shift: bilinear averages neighbours.
  expect_close(data::affine(tensor({{0.f, 2.f, 4.f}}), 0, 0.5, 0), tensor({{0.f, 1.f, 3.f}}));
  // Scale 2 about the center of a 1x5 row: x' = 2 + (x - 2) * 2.
  expect_close(data::affine(arange(5, kFloat32).view({1, 5}), 0, 0, 0, 2), tensor({{1.f, 1.5f, 2.f, 2.5f, 3.f}}));
  // RandomAffine translate 0.25 of width 4: shifts by -1, 0 or 1 pixel, all seen, nothing else.
  std::set<int> shifts;
  Generator gen(11);
  for (int i = 0; i < 100; ++i) {
    Tensor out = data::RandomAffine(0, {0.25, 0})(g, gen);
    int found = -9;
    for (int s = -1; s <= 1; ++s)
      if (out.allclose(data::affine(g, 0, s, 0))) found = s;
    EXPECT_NE(found, -9);
    shifts.insert(found);
  }
  EXPECT_EQ(shifts, (std::set<int>{-1, 0, 1}));
  // u8 images are computed in float and rounded back.
  Tensor u8 = tensor({{0, 100, 200}}, kUInt8);
  EXPECT_TRUE(data::affine(u8, 0, 0.5, 0).equal(tensor({{0, 50, 150}}, kUInt8)));
}

TEST(DataTransforms, ResizeBilinear) {
  // Upscaling matches PyTorch's bilinear, align_corners=False.
  expect_close(data::resize_bilinear(tensor({{0.f, 1.f}}), 1, 4), tensor({{0.f, 0.25f, 0.75f, 1.f}}));
  expect_close(data::resize_bilinear(tensor({{0.f, 1.f}, {2.f, 3.f}}), 4, 4), tensor({{0.f, 0.25f, 0.75f, 1.f},
                                                                                      {0.5f, 0.75f, 1.25f, 1.5f},
                                                                                      {1.5f, 1.75f, 2.25f, 2.5f},
                                                                                      {2.f, 2.25f, 2.75f, 3.f}}));
  // Shrinking by 2 without antialias averages pairs; with it, the wider triangle filter (as PIL).
  Tensor row = tensor({{0.f, 1.f, 2.f, 3.f}});
  expect_close(data::resize_bilinear(row, 1, 2, false), tensor({{0.5f, 2.5f}}));
  expect_close(data::resize_bilinear(row, 1, 2, true), tensor({{5.f / 7, 16.f / 7}}));
  // Same size is the identity; a constant stays constant; leading dims are batch dims.
  Tensor x = rand({2, 3, 5, 7});
  expect_close(data::resize_bilinear(x, 5, 7), x);
  expect_close(data::resize_bilinear(full({3, 9, 9}, 0.3), 4, 2), full({3, 4, 2}, 0.3));
  EXPECT_EQ(data::resize_bilinear(x, 11, 2).sizes(), (Shape{2, 3, 11, 2}));
  // u8 in, u8 out, rounded; float64 stays float64.
  EXPECT_TRUE(data::resize_bilinear(tensor({{0, 255}}, kUInt8), 1, 4).equal(tensor({{0, 64, 191, 255}}, kUInt8)));
  EXPECT_EQ(data::resize_bilinear(zeros({4, 4}, kFloat64), 2, 2).dtype(), kFloat64);
  // A 280x280 drawing of a bar shrunk to 28x28 keeps the bar's mean intensity.
  Tensor big = zeros({280, 280});
  big.narrow(1, 100, 80).fill_(1.0);
  Tensor small = data::resize_bilinear(big, 28, 28);
  EXPECT_NEAR(small.mean().item<double>(), big.mean().item<double>(), 1e-3);
  EXPECT_THROW(data::resize_bilinear(tensor({1.f}), 2, 2), ShapeError);
  EXPECT_THROW(data::resize_bilinear(zeros({2, 2}), 0, 2), ValueError);
  EXPECT_THROW(data::resize_bilinear(zeros({2, 2}, kInt64), 1, 1), DTypeError);
}

TEST(DataTransforms, ResizeSmallerEdgeAndCompose) {
  EXPECT_EQ(data::Resize(2)(zeros({3, 4, 8})).sizes(), (Shape{3, 2, 4}));
  EXPECT_EQ(data::Resize(2)(zeros({3, 8, 5})).sizes(), (Shape{3, 3, 2}));
  EXPECT_EQ(data::Resize(6, 3)(zeros({1, 8, 5})).sizes(), (Shape{1, 6, 3}));
  // Compose applies in order: u8 HWC -> float CHW -> crop -> normalize.
  Tensor img = arange(16, kInt64).mul(10).to(kUInt8).view({4, 4, 1});
  data::Compose pipeline(
      {data::ToTensor(), data::CenterCrop(2), data::Normalize({0.5}, {0.5}), [](const Tensor& x) { return x.mul(2); }});
  Tensor expected = tensor({{{50.f, 60.f}, {90.f, 100.f}}}).div(255).sub(0.5).div(0.5).mul(2);
  expect_close(pipeline(img), expected);
  // A default Transform is the identity.
  Tensor x = rand({1, 2, 2});
  EXPECT_TRUE(data::Transform()(x).is_same(x));
}

TEST(DataTransforms, SeededBySampleGenerator) {
  // Without an explicit generator, random transforms draw from sample_generator(): the guard
  // installs a seeded one, so results repeat.
  Tensor x = grid4();
  data::Compose aug({data::RandomCrop(4, 2), data::RandomHorizontalFlip(), data::RandomAffine(15, {0.1, 0.1})});
  Tensor a, b, c;
  {
    Generator g(77);
    data::SampleGeneratorGuard guard(g);
    a = aug(x);
    c = aug(x);
  }
  {
    Generator g(77);
    data::SampleGeneratorGuard guard(g);
    b = aug(x);
  }
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));  // the generator advances
  EXPECT_EQ(&data::sample_generator(), &default_generator(kCPU));
}
