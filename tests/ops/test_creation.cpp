// Tensor creation: tensor() from nested lists and vectors, filled tensors, ranges, eye, random
// tensors (statistics and reproducibility) and from_blob aliasing.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

// ---- tensor() from data ---------------------------------------------------------------------------
TEST(Creation, NestedFloatListInfersFloat32) {
  Tensor t = tensor({{1., 2., 3.}, {4., 5., 6.}});
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(t, {2, 3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{3, 1}));
}

TEST(Creation, NestedIntListInfersInt64) {
  Tensor t = tensor({{1, 2}, {3, 4}, {5, 6}});
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(int_values(t), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(shape_of(t), (std::vector<int64_t>{3, 2}));
}

TEST(Creation, MixedIntAndFloatInfersFloat32) {
  Tensor t = tensor({1, 2.5, 3});
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(t, {3}, {1, 2.5, 3}));
}

TEST(Creation, BoolListInfersBool) {
  Tensor t = tensor({true, false, true});
  EXPECT_EQ(t.dtype(), kBool);
  EXPECT_TRUE(tensor_is(t, {3}, {1, 0, 1}));
}

TEST(Creation, ScalarDataGivesZeroDim) {
  Tensor t = tensor(3.5);
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_DOUBLE_EQ(t.item<double>(), 3.5);
  Tensor i = tensor(7);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.item<int64_t>(), 7);
}

TEST(Creation, ExplicitDtypeOverridesInference) {
  Tensor t = tensor({1, 2, 3}, kFloat64);
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_TRUE(tensor_is(t, {3}, {1, 2, 3}));
  Tensor u = tensor({1.7, -2.2}, kInt32);
  EXPECT_EQ(u.dtype(), kInt32);
  EXPECT_EQ(int_values(u), (std::vector<int64_t>{1, -2}));  // truncation toward zero
}

TEST(Creation, ThreeDimNestedList) {
  Tensor t = tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  EXPECT_EQ(shape_of(t), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(t[1][0][1].item<int64_t>(), 6);
}

TEST(Creation, RaggedListThrowsShapeError) {
  EXPECT_THROW(tensor({{1, 2}, {3}}), ShapeError);
  EXPECT_THROW(tensor({{1, 2}, 3}), ShapeError);
}

TEST(Creation, EmptyListIsFloat32OfShapeZero) {
  Tensor t = tensor(TensorData(std::initializer_list<TensorData>{}));
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_EQ(shape_of(t), (std::vector<int64_t>{0}));
}

TEST(Creation, FromVectorsKeepsElementType) {
  EXPECT_EQ(tensor(std::vector<float>{1, 2}).dtype(), kFloat32);
  EXPECT_EQ(tensor(std::vector<double>{1, 2}).dtype(), kFloat64);
  EXPECT_EQ(tensor(std::vector<int64_t>{1, 2}).dtype(), kInt64);
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).dtype(), kInt32);
  EXPECT_EQ(tensor(std::vector<uint8_t>{1, 2}).dtype(), kUInt8);
  EXPECT_EQ(tensor(std::vector<bool>{true, false}).dtype(), kBool);
  Tensor t = tensor(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_TRUE(tensor_is(t, {3, 2}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tensor(std::vector<int64_t>{1, 2}, kFloat32).dtype(), kFloat32);
}

TEST(Creation, FromVectorWrongCountThrows) {
  EXPECT_TRUE(throws_with<ShapeError>([] { tensor(std::vector<double>{1, 2, 3}, {2, 2}); }, {"tensor", "[2, 2]"}));
}

TEST(Creation, RequiresGradOption) {
  Tensor t = tensor({1., 2.}, requires_grad());
  EXPECT_TRUE(t.requires_grad());
  EXPECT_TRUE(t.is_leaf());
  Tensor z = zeros({2}, dtype(kFloat64).requires_grad(true));
  EXPECT_TRUE(z.requires_grad());
  EXPECT_EQ(z.dtype(), kFloat64);
}

// ---- filled tensors --------------------------------------------------------------------------------
TEST(Creation, ZerosOnesFull) {
  EXPECT_TRUE(tensor_is(zeros({2, 2}), {2, 2}, {0, 0, 0, 0}));
  EXPECT_TRUE(tensor_is(ones({3}), {3}, {1, 1, 1}));
  EXPECT_EQ(zeros({2}).dtype(), kFloat32);
  EXPECT_EQ(ones({2}, kInt32).dtype(), kInt32);
  Tensor f = full({2, 1}, 2.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(f, {2, 1}, {2.5, 2.5}));
}

TEST(Creation, FullInfersDtypeFromScalar) {
  EXPECT_EQ(full({2}, 7).dtype(), kInt64);
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(full({2}, 1.5).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 7, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(int_values(full({2}, int64_t(1) << 40)), (std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}));
}

TEST(Creation, EmptyShapes) {
  Tensor e = empty({0, 4});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(shape_of(e), (std::vector<int64_t>{0, 4}));
  Tensor s = zeros({});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_THROW(zeros({2, -1}), ShapeError);
}

TEST(Creation, LikeFunctionsKeepShapeAndDtype) {
  Tensor base = tensor({{1, 2, 3}}, kInt32);
  Tensor z = zeros_like(base), o = ones_like(base), f = full_like(base, 9), e = empty_like(base);
  for (const Tensor& t : {z, o, f, e}) {
    EXPECT_EQ(t.dtype(), kInt32);
    EXPECT_EQ(shape_of(t), (std::vector<int64_t>{1, 3}));
  }
  EXPECT_EQ(int_values(z), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(int_values(o), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(int_values(f), (std::vector<int64_t>{9, 9, 9}));
  EXPECT_EQ(zeros_like(base, kFloat64).dtype(), kFloat64);
  Tensor r = rand_like(zeros({4}, kFloat64));
  EXPECT_EQ(r.dtype(), kFloat64);
  EXPECT_GE(r.min().item<double>(), 0.0);
  EXPECT_LT(r.max().item<double>(), 1.0);
  // randn_like: the shape and dtype of its argument, the values randn gives after the same seed.
  Tensor like = zeros({2, 500}, kFloat64);
  manual_seed(5);
  Tensor n = randn_like(like);
  manual_seed(5);
  Tensor want = randn({2, 500}, kFloat64);
  EXPECT_EQ(n.dtype(), kFloat64);
  EXPECT_EQ(shape_of(n), (std::vector<int64_t>{2, 500}));
  EXPECT_TRUE(equal(n, want));
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.15);  // 1000 samples: the mean's sd is ~0.03
  EXPECT_NEAR(n.std().item<double>(), 1.0, 0.1);
  EXPECT_EQ(randn_like(zeros({3}, kInt64), kFloat32).dtype(), kFloat32);
}

TEST(Creation, LikeOfNonContiguousIsContiguous) {
  Tensor base = zeros({3, 4}).t();
  Tensor z = zeros_like(base);
  EXPECT_EQ(shape_of(z), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(z.is_contiguous());
}

TEST(Creation, ScalarTensor) {
  Tensor t = scalar_tensor(2.5, kFloat64);
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_DOUBLE_EQ(t.item<double>(), 2.5);
}

// ---- ranges ----------------------------------------------------------------------------------------
TEST(Creation, ArangeIntegers) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(int_values(a), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(int_values(arange(2, 11, 3)), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(int_values(arange(2, 12, 3)), (std::vector<int64_t>{2, 5, 8, 11}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
}

TEST(Creation, ArangeNegativeStep) {
  EXPECT_EQ(int_values(arange(5, 0, -1)), (std::vector<int64_t>{5, 4, 3, 2, 1}));
  EXPECT_EQ(int_values(arange(10, -1, -4)), (std::vector<int64_t>{10, 6, 2}));
  EXPECT_TRUE(tensor_is(arange(1.0, 0.0, -0.25), {4}, {1, 0.75, 0.5, 0.25}));
}

TEST(Creation, ArangeFloatSteps) {
  Tensor a = arange(0.0, 1.0, 0.1);
  EXPECT_EQ(a.dtype(), kFloat32);
  ASSERT_EQ(a.numel(), 10);  // ceil((1 - 0) / 0.1) = 10, as PyTorch
  std::vector<double> want;
  for (int i = 0; i < 10; ++i) want.push_back(0.1 * i);
  EXPECT_TRUE(values_near(values(a), want, 1e-6, 0));
  EXPECT_EQ(arange(0.0, 1.0, 0.3).numel(), 4);  // 0, .3, .6, .9
  EXPECT_EQ(arange(1, 2.5).numel(), 2);         // float end: float32 result
  EXPECT_EQ(arange(1, 2.5).dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(arange(-1.5, 1.5, 1.0, kFloat64), {3}, {-1.5, -0.5, 0.5}));
}

TEST(Creation, ArangeBadArguments) {
  EXPECT_THROW(arange(0, 10, 0), ValueError);
  EXPECT_THROW(arange(0, 10, -1), ValueError);
  EXPECT_THROW(arange(5, 0, 1), ValueError);
}

TEST(Creation, Linspace) {
  EXPECT_TRUE(tensor_is(linspace(0, 1, 5), {5}, {0, 0.25, 0.5, 0.75, 1}));
  EXPECT_TRUE(tensor_is(linspace(-1, 1, 3, kFloat64), {3}, {-1, 0, 1}, 0, 0));
  EXPECT_TRUE(tensor_is(linspace(2, 2, 1), {1}, {2}));
  EXPECT_TRUE(tensor_is(linspace(0, 1, 1), {1}, {0}));  // one step gives start, as PyTorch
  EXPECT_TRUE(tensor_is(linspace(-3, 5, 2), {2}, {-3, 5}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  // The last value is exactly `end`, the first exactly `start`.
  std::vector<double> v = values(linspace(0.1, 0.7, 7, kFloat64));
  EXPECT_EQ(v.front(), 0.1);
  EXPECT_EQ(v.back(), 0.7);
  EXPECT_NEAR(v[3], 0.4, 1e-15);
  EXPECT_TRUE(tensor_is(linspace(5, 1, 5), {5}, {5, 4, 3, 2, 1}));
  EXPECT_THROW(linspace(0, 1, -1), ValueError);
}

TEST(Creation, Eye) {
  EXPECT_TRUE(tensor_is(eye(3), {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_TRUE(tensor_is(eye(2, 4), {2, 4}, {1, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_TRUE(tensor_is(eye(3, 2), {3, 2}, {1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(eye(0).numel(), 0);
  EXPECT_EQ(eye(2, std::nullopt, kInt64).dtype(), kInt64);
  Tensor e = eye(2, std::nullopt, requires_grad());
  EXPECT_TRUE(e.requires_grad());
  EXPECT_TRUE(e.is_leaf());
}

// ---- random ----------------------------------------------------------------------------------------
TEST(Random, RandIsUniformInUnitInterval) {
  manual_seed(1);
  Tensor r = rand({100000});
  std::vector<double> v = values(r);
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  // 100k samples: the mean's standard error is 0.29/316 ~ 1e-3.
  EXPECT_NEAR(mean, 0.5, 5e-3);
  EXPECT_NEAR(var, 1.0 / 12, 2e-3);
  // Each tenth of the interval gets about a tenth of the samples.
  std::vector<int> bins(10);
  for (double x : v) ++bins[static_cast<int>(x * 10)];
  for (int b : bins) EXPECT_NEAR(b, 10000, 600);
}

TEST(Random, RandnHasZeroMeanUnitVariance) {
  manual_seed(2);
  for (DType dt : {kFloat32, kFloat64}) {
    std::vector<double> v = values(randn({100000}, dt));
    double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    double var = 0, within1 = 0;
    for (double x : v) {
      var += (x - mean) * (x - mean);
      within1 += std::fabs(x) < 1;
    }
    var /= v.size();
    EXPECT_NEAR(mean, 0, 0.02) << dt;
    EXPECT_NEAR(var, 1, 0.03) << dt;
    EXPECT_NEAR(within1 / v.size(), 0.6827, 0.01) << dt;  // one-sigma mass of the normal
  }
}

TEST(Random, ManualSeedReproduces) {
  manual_seed(1234);
  Tensor a = randn({50});
  Tensor b = rand({7, 3});
  manual_seed(1234);
  Tensor a2 = randn({50});
  Tensor b2 = rand({7, 3});
  EXPECT_TRUE(equal(a, a2));
  EXPECT_TRUE(equal(b, b2));
  // Consecutive draws differ, and another seed differs.
  EXPECT_FALSE(equal(randn({50}), a));
  manual_seed(4321);
  EXPECT_FALSE(equal(randn({50}), a));
}

TEST(Random, ResultsDoNotDependOnTheThreadCount) {
  int threads = get_num_threads();
  set_num_threads(4);  // several workers even on a small machine
  manual_seed(99);
  Tensor a = randn({100001}), b = rand({70001}, kFloat64), c = randint(0, 1000, {50001});
  set_num_threads(1);
  manual_seed(99);
  Tensor a1 = randn({100001}), b1 = rand({70001}, kFloat64), c1 = randint(0, 1000, {50001});
  set_num_threads(threads);
  EXPECT_TRUE(equal(a, a1));
  EXPECT_TRUE(equal(b, b1));
  EXPECT_TRUE(equal(c, c1));
}

// The element <-> Philox word mapping is part of the contract (the CUDA kernels use the same one, so a
// seed gives the same numbers on both devices): pin it against Philox computed here, with lengths
// that end mid-block.
TEST(Random, ElementsFollowThePhiloxStream) {
  manual_seed(77);
  Generator::State st = default_generator().get_state();
  auto words = [&](uint64_t blk) {
    std::array<uint32_t, 4> w{};
    Philox::block(st.seed, st.offset + blk, w.data());
    return w;
  };
  auto box_muller = [](double u1, double u2, int which) {
    double r = std::sqrt(-2.0 * std::log1p(-u1)), t = 6.283185307179586 * u2;
    return which ? r * std::sin(t) : r * std::cos(t);
  };
  // float uniforms: one word each, four per block (7 elements: 2 blocks).
  std::vector<double> u = values(rand({7}));
  for (int i = 0; i < 7; ++i) EXPECT_EQ(u[i], Philox::to_float(words(i / 4)[i % 4])) << i;
  st.offset += 2;
  // double uniforms: two words each (3 elements: 2 blocks).
  u = values(rand({3}, kFloat64));
  for (int i = 0; i < 3; ++i) {
    auto w = words(i / 2);
    EXPECT_EQ(u[i], i % 2 ? Philox::to_double(w[2], w[3]) : Philox::to_double(w[0], w[1])) << i;
  }
  st.offset += 2;
  // float normals: words (0,1) give elements 4b, 4b+1 (cosine, sine), words (2,3) give 4b+2, 4b+3.
  u = values(randn({6}));
  for (int i = 0; i < 6; ++i) {
    auto w = words(i / 4);
    int pair = (i % 4) / 2;
    float want =
        static_cast<float>(box_muller(Philox::to_float(w[2 * pair]), Philox::to_float(w[2 * pair + 1]), i % 2));
    EXPECT_EQ(static_cast<float>(u[i]), want) << i;
  }
  st.offset += 2;
  // double normals: one pair per block.
  u = values(randn({3}, kFloat64));
  for (int i = 0; i < 3; ++i) {
    auto w = words(i / 2);
    EXPECT_EQ(u[i], box_muller(Philox::to_double(w[0], w[1]), Philox::to_double(w[2], w[3]), i % 2)) << i;
  }
  st.offset += 2;
  // randint: 64 bits per element, two per block.
  std::vector<int64_t> r = int_values(randint(-5, 1000, {3}));
  for (int i = 0; i < 3; ++i) {
    auto w = words(i / 2);
    uint64_t bits = i % 2 ? (uint64_t(w[2]) << 32 | w[3]) : (uint64_t(w[0]) << 32 | w[1]);
    EXPECT_EQ(r[i], -5 + static_cast<int64_t>(bits % 1005)) << i;
  }
  st.offset += 2;
  // bernoulli: float uniform below p.
  u = values(empty({5}).bernoulli_(0.3));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(u[i], Philox::to_float(words(i / 4)[i % 4]) < 0.3 ? 1.0 : 0.0) << i;
}

TEST(Random, NormalAndUniformInPlace) {
  manual_seed(3);
  Tensor t = empty({20000}, kFloat64);
  t.normal_(5, 2);
  std::vector<double> v = values(t);
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  EXPECT_NEAR(mean, 5, 0.06);
  t.uniform_(-3, -1);
  v = values(t);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -3);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), -1);
  EXPECT_THROW(zeros({2}, kInt64).uniform_(), DTypeError);
}

// uniform_(from, to) is from + (to - from) * u and normal_(mean, std) is mean + std * z, each product
// and sum rounded on its own (no fused multiply-add), in the portable and the AVX2 build alike: the
// GPU's kernels take the same steps, so a seed gives the same tensor on both devices.
TEST(Random, AffineMapsRoundEachStepAsTheGpuDoes) {
  auto unfused = [](double a, double b, double c) {
    volatile double product = b * c;  // (volatile: no contraction in the test either)
    return a + product;
  };
  manual_seed(11);
  std::vector<double> u = values(empty({1001}, kFloat64).uniform_(0, 1));
  manual_seed(11);
  std::vector<double> v = values(empty({1001}, kFloat64).uniform_(-0.1, 0.1));
  int differ = 0;
  for (size_t i = 0; i < u.size(); ++i) differ += v[i] != unfused(-0.1, 0.1 - -0.1, u[i]);
  EXPECT_EQ(differ, 0) << "of 1001 uniforms";
  manual_seed(3);
  std::vector<double> z = values(empty({1001}, kFloat64).normal_(0, 1));
  manual_seed(3);
  std::vector<double> n = values(empty({1001}, kFloat64).normal_(0.5, 0.3));
  differ = 0;
  for (size_t i = 0; i < z.size(); ++i) differ += n[i] != unfused(0.5, 0.3, z[i]);
  EXPECT_EQ(differ, 0) << "of 1001 normals";
}

TEST(Random, RandintStaysInRangeAndCoversIt) {
  manual_seed(5);
  Tensor r = randint(-3, 4, {5000});
  EXPECT_EQ(r.dtype(), kInt64);
  std::vector<int64_t> v = int_values(r);
  std::set<int64_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  Tensor r2 = randint(10, {2, 3}, kInt32);
  EXPECT_EQ(r2.dtype(), kInt32);
  EXPECT_EQ(shape_of(r2), (std::vector<int64_t>{2, 3}));
  EXPECT_THROW(randint(5, 5, {2}), ValueError);
}

TEST(Random, RandpermIsAPermutation) {
  manual_seed(6);
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    std::vector<int64_t> v = int_values(randperm(n));
    std::sort(v.begin(), v.end());
    std::vector<int64_t> want(n);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(v, want) << n;
  }
  // Not the identity (probability 1/1000! of failing).
  std::vector<int64_t> p = int_values(randperm(1000));
  int fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed += p[i] == i;
  EXPECT_LT(fixed, 20);
  EXPECT_EQ(randperm(4).dtype(), kInt64);
}

TEST(Random, BernoulliAndMultinomial) {
  manual_seed(7);
  Tensor b = bernoulli(full({20000}, 0.25));
  double m = values(b.mean())[0];
  EXPECT_NEAR(m, 0.25, 0.015);
  Tensor w = tensor({0., 1., 3.});
  std::vector<int64_t> s = int_values(multinomial(w, 4000, true));
  int64_t c1 = std::count(s.begin(), s.end(), 1), c2 = std::count(s.begin(), s.end(), 2);
  EXPECT_EQ(std::count(s.begin(), s.end(), 0), 0);  // zero weight is never drawn
  EXPECT_NEAR(static_cast<double>(c2) / (c1 + c2), 0.75, 0.03);
  std::vector<int64_t> nr = int_values(multinomial(tensor({1., 1., 1., 1.}), 4, false));
  std::sort(nr.begin(), nr.end());
  EXPECT_EQ(nr, (std::vector<int64_t>{0, 1, 2, 3}));
}

// ---- from_blob -------------------------------------------------------------------------------------
TEST(FromBlob, AliasesCallerMemoryBothWays) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = from_blob(data, {2, 3});
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_EQ(t.data_ptr(), static_cast<void*>(data));
  EXPECT_TRUE(tensor_is(t, {2, 3}, {1, 2, 3, 4, 5, 6}));
  data[4] = 50;  // caller writes are seen by the tensor
  EXPECT_FLOAT_EQ(t[1][1].item<float>(), 50);
  t.mul_(2);  // tensor writes are seen by the caller
  EXPECT_FLOAT_EQ(data[0], 2);
  EXPECT_FLOAT_EQ(data[4], 100);
}

TEST(FromBlob, WithDtypeAndStrides) {
  double data[12];
  for (int i = 0; i < 12; ++i) data[i] = i;
  // A column-major 3x4 view: element (i, j) at i + 3 j.
  Tensor t = from_blob(data, {3, 4}, {1, 3}, kFloat64);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(tensor_is(t, {3, 4}, {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  // Every other element.
  Tensor s = from_blob(data, {6}, {2}, kFloat64);
  EXPECT_TRUE(tensor_is(s, {6}, {0, 2, 4, 6, 8, 10}));
  s.fill_(-1);
  EXPECT_EQ(data[2], -1);
  EXPECT_EQ(data[3], 3);
  int64_t idata[3] = {7, 8, 9};
  EXPECT_EQ(int_values(from_blob(idata, {3}, kInt64)), (std::vector<int64_t>{7, 8, 9}));
}

TEST(FromBlob, DeleterRunsWhenLastViewDies) {
  int calls = 0;
  float* buf = new float[4]{1, 2, 3, 4};
  {
    Tensor t = from_blob(buf, {4}, [&](void* p) {
      ++calls;
      delete[] static_cast<float*>(p);
    });
    Tensor v = t.slice(0, 1, 3);
    t = Tensor();
    EXPECT_EQ(calls, 0);  // the view keeps the storage alive
    EXPECT_TRUE(tensor_is(v, {2}, {2, 3}));
  }
  EXPECT_EQ(calls, 1);
}

TEST(FromBlob, NoDeleterLeavesMemoryAlone) {
  std::vector<float> buf = {1, 2};
  { Tensor t = from_blob(buf.data(), {2}); }
  EXPECT_EQ(buf[1], 2);  // still valid (ASan would flag a free of vector memory)
}

}  // namespace
}  // namespace nabla::testing
