// The CPU kernels' special paths against float64 references: the direct convolution and its weight
// gradient (few input taps), GEMM-based convolution with fused packing, the 2x2 max-pool fast path,
// and GEMM shapes around the micro-kernel tile sizes. Float32 results must match the float64 path
// (which always takes the general code) to float32 accuracy. The vectorized float32 exp, tanh,
// sigmoid and silu against float64 in ulp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "nabla.h"
#include "tests/common/value_helpers.h"

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
  Tensor x32 = x.to(kFloat32).requires_grad_(), w32 = w.to(kFloat32).requires_grad_(),
         b32 = b.to(kFloat32).requires_grad_();
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

TEST(CpuKernels, InstructionSetFollowsTheEnvironment) {
  // One choice (core/cpu/isa.h) for the build, the convolutions and the GEMM, with the overrides
  // the cpu_paths tests run under.
  using cpu::Isa;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  const Isa vector = cpu::vector_isa(), gemm = cpu::gemm_isa();
  EXPECT_EQ(cpu::isa(), vector == Isa::base ? Isa::base : Isa::avx2);
  if (env("NABLA_CPU_ISA") == "base") EXPECT_EQ(vector, Isa::base);
  const std::string kernel = env("NABLA_GEMM_KERNEL");
  if (!kernel.empty() && kernel != "avx512") EXPECT_NE(vector, Isa::avx512);
  EXPECT_EQ(gemm, kernel == "generic" ? Isa::base : vector);
  EXPECT_STREQ(cpu::isa_name(Isa::avx512), "avx512");
}

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
    SCOPED_TRACE(::testing::Message() << "c=" << s.c << " h=" << s.h << " o=" << s.o << " k=" << s.k
                                      << " stride=" << s.stride << " groups=" << s.groups);
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
    // Without autograd, max_pool2d skips the indices (each kernel without its index stores): the
    // same values, bit for bit, NaN and -0 included; and the same with a padded (general) window.
    auto same_bits = [](const Tensor& a, const Tensor& b) {
      Tensor ac = a.contiguous(), bc = b.contiguous();
      return ac.sizes() == bc.sizes() && std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
    };
    EXPECT_TRUE(same_bits(max_pool2d(x, {2}), y));
    EXPECT_TRUE(allclose(max_pool2d(x, {3}, {2}, {1}), std::get<0>(max_pool2d_with_indices(x, {3}, {2}, {1})), 0, 0,
                         /*equal_nan=*/true));
    EXPECT_TRUE(allclose(max_pool2d(x.to(kFloat64), {2}), y64, 0, 0, /*equal_nan=*/true));
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
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{11, 31, 7},
                                                            {12, 32, 256},
                                                            {13, 33, 257},
                                                            {25, 65, 300},
                                                            {97, 4, 129},
                                                            {3, 100, 50},
                                                            {241, 17, 5},
                                                            {20, 40, 33},
                                                            {8, 64, 70},
                                                            {10, 33, 100},
                                                            {16, 17, 300},
                                                            {30, 50, 20},
                                                            {5, 40, 9},
                                                            {40, 70, 260},
                                                            {250, 64, 20}}) {
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

// Fewer than 4 rows times a transposed B (linear's weight at batch 1-3): one contiguous dot product
// per output element, summed in 16 partial sums from 16 terms on; against float64, with alpha and
// beta (addmm), a strided A, and each k on both sides of 16.
TEST(CpuKernels, SmallRowsTimesTransposedBMatchFloat64) {
  manual_seed(12);
  for (int64_t m : {1, 2, 3})
    for (int64_t k : {1, 7, 15, 16, 17, 31, 33, 100, 3136})
      for (int64_t n : {1, 10, 128}) {
        Tensor a = randn({m, k}, kFloat64), w = randn({n, k}, kFloat64), c = randn({m, n}, kFloat64);
        Tensor want = (a.unsqueeze(1) * w.unsqueeze(0)).sum({2});  // (m, n)
        EXPECT_LT(max_rel_err(mm(a.to(kFloat32), w.to(kFloat32).t()), want), 1e-5) << m << "x" << n << "x" << k;
        EXPECT_LT(max_rel_err(mm(a, w.t()), want), 1e-12) << m << "x" << n << "x" << k;
        EXPECT_LT(max_rel_err(addmm(c, a, w.t(), 0.5, 2.0), c * 0.5 + want * 2.0), 1e-12) << m << "x" << n << "x" << k;
        Tensor a_strided = a.t().contiguous().t();  // column-major A: a strided row
        EXPECT_LT(max_rel_err(mm(a_strided, w.t()), want), 1e-12) << m << "x" << n << "x" << k;
      }
  // linear at batch 1 equals its row of the batch-8 product (the packed kernel) to float32 rounding.
  Tensor x = randn({8, 3136}), w = randn({128, 3136}), bias = randn({128});
  Tensor all = linear(x, w, bias);
  for (int64_t i : {0, 5}) EXPECT_LT(max_rel_err(linear(x.narrow(0, i, 1), w, bias), all.narrow(0, i, 1)), 1e-5);
}

TEST(CpuKernels, ReducingOnlySizeOneDimsCopiesTheInput) {
  // Regression: a reduction whose reduced dims all have size 1 read past its dim list.
  Tensor x = arange(6, kFloat32).view({2, 1, 3});
  EXPECT_TRUE(equal(x.sum({1}), x.view({2, 3})));
  EXPECT_TRUE(equal(x.sum({1}, true), x));
  EXPECT_TRUE(equal(x.amax({1}), x.view({2, 3})));
  EXPECT_TRUE(equal(x.sum({0, 1}), tensor({3.f, 5.f, 7.f})));
}

// ---- float32 exp, tanh, sigmoid, silu (core/cpu/vmath.h) --------------------------------------------
namespace {

// Position of a float on the number line in units of ulp (adjacent floats differ by 1).
int64_t ulp_index(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof(i));
  return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : i;
}

// Inputs over the whole range where the functions change (dense near 0), the edges of exp's range,
// arguments that are subnormal, and the special values.
std::vector<float> transcendental_inputs() {
  std::vector<float> v;
  for (double x = -110; x <= 110; x += 0.00371) v.push_back(static_cast<float>(x));
  for (double x = -1; x <= 1; x += 1.7e-5) v.push_back(static_cast<float>(x));
  for (int e = -149; e <= 6; e += 5) {
    v.push_back(std::ldexp(1.0f, e));
    v.push_back(-std::ldexp(1.37f, e));
  }
  for (float x : {88.72f, 88.7228f, 88.73f, 89.5f, -87.33f, -87.34f, -103.9f, -104.2f, 0.625f, -0.625f, 0.62499f})
    v.push_back(x);
  return v;
}

}  // namespace

// The vectorized float32 forms are within 2 ulp of the correctly rounded float64 result wherever that
// is a normal float, give libm's answers for 0, -0, inf, -inf and NaN, and take the same path for
// strided inputs.
TEST(CpuKernels, Float32ExpTanhSigmoidSiluAreWithinTwoUlp) {
  std::vector<float> v = transcendental_inputs();
  Tensor x = from_blob(v.data(), {static_cast<int64_t>(v.size())}, kFloat32);
  struct Fn {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
  };
  const Fn fns[] = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](double d) { return std::exp(d); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double d) { return std::tanh(d); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, [](double d) { return 1 / (1 + std::exp(-d)); }},
      {"silu", [](const Tensor& t) { return silu(t); }, [](double d) { return d / (1 + std::exp(-d)); }},
  };
  for (const Fn& f : fns) {
    Tensor y = f.op(x);
    const float* yp = y.data_ptr<float>();
    int64_t worst = 0;
    float worst_at = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      double r = f.ref(v[i]);
      // sigmoid and silu of large negative x pass through 1 / (1 + exp(-x)) with exp(-x) beyond
      // float range (as libm's float formula does): only values whose 1 + exp(-x) is a float count.
      if (std::string(f.name) != "exp" && std::string(f.name) != "tanh" && v[i] < -80) continue;
      float rf = static_cast<float>(r);
      if (std::fabs(rf) < std::numeric_limits<float>::min()) {
        EXPECT_NEAR(yp[i], rf, 2 * std::numeric_limits<float>::denorm_min()) << f.name << "(" << v[i] << ")";
        continue;
      }
      int64_t u = std::llabs(ulp_index(yp[i]) - ulp_index(rf));
      if (u > worst) worst = u, worst_at = v[i];
    }
    EXPECT_LE(worst, 2) << f.name << " is " << worst << " ulp off at x = " << worst_at;
    // A strided view takes the same per-element function.
    Tensor strided = x.narrow(0, 0, 2000).view({1000, 2}).t();
    EXPECT_TRUE(f.op(strided).equal(f.op(strided.contiguous()))) << f.name << " on a strided input";
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor s = tensor({0.0f, -0.0f, inf, -inf, nan});
  std::vector<double> e = nabla::testing::values(exp(s)), t = nabla::testing::values(tanh(s)),
                      g = nabla::testing::values(sigmoid(s));
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], 1.0f);
  EXPECT_EQ(e[2], inf);
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(t[0], 0.0f);
  EXPECT_TRUE(std::signbit(t[1])) << "tanh(-0) is -0";
  EXPECT_EQ(t[2], 1.0f);
  EXPECT_EQ(t[3], -1.0f);
  EXPECT_TRUE(std::isnan(t[4]));
  EXPECT_EQ(g[0], 0.5f);
  EXPECT_EQ(g[2], 1.0f);
  EXPECT_EQ(g[3], 0.0f);
  EXPECT_TRUE(std::isnan(g[4]));
}
