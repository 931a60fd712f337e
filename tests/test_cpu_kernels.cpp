// The CPU kernels' special paths against float64 references: the direct convolution and its weight
// gradient (few input taps), GEMM-based convolution with fused packing, the 2x2 max-pool fast path,
// and GEMM shapes around the micro-kernel tile sizes. Float32 results must match the float64 path
// (which always takes the general code) to float32 accuracy.
#include <gtest/gtest.h>

#include <cmath>

#include "nabla.h"

using namespace nabla;

namespace {

double max_rel_err(const Tensor& got, const Tensor& want) {
  Tensor g = got.detach().to(kFloat64), w = want.detach().to(kFloat64);
  double scale = std::max(1.0, w.abs().max().item<double>());
  return (g - w).abs().max().item<double>() / scale;
}

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad, groups;
};

void check_conv(const ConvCase& s) {
  manual_seed(7);
  Tensor x = randn({s.n, s.c, s.h, s.w}, kFloat64), w = randn({s.o, s.c / s.groups, s.k, s.k}, kFloat64);
  Tensor b = randn({s.o}, kFloat64);
  Tensor x32 = x.to(kFloat32).requires_grad_(), w32 = w.to(kFloat32).requires_grad_(), b32 = b.to(kFloat32).requires_grad_();
  Tensor x64 = x.clone().requires_grad_(), w64 = w.clone().requires_grad_(), b64 = b.clone().requires_grad_();
  Tensor y32 = conv2d(x32, w32, b32, s.stride, s.pad, 1, s.groups);
  Tensor y64 = conv2d(x64, w64, b64, s.stride, s.pad, 1, s.groups);
  EXPECT_LT(max_rel_err(y32, y64), 1e-5) << "forward";
  Tensor gy = randn(y64.sizes(), kFloat64);
  y32.backward(gy.to(kFloat32));
  y64.backward(gy);
  EXPECT_LT(max_rel_err(x32.grad(), x64.grad()), 1e-5) << "input grad";
  EXPECT_LT(max_rel_err(w32.grad(), w64.grad()), 1e-5) << "weight grad";
  EXPECT_LT(max_rel_err(b32.grad(), b64.grad()), 1e-5) << "bias grad";
}

}  // namespace

TEST(CpuKernels, ConvFirstLayerShapesMatchFloat64) {
  // LeNet's and the CNN's first layers (direct kernels), odd widths, padding, rows of 1 to 4 AVX2
  // vectors and channel counts that leave partial blocks, a 7-wide kernel (the AVX2 weight gradient
  // takes the GEMM for it); one image and an odd count (the weight gradient splits the images
  // between threads).
  for (ConvCase s : {ConvCase{4, 1, 28, 28, 10, 5, 1, 0, 1}, ConvCase{4, 1, 28, 28, 32, 3, 1, 1, 1},
                     ConvCase{3, 2, 9, 17, 5, 3, 1, 1, 1}, ConvCase{2, 3, 7, 31, 9, 3, 1, 2, 1},
                     ConvCase{2, 1, 5, 33, 3, 1, 1, 0, 1}, ConvCase{1, 1, 28, 28, 10, 5, 1, 0, 1},
                     ConvCase{5, 2, 12, 12, 7, 5, 1, 2, 1}, ConvCase{3, 1, 6, 6, 9, 3, 1, 0, 1},
                     ConvCase{2, 1, 10, 10, 3, 7, 1, 0, 1}}) {
    SCOPED_TRACE(::testing::Message() << "c=" << s.c << " h=" << s.h << " w=" << s.w << " o=" << s.o << " k=" << s.k);
    check_conv(s);
  }
}

TEST(CpuKernels, ConvGemmShapesMatchFloat64) {
  // LeNet's and the CNN's second layers, stride 2, groups, 1x1; even kernel widths, a 16-wide image
  // and images up to 8 wide (the input gradient's narrow col2im pairs kernel columns and masks
  // 16-lane rows, or two 8-lane halves with AVX2).
  for (ConvCase s : {ConvCase{4, 10, 12, 12, 20, 5, 1, 0, 1}, ConvCase{2, 32, 14, 14, 64, 3, 1, 1, 1},
                     ConvCase{2, 8, 11, 9, 12, 3, 2, 1, 1}, ConvCase{2, 8, 10, 10, 8, 3, 1, 1, 4},
                     ConvCase{2, 16, 7, 7, 24, 1, 1, 0, 1}, ConvCase{2, 3, 9, 13, 4, 4, 1, 1, 1},
                     ConvCase{2, 6, 16, 16, 4, 2, 1, 0, 1}, ConvCase{3, 4, 6, 7, 5, 3, 1, 1, 1},
                     ConvCase{2, 3, 8, 8, 4, 5, 1, 2, 1}, ConvCase{2, 5, 9, 4, 3, 4, 1, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "c=" << s.c << " h=" << s.h << " o=" << s.o << " k=" << s.k << " stride="
                                      << s.stride << " groups=" << s.groups);
    check_conv(s);
  }
}

TEST(CpuKernels, MaxPool2x2FastPathMatchesGeneralPath) {
  manual_seed(3);
  // Odd sizes leave a border the 2x2/stride-2 path must skip; ties pick the first index; rows of
  // more than 16 outputs span several vector chunks; a NaN wins its window (the first NaN), and a
  // window of zeros keeps its first zero's sign.
  for (Shape s : {Shape{2, 3, 8, 8}, Shape{1, 2, 7, 9}, Shape{2, 2, 24, 40}, Shape{1, 3, 6, 35}, Shape{1, 1, 4, 70}}) {
    Tensor x = randn(s).round();  // many ties
    {
      float* xm = x.data_ptr<float>();
      int64_t n = x.numel();
      for (int64_t i = 0; i < n; i += 13) xm[i] = std::nanf("");
      for (int64_t i = 5; i < n; i += 17) xm[i] = -0.0f;
    }
    auto [y, idx] = max_pool2d_with_indices(x, {2});
    auto [yr, ir] = max_pool2d_with_indices(x, {2}, {2}, {0}, {1}, false);
    Tensor y64 = max_pool2d(x.to(kFloat64), {2, 2}, {2, 2}, {0, 0}, {1, 1});  // float64 takes the general path
    EXPECT_TRUE(allclose(y.to(kFloat64), y64, 1e-5, 1e-8, /*equal_nan=*/true));
    // The index of the first maximum in each window (NaN winning), computed here directly.
    Tensor xc = x.contiguous(), yc = y.contiguous();
    const float* xp = xc.data_ptr<float>();
    const float* yp = yc.data_ptr<float>();
    Tensor ic = idx.contiguous();
    const int64_t* ip = ic.data_ptr<int64_t>();
    int64_t H = s[2], W = s[3], Ho = H / 2, Wo = W / 2, planes = s[0] * s[1];
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          const float* xpl = xp + p * H * W;
          int64_t best = (2 * i) * W + 2 * j;
          for (int64_t di = 0; di < 2; ++di)
            for (int64_t dj = 0; dj < 2; ++dj) {
              int64_t k = (2 * i + di) * W + 2 * j + dj;
              float v = xpl[k], b = xpl[best];
              if (v > b || (std::isnan(v) && !std::isnan(b))) best = k;
            }
          const int64_t o = (p * Ho + i) * Wo + j;
          ASSERT_EQ(ip[o], best) << "plane " << p << " (" << i << ", " << j << ")";
          float want = xpl[best];
          if (std::isnan(want)) ASSERT_TRUE(std::isnan(yp[o]));
          else ASSERT_EQ(std::signbit(yp[o]), std::signbit(want)) << o;
        }
  }
}

TEST(CpuKernels, GemmTileEdgesMatchFloat64) {
  manual_seed(11);
  // Sizes on both sides of the micro-kernel tiles (6/12 rows, 16/32 columns) and cache blocks, and
  // row counts that pick each kernel height (AVX-512: 12, 10, 8 rows; AVX2: 6, 5, 4).
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{11, 31, 7},   {12, 32, 256}, {13, 33, 257}, {25, 65, 300},
                                                            {97, 4, 129},  {3, 100, 50},  {241, 17, 5},  {20, 40, 33},
                                                            {8, 64, 70},   {10, 33, 100}, {16, 17, 300}, {30, 50, 20},
                                                            {5, 40, 9},    {40, 70, 260}, {250, 64, 20}}) {
    Tensor a = randn({m, k}, kFloat64), b = randn({k, n}, kFloat64);
    Tensor want = (a.unsqueeze(2) * b.unsqueeze(0)).sum({1});
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor A = ta ? a.t().contiguous().t() : a, B = tb ? b.t().contiguous().t() : b;
        EXPECT_LT(max_rel_err(mm(A.to(kFloat32), B.to(kFloat32)), want), 1e-5) << m << "x" << n << "x" << k;
        EXPECT_LT(max_rel_err(mm(A, B), want), 1e-12) << m << "x" << n << "x" << k;
      }
  }
}

TEST(CpuKernels, ReducingOnlySizeOneDimsCopiesTheInput) {
  // Regression: a reduction whose reduced dims all have size 1 read past its dim list.
  Tensor x = arange(6, kFloat32).view({2, 1, 3});
  EXPECT_TRUE(equal(x.sum({1}), x.view({2, 3})));
  EXPECT_TRUE(equal(x.sum({1}, true), x));
  EXPECT_TRUE(equal(x.amax({1}), x.view({2, 3})));
  EXPECT_TRUE(equal(x.sum({0, 1}), tensor({3.f, 5.f, 7.f})));
}
