#include "metrics/metrics.h"

#include <vector>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::metrics {

namespace {

// Class predictions (int64, on the CPU) from indices or scores.
Tensor as_classes(const Tensor& preds, const Tensor& target, const char* op) {
  NABLA_CHECK(ValueError, preds.defined() && target.defined(), op, ": preds or target is undefined");
  NABLA_CHECK(DTypeError, target.dtype() == kInt64 || target.dtype() == kInt32, op,
              ": target must hold int64 class indices, got ", target.dtype());
  Tensor p = preds;
  if (preds.is_floating_point()) {
    NABLA_CHECK(ShapeError, preds.dim() == target.dim() + 1 && preds.dim() >= 2, op, ": score preds of shape ",
                preds.sizes(), " need a class dim 1 and target of shape ", target.sizes(), " the others");
    p = preds.argmax(1);
  }
  NABLA_CHECK(ShapeError, p.sizes() == target.sizes(), op, ": preds of shape ", preds.sizes(),
              " do not match target of shape ", target.sizes());
  return p.to(kCPU, kInt64).reshape({-1});
}

}  // namespace

Tensor confusion_matrix(const Tensor& preds, const Tensor& target, int64_t c, std::optional<int64_t> ignore_index) {
  NABLA_CHECK(ValueError, c > 0, "confusion_matrix: num_classes must be positive, got ", c);
  autograd::NoGradGuard ng;
  Tensor p = as_classes(preds, target, "confusion_matrix");
  Tensor t = target.to(kCPU, kInt64).reshape({-1});
  if (ignore_index) {
    Tensor keep = t.ne(*ignore_index);
    p = p.masked_select(keep);
    t = t.masked_select(keep);
  }
  if (t.numel() > 0) {
    int64_t lo = std::min(p.min().item<int64_t>(), t.min().item<int64_t>());
    int64_t hi = std::max(p.max().item<int64_t>(), t.max().item<int64_t>());
    NABLA_CHECK(IndexError, lo >= 0 && hi < c, "confusion_matrix: class ", lo < 0 ? lo : hi, " is out of range for ", c,
                " classes");
  }
  Tensor idx = t * c + p;
  return zeros({c * c}, dtype(kInt64)).scatter_add(0, idx, ones_like(idx)).view({c, c});
}

Tensor score_from_confusion(const Tensor& cm_in, Score score, Average average) {
  Tensor cm = cm_in.to(kCPU, kInt64).contiguous();
  int64_t c = cm.size(0);
  const int64_t* m = cm.data_ptr<int64_t>();
  std::vector<double> tp(c), fp(c), fn(c);
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double v = static_cast<double>(m[i * c + j]);
      if (i == j) tp[i] += v;
      else {
        fn[i] += v;  // true i, predicted j
        fp[j] += v;
      }
    }
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  auto value = [&](double t, double p, double n) {
    switch (score) {
      case Score::accuracy:
      case Score::recall: return ratio(t, t + n);
      case Score::precision: return ratio(t, t + p);
      case Score::f1: return ratio(2 * t, 2 * t + p + n);
    }
    return 0.0;
  };
  if (average == Average::micro) {
    double t = 0, p = 0, n = 0;
    for (int64_t i = 0; i < c; ++i) t += tp[i], p += fp[i], n += fn[i];
    // Pooled over classes: accuracy = precision = recall = f1 = correct / total.
    return scalar_tensor(score == Score::accuracy ? ratio(t, t + n) : value(t, p, n), dtype(kFloat64));
  }
  std::vector<double> per(c);
  for (int64_t i = 0; i < c; ++i) per[i] = value(tp[i], fp[i], fn[i]);
  if (average == Average::none) return tensor(per, dtype(kFloat64));
  double sum = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < c; ++i)
    if (tp[i] + fp[i] + fn[i] > 0) {
      sum += per[i];
      ++count;
    }
  return scalar_tensor(count ? sum / static_cast<double>(count) : 0.0, dtype(kFloat64));
}

Tensor accuracy(const Tensor& preds, const Tensor& target, int64_t c, Average a) {
  return score_from_confusion(confusion_matrix(preds, target, c), Score::accuracy, a);
}
Tensor precision(const Tensor& preds, const Tensor& target, int64_t c, Average a) {
  return score_from_confusion(confusion_matrix(preds, target, c), Score::precision, a);
}
Tensor recall(const Tensor& preds, const Tensor& target, int64_t c, Average a) {
  return score_from_confusion(confusion_matrix(preds, target, c), Score::recall, a);
}
Tensor f1_score(const Tensor& preds, const Tensor& target, int64_t c, Average a) {
  return score_from_confusion(confusion_matrix(preds, target, c), Score::f1, a);
}

Metric::Metric(int64_t c, std::optional<int64_t> ignore_index) : num_classes_(c), ignore_index_(ignore_index) {
  NABLA_CHECK(ValueError, c > 0, "metrics: num_classes must be positive, got ", c);
  reset();
}

void Metric::reset() { state_ = zeros({num_classes_, num_classes_}, dtype(kInt64)); }

void Metric::update(const Tensor& preds, const Tensor& target) {
  state_.add_(confusion_matrix(preds, target, num_classes_, ignore_index_));
}

Tensor Metric::forward(const Tensor& preds, const Tensor& target) {
  Tensor cm = confusion_matrix(preds, target, num_classes_, ignore_index_);
  state_.add_(cm);
  return compute_from(cm);
}

Tensor Accuracy::compute_from(const Tensor& cm) const { return score_from_confusion(cm, Score::accuracy, average); }
Tensor Precision::compute_from(const Tensor& cm) const { return score_from_confusion(cm, Score::precision, average); }
Tensor Recall::compute_from(const Tensor& cm) const { return score_from_confusion(cm, Score::recall, average); }
Tensor F1Score::compute_from(const Tensor& cm) const { return score_from_confusion(cm, Score::f1, average); }

}  // namespace nabla::metrics
