// Classification metrics over class predictions, per batch or accumulated (as torchmetrics):
//
//   metrics::Accuracy acc(10);                      // micro: correct / total
//   metrics::F1Score f1(10, metrics::Average::macro);
//   for (auto& [x, y] : loader) {
//     Tensor logits = (*model)(x);
//     double batch_acc = acc.forward(logits, y).item<double>();   // this batch, and accumulated
//     f1.update(logits, y);
//   }
//   double epoch_acc = acc.compute().item<double>();   acc.reset();
//
// preds are class indices (int64, the target's shape) or scores (N, C, ...) whose argmax over dim 1
// is taken; target holds int64 class indices. Everything derives from the confusion matrix
// (rows: true class, columns: predicted class): per class tp = diagonal, fp = column sum - tp,
// fn = row sum - tp.
//   micro: pooled counts (for single-label multiclass, accuracy = precision = recall = f1).
//   macro: the mean of the per-class values over the classes that occur (tp + fp + fn > 0), as
//          torchmetrics does; a 0/0 per-class value counts as 0.
//   none:  the per-class values, a (C) tensor.
// Accuracy with macro averaging is the mean per-class recall (balanced accuracy), as torchmetrics.
// Results are float64 CPU tensors (0-dim for micro/macro); the confusion matrix is int64 (C, C).
#pragma once

#include <optional>

#include "../core/tensor.h"

namespace nabla::metrics {

enum class Average { micro, macro, none };

// The batch's confusion matrix; targets equal to ignore_index are skipped.
Tensor confusion_matrix(const Tensor& preds, const Tensor& target, int64_t num_classes,
                        std::optional<int64_t> ignore_index = std::nullopt);
Tensor accuracy(const Tensor& preds, const Tensor& target, int64_t num_classes, Average average = Average::micro);
Tensor precision(const Tensor& preds, const Tensor& target, int64_t num_classes, Average average = Average::micro);
Tensor recall(const Tensor& preds, const Tensor& target, int64_t num_classes, Average average = Average::micro);
Tensor f1_score(const Tensor& preds, const Tensor& target, int64_t num_classes, Average average = Average::micro);

// Accumulates a confusion matrix over batches.
class Metric {
 public:
  Metric(int64_t num_classes, std::optional<int64_t> ignore_index = std::nullopt);
  virtual ~Metric() = default;
  void update(const Tensor& preds, const Tensor& target);
  // The value over everything seen since construction or reset().
  Tensor compute() const { return compute_from(state_); }
  // update() and the value of this batch alone.
  Tensor forward(const Tensor& preds, const Tensor& target);
  void reset();
  const Tensor& confusion() const { return state_; }
  int64_t num_classes() const { return num_classes_; }

 protected:
  virtual Tensor compute_from(const Tensor& cm) const = 0;

 private:
  int64_t num_classes_;
  std::optional<int64_t> ignore_index_;
  Tensor state_;  // (C, C) int64
};

class ConfusionMatrix : public Metric {
 public:
  using Metric::Metric;

 protected:
  Tensor compute_from(const Tensor& cm) const override { return cm.clone(); }
};

class Accuracy : public Metric {
 public:
  Accuracy(int64_t num_classes, Average average = Average::micro, std::optional<int64_t> ignore_index = std::nullopt)
      : Metric(num_classes, ignore_index), average(average) {}
  Average average;

 protected:
  Tensor compute_from(const Tensor& cm) const override;
};

class Precision : public Metric {
 public:
  Precision(int64_t num_classes, Average average = Average::micro, std::optional<int64_t> ignore_index = std::nullopt)
      : Metric(num_classes, ignore_index), average(average) {}
  Average average;

 protected:
  Tensor compute_from(const Tensor& cm) const override;
};

class Recall : public Metric {
 public:
  Recall(int64_t num_classes, Average average = Average::micro, std::optional<int64_t> ignore_index = std::nullopt)
      : Metric(num_classes, ignore_index), average(average) {}
  Average average;

 protected:
  Tensor compute_from(const Tensor& cm) const override;
};

class F1Score : public Metric {
 public:
  F1Score(int64_t num_classes, Average average = Average::micro, std::optional<int64_t> ignore_index = std::nullopt)
      : Metric(num_classes, ignore_index), average(average) {}
  Average average;

 protected:
  Tensor compute_from(const Tensor& cm) const override;
};

// The statistics behind the metrics, from a confusion matrix.
enum class Score { accuracy, precision, recall, f1 };
Tensor score_from_confusion(const Tensor& cm, Score score, Average average);

}  // namespace nabla::metrics
