// Losses against values computed from their definitions (tests/optim/reference_values.py derives every
// number below in plain Python from PyTorch's documented formulas), every reduction, and the
// loss modules.
#include <gtest/gtest.h>

#include <cmath>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
namespace F = nn::functional;
using nabla::testing::tensor_is;
using nabla::testing::throws_with;
using nn::Reduction;

namespace {

// The fixture of reference_values.py: 3 samples, 4 classes.
Tensor X() { return tensor({{0.2, -1.3, 0.7, 2.1}, {-0.5, 0.4, 1.5, -2.0}, {1.1, 0.3, -0.8, 0.0}}, kFloat64); }
Tensor T() { return tensor({3, 0, 1}); }
Tensor W() { return tensor({0.5, 2.0, 1.0, 0.25}, kFloat64); }
Tensor P() { return tensor({{0.1, 0.2, 0.3, 0.4}, {0.25, 0.25, 0.25, 0.25}, {0.7, 0.1, 0.1, 0.1}}, kFloat64); }

void expect_values(const Tensor& t, std::vector<double> expect, const std::string& what, double tol = 1e-12) {
  Tensor c = t.detach().to(kFloat64).contiguous().reshape({-1});
  ASSERT_EQ(c.numel(), static_cast<int64_t>(expect.size())) << what;
  for (size_t i = 0; i < expect.size(); ++i)
    EXPECT_NEAR(c[static_cast<int64_t>(i)].item<double>(), expect[i], tol * std::max(1.0, std::abs(expect[i])))
        << what << " [" << i << "]";
}

// mean, sum and none of one loss.
void expect_reductions(const std::function<Tensor(Reduction)>& f, double mean, double sum, std::vector<double> none,
                       const std::string& what) {
  expect_values(f(Reduction::mean), {mean}, what + " mean");
  expect_values(f(Reduction::sum), {sum}, what + " sum");
  expect_values(f(Reduction::none), std::move(none), what + " none");
}

}  // namespace

TEST(NnLoss, CrossEntropyClassIndices) {
  Tensor x = X(), t = T(), w = W();
  expect_reductions([&](Reduction r) { return F::cross_entropy(x, t, {.reduction = r}); }, 1.4067294260156586,
                    4.220188278046976, {0.35735191193138194, 2.404400375052385, 1.4584359910632085}, "ce");
  // Class weights: each sample weighted by w[target]; mean divides by the summed weights (2.75).
  expect_reductions([&](Reduction r) { return F::cross_entropy(x, t, {.weight = w, .reduction = r}); },
                    1.530330962776529, 4.208410147635455, {0.08933797798284548, 1.2022001875261925, 2.916871982126417},
                    "ce weight");
  // ignore_index: sample 1 (class 0) is skipped and not counted in the mean.
  expect_reductions([&](Reduction r) { return F::cross_entropy(x, t, {.ignore_index = 0, .reduction = r}); },
                    0.9078939514972952, 1.8157879029945905, {0.35735191193138194, 0.0, 1.4584359910632085},
                    "ce ignore");
  // Label smoothing: the target is (1 - 0.1) onehot + 0.1 / 4.
  expect_reductions([&](Reduction r) { return F::cross_entropy(x, t, {.reduction = r, .label_smoothing = 0.1}); },
                    1.455896092682325, 4.367688278046975, {0.5248519119313819, 2.369400375052385, 1.4734359910632084},
                    "ce smoothing");
  // All at once.
  expect_reductions(
      [&](Reduction r) {
        return F::cross_entropy(x, t, {.weight = w, .ignore_index = 0, .reduction = r, .label_smoothing = 0.2});
      },
      1.4407458666217317, 3.2416781998988964, {0.5959738658734105, 0.0, 2.6457043340254858}, "ce all");
}

TEST(NnLoss, CrossEntropyGradientWithEverything) {
  Tensor x = X().requires_grad_();
  F::cross_entropy(x, T(), {.weight = W(), .ignore_index = 0, .label_smoothing = 0.2}).backward();
  // d/dx_nk = (-w_k q_nk + (sum_c w_c q_nc) softmax_nk) / sum of target weights; 0 for the ignored row.
  expect_values(x.grad(),
                {0.006908014371858183, -0.040423834089694854, 0.007486293240963966, 0.026029526476872695, 0.0, 0.0, 0.0,
                 0.0, 0.40014125983794263, -0.570767953726266, 0.039288227052662654, 0.13133846683566058},
                "ce grad");
}

TEST(NnLoss, CrossEntropyProbabilities) {
  Tensor x = X(), p = P(), w = W();
  // Probability targets: mean divides by the number of samples, whatever the weights.
  expect_reductions([&](Reduction r) { return F::cross_entropy(x, p, {.reduction = r}); }, 1.5800627593489918,
                    4.7401882780469755, {1.647351911931382, 2.054400375052385, 1.0384359910632086}, "ce prob");
  expect_reductions(
      [&](Reduction r) { return F::cross_entropy(x, p, {.weight = w, .reduction = r, .label_smoothing = 0.2}); },
      1.5450467729035229, 4.635140318710569, {2.2675027836004737, 1.3978753516116111, 0.9697621834984842},
      "ce prob all");
  // One-hot probabilities give the class-index loss.
  Tensor onehot = one_hot(T(), 4).to(kFloat64);
  EXPECT_NEAR(F::cross_entropy(x, onehot).item<double>(), F::cross_entropy(x, T()).item<double>(), 1e-14);
}

TEST(NnLoss, CrossEntropyShapesAndErrors) {
  manual_seed(1);
  // (N, C, d1) with (N, d1) targets equals the flattened (N * d1, C) problem.
  Tensor x = randn({2, 3, 4}, kFloat64);
  Tensor t = randint(0, 3, {2, 4});
  Tensor flat = x.permute({0, 2, 1}).reshape({8, 3});
  EXPECT_NEAR(F::cross_entropy(x, t).item<double>(), F::cross_entropy(flat, t.reshape({8})).item<double>(), 1e-14);
  EXPECT_EQ(F::cross_entropy(x, t, {.reduction = Reduction::none}).sizes(), (Shape{2, 4}));
  // Unbatched (C) input with a 0-dim target.
  Tensor one = tensor({0.5, 1.5, -1.0}, kFloat64);
  EXPECT_NEAR(F::cross_entropy(one, tensor(int64_t(1))).item<double>(), -log_softmax(one, 0)[1].item<double>(), 1e-15);
  try {
    F::cross_entropy(X(), tensor({3, 4, 1}));
    FAIL();
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("target 4 is out of bounds for 4 classes"), std::string::npos) << e.what();
  }
  // With ignored targets among them, a bad target is still named (ignored ones count as in range).
  EXPECT_TRUE(nabla::testing::throws_with<IndexError>(
      [&] {
        F::cross_entropy(X(), tensor({-100, 5, 1}));
      },
      {"cross_entropy", "target 5 is out of bounds", "ignore_index -100"}));
  EXPECT_TRUE(nabla::testing::throws_with<IndexError>(
      [&] {
        F::cross_entropy(X(), tensor({-100, -3, 1}));
      },
      {"target -3"}));
  EXPECT_NO_THROW(F::cross_entropy(X(), tensor({-100, 2, 1})));
  EXPECT_THROW(F::cross_entropy(X(), tensor({1, 2})), ShapeError);
  EXPECT_THROW(F::cross_entropy(X(), T(), {.weight = ones({3}, kFloat64)}), ShapeError);
  EXPECT_THROW(F::cross_entropy(X(), T(), {.label_smoothing = 1.5}), ValueError);
  EXPECT_THROW(F::cross_entropy(X(), T().to(kFloat32)),
               DTypeError);  // class indices must be int64 (float targets are probabilities of the input's shape)
  // Every target ignored: the mean is 0/0, as in PyTorch.
  EXPECT_TRUE(std::isnan(F::cross_entropy(X(), tensor({-100, -100, -100})).item<double>()));
}

TEST(NnLoss, NllLoss) {
  Tensor lp = log_softmax(X(), 1), t = T(), w = W();
  // nll(log_softmax(x)) is cross_entropy(x).
  expect_reductions([&](Reduction r) { return F::nll_loss(lp, t, {.weight = w, .reduction = r}); }, 1.530330962776529,
                    4.208410147635455, {0.08933797798284548, 1.2022001875261925, 2.916871982126417}, "nll weight");
  // Plain values: -input[n, t_n].
  Tensor in = tensor({{-1.0, -2.0}, {-3.0, -4.0}}, kFloat64);
  EXPECT_DOUBLE_EQ(F::nll_loss(in, tensor({1, 0})).item<double>(), 2.5);
  EXPECT_THROW(F::nll_loss(in, tensor({1.0, 0.0})), DTypeError);
}

TEST(NnLoss, RegressionLosses) {
  Tensor a = tensor({0.5, -1.0, 2.0, 0.1}, kFloat64), b = tensor({0.0, 0.5, 0.3, 0.2}, kFloat64);
  // d = a - b = [0.5, -1.5, 1.7, -0.1]
  expect_reductions([&](Reduction r) { return F::mse_loss(a, b, r); }, 1.35, 5.4, {0.25, 2.25, 2.89, 0.01}, "mse");
  expect_reductions([&](Reduction r) { return F::l1_loss(a, b, r); }, 0.95, 3.8, {0.5, 1.5, 1.7, 0.1}, "l1");
  // beta 0.5: 0.5 d^2 / beta below 0.5, |d| - 0.25 above.
  expect_reductions([&](Reduction r) { return F::smooth_l1_loss(a, b, {.reduction = r, .beta = 0.5}); }, 0.74, 2.96,
                    {0.25, 1.25, 1.45, 0.01}, "smooth_l1");
  // delta 0.7: 0.5 d^2 below, 0.7 (|d| - 0.35) above.
  expect_reductions([&](Reduction r) { return F::huber_loss(a, b, {.reduction = r, .delta = 0.7}); }, 0.47, 1.88,
                    {0.125, 0.805, 0.945, 0.005}, "huber");
  // beta = 0 is l1; huber with delta = 1 equals smooth_l1 with beta = 1.
  EXPECT_TRUE(
      F::smooth_l1_loss(a, b, {.reduction = Reduction::none, .beta = 0.0}).equal(F::l1_loss(a, b, Reduction::none)));
  EXPECT_TRUE(allclose(F::huber_loss(a, b), F::smooth_l1_loss(a, b)));
  try {
    F::mse_loss(zeros({64, 1}), zeros({64}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("mse_loss: input of shape [64, 1] and target of shape [64] differ"),
              std::string::npos);
  }
  EXPECT_THROW(F::mse_loss(a, b, Reduction::batchmean), ValueError);
}

TEST(NnLoss, BinaryCrossEntropy) {
  Tensor p = tensor({0.1, 0.6, 0.9, 0.35}, kFloat64).requires_grad_();
  Tensor y = tensor({0.0, 1.0, 1.0, 0.5}, kFloat64), w = tensor({1.0, 2.0, 0.5, 1.0}, kFloat64);
  expect_reductions([&](Reduction r) { return F::binary_cross_entropy(p, y, {.weight = w, .reduction = r}); },
                    0.47999863532857173, 1.919994541314287,
                    {0.10536051565782628, 1.0216512475319814, 0.05268025782891314, 0.740302520295566}, "bce");
  F::binary_cross_entropy(p, y, {.weight = w}).backward();
  // d/dp = w (p - y) / (p (1 - p)) / 4
  expect_values(p.grad(), {0.27777777777777773, -0.8333333333333334, -0.1388888888888889, -0.16483516483516486},
                "bce grad");
  // At 0 and 1 the logs are clamped at -100 and the gradient stays finite.
  Tensor e = tensor({0.0, 1.0, 0.5}, kFloat64).requires_grad_();
  Tensor loss = F::binary_cross_entropy(e, tensor({1.0, 1.0, 0.0}, kFloat64), {.reduction = Reduction::sum});
  expect_values(loss, {100.69314718055995}, "bce edge");
  loss.backward();
  expect_values(e.grad(), {-1e12, 0.0, 2.0}, "bce edge grad");
  EXPECT_THROW(F::binary_cross_entropy(tensor({1.5}), tensor({1.0})), ValueError);
}

TEST(NnLoss, BinaryCrossEntropyWithLogits) {
  Tensor z = tensor({-1.5, 0.0, 2.0, 0.3}, kFloat64).requires_grad_();
  Tensor y = tensor({0.0, 1.0, 1.0, 0.5}, kFloat64), w = tensor({1.0, 2.0, 0.5, 1.0}, kFloat64);
  Tensor pw = tensor({2.0, 1.0, 0.5, 3.0}, kFloat64);
  expect_reductions(
      [&](Reduction r) {
        return F::binary_cross_entropy_with_logits(z, y, {.weight = w, .pos_weight = pw, .reduction = r});
      },
      0.7195375327001101, 2.8781501308004405,
      {0.2014132779827524, 1.3862943611198906, 0.03173200276074316, 1.2587104889370542}, "bce logits");
  F::binary_cross_entropy_with_logits(z, y, {.weight = w, .pos_weight = pw}).backward();
  // -w (pw y (1 - sigmoid(z)) - (1 - y) sigmoid(z)) / 4; at z = 0 it is -2 * 0.5 / 4 = -0.25.
  expect_values(z.grad(), {0.04560638095158909, -0.25, -0.007450182626382355, -0.0877787415941705}, "bce logits grad");
  // Equal to binary_cross_entropy(sigmoid(z)) without pos_weight, and stable for large logits.
  Tensor zz = tensor({-30.0, -1.0, 0.5, 40.0}, kFloat64);
  Tensor yy = tensor({1.0, 0.0, 1.0, 0.0}, kFloat64);
  Tensor stable = F::binary_cross_entropy_with_logits(zz, yy, {.reduction = Reduction::none});
  expect_values(stable,
                {30.0 + std::log1p(std::exp(-30.0)), std::log1p(std::exp(-1.0)), std::log1p(std::exp(-0.5)),
                 40.0 + std::log1p(std::exp(-40.0))},
                "bce logits stable");
}

TEST(NnLoss, KlDiv) {
  Tensor lp = log_softmax(X(), 1), p = P();
  expect_values(F::kl_div(lp, p, {.reduction = Reduction::mean}), {0.09446597520317425}, "kl mean");
  expect_values(F::kl_div(lp, p, {.reduction = Reduction::sum}), {1.133591702438091}, "kl sum");
  expect_values(F::kl_div(lp, p, {.reduction = Reduction::batchmean}), {0.377863900812697}, "kl batchmean");
  expect_values(F::kl_div(lp, p.log(), {.reduction = Reduction::batchmean, .log_target = true}), {0.377863900812697},
                "kl log_target");
  // A zero target contributes 0 (0 log 0 = 0); the gradient with respect to it is NaN there, as
  // PyTorch 1.13's (xlogy(t, t) - t x: log t + 1 - x), and -t with respect to the input:
  //   F.kl_div(lp, pz, reduction='sum') = 2.0642047313714365
  //   pz.grad = [nan, 4.064204731371437, 2.0642047313714365, nan], lp.grad = [-0, -0.5, -0.5, -0]
  Tensor lpr = lp.slice(0, 0, 1).detach().requires_grad_();
  Tensor pz = tensor({{0.0, 0.5, 0.5, 0.0}}, kFloat64).requires_grad_();
  Tensor l = F::kl_div(lpr, pz, {.reduction = Reduction::sum});
  expect_values(l, {2.0642047313714365}, "kl zero target");
  l.backward();
  EXPECT_TRUE(tensor_is(pz.grad(), {1, 4}, {NAN, 4.064204731371437, 2.0642047313714365, NAN}, 1e-12));
  EXPECT_TRUE(tensor_is(lpr.grad(), {1, 4}, {0, -0.5, -0.5, 0}, 1e-12));
  // A negative target gives NaN (PyTorch: [nan, 1.5321023656857184, 0.5321023656857182, -0.1678976343142817]).
  EXPECT_TRUE(tensor_is(F::kl_div(lpr, tensor({{-0.5, 0.5, 0.5, 0.5}}, kFloat64), {.reduction = Reduction::none}),
                        {1, 4}, {NAN, 1.5321023656857184, 0.5321023656857182, -0.16789763431428173}, 1e-12));
}

TEST(NnLoss, LossModules) {
  Tensor x = X(), t = T(), w = W();
  nn::CrossEntropyLoss ce({.weight = w, .label_smoothing = 0.1});
  EXPECT_TRUE(ce(x, t).equal(F::cross_entropy(x, t, {.weight = w, .label_smoothing = 0.1})));
  EXPECT_EQ(ce.buffers().size(), 1u);  // the class weights follow to(device)
  EXPECT_TRUE(nn::NLLLoss()(log_softmax(x, 1), t).equal(F::nll_loss(log_softmax(x, 1), t)));
  Tensor a = tensor({0.5, -1.0}, kFloat64), b = tensor({0.0, 0.5}, kFloat64);
  EXPECT_TRUE(nn::MSELoss(Reduction::sum)(a, b).equal(F::mse_loss(a, b, Reduction::sum)));
  EXPECT_TRUE(nn::L1Loss()(a, b).equal(F::l1_loss(a, b)));
  EXPECT_TRUE(nn::SmoothL1Loss({.beta = 0.3})(a, b).equal(F::smooth_l1_loss(a, b, {.beta = 0.3})));
  EXPECT_TRUE(nn::HuberLoss({.reduction = Reduction::none, .delta = 2.0})(a, b).equal(
      F::huber_loss(a, b, {.reduction = Reduction::none, .delta = 2.0})));
  Tensor pr = tensor({0.2, 0.7}, kFloat64), y = tensor({0.0, 1.0}, kFloat64);
  EXPECT_TRUE(nn::BCELoss()(pr, y).equal(F::binary_cross_entropy(pr, y)));
  nn::BCEWithLogitsLoss bl({.pos_weight = tensor({3.0, 1.0}, kFloat64)});
  EXPECT_TRUE(bl(a, y).equal(F::binary_cross_entropy_with_logits(a, y, {.pos_weight = tensor({3.0, 1.0}, kFloat64)})));
  EXPECT_TRUE(nn::KLDivLoss({.reduction = Reduction::batchmean})(log_softmax(x, 1), P())
                  .equal(F::kl_div(log_softmax(x, 1), P(), {.reduction = Reduction::batchmean})));
  nn::CrossEntropyLoss plain;
  Tensor logits = X().requires_grad_();
  plain(logits, t).backward();
  // (softmax - onehot) / N
  Tensor expect = (softmax(X(), 1) - one_hot(t, 4).to(kFloat64)) / 3;
  EXPECT_TRUE(allclose(logits.grad(), expect, 1e-12, 1e-14));
}

// ---- ranking, embedding, margin and likelihood losses: values worked by hand -------------------------
TEST(NnLoss, RankingEmbeddingAndMarginLosses) {
  auto d = [](std::vector<double> v) { return tensor(v, TensorOptions().dtype(kFloat64)); };
  auto near = [](const Tensor& t, double want) { return std::abs(t.item<double>() - want) < 1e-12; };
  // max(0, -y (x1 - x2) + margin): 1 and 0.
  EXPECT_TRUE(near(F::margin_ranking_loss(d({1, 2}), d({2, 1}), d({1, 1})), 0.5));
  // y = -1: max(0, (1 - 2) + 0.5) = 0; y = 1: max(0, -(2 - 1) + 0.5) = 0.
  EXPECT_TRUE(near(F::margin_ranking_loss(d({1, 2}), d({2, 1}), d({-1, 1}), 0.5, Reduction::sum), 0.0));
  // y = -1: max(0, 1 - 0.3) = 0.7; y = 1: x = 2.
  EXPECT_TRUE(near(F::hinge_embedding_loss(d({0.3, 2}), d({-1, 1})), 1.35));
  // Orthogonal vectors: cos = 0, so 1 for y = 1 and max(0, 0 - margin) = 0 for y = -1.
  Tensor e1 = tensor({1.0, 0.0}, kFloat64).reshape({1, 2}), e2 = tensor({0.0, 1.0}, kFloat64).reshape({1, 2});
  EXPECT_TRUE(near(F::cosine_embedding_loss(e1, e2, d({1})), 1.0));
  EXPECT_TRUE(near(F::cosine_embedding_loss(e1, e2, d({-1})), 0.0));
  EXPECT_NEAR(F::cosine_embedding_loss(e1, e1, d({-1}), 0.5).item<double>(), 0.5, 1e-9);  // cos = 1 - 1e-12
  // d(a, p) = 5, d(a, n) = 1: 1 + 5 - 1.
  Tensor a = tensor({0.0, 0.0}, kFloat64).reshape({1, 2}), p = tensor({3.0, 4.0}, kFloat64).reshape({1, 2}),
         n = tensor({0.0, 1.0}, kFloat64).reshape({1, 2});
  EXPECT_TRUE(near(F::triplet_margin_loss(a, p, n, {.eps = 0}), 5.0));
  // swap: d(p, n) = sqrt(18) > 1 keeps d(a, n); with n and p exchanged, d(a, n) = 5 and d(p, n) = sqrt(18).
  EXPECT_TRUE(near(F::triplet_margin_loss(a, n, p, {.eps = 0, .swap = true}), std::max(0.0, 1 + 1 - std::sqrt(18.0))));
  auto l1 = [](const Tensor& u, const Tensor& v) { return (u - v).abs().sum(-1); };
  EXPECT_TRUE(near(F::triplet_margin_with_distance_loss(a, p, n, {.distance_function = l1}), 1 + 7 - 1));
  EXPECT_TRUE(near(F::soft_margin_loss(d({0.0}), d({1.0})), std::log(2.0)));
  EXPECT_TRUE(near(F::multilabel_soft_margin_loss(tensor({0.0, 0.0}, kFloat64).reshape({1, 2}),
                                                  tensor({1.0, 0.0}, kFloat64).reshape({1, 2})),
                   std::log(2.0)));
  // PyTorch's documented example: ((1 - 0.7) + (1 - 0.6) + (1 - 0.4)) / 4.
  Tensor mx = tensor({0.1, 0.2, 0.4, 0.8}, kFloat64).reshape({1, 4});
  Tensor my = tensor({3});
  EXPECT_TRUE(near(F::multi_margin_loss(mx, my), 0.325));
  EXPECT_TRUE(near(F::multi_margin_loss(mx, my, {.p = 2}), (0.09 + 0.16 + 0.36) / 4));
  EXPECT_TRUE(near(F::multi_margin_loss(mx, my, {.weight = d({1, 1, 1, 2})}), 0.65));
  // exp(0) - 2 * 0 = 1, plus Stirling's 2 log 2 - 2 + 0.5 log(4 pi) with full.
  EXPECT_TRUE(near(F::poisson_nll_loss(d({0.0}), d({2.0})), 1.0));
  EXPECT_TRUE(near(F::poisson_nll_loss(d({0.0}), d({2.0}), {.full = true}),
                   1.0 + 2 * std::log(2.0) - 2 + 0.5 * std::log(4 * M_PI)));
  EXPECT_TRUE(near(F::poisson_nll_loss(d({0.0}), d({1.0}), {.full = true}), 1.0));  // no term where target <= 1
  EXPECT_TRUE(near(F::poisson_nll_loss(d({2.0}), d({3.0}), {.log_input = false, .eps = 0}), 2 - 3 * std::log(2.0)));
  // 0.5 (log 2 + 1 / 2), plus 0.5 log(2 pi) with full.
  EXPECT_TRUE(near(F::gaussian_nll_loss(d({1.0}), d({0.0}), d({2.0})), 0.5 * (std::log(2.0) + 0.5)));
  EXPECT_TRUE(near(F::gaussian_nll_loss(d({1.0}), d({0.0}), d({2.0}), {.full = true}),
                   0.5 * (std::log(2.0) + 0.5) + 0.5 * std::log(2 * M_PI)));
  // var is clamped at eps in value, but its gradient passes through the clamp.
  Tensor v = d({0.0}).requires_grad_();
  Tensor g = F::gaussian_nll_loss(d({0.0}), d({0.0}), v, {.eps = 0.25});
  EXPECT_TRUE(near(g, 0.5 * std::log(0.25)));
  g.backward();
  EXPECT_NEAR(v.grad().item<double>(), 0.5 / 0.25, 1e-12);
  // Modules.
  EXPECT_TRUE(near(nn::MarginRankingLoss()(d({1, 2}), d({2, 1}), d({1, 1})), 0.5));
  EXPECT_TRUE(near(nn::TripletMarginLoss({.eps = 0})(a, p, n), 5.0));
  nn::MultiMarginLoss mm({.weight = d({1, 1, 1, 2})});
  EXPECT_EQ(mm.buffers().size(), 1u);
  EXPECT_TRUE(near(mm(mx, my), 0.65));
  EXPECT_TRUE(near(nn::GaussianNLLLoss()(d({1.0}), d({0.0}), d({2.0})), 0.5 * (std::log(2.0) + 0.5)));
}

TEST(NnLoss, RankingEmbeddingAndMarginLossErrors) {
  Tensor x = ones({3, 4}, kFloat64);
  // PyTorch 1.13: "The function 'soft_margin_loss' is not differentiable with respect to argument
  // 'target'. This input cannot have requires_grad True." (raised by the forward).
  Tensor target = tensor({1.0, -1.0, 1.0}, kFloat64).requires_grad_();
  EXPECT_TRUE(throws_with<AutogradError>([&] { F::soft_margin_loss(ones({3}, kFloat64), target); },
                                         {"soft_margin_loss", "target", "[3]"}));
  EXPECT_NEAR(F::soft_margin_loss(zeros({3}, kFloat64), target.detach()).item<double>(), std::log(2.0), 1e-12);
  {
    autograd::NoGradGuard ng;  // without grad mode nothing is recorded: fine, as in PyTorch
    EXPECT_NEAR(F::soft_margin_loss(zeros({3}, kFloat64), target).item<double>(), std::log(2.0), 1e-12);
  }
  EXPECT_THROW(F::cosine_embedding_loss(x, x, ones({3, 1})), ShapeError);  // multi-target
  EXPECT_THROW(F::cosine_embedding_loss(x, x, ones({4})), ShapeError);     // N differs
  EXPECT_THROW(F::margin_ranking_loss(x, ones({4, 3}, kFloat64), x), ShapeError);
  EXPECT_THROW(F::triplet_margin_loss(x, x, ones({4}, kFloat64)), ShapeError);
  EXPECT_THROW(F::triplet_margin_with_distance_loss(x, x, x, {.margin = 0}), ValueError);
  Tensor y = tensor({0, 1, 5});
  EXPECT_THROW(F::multi_margin_loss(x, y), IndexError);
  EXPECT_THROW(F::multi_margin_loss(x, tensor({0, -100, 1})), IndexError);
  EXPECT_THROW(F::multi_margin_loss(x, tensor({0, 1, 2}), {.p = 3}), ValueError);
  EXPECT_THROW(F::gaussian_nll_loss(x, x, -ones({3, 4}, kFloat64)), ValueError);  // negative variance
  EXPECT_THROW(F::gaussian_nll_loss(x, x, ones({4}, kFloat64)), ShapeError);      // fits no accepted shape
  try {
    F::gaussian_nll_loss(x, x, ones({2, 4}, kFloat64));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("gaussian_nll_loss"), std::string::npos) << e.what();
  }
}

TEST(CTCLoss, MatchesTheAlignmentSumByHand) {
  // T = 2, C = 2 (blank 0, label 1), target "1": the alignments are "1 1", "0 1", "1 0".
  Tensor lp = tensor({0.6, 0.4, 0.3, 0.7}, dtype(kFloat64)).log().view({2, 1, 2});
  Tensor target = tensor(std::vector<int64_t>{1}, dtype(kInt64)).view({1, 1});
  const double p = 0.4 * 0.7 + 0.6 * 0.7 + 0.4 * 0.3;
  Tensor loss = nn::functional::ctc_loss(lp, target, {2}, {1}, {.reduction = nn::Reduction::sum});
  EXPECT_NEAR(loss.item<double>(), -std::log(p), 1e-12);
  // An empty target: only the all-blank path.
  Tensor empty = nn::functional::ctc_loss(lp, target, {2}, {0}, {.reduction = nn::Reduction::sum});
  EXPECT_NEAR(empty.item<double>(), -std::log(0.6 * 0.3), 1e-12);
  // Too short an input for "1 1" (it needs a blank between): inf, or 0 with zero_infinity.
  Tensor two = tensor(std::vector<int64_t>{1, 1}, dtype(kInt64)).view({1, 2});
  EXPECT_TRUE(std::isinf(nn::functional::ctc_loss(lp, two, {2}, {2}).item<double>()));
  EXPECT_EQ(nn::functional::ctc_loss(lp, two, {2}, {2}, {.zero_infinity = true}).item<double>(), 0.0);
  nn::CTCLoss module;
  EXPECT_NEAR(module(lp, target, tensor(std::vector<int64_t>{2}), tensor(std::vector<int64_t>{1})).item<double>(),
              -std::log(p), 1e-12);  // mean divides by the target length 1
}

TEST(CTCLoss, RejectsBadTargetsAndLengths) {
  Tensor lp = zeros({4, 1, 3});
  Tensor t = tensor(std::vector<int64_t>{1, 2}, dtype(kInt64)).view({1, 2});
  EXPECT_TRUE(nabla::testing::throws_with<IndexError>(
      [&] { nn::functional::ctc_loss(lp, t.clone().fill_(0), {4}, {2}); }, {"ctc_loss", "target 0", "blank 0"}));
  EXPECT_TRUE(nabla::testing::throws_with<ValueError>([&] { nn::functional::ctc_loss(lp, t, {5}, {2}); },
                                                      {"input length 5", "[0, 4]"}));
  EXPECT_TRUE(nabla::testing::throws_with<ValueError>([&] { nn::functional::ctc_loss(lp, t, {4}, {3}); },
                                                      {"target length 3", "width 2"}));
  EXPECT_TRUE(nabla::testing::throws_with<ShapeError>(
      [&] {
        nn::functional::ctc_loss(lp, t, {4, 4}, {2, 2});
      },
      {"one per batch element"}));
}
