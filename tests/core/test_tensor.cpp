// Tensor basics: metadata, item/data_ptr, dtype conversions, clone/contiguous/copy_, detach and the
// version counter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

TEST(TensorMeta, SizesStridesNumel) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.ndimension(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(t.stride(-2), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_THROW(t.size(3), IndexError);
  EXPECT_THROW(t.stride(-4), IndexError);
}

TEST(TensorMeta, DtypeDeviceAndSizes) {
  Tensor t = ones({5}, kFloat64);
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.element_size(), 8u);
  EXPECT_EQ(t.nbytes(), 40u);
  EXPECT_TRUE(t.is_floating_point());
  EXPECT_TRUE(t.is_cpu());
  EXPECT_FALSE(t.is_cuda());
  EXPECT_EQ(t.device(), kCPU);
  EXPECT_EQ(t.device().str(), "cpu");
  EXPECT_FALSE(ones({1}, kInt32).is_floating_point());
  EXPECT_EQ(ones({1}, kBool).element_size(), 1u);
  EXPECT_EQ(ones({1}, kFloat16).element_size(), 2u);
}

TEST(TensorMeta, DeviceParsing) {
  EXPECT_EQ(Device("cpu"), kCPU);
  EXPECT_EQ(Device("cuda"), Device::cuda(0));
  EXPECT_EQ(Device("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_THROW(Device("gpu"), ValueError);
  EXPECT_THROW(Device("cuda:"), ValueError);
  EXPECT_THROW(Device("cuda:x"), ValueError);
}

TEST(TensorMeta, DTypeNamesAndPromotion) {
  EXPECT_STREQ(dtype_name(kFloat32), "float32");
  EXPECT_STREQ(dtype_name(kInt64), "int64");
  EXPECT_STREQ(dtype_name(kBool), "bool");
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kInt64, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kFloat32, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kFloat16, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
}

TEST(TensorMeta, ItemOfOneElementTensors) {
  EXPECT_DOUBLE_EQ(tensor(2.5).item<double>(), 2.5);
  EXPECT_EQ(tensor({{7}}).item<int64_t>(), 7);
  EXPECT_EQ(tensor({-2.7}).item<int64_t>(), -2);
  EXPECT_TRUE(tensor(true).item<bool>());
  Scalar s = tensor(3).item();
  EXPECT_TRUE(s.is_integral());
  EXPECT_TRUE(tensor(3.f).item().is_floating());
  EXPECT_TRUE(throws_with<ValueError>([] { zeros({2, 2}).item(); }, {"item", "4 elements", "[2, 2]"}));
  EXPECT_THROW(zeros({0}).item(), ValueError);
}

TEST(TensorMeta, DataPtrChecksType) {
  Tensor t = zeros({3});
  EXPECT_NE(t.data_ptr<float>(), nullptr);
  EXPECT_TRUE(throws_with<DTypeError>([&] { t.data_ptr<double>(); }, {"float32", "float64"}));
  EXPECT_THROW(t.data_ptr<int64_t>(), DTypeError);
  EXPECT_NE(zeros({2}, kInt64).data_ptr<int64_t>(), nullptr);
  EXPECT_NE(zeros({2}, kBool).data_ptr<bool>(), nullptr);
}

TEST(TensorMeta, DataPtrOfViewPointsAtOffset) {
  Tensor t = arange(10, kFloat32);
  Tensor v = t.slice(0, 3);
  EXPECT_EQ(v.storage_offset(), 3);
  EXPECT_EQ(v.data_ptr<float>(), t.data_ptr<float>() + 3);
  EXPECT_FLOAT_EQ(*v.data_ptr<float>(), 3);
}

TEST(TensorMeta, UndefinedTensor) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_EQ(u.use_count(), 0);
  EXPECT_THROW(u.sizes(), Error);
  EXPECT_EQ(u.str(), "tensor(undefined)");
}

// ---- conversions ----------------------------------------------------------------------------------
TEST(Conversion, FloatToIntTruncatesTowardZero) {
  Tensor f = tensor({-2.9, -0.5, 0.5, 2.9, 3.0}, kFloat64);
  EXPECT_EQ(int_values(f.to(kInt64)), (std::vector<int64_t>{-2, 0, 0, 2, 3}));
  EXPECT_EQ(int_values(f.to(kInt32)), (std::vector<int64_t>{-2, 0, 0, 2, 3}));
}

TEST(Conversion, FloatToIntSaturates) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor f = tensor(std::vector<double>{1e20, -1e20, inf, -inf, nan, 3e9, -3e9});
  std::vector<int64_t> i64 = int_values(f.to(kInt64));
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64[2], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[3], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64[4], 0);
  EXPECT_EQ(i64[5], 3000000000);
  std::vector<int64_t> i32 = int_values(f.to(kInt32));
  EXPECT_EQ(i32[5], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(i32[6], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(int_values(tensor({300.0, -5.0, 254.6}).to(kUInt8)), (std::vector<int64_t>{255, 0, 254}));
}

TEST(Conversion, ToBoolIsNonzero) {
  EXPECT_EQ(int_values(tensor({0.0, -0.0, 0.5, -2.0}).to(kBool)), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(int_values(tensor({0, 3, -1}).to(kBool)), (std::vector<int64_t>{0, 1, 1}));
  // Values too small for float32 are still nonzero, and NaN is true (as in PyTorch and C++).
  Tensor tiny = tensor(std::vector<double>{1e-50, -1e-300, std::nan("")});
  EXPECT_EQ(int_values(tiny.to(kBool)), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(int_values(tensor(std::vector<int64_t>{int64_t(1) << 40}).to(kBool)), (std::vector<int64_t>{1}));
}

TEST(Conversion, BoolToNumbers) {
  Tensor b = tensor({true, false});
  EXPECT_TRUE(tensor_is(b.to(kFloat32), {2}, {1, 0}));
  EXPECT_EQ(int_values(b.to(kInt64)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(int_values(b.to(kUInt8)), (std::vector<int64_t>{1, 0}));
}

TEST(Conversion, IntNarrowingWraps) {
  Tensor big = tensor(std::vector<int64_t>{(int64_t(1) << 32) + 5, -1, 256 + 7});
  EXPECT_EQ(int_values(big.to(kInt32)), (std::vector<int64_t>{5, -1, 263}));
  EXPECT_EQ(int_values(big.to(kUInt8)), (std::vector<int64_t>{5, 255, 7}));
}

TEST(Conversion, HalfAndBFloat16RoundToNearest) {
  Tensor third = tensor(std::vector<double>{1.0 / 3, 65504, 1e6, 1e-8, -2.5});
  std::vector<double> h = values(third.to(kFloat16));
  EXPECT_EQ(h[0], 0.333251953125);
  EXPECT_EQ(h[1], 65504);
  EXPECT_TRUE(std::isinf(h[2]));  // overflow
  EXPECT_EQ(h[3], 0);             // below the smallest subnormal (6e-8)
  EXPECT_EQ(h[4], -2.5);
  std::vector<double> b = values(third.to(kBFloat16));
  EXPECT_EQ(b[0], 0.333984375);
  EXPECT_EQ(b[2], 999424);
  EXPECT_EQ(b[4], -2.5);
}

TEST(Conversion, ToSameDtypeIsNoCopyUnlessAsked) {
  Tensor t = ones({2});
  EXPECT_TRUE(t.to(kFloat32).is_same(t));
  Tensor c = t.to(kFloat32, /*copy=*/true);
  EXPECT_FALSE(c.is_same(t));
  EXPECT_NE(c.data_ptr(), t.data_ptr());
  EXPECT_TRUE(t.to(kCPU).is_same(t));
}

TEST(Conversion, NonContiguousSourceConverts) {
  Tensor t = tensor({{1.5, 2.5}, {3.5, 4.5}}).t();
  EXPECT_TRUE(tensor_is(t.to(kFloat64), {2, 2}, {1.5, 3.5, 2.5, 4.5}));
  EXPECT_EQ(int_values(t.to(kInt64)), (std::vector<int64_t>{1, 3, 2, 4}));
}

// ---- clone, contiguous, copy_ ---------------------------------------------------------------------
TEST(Copies, CloneIsIndependent) {
  Tensor t = tensor({1., 2., 3.});
  Tensor c = t.clone();
  c.fill_(0);
  EXPECT_TRUE(tensor_is(t, {3}, {1, 2, 3}));
  EXPECT_NE(c.data_ptr(), t.data_ptr());
}

TEST(Copies, CloneOfNonContiguousIsContiguous) {
  Tensor t = arange(6, kFloat32).view({2, 3}).t();
  Tensor c = t.clone();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_TRUE(tensor_is(c, {3, 2}, {0, 3, 1, 4, 2, 5}));
}

TEST(Copies, ContiguousReturnsSelfWhenAlreadyContiguous) {
  Tensor t = zeros({2, 3});
  EXPECT_TRUE(t.contiguous().is_same(t));
  Tensor tt = t.t();
  EXPECT_FALSE(tt.is_contiguous());
  Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (std::vector<int64_t>{2, 1}));
}

TEST(Copies, CopyBroadcastsSource) {
  Tensor dst = zeros({2, 3});
  dst.copy_(tensor({1., 2., 3.}));
  EXPECT_TRUE(tensor_is(dst, {2, 3}, {1, 2, 3, 1, 2, 3}));
  dst.copy_(tensor({{10.}, {20.}}));
  EXPECT_TRUE(tensor_is(dst, {2, 3}, {10, 10, 10, 20, 20, 20}));
  dst.copy_(tensor(7.));
  EXPECT_TRUE(tensor_is(dst, {2, 3}, {7, 7, 7, 7, 7, 7}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { dst.copy_(zeros({3, 3})); }, {"copy_"}));
  EXPECT_THROW(zeros({3}).copy_(zeros({2, 3})), ShapeError);
}

TEST(Copies, CopyConvertsDtypeAndWritesIntoViews) {
  Tensor dst = zeros({2, 2}, kInt64);
  dst.copy_(tensor({{1.9, -1.9}, {2.5, 3.0}}));
  EXPECT_EQ(int_values(dst), (std::vector<int64_t>{1, -1, 2, 3}));
  Tensor base = zeros({3, 3});
  base.t().copy_(arange(9, kFloat32).view({3, 3}));  // write through a transposed view
  EXPECT_TRUE(tensor_is(base, {3, 3}, {0, 3, 6, 1, 4, 7, 2, 5, 8}));
  base.select(1, 1).copy_(tensor({-1., -2., -3.}));
  EXPECT_TRUE(tensor_is(base, {3, 3}, {0, -1, 6, 1, -2, 7, 2, -3, 8}));
}

TEST(Copies, CopyIntoExpandedViewIsRejected) {
  Tensor e = zeros({1, 3}).expand({4, 3});
  EXPECT_THROW(e.copy_(ones({4, 3})), ValueError);
  EXPECT_THROW(e.add_(1), ValueError);
}

TEST(Copies, OverlappingSourceAndDestination) {
  // Source and destination share memory in different layouts: the result is as if the source
  // were read completely before any write (NumPy's rule; PyTorch refuses such calls).
  Tensor x = arange(8, kFloat64);
  x.slice(0, 1).copy_(x.slice(0, 0, 7));
  EXPECT_TRUE(tensor_is(x, {8}, {0, 0, 1, 2, 3, 4, 5, 6}));
  Tensor y = arange(8, kFloat64);
  y.slice(0, 0, 7).copy_(y.slice(0, 1));
  EXPECT_TRUE(tensor_is(y, {8}, {1, 2, 3, 4, 5, 6, 7, 7}));
  Tensor m = arange(4, kFloat64).view({2, 2});
  m.copy_(m.t());
  EXPECT_TRUE(tensor_is(m, {2, 2}, {0, 2, 1, 3}));
  Tensor a = arange(8, kFloat64);
  a.slice(0, 1).add_(a.slice(0, 0, 7));
  EXPECT_TRUE(tensor_is(a, {8}, {0, 1, 3, 5, 7, 9, 11, 13}));
  Tensor b = tensor({1., 2., 3.});
  b.mul_(b[0].add(1));  // a fresh tensor: fine anyway
  b.add_(b[2]);         // broadcast of an element that is itself written
  EXPECT_TRUE(tensor_is(b, {3}, {8, 10, 12}));
  Tensor c = tensor({1., 2., 3.});
  c.add_(c);  // the same layout: elementwise in place is fine
  EXPECT_TRUE(tensor_is(c, {3}, {2, 4, 6}));
  Tensor r = arange(6, kFloat64).view({3, 2});
  r.index_add_(0, tensor({1, 2, 0}), r);  // reads rows it also writes
  EXPECT_TRUE(tensor_is(r, {3, 2}, {4, 6, 2, 4, 6, 8}));
  Tensor s = tensor({1., 2., 3.});
  s.scatter_add_(0, tensor({1, 2, 0}), s);
  EXPECT_TRUE(tensor_is(s, {3}, {4, 3, 5}));
}

TEST(Copies, DetachSharesStorage) {
  Tensor x = tensor({1., 2.}, requires_grad());
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
  d.mul_(3);  // allowed: d does not require grad
  EXPECT_TRUE(tensor_is(x, {2}, {3, 6}));
}

// ---- version counter ------------------------------------------------------------------------------
TEST(Version, InPlaceOpsBumpTheCounter) {
  Tensor t = zeros({4});
  uint32_t v = t.version();
  t.add_(1);
  EXPECT_EQ(t.version(), v + 1);
  t.mul_(2);
  t.fill_(3);
  t.zero_();
  EXPECT_EQ(t.version(), v + 4);
  t.copy_(ones({4}));
  EXPECT_EQ(t.version(), v + 5);
  t.masked_fill_(tensor({true, false, false, true}), 9);
  EXPECT_GT(t.version(), v + 5);
  uint32_t before = t.version();
  Tensor r = t + 1;  // out-of-place ops leave it alone
  (void)r;
  EXPECT_EQ(t.version(), before);
}

TEST(Version, SharedWithViewsAndDetach) {
  Tensor base = zeros({2, 3});
  Tensor row = base[1];
  Tensor d = base.detach();
  uint32_t v = base.version();
  row.add_(1);
  EXPECT_EQ(base.version(), v + 1);
  EXPECT_EQ(d.version(), v + 1);
  d.sub_(1);
  EXPECT_EQ(row.version(), v + 2);
  EXPECT_TRUE(tensor_is(base, {2, 3}, {-1, -1, -1, 0, 0, 0}));
}

TEST(Version, InferenceModeStillBumps) {
  Tensor t = zeros({2});
  uint32_t v = t.version();
  {
    autograd::InferenceMode im;
    t.add_(1);
  }
  EXPECT_EQ(t.version(), v + 1);
  EXPECT_TRUE(tensor_is(t, {2}, {1, 1}));
}

TEST(Version, IndexPutAndScatterBump) {
  Tensor t = zeros({3});
  uint32_t v = t.version();
  t.index_put_({1}, 5.0);
  EXPECT_GT(t.version(), v);
  v = t.version();
  t.scatter_(0, tensor({0}), tensor({2.f}));
  EXPECT_GT(t.version(), v);
  EXPECT_TRUE(tensor_is(t, {3}, {2, 5, 0}));
}

}  // namespace
}  // namespace nabla::testing
