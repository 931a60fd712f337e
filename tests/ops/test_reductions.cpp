// Reductions, scans, sort/topk and softmax against float64 references computed line by line,
// with dims, keepdim, non-contiguous and empty inputs, NaN propagation and tie rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const float kInff = std::numeric_limits<float>::infinity();
const float kNaNf = std::numeric_limits<float>::quiet_NaN();

using LineFn = std::function<double(const std::vector<double>&)>;

// Reduces `x` along `dim` in float64: fn sees each line's values in order. The result has the
// reduced dim removed (or kept as size 1).
Tensor ref_reduce(const Tensor& x, int64_t dim, const LineFn& fn, bool keepdim = false) {
  std::vector<int64_t> s = shape_of(x);
  int64_t d = dim < 0 ? dim + static_cast<int64_t>(s.size()) : dim;
  std::vector<double> v = values(x);
  int64_t outer = 1, len = s[d], inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= s[i];
  for (size_t i = d + 1; i < s.size(); ++i) inner *= s[i];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line;
      for (int64_t j = 0; j < len; ++j) line.push_back(v[(o * len + j) * inner + i]);
      out.push_back(fn(line));
    }
  std::vector<int64_t> os = s;
  if (keepdim) os[d] = 1;
  else os.erase(os.begin() + d);
  return f64(out, os);
}

// The same for a scan (the output has x's shape): fn maps a line to a line.
Tensor ref_scan(const Tensor& x, int64_t dim,
                const std::function<std::vector<double>(const std::vector<double>&)>& fn) {
  std::vector<int64_t> s = shape_of(x);
  int64_t d = dim < 0 ? dim + static_cast<int64_t>(s.size()) : dim;
  std::vector<double> v = values(x), out(v.size());
  int64_t outer = 1, len = s[d], inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= s[i];
  for (size_t i = d + 1; i < s.size(); ++i) inner *= s[i];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<double> line;
      for (int64_t j = 0; j < len; ++j) line.push_back(v[(o * len + j) * inner + i]);
      std::vector<double> r = fn(line);
      for (int64_t j = 0; j < len; ++j) out[(o * len + j) * inner + i] = r[j];
    }
  return f64(out, s);
}

double l_sum(const std::vector<double>& l) { return std::accumulate(l.begin(), l.end(), 0.0); }
double l_mean(const std::vector<double>& l) { return l_sum(l) / l.size(); }
double l_prod(const std::vector<double>& l) { return std::accumulate(l.begin(), l.end(), 1.0, std::multiplies<>()); }
double l_max(const std::vector<double>& l) { return *std::max_element(l.begin(), l.end()); }
double l_min(const std::vector<double>& l) { return *std::min_element(l.begin(), l.end()); }
double l_var(const std::vector<double>& l, int correction) {
  double m = l_mean(l), s = 0;
  for (double x : l) s += (x - m) * (x - m);
  return s / (static_cast<double>(l.size()) - correction);
}
double l_lse(const std::vector<double>& l) {
  double m = l_max(l), s = 0;
  for (double x : l) s += std::exp(x - m);
  return m + std::log(s);
}

// A (2, 3, 4) float64 test tensor and a non-contiguous tensor with the same values.
Tensor cube() { return lcg_tensor({2, 3, 4}, 42, kFloat64, -2, 2); }
Tensor cube_noncontig() {
  Tensor c = cube();
  // Stored as (4, 3, 2) and permuted back: same values, no dim contiguous.
  Tensor stored = c.permute({2, 1, 0}).contiguous();
  Tensor v = stored.permute({2, 1, 0});
  EXPECT_FALSE(v.is_contiguous());
  return v;
}

// ---- sum / mean / prod ---------------------------------------------------------------------------
TEST(Reduce, SumAllAndPerDim) {
  Tensor x = cube();
  EXPECT_NEAR(x.sum().item<double>(), l_sum(values(x)), 1e-13);
  for (int64_t d : {0, 1, 2, -1}) {
    EXPECT_TRUE(tensor_near(x.sum(d), ref_reduce(x, d, l_sum), 1e-13)) << d;
    EXPECT_TRUE(tensor_near(x.sum(d, true), ref_reduce(x, d, l_sum, true), 1e-13)) << d;
  }
}

TEST(Reduce, SumMultipleDims) {
  Tensor x = cube();
  Tensor r = x.sum({0, 2});
  EXPECT_TRUE(tensor_near(r, ref_reduce(ref_reduce(x, 2, l_sum), 0, l_sum), 1e-13));
  Tensor k = x.sum({2, 0}, true);
  EXPECT_EQ(shape_of(k), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_TRUE(values_near(values(k), values(r), 1e-13, 0));
  EXPECT_THROW(x.sum({1, 1}), ValueError);
  EXPECT_THROW(x.sum(3), IndexError);
}

TEST(Reduce, NonContiguousInputsMatch) {
  Tensor x = cube(), nc = cube_noncontig();
  for (int64_t d : {0, 1, 2}) {
    EXPECT_TRUE(tensor_near(nc.sum(d), ref_reduce(x, d, l_sum), 1e-13)) << d;
    EXPECT_TRUE(tensor_near(nc.mean(d), ref_reduce(x, d, l_mean), 1e-13)) << d;
    EXPECT_TRUE(tensor_near(std::get<0>(nc.max(d)), ref_reduce(x, d, l_max), 0)) << d;
    EXPECT_TRUE(tensor_near(nc.prod(d), ref_reduce(x, d, l_prod), 1e-13)) << d;
  }
  EXPECT_NEAR(nc.sum().item<double>(), l_sum(values(x)), 1e-13);
  EXPECT_TRUE(tensor_near(nc.sum({0, 1}), ref_reduce(ref_reduce(x, 1, l_sum), 0, l_sum), 1e-13));
  // A sliced (strided) input and an expanded (stride-0) one.
  Tensor sl = x.slice(2, 0, std::nullopt, 2);
  EXPECT_TRUE(tensor_near(sl.sum(2), ref_reduce(sl.contiguous(), 2, l_sum), 1e-13));
  Tensor ex = tensor({1., 2., 3.}).expand({4, 3});
  EXPECT_TRUE(tensor_is(ex.sum(0), {3}, {4, 8, 12}));
  EXPECT_DOUBLE_EQ(ex.sum().item<double>(), 24);
}

TEST(Reduce, MeanAndDtypes) {
  Tensor x = cube();
  EXPECT_NEAR(x.mean().item<double>(), l_mean(values(x)), 1e-14);
  EXPECT_TRUE(tensor_near(x.mean({1}, true), ref_reduce(x, 1, l_mean, true), 1e-14));
  // Integer sums are int64; mean of an integer tensor is an error, as in PyTorch.
  Tensor i = tensor({{1, 2}, {3, 4}}, kInt32);
  EXPECT_EQ(i.sum().dtype(), kInt64);
  EXPECT_EQ(i.sum().item<int64_t>(), 10);
  EXPECT_EQ(tensor({true, true, false}).sum().item<int64_t>(), 2);
  EXPECT_EQ(tensor({200, 100}, kUInt8).sum().item<int64_t>(), 300);  // no uint8 overflow
  EXPECT_THROW(i.mean(), DTypeError);
  EXPECT_EQ(i.sum(kFloat64).dtype(), kFloat64);
  EXPECT_EQ(i.sum(std::vector<int64_t>{0}, false, kFloat32).dtype(), kFloat32);
}

TEST(Reduce, Float32SumsAccumulateInDouble) {
  // 2^24 + 1 is not representable in float32; a float accumulator would get stuck at 2^24.
  Tensor ones_ = ones({(1 << 24) + 8});
  EXPECT_EQ(ones_.sum().item<double>(), static_cast<double>((1 << 24) + 8));
  Tensor small = full({1000000}, 0.1f);
  EXPECT_NEAR(small.sum().item<double>(), 100000 * 1.0000000149011612, 1e-2);
}

TEST(Reduce, ResultsDoNotDependOnTheThreadCount) {
  Tensor x = lcg_tensor({300001}, 77, kFloat32, -1, 1);
  Tensor m = lcg_tensor({600, 700}, 78, kFloat32, -1, 1);
  int threads = get_num_threads();
  set_num_threads(4);  // several workers even on a small machine
  double s = x.sum().item<double>();
  Tensor cols = m.sum(0), rows = m.sum(1);
  set_num_threads(1);
  double s1 = x.sum().item<double>();
  Tensor cols1 = m.sum(0), rows1 = m.sum(1);
  set_num_threads(threads);
  EXPECT_EQ(s, s1);  // bit-identical: fixed blocks combined in order
  EXPECT_TRUE(equal(cols, cols1));
  EXPECT_TRUE(equal(rows, rows1));
}

TEST(Reduce, Prod) {
  Tensor x = tensor({{1., 2., 3.}, {4., 0.5, -1.}});
  EXPECT_DOUBLE_EQ(x.prod().item<double>(), -12);
  EXPECT_TRUE(tensor_is(x.prod(0), {3}, {4, 1, -3}));
  EXPECT_TRUE(tensor_is(x.prod(1, true), {2, 1}, {6, -2}));
  EXPECT_EQ(tensor({2, 3, 4}).prod().item<int64_t>(), 24);
  EXPECT_EQ(tensor({2, 3}, kInt32).prod().dtype(), kInt64);
}

TEST(Reduce, EmptyTensors) {
  Tensor e = zeros({0, 3});
  EXPECT_DOUBLE_EQ(e.sum().item<double>(), 0);
  EXPECT_TRUE(tensor_is(e.sum(0), {3}, {0, 0, 0}));
  EXPECT_EQ(shape_of(e.sum(1)), (std::vector<int64_t>{0}));
  EXPECT_TRUE(tensor_is(e.prod(0), {3}, {1, 1, 1}));
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));  // 0 / 0, as PyTorch
  EXPECT_TRUE(tensor_is(e.mean(0), {3}, {kNaN, kNaN, kNaN}));
  EXPECT_FALSE(e.any().item<bool>());
  EXPECT_TRUE(e.all().item<bool>());
  EXPECT_THROW(e.max(), ValueError);
  EXPECT_THROW(e.max(0), IndexError);
  EXPECT_EQ(shape_of(std::get<0>(e.max(1))), (std::vector<int64_t>{0}));  // reducing a non-empty dim is fine
  EXPECT_THROW(e.amax({0}), IndexError);
  EXPECT_EQ(shape_of(e.amax({1})), (std::vector<int64_t>{0}));  // only the non-empty dim: fine, as PyTorch
  EXPECT_EQ(shape_of(e.amin({1}, true)), (std::vector<int64_t>{0, 1}));
}

TEST(Reduce, ZeroDimInputs) {
  Tensor s = tensor(2.5);
  EXPECT_DOUBLE_EQ(s.sum().item<double>(), 2.5);
  EXPECT_EQ(s.sum(0).dim(), 0);
  EXPECT_DOUBLE_EQ(s.sum(-1, true).item<double>(), 2.5);
  EXPECT_DOUBLE_EQ(s.max().item<double>(), 2.5);
  auto [v, i] = s.max(0);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(s.prod().item<double>(), 2.5);
  EXPECT_THROW(s.sum(1), IndexError);
}

// ---- max / min / argmax / argmin ------------------------------------------------------------------
TEST(Reduce, MaxMinValuesAndIndices) {
  Tensor x = cube();
  EXPECT_DOUBLE_EQ(max(x).item<double>(), l_max(values(x)));
  EXPECT_DOUBLE_EQ(min(x).item<double>(), l_min(values(x)));
  for (int64_t d : {0, 1, 2}) {
    auto [mv, mi] = x.max(d);
    EXPECT_TRUE(tensor_near(mv, ref_reduce(x, d, l_max), 0));
    EXPECT_EQ(mi.dtype(), kInt64);
    // The index points at the maximum.
    EXPECT_TRUE(tensor_near(x.gather(d, mi.unsqueeze(d)).squeeze(d), mv, 0));
    auto [nv, ni] = x.min(d, true);
    EXPECT_TRUE(tensor_near(nv, ref_reduce(x, d, l_min, true), 0));
    EXPECT_TRUE(tensor_near(x.gather(d, ni), nv, 0));
  }
  EXPECT_TRUE(tensor_near(x.amax({0, 2}), ref_reduce(ref_reduce(x, 2, l_max), 0, l_max), 0));
  EXPECT_TRUE(tensor_near(x.amin({1}, true), ref_reduce(x, 1, l_min, true), 0));
}

TEST(Reduce, TiesPickTheFirstIndex) {
  Tensor x = tensor({{3., 1., 3.}, {0., 0., -1.}});
  auto [v, i] = x.max(1);
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{0, 0}));
  auto [mv, mi] = x.min(1);
  EXPECT_EQ(int_values(mi), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(argmax(tensor({1, 5, 5, 2})).item<int64_t>(), 1);
  EXPECT_EQ(argmin(tensor({4., 1., 1., 1.})).item<int64_t>(), 1);
}

TEST(Reduce, NaNPropagatesInMaxAndMin) {
  Tensor x = tensor(std::vector<double>{1, kNaN, 3, 2}, {2, 2});  // [[1, nan], [3, 2]]
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_TRUE(std::isnan(min(x).item<double>()));
  auto [v, i] = x.max(1);
  EXPECT_TRUE(values_near(values(v), {kNaN, 3}, 0, 0));
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{1, 0}));
  auto [nv, ni] = x.min(0);
  EXPECT_TRUE(values_near(values(nv), {1, kNaN}, 0, 0));
  EXPECT_EQ(int_values(ni), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(argmax(tensor(std::vector<double>{1, 5, kNaN, 7})).item<int64_t>(), 2);
  EXPECT_TRUE(values_near(values(x.amax({1})), {kNaN, 3}, 0, 0));
  // A long row exercises the 4-accumulator loop.
  std::vector<double> row(1001, 1.0);
  row[777] = kNaN;
  EXPECT_TRUE(std::isnan(max(tensor(row)).item<double>()));
  EXPECT_TRUE(std::isnan(tensor(row).sum().item<double>()));
}

TEST(Reduce, ArgmaxArgminDimsAndKeepdim) {
  Tensor x = tensor({{1., 9., 3.}, {7., 2., 8.}});
  EXPECT_EQ(argmax(x).item<int64_t>(), 1);  // flattened index
  EXPECT_EQ(argmin(x).item<int64_t>(), 0);
  EXPECT_EQ(int_values(argmax(x, 0)), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(int_values(argmin(x, 1)), (std::vector<int64_t>{0, 1}));
  Tensor k = argmax(x, 1, true);
  EXPECT_EQ(shape_of(k), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(shape_of(argmax(x, std::nullopt, true)), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(int_values(argmax(x.t(), 1)), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(int_values(argmax(tensor({3, 7, 7}, kInt32))), (std::vector<int64_t>{1}));
}

TEST(Reduce, MaxOfIntegersAndBool) {
  Tensor i = tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -5, 3});
  EXPECT_EQ(max(i).item<int64_t>(), 3);
  EXPECT_EQ(min(i).item<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(max(tensor({10, 250}, kUInt8)).item<int64_t>(), 250);
}

// ---- statistics ------------------------------------------------------------------------------------
TEST(Reduce, VarAndStd) {
  Tensor x = cube();
  std::vector<double> all = values(x);
  EXPECT_NEAR(x.var().item<double>(), l_var(all, 1), 1e-13);
  EXPECT_NEAR(x.var(false).item<double>(), l_var(all, 0), 1e-13);
  EXPECT_NEAR(x.std().item<double>(), std::sqrt(l_var(all, 1)), 1e-13);
  for (int64_t d : {0, 1, 2}) {
    EXPECT_TRUE(tensor_near(var(x, {d}), ref_reduce(x, d, [](auto& l) { return l_var(l, 1); }), 1e-13));
    EXPECT_TRUE(tensor_near(var(x, {d}, 0, true),
                            ref_reduce(
                                x, d, [](auto& l) { return l_var(l, 0); }, true),
                            1e-13));
    EXPECT_TRUE(
        tensor_near(nabla::std(x, {d}), ref_reduce(x, d, [](auto& l) { return std::sqrt(l_var(l, 1)); }), 1e-13));
  }
  EXPECT_TRUE(tensor_near(var(cube_noncontig(), {1}), ref_reduce(x, 1, [](auto& l) { return l_var(l, 1); }), 1e-13));
  auto [v, m] = var_mean(x, {2});
  EXPECT_TRUE(tensor_near(m, ref_reduce(x, 2, l_mean), 1e-14));
  EXPECT_TRUE(tensor_near(v, ref_reduce(x, 2, [](auto& l) { return l_var(l, 1); }), 1e-13));
  // One element with correction 1: 0 / 0.
  EXPECT_TRUE(std::isnan(tensor({5.}).var().item<double>()));
  EXPECT_DOUBLE_EQ(tensor({5.}).var(false).item<double>(), 0);
  EXPECT_THROW(tensor({1, 2}).var(), DTypeError);
}

TEST(Reduce, VarIsStableForLargeOffsets) {
  // A two-pass variance survives a large common offset that a sum-of-squares formula would not.
  Tensor x = tensor(std::vector<double>{1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4});
  EXPECT_NEAR(x.var().item<double>(), 5.0 / 3, 1e-6);
}

TEST(Reduce, Norms) {
  Tensor x = tensor(std::vector<double>{3, -4, 0, 12}, {2, 2});
  EXPECT_DOUBLE_EQ(x.norm().item<double>(), 13);
  EXPECT_DOUBLE_EQ(x.norm(1).item<double>(), 19);
  EXPECT_DOUBLE_EQ(x.norm(INFINITY).item<double>(), 12);
  EXPECT_DOUBLE_EQ(x.norm(-INFINITY).item<double>(), 0);
  EXPECT_DOUBLE_EQ(x.norm(0).item<double>(), 3);  // count of nonzeros
  EXPECT_NEAR(x.norm(3).item<double>(), std::cbrt(27 + 64 + 1728), 1e-12);
  EXPECT_TRUE(tensor_is(x.norm(2, {1}), {2}, {5, 12}));
  EXPECT_TRUE(tensor_is(x.norm(1, {0}, true), {1, 2}, {3, 16}));
  EXPECT_TRUE(tensor_is(x.t().norm(2, {0}), {2}, {5, 12}));
  EXPECT_THROW(tensor({1, 2}).norm(), DTypeError);
}

TEST(Reduce, LogSumExp) {
  Tensor x = cube();
  for (int64_t d : {0, 1, 2}) EXPECT_TRUE(tensor_near(x.logsumexp({d}), ref_reduce(x, d, l_lse), 1e-13));
  EXPECT_TRUE(tensor_near(x.logsumexp({1}, true), ref_reduce(x, 1, l_lse, true), 1e-13));
  // Large values do not overflow; all -inf gives -inf; one +inf gives +inf.
  Tensor big = tensor(std::vector<double>{1000, 1000, -kInf, -kInf, 5, kInf}, {3, 2});
  EXPECT_TRUE(values_near(values(big.logsumexp({1})), {1000 + std::log(2.0), -kInf, kInf}, 1e-12, 0));
  Tensor f = tensor({{100.f, 100.f}});
  EXPECT_NEAR(f.logsumexp({1}).item<double>(), 100 + std::log(2.0), 1e-4);
}

TEST(Reduce, AnyAllCountNonzero) {
  Tensor m = tensor({{true, false, false}, {true, true, true}});
  EXPECT_TRUE(m.any().item<bool>());
  EXPECT_FALSE(m.all().item<bool>());
  EXPECT_TRUE(tensor_is(m.any(1), {2}, {1, 1}));
  EXPECT_TRUE(tensor_is(m.all(1), {2}, {0, 1}));
  EXPECT_TRUE(tensor_is(m.all(0, true), {1, 3}, {1, 0, 0}));
  EXPECT_EQ(m.any(0).dtype(), kBool);
  EXPECT_TRUE(tensor_is(tensor({0., 0.5}).any(0), {}, {1}));
  EXPECT_TRUE(tensor_is(tensor({0, 2}).all(0), {}, {0}));
  EXPECT_TRUE(tensor_is(m.t().any(0), {2}, {1, 1}));
  EXPECT_EQ(count_nonzero(tensor({{0, 1, 2}, {3, 0, 0}})).item<int64_t>(), 3);
  EXPECT_EQ(int_values(count_nonzero(tensor({{0, 1, 2}, {3, 0, 0}}), {0})), (std::vector<int64_t>{1, 1, 1}));
}

// ---- scans -----------------------------------------------------------------------------------------
std::vector<double> cum(const std::vector<double>& l, bool product) {
  std::vector<double> r;
  double a = product ? 1 : 0;
  for (double x : l) r.push_back(a = product ? a * x : a + x);
  return r;
}

TEST(Scan, CumsumCumprodAlongEachDim) {
  Tensor x = cube();
  for (int64_t d : {0, 1, 2, -1}) {
    EXPECT_TRUE(tensor_near(x.cumsum(d), ref_scan(x, d, [](auto& l) { return cum(l, false); }), 1e-13));
    EXPECT_TRUE(tensor_near(cumprod(x, d), ref_scan(x, d, [](auto& l) { return cum(l, true); }), 1e-13));
    EXPECT_TRUE(tensor_near(cube_noncontig().cumsum(d), ref_scan(x, d, [](auto& l) { return cum(l, false); }), 1e-13));
  }
  EXPECT_EQ(int_values(tensor({1, 2, 3}, kInt32).cumsum(0)), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_EQ(tensor({1, 2, 3}, kInt32).cumsum(0).dtype(), kInt64);
  EXPECT_EQ(int_values(cumprod(tensor({true, true, false}), 0)), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(zeros({0, 2}).cumsum(0).numel(), 0);
  EXPECT_DOUBLE_EQ(tensor(4.).cumsum(0).item<double>(), 4);
}

// ---- sort / topk -----------------------------------------------------------------------------------
TEST(Sort, ValuesAndIndicesAlongDims) {
  Tensor x = tensor({{3., 1., 2.}, {-1., 5., 0.}});
  auto [v, i] = x.sort(1);
  EXPECT_TRUE(tensor_is(v, {2, 3}, {1, 2, 3, -1, 0, 5}));
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{1, 2, 0, 0, 2, 1}));
  auto [vd, id] = x.sort(0, true);
  EXPECT_TRUE(tensor_is(vd, {2, 3}, {3, 5, 2, -1, 1, 0}));
  EXPECT_EQ(int_values(id), (std::vector<int64_t>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(int_values(x.argsort(1, true)), (std::vector<int64_t>{0, 2, 1, 1, 2, 0}));
  auto [vt, it] = x.t().sort(0);  // non-contiguous input
  EXPECT_TRUE(tensor_is(vt, {3, 2}, {1, -1, 2, 0, 3, 5}));
}

TEST(Sort, StableAndNaNLast) {
  Tensor x = tensor(std::vector<double>{2, kNaN, 1, 2, 1, kNaN});
  auto [v, i] = x.sort();
  EXPECT_TRUE(values_near(values(v), {1, 1, 2, 2, kNaN, kNaN}, 0, 0));
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{2, 4, 0, 3, 1, 5}));  // equal keys keep their order
  auto [vd, id] = x.sort(0, true);
  EXPECT_TRUE(values_near(values(vd), {kNaN, kNaN, 2, 2, 1, 1}, 0, 0));
  EXPECT_EQ(int_values(id), (std::vector<int64_t>{1, 5, 0, 3, 2, 4}));
}

TEST(Sort, MatchesStdSortOnRandomData) {
  Tensor x = lcg_tensor({5, 200}, 9);
  auto [v, i] = x.sort(1);
  std::vector<double> xv = values(x), vv = values(v);
  std::vector<int64_t> iv = int_values(i);
  for (int r = 0; r < 5; ++r) {
    std::vector<double> row(xv.begin() + r * 200, xv.begin() + (r + 1) * 200);
    std::sort(row.begin(), row.end());
    for (int c = 0; c < 200; ++c) {
      EXPECT_EQ(vv[r * 200 + c], row[c]);
      EXPECT_EQ(xv[r * 200 + iv[r * 200 + c]], row[c]);
    }
  }
}

TEST(TopK, LargestAndSmallest) {
  Tensor x = tensor({{1., 9., 3., 7.}, {4., 4., 8., 0.}});
  auto [v, i] = x.topk(2);
  EXPECT_TRUE(tensor_is(v, {2, 2}, {9, 7, 8, 4}));
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{1, 3, 2, 0}));  // of the tied 4s, the first
  auto [vs, is] = x.topk(3, 1, false);
  EXPECT_TRUE(tensor_is(vs, {2, 3}, {1, 3, 7, 0, 4, 4}));
  EXPECT_EQ(int_values(is), (std::vector<int64_t>{0, 2, 3, 3, 0, 1}));
  auto [v0, i0] = x.topk(1, 0);
  EXPECT_TRUE(tensor_is(v0, {1, 4}, {4, 9, 8, 7}));
  EXPECT_EQ(int_values(i0), (std::vector<int64_t>{1, 0, 1, 0}));
  auto [vt, it] = x.t().topk(1, 0);  // non-contiguous, along dim 0
  EXPECT_TRUE(tensor_is(vt, {1, 2}, {9, 8}));
  EXPECT_EQ(std::get<0>(x.topk(0)).numel(), 0);
  EXPECT_THROW(x.topk(5), IndexError);
  auto [vn, in] = tensor(std::vector<double>{1, kNaN, 3}).topk(1);
  EXPECT_TRUE(std::isnan(vn.item<double>()));  // NaN counts as the largest, as PyTorch
}

TEST(TopK, MatchesSortOnRandomData) {
  Tensor x = lcg_tensor({3, 100}, 10);
  auto [v, i] = x.topk(10, 1);
  auto [sv, si] = x.sort(1, true);
  EXPECT_TRUE(tensor_near(v, sv.narrow(1, 0, 10), 0));
  EXPECT_TRUE(tensor_near(x.gather(1, i), v, 0));
}

// ---- softmax ---------------------------------------------------------------------------------------
std::vector<double> softmax_line(const std::vector<double>& l) {
  double m = l_max(l), s = 0;
  std::vector<double> r;
  for (double x : l) s += std::exp(x - m);
  for (double x : l) r.push_back(std::exp(x - m) / s);
  return r;
}

TEST(Softmax, MatchesReferenceAlongEachDim) {
  Tensor x = cube();
  for (int64_t d : {0, 1, 2, -1}) {
    Tensor ref = ref_scan(x, d, softmax_line);
    EXPECT_TRUE(tensor_near(x.softmax(d), ref, 1e-15, 1e-13));
    EXPECT_TRUE(tensor_near(x.log_softmax(d), ref.log(), 1e-13, 1e-13));
    EXPECT_TRUE(tensor_near(cube_noncontig().softmax(d), ref, 1e-15, 1e-13));
    EXPECT_TRUE(tensor_near(x.softmax(d).sum(d), ones(ref_reduce(x, d, l_sum).sizes(), kFloat64), 1e-14));
  }
}

TEST(Softmax, StableForLargeValues) {
  Tensor x = tensor({{1000.f, 1001.f, 1002.f}, {-1000.f, -1001.f, -1002.f}});
  std::vector<double> want = softmax_line({0, 1, 2}), want2 = softmax_line({0, -1, -2});
  want.insert(want.end(), want2.begin(), want2.end());
  EXPECT_TRUE(tensor_is(x.softmax(1), {2, 3}, want, 1e-7, 1e-6));
  Tensor ls = x.log_softmax(1);
  std::vector<double> lw;
  for (double w : want) lw.push_back(std::log(w));
  EXPECT_TRUE(tensor_is(ls, {2, 3}, lw, 1e-6, 1e-6));
  for (double v : values(ls)) EXPECT_TRUE(std::isfinite(v));
  // exp(-1e4) underflows to 0 in float64 but log_softmax stays finite.
  Tensor far = tensor(std::vector<double>{0, -1e4});
  EXPECT_TRUE(values_near(values(far.log_softmax(0)), {0, -1e4}, 1e-12, 0));
}

TEST(Softmax, InfinitiesAndEdgeCases) {
  Tensor x = tensor(std::vector<double>{-kInf, 0, -kInf, 0});
  EXPECT_TRUE(tensor_is(x.softmax(0), {4}, {0, 0.5, 0, 0.5}, 0, 0));
  Tensor all_neg_inf = tensor(std::vector<double>{-kInf, -kInf});
  EXPECT_TRUE(values_near(values(all_neg_inf.softmax(0)), {kNaN, kNaN}, 0, 0));  // 0/0, as PyTorch
  EXPECT_TRUE(tensor_is(tensor(3.).softmax(0), {}, {1}));
  EXPECT_TRUE(tensor_is(tensor(3.).log_softmax(0), {}, {0}));
  EXPECT_EQ(zeros({0, 3}).softmax(1).numel(), 0);
  Tensor i = tensor({1, 2});  // integers compute in float32
  EXPECT_EQ(i.softmax(0).dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(i.softmax(0), {2}, softmax_line({1, 2}), 1e-7));
  EXPECT_THROW(zeros({2, 2}).softmax(2), IndexError);
}

// Contiguous float32 lines take a vectorized path (16-lane max, exp_f32, float64 lane sums):
// lengths around the lane widths, a NaN, infinities, against the float64 loop.
TEST(Softmax, Float32ContiguousLinesMatchFloat64) {
  manual_seed(7);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 100, 1000}) {
    Tensor x = (rand({3, n}, kFloat64) * 40 - 20);
    Tensor x32 = x.to(kFloat32);
    Tensor ref = x32.to(kFloat64).softmax(1), lref = x32.to(kFloat64).log_softmax(1);
    EXPECT_TRUE(tensor_near(x32.softmax(1).to(kFloat64), ref, 1e-12, 1e-6)) << n;
    EXPECT_TRUE(tensor_near(x32.log_softmax(1).to(kFloat64), lref, 1e-5, 1e-6)) << n;
    // The backward's contiguous float32 path too: d/dx sum(w * log_softmax(x)).
    Tensor w = rand({3, n}, kFloat64);
    Tensor x64 = x32.to(kFloat64).requires_grad_(), xg = x32.clone().requires_grad_();
    (x64.log_softmax(1) * w).sum().backward();
    (xg.log_softmax(1) * w.to(kFloat32)).sum().backward();
    EXPECT_TRUE(tensor_near(xg.grad().to(kFloat64), x64.grad(), 1e-5, 1e-5)) << n;
  }
  Tensor special = tensor({{1.f, kNaNf, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f},
                           {-kInff, 0.f, -kInff, 0.f, -kInff, -kInff, -kInff, -kInff, -kInff, -kInff, -kInff, -kInff,
                            -kInff, -kInff, -kInff, -kInff, -kInff}});
  std::vector<double> sm = values(special.softmax(1)), lsm = values(special.log_softmax(1));
  for (int j = 0; j < 17; ++j) {
    EXPECT_TRUE(std::isnan(sm[j]) && std::isnan(lsm[j])) << j;  // a NaN in the line: all NaN
    double want = (j == 1 || j == 3) ? 0.5 : 0.0;
    EXPECT_EQ(sm[17 + j], want) << j;
    EXPECT_EQ(lsm[17 + j], static_cast<double>(std::log(static_cast<float>(want)))) << j;
  }
}

}  // namespace
}  // namespace nabla::testing
