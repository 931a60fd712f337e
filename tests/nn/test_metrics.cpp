// Classification metrics: batch values, accumulation, and the micro/macro/none averages.
#include <gtest/gtest.h>

#include "nabla.h"

using namespace nabla;
using metrics::Average;

namespace {
// 10 samples, 3 classes.
//   target: 0 0 0 0 1 1 1 2 2 2
//   preds:  0 0 1 2 1 1 0 2 2 1
// Confusion (rows true, columns predicted):
//   [[2, 1, 1],
//    [1, 2, 0],
//    [0, 1, 2]]
// tp = [2, 2, 2], fp = [1, 2, 1], fn = [2, 1, 1]
Tensor target() { return tensor({0, 0, 0, 0, 1, 1, 1, 2, 2, 2}); }
Tensor preds() { return tensor({0, 0, 1, 2, 1, 1, 0, 2, 2, 1}); }
}  // namespace

TEST(Metrics, ConfusionMatrixAndScoresByHand) {
  Tensor cm = metrics::confusion_matrix(preds(), target(), 3);
  EXPECT_TRUE(cm.equal(tensor({{2, 1, 1}, {1, 2, 0}, {0, 1, 2}})));
  // micro: 6 correct of 10.
  EXPECT_DOUBLE_EQ(metrics::accuracy(preds(), target(), 3).item<double>(), 0.6);
  EXPECT_DOUBLE_EQ(metrics::precision(preds(), target(), 3).item<double>(), 0.6);
  EXPECT_DOUBLE_EQ(metrics::recall(preds(), target(), 3).item<double>(), 0.6);
  EXPECT_DOUBLE_EQ(metrics::f1_score(preds(), target(), 3).item<double>(), 0.6);
  // Per class: precision tp/(tp+fp) = [2/3, 1/2, 2/3]; recall tp/(tp+fn) = [1/2, 2/3, 2/3];
  // f1 = 2tp/(2tp+fp+fn) = [4/7, 4/7, 2/3].
  EXPECT_TRUE(
      allclose(metrics::precision(preds(), target(), 3, Average::none), tensor({2. / 3, 0.5, 2. / 3}, kFloat64)));
  EXPECT_TRUE(allclose(metrics::recall(preds(), target(), 3, Average::none), tensor({0.5, 2. / 3, 2. / 3}, kFloat64)));
  EXPECT_TRUE(
      allclose(metrics::f1_score(preds(), target(), 3, Average::none), tensor({4. / 7, 4. / 7, 2. / 3}, kFloat64)));
  EXPECT_NEAR(metrics::precision(preds(), target(), 3, Average::macro).item<double>(), (2. / 3 + 0.5 + 2. / 3) / 3,
              1e-15);
  EXPECT_NEAR(metrics::recall(preds(), target(), 3, Average::macro).item<double>(), (0.5 + 2. / 3 + 2. / 3) / 3, 1e-15);
  EXPECT_NEAR(metrics::f1_score(preds(), target(), 3, Average::macro).item<double>(), (4. / 7 + 4. / 7 + 2. / 3) / 3,
              1e-15);
  // Macro accuracy is the mean per-class recall (as torchmetrics).
  EXPECT_NEAR(metrics::accuracy(preds(), target(), 3, Average::macro).item<double>(), (0.5 + 2. / 3 + 2. / 3) / 3,
              1e-15);
}

TEST(Metrics, ScoresFromLogitsAndAbsentClasses) {
  // Scores (N, C): the argmax is the prediction.
  Tensor logits = tensor({{2.0, 0.1, 0.3, -1.0}, {0.1, 0.2, 3.0, 0.0}, {0.0, 1.0, 0.5, 0.2}});
  Tensor t = tensor({0, 2, 2});
  EXPECT_NEAR(metrics::accuracy(logits, t, 4).item<double>(), 2.0 / 3, 1e-15);
  // Class 3 never occurs (tp + fp + fn = 0): left out of the macro mean. Class 1 is predicted
  // once wrongly: precision 0. Per-class precision [1, 0, 1, -] -> macro 2/3.
  EXPECT_NEAR(metrics::precision(logits, t, 4, Average::macro).item<double>(), 2.0 / 3, 1e-15);
  EXPECT_NEAR(metrics::recall(logits, t, 4, Average::macro).item<double>(), (1.0 + 0.0 + 0.5) / 3, 1e-15);
  EXPECT_THROW(metrics::accuracy(tensor({0, 5}), tensor({0, 1}), 3), IndexError);
  EXPECT_THROW(metrics::accuracy(tensor({0, 1}), tensor({0, 1, 1}), 3), ShapeError);
}

TEST(Metrics, AccumulateOverBatches) {
  metrics::Accuracy acc(3);
  metrics::F1Score f1(3, Average::macro);
  metrics::ConfusionMatrix cm(3);
  Tensor p = preds(), t = target();
  // Two batches: the first 4 samples (all class 0, 2 right), then the rest (4 of 6 right).
  Tensor b1 = acc.forward(p.slice(0, 0, 4), t.slice(0, 0, 4));
  EXPECT_DOUBLE_EQ(b1.item<double>(), 0.5);
  Tensor b2 = acc.forward(p.slice(0, 4), t.slice(0, 4));
  EXPECT_DOUBLE_EQ(b2.item<double>(), 4.0 / 6);
  EXPECT_DOUBLE_EQ(acc.compute().item<double>(), 0.6);  // the whole epoch
  f1.update(p.slice(0, 0, 5), t.slice(0, 0, 5));
  f1.update(p.slice(0, 5), t.slice(0, 5));
  EXPECT_NEAR(f1.compute().item<double>(), metrics::f1_score(p, t, 3, Average::macro).item<double>(), 1e-15);
  cm.update(p, t);
  cm.update(p, t);
  EXPECT_TRUE(cm.compute().equal(tensor({{4, 2, 2}, {2, 4, 0}, {0, 2, 4}})));
  acc.reset();
  EXPECT_DOUBLE_EQ(acc.compute().item<double>(), 0.0);  // nothing seen
  // ignore_index skips targets.
  metrics::Accuracy ig(3, Average::micro, -1);
  ig.update(tensor({0, 1, 2}), tensor({0, -1, 1}));
  EXPECT_DOUBLE_EQ(ig.compute().item<double>(), 0.5);
}
