// Values of the math ops (lgamma, digamma, polygamma, nan_to_num, div with rounding,
// median, quantile, mode, cummax, logcumsumexp, histc, bincount, searchsorted, unique): expected
// numbers from PyTorch 1.13 (torch.<op> on the same inputs) or worked by hand, tie rules, edge cases
// and the errors. The registry (tests/ops/opinfo_math.cpp) checks gradients and compares with PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "onnx/export.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(MathOps, GammaFamilyValues) {
  // torch.lgamma / digamma / polygamma, float64.
  EXPECT_TRUE(tensor_is(lgamma(f64({0.5, 1, -0.5, 0, -1, 10}, {6})), {6},
                        {0.5723649429247001, 0.0, 1.2655121234846454, kInf, kInf, 12.801827480081469}, 1e-14, 1e-14));
  EXPECT_TRUE(tensor_is(digamma(f64({1, 0.5, -0.5, 0, -0.0, -1, 10, 1e-3}, {8})), {8},
                        {-0.5772156649015328, -1.9635100260214229, 0.03648997397857639, -kInf, kInf, kNaN,
                         2.251752589066721, -1000.5755719318104},
                        1e-13, 1e-13));
  EXPECT_TRUE(tensor_is(polygamma(1, f64({1, 0.5, -0.5}, {3})), {3},
                        {1.6449340676383375, 4.934802202073678, 8.934802200117687}, 1e-12, 1e-12));
  EXPECT_TRUE(tensor_is(polygamma(2, f64({1, 3}, {2})), {2}, {-2.404113806319188, -0.15411380631918856}, 1e-12, 1e-12));
  // Integers promote to float32, as PyTorch.
  EXPECT_EQ(lgamma(tensor({1, 2, 3})).dtype(), kFloat32);
  EXPECT_THROW(polygamma(-1, f64({1}, {1})), ValueError);
  // The gradient of lgamma is digamma, of digamma trigamma.
  Tensor x = f64({0.7, 2.5}, {2}).requires_grad_();
  lgamma(x).sum().backward();
  EXPECT_TRUE(tensor_near(x.grad(), digamma(x.detach()), 1e-14, 1e-14));
}

TEST(MathOps, NanToNumAndRoundingDiv) {
  Tensor x = tensor({kNaN, kInf, -kInf, 1.5}, TensorOptions().dtype(kFloat32));
  EXPECT_TRUE(
      tensor_is(nan_to_num(x), {4}, {0, std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(), 1.5}));
  EXPECT_TRUE(tensor_is(nan_to_num(x, 7.0, 8.0, -9.0), {4}, {7, 8, -9, 1.5}));
  EXPECT_EQ(nan_to_num(tensor({1, 2})).dtype(), kInt64);
  // torch.div(..., rounding_mode=...) on integers keeps int64; floats round the true quotient.
  Tensor a = tensor({-7, 7, -7, 7}), b = tensor({2, 2, -2, -2});
  Tensor t = div(a, b, "trunc"), f = div(a, b, "floor");
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(int_values(t), (std::vector<int64_t>{-3, 3, 3, -3}));
  EXPECT_EQ(int_values(f), (std::vector<int64_t>{-4, 3, 3, -4}));
  EXPECT_TRUE(tensor_is(div(f64({-7.5, 7.5}, {2}), 2.0, "trunc"), {2}, {-3, 3}));
  EXPECT_TRUE(tensor_is(div(f64({-7.5, 7.5}, {2}), 2.0, "floor"), {2}, {-4, 3}));
  EXPECT_EQ(div(a, 2.5, "trunc").dtype(), kFloat32);  // a float scalar promotes, as PyTorch
  EXPECT_THROW(div(a, b, "round"), ValueError);
  EXPECT_THROW(div(a, tensor({0, 1, 1, 1}), "trunc"), Error);  // integer division by zero
}

TEST(MathOps, MedianQuantileAndNaN) {
  Tensor x = tensor({{1., 5, 2, 8}, {3, kNaN, 0, 1}});
  auto [mv, mi] = median(x, 1);
  EXPECT_TRUE(tensor_is(mv, {2}, {2, kNaN}));
  EXPECT_EQ(int_values(mi), (std::vector<int64_t>{2, 1}));  // the lower median; the first NaN
  auto [nv, ni] = nanmedian(x, 1);
  EXPECT_TRUE(tensor_is(nv, {2}, {2, 1}));
  EXPECT_EQ(int_values(ni), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(std::isnan(median(x).item<double>()));
  EXPECT_EQ(nanmedian(x).item<double>(), 2.0);  // sorted non-NaN: 0 1 1 2 3 5 8 -> element 3
  EXPECT_TRUE(std::isnan(median(zeros({0})).item<double>()));
  // Ties: PyTorch's index among equal values is unspecified (1.13 gives 2 here); nabla's is the stable
  // sort's (the 2 at index 0), and the value is PyTorch's.
  auto [kv, ki] = kthvalue(tensor({2., 1., 2., 1.}), 3);
  EXPECT_EQ(kv.item<double>(), 2.0);
  EXPECT_EQ(ki.item<int64_t>(), 0);
  auto [tv, ti] = median(tensor({2., 1., 2., 1., 2., 1.}), 0);
  EXPECT_EQ(tv.item<double>(), 1.0);  // the lower median: the third smallest, the 1 at index 5 (PyTorch's too)
  EXPECT_EQ(ti.item<int64_t>(), 5);
  EXPECT_THROW(kthvalue(tensor({1., 2.}), 3), IndexError);
  EXPECT_THROW(median(zeros({2, 0}), 1), IndexError);

  // torch.quantile(x, [0, 0.5, 0.9], dim=1, keepdim=True)
  Tensor y = tensor({{1., 5, 2, 8}, {3, 4, 0, 1}});
  Tensor q = quantile(y, tensor({0.0, 0.5, 0.9}), 1, true);
  EXPECT_TRUE(tensor_is(q, {3, 2, 1}, {1, 0, 3.5, 2, 7.1, 3.7}, 1e-6, 1e-6));
  EXPECT_TRUE(tensor_is(nanquantile(x, 0.5, 1), {2}, {3.5, 1}));
  EXPECT_TRUE(tensor_is(quantile(x, 0.5, 1), {2}, {3.5, kNaN}));
  EXPECT_TRUE(tensor_is(quantile(y, 0.5, std::nullopt, true), {1, 1}, {2.5}));
  EXPECT_TRUE(tensor_is(quantile(y, 0.4, 1, false, "lower"), {2}, {2, 1}));
  EXPECT_TRUE(tensor_is(quantile(y, 0.4, 1, false, "higher"), {2}, {5, 3}));
  EXPECT_TRUE(tensor_is(quantile(y, 0.5, 1, false, "midpoint"), {2}, {3.5, 2}));
  EXPECT_TRUE(tensor_is(quantile(y, 0.5, 1, false, "nearest"), {2}, {5, 3}));  // rank 1.5 rounds to even 2
  EXPECT_THROW(quantile(y, 1.5), ValueError);
  EXPECT_THROW(quantile(y, 0.5, 1, false, "cubic"), ValueError);
  EXPECT_THROW(quantile(tensor({1, 2}), 0.5), DTypeError);
  EXPECT_THROW(quantile(zeros({0}), 0.5), ValueError);
}

TEST(MathOps, ModeAndCumExtremesTieRules) {
  // torch.mode: the smallest of the most frequent values, its last index.
  auto [v, i] = mode(tensor({{1., 2, 2, 1, 5}, {4, 4, 4, 0, 0}}), -1);
  EXPECT_TRUE(tensor_is(v, {2}, {1, 4}));
  EXPECT_EQ(int_values(i), (std::vector<int64_t>{3, 2}));
  auto [v1, i1] = mode(tensor({3., 1., 3., 1., 2.}));
  EXPECT_EQ(v1.item<double>(), 1.0);
  EXPECT_EQ(i1.item<int64_t>(), 3);
  // torch.cummax([1, 3, 3, nan, 2, nan]): ties take the latest index, NaN stays.
  auto [cv, ci] = cummax(tensor({1., 3, 3, kNaN, 2, kNaN}), 0);
  EXPECT_TRUE(tensor_is(cv, {6}, {1, 3, 3, kNaN, kNaN, kNaN}));
  EXPECT_EQ(int_values(ci), (std::vector<int64_t>{0, 1, 2, 3, 3, 5}));
  auto [nv, ni] = cummin(tensor({3, 1, 1, 2}), 0);
  EXPECT_EQ(int_values(nv), (std::vector<int64_t>{3, 1, 1, 1}));
  EXPECT_EQ(int_values(ni), (std::vector<int64_t>{0, 1, 2, 2}));
  // The gradient goes to the element each output took.
  Tensor x = f64({1, 3, 2}, {3}).requires_grad_();
  std::get<0>(cummax(x, 0)).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {1, 2, 0}));
}

TEST(MathOps, LogCumSumExpIsStable) {
  EXPECT_TRUE(tensor_is(logcumsumexp(f64({-1000, 0, 1000}, {3}), 0), {3}, {-1000, 0, 1000}, 1e-12, 1e-12));
  Tensor x = f64({0.1, -0.4, 0.3, 2, -1}, {5});
  Tensor ref = log(cumsum(exp(x), 0));
  EXPECT_TRUE(tensor_near(logcumsumexp(x, 0), ref, 1e-14, 1e-14));
  EXPECT_THROW(logcumsumexp(tensor({1, 2}), 0), DTypeError);
}

TEST(MathOps, CountingAndSearching) {
  EXPECT_TRUE(tensor_is(histc(tensor({1., 2, 1, 2.5, 4}), 4, 0, 4), {4}, {0, 2, 2, 1}));
  EXPECT_TRUE(tensor_is(histc(zeros({0}), 4), {4}, {0, 0, 0, 0}));
  EXPECT_THROW(histc(tensor({1., 2.}), 0), ValueError);
  EXPECT_THROW(histc(tensor({1., 2.}), 3, 2, 1), ValueError);
  EXPECT_THROW(histc(tensor({1., kNaN}), 3), ValueError);  // the range from the data is not finite

  EXPECT_EQ(int_values(bincount(tensor({0, 3, 3, 1}))), (std::vector<int64_t>{1, 1, 0, 2}));
  Tensor wc = bincount(tensor({0, 2, 2}), tensor({0.5, 1.0, 2.0}), 4);
  EXPECT_EQ(wc.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(wc, {4}, {0.5, 0, 3, 0}));
  EXPECT_EQ(bincount(tensor({0, 2}), f64({1, 2}, {2})).dtype(), kFloat64);
  EXPECT_EQ(int_values(bincount(zeros({0}, TensorOptions().dtype(kInt64)), {}, 3)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_THROW(bincount(tensor({1, -1})), ValueError);
  EXPECT_THROW(bincount(tensor({{1, 2}})), ShapeError);
  EXPECT_THROW(bincount(tensor({1., 2.})), DTypeError);

  Tensor s = tensor({1, 3, 5, 7, 9});
  EXPECT_EQ(int_values(searchsorted(s, tensor({{3, 6, 9}, {3, 6, 9}}), false, true)),
            (std::vector<int64_t>{2, 3, 5, 2, 3, 5}));
  EXPECT_EQ(int_values(searchsorted(s, tensor({3, 6, 9}))), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(searchsorted(s, Scalar(4)).item<int64_t>(), 2);
  EXPECT_EQ(searchsorted(s, tensor({3}), true).dtype(), kInt32);
  EXPECT_THROW(searchsorted(s, tensor({3}), false, true, "left"), ValueError);
  EXPECT_THROW(searchsorted(tensor({{1, 2}, {3, 4}}), tensor({{1}, {2}, {3}})), ShapeError);
  // sorter: indices that sort an unsorted sequence.
  Tensor u = tensor({5, 1, 9, 3});
  EXPECT_EQ(int_values(searchsorted(u, tensor({4, 10}), false, false, std::nullopt, argsort(u))),
            (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(int_values(bucketize(tensor({0, 1, 8}), s)), (std::vector<int64_t>{0, 0, 4}));
  EXPECT_EQ(int_values(bucketize(tensor({0, 1, 8}), s, false, true)), (std::vector<int64_t>{0, 1, 4}));

  UniqueResult r = unique(tensor({2, 3, 1, 3, 2, 2}), true, true, true);
  EXPECT_EQ(int_values(r.values), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(int_values(r.inverse), (std::vector<int64_t>{1, 2, 0, 2, 1, 1}));
  EXPECT_EQ(int_values(r.counts), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_FALSE(unique(tensor({1, 1})).inverse.defined());
  UniqueResult c = unique_consecutive(tensor({1, 1, 2, 2, 3, 1, 1, 2}), true, true);
  EXPECT_EQ(int_values(c.values), (std::vector<int64_t>{1, 2, 3, 1, 2}));
  EXPECT_EQ(int_values(c.inverse), (std::vector<int64_t>{0, 0, 1, 1, 2, 3, 3, 4}));
  EXPECT_EQ(int_values(c.counts), (std::vector<int64_t>{2, 2, 1, 2, 1}));
  // Along a dim: distinct rows in lexicographic order, the inverse one entry per row.
  Tensor rows = tensor({3, 1, 0, 2, 3, 1, 0, 2, 0, 2}, dtype(kInt64)).view({5, 2});
  UniqueResult ud = unique(rows, true, true, true, 0);
  EXPECT_TRUE(tensor_is(ud.values, {2, 2}, {0, 2, 3, 1}));  // rows (3, 1) (0, 2) (3, 1) (0, 2) (0, 2)
  EXPECT_TRUE(tensor_is(ud.inverse, {5}, {1, 0, 1, 0, 0}));
  EXPECT_TRUE(tensor_is(ud.counts, {2}, {3, 2}));
  UniqueResult uc = unique_consecutive(rows, true, true, 0);
  EXPECT_TRUE(tensor_is(uc.inverse, {5}, {0, 1, 2, 3, 3}));
  EXPECT_TRUE(tensor_is(uc.counts, {4}, {1, 1, 1, 2}));
  UniqueResult ue = unique(zeros({0, 3}), true, true, true, 0);
  EXPECT_EQ(ue.values.sizes(), (Shape{0, 3}));
  EXPECT_EQ(ue.counts.numel(), 0);
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        unique(zeros({0, 3}), true, false, false, 1);
      },
      {"unique", "dim 1", "[0, 3]", "only dim of size 0"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { unique(zeros({2, 3}), true, false, false, 2); }, {"unique"}));
  UniqueResult e = unique(zeros({0}), true, true, true);
  EXPECT_EQ(e.values.numel(), 0);
  EXPECT_EQ(e.counts.numel(), 0);
}

// ONNX export: the new ops have trace hooks and no mapping, so exporting a model that uses one fails
// naming the op, instead of freezing the example's indices into constants.
struct MathFn : nn::Module {
  explicit MathFn(std::function<Tensor(Tensor)> f) : nn::Module("MathFn"), f_(std::move(f)) {}
  Tensor forward(Tensor x) override { return f_(x); }
  std::function<Tensor(Tensor)> f_;
};

// Ops without an ONNX mapping stop the export by name (the stats and scan ops now map: tests/onnx/test_export.cpp).
TEST(MathOps, OnnxExportRefusesOpsWithoutAMapping) {
  const std::vector<std::pair<std::string, std::function<Tensor(Tensor)>>> cases = {
      {"lgamma", [](Tensor x) { return lgamma(x) * 2; }},
      {"digamma", [](Tensor x) { return digamma(x) * 2; }},
  };
  for (const auto& [name, f] : cases) {
    MathFn m(f);
    try {
      (void)onnx::export_model_to_string(m, {rand({2, 4}) + 0.5});
      ADD_FAILURE() << "exported a model with " << name;
    } catch (const NotImplemented& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("op '" + name + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("has no ONNX mapping"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace nabla::testing
