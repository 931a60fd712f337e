// nn::functional losses. Formulas follow PyTorch's (aten/src/ATen/native/Loss*.cpp), including its
// conventions for class weights, ignore_index, label smoothing and reductions.
#include <cmath>
#include <optional>
#include <tuple>

#include "core/autocast.h"
#include "core/error.h"
#include "core/graph.h"
#include "nn/functional.h"
#include "nn/value_checks.h"

namespace nabla::nn::functional {

using autograd::GradList;
using autograd::Node;

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::batchmean: return "batchmean";
  }
  return "?";
}

namespace {

Tensor reduce(const Tensor& loss, Reduction r, const char* op) {
  switch (r) {
    case Reduction::none: return loss;
    case Reduction::mean: return loss.mean();
    case Reduction::sum: return loss.sum();
    case Reduction::batchmean: break;
  }
  throw ValueError(internal::str(op, ": reduction 'batchmean' is only supported by kl_div; use none, mean or sum"));
}

void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  NABLA_CHECK(ValueError, input.defined() && target.defined(), op, ": input or target is undefined");
  NABLA_CHECK(ShapeError, input.sizes() == target.sizes(), op, ": input of shape ", input.sizes(),
              " and target of shape ", target.sizes(),
              " differ (broadcasting them is almost always a bug: reshape one of them)");
  NABLA_CHECK(DTypeError, input.is_floating_point(), op, ": input must be floating, got ", input.dtype());
}

// The class dim of a classification input: (C) -> 0, (N, C, ...) -> 1.
int64_t class_dim_of(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

// Checks that `target` holds class indices for `input` ((N) for (N, C), (N, d...) for (N, C, d...),
// () for (C)), all in [0, C) except those equal to ignore_index.
void check_class_target(const Tensor& input, const Tensor& target, const Tensor& weight,
                        std::optional<int64_t> ignore_index, const char* op) {
  NABLA_CHECK(ShapeError, input.dim() >= 1, op, ": input must have a class dim, got a 0-dim tensor");
  NABLA_CHECK(DTypeError, target.dtype() == DType::i64, op, ": class-index targets must be int64, got ",
              target.dtype());
  int64_t cd = class_dim_of(input), c = input.size(cd);
  Shape expect = input.sizes();
  expect.erase(expect.begin() + cd);
  NABLA_CHECK(ShapeError, target.sizes() == expect, op, ": expected target of shape ", expect, " for input of shape ",
              input.sizes(), ", got ", target.sizes());
  if (weight.defined())
    NABLA_CHECK(ShapeError, weight.dim() == 1 && weight.size(0) == c, op, ": weight must have one value per class (", c,
                "), got shape ", weight.sizes());
  if (!value_checks::check_now(target)) return;
  // The value checks, as a function of the target (compile replays them: core/trace.h).
  auto values = [op, c, ignore_index](const Tensor& target) {
    autograd::NoGradGuard ng;
    auto in_bounds = [op, c, ignore_index](int64_t lo, int64_t hi) {
      if (lo >= 0 && hi < c) return;
      if (!ignore_index)  // a loss without ignore_index (multi_margin_loss)
        throw IndexError(internal::str(op, ": target ", lo < 0 ? lo : hi, " is out of bounds for ", c,
                                       " classes (expected values in [0, ", c, "))"));
      throw IndexError(internal::str(op, ": target ", lo < 0 ? lo : hi, " is out of bounds for ", c,
                                     " classes (expected values in [0, ", c, ") or ignore_index ", *ignore_index, ")"));
    };
    // Ignored targets (e.g. padding marked -100) count as class 0.
    if (target.is_cuda() && c > 0) {  // checked on the device without waiting (nn/value_checks.h)
      value_checks::check_min_max<int64_t>(ignore_index ? target.masked_fill(target.eq(*ignore_index), 0) : target,
                                           in_bounds);
      return;
    }
    // The common case costs two reductions: every target in range.
    auto [lo, hi] = value_checks::min_max<int64_t>(target);
    if (lo >= 0 && hi < c) return;
    if (!ignore_index) in_bounds(lo, hi);
    if (c > 0) {
      std::tie(lo, hi) = value_checks::min_max<int64_t>(target.masked_fill(target.eq(*ignore_index), 0));
    } else {
      Tensor valid = target.ne(*ignore_index);
      if (!valid.any().item<bool>()) return;
      Tensor t = target.masked_select(valid);
      lo = t.min().item<int64_t>();
      hi = t.max().item<int64_t>();
    }
    in_bounds(lo, hi);
  };
  if (trace::tl_current) [[unlikely]]
    return trace::value_check(target, values);
  values(target);
}

}  // namespace

// ---- classification -------------------------------------------------------------------------------

namespace {
// nll_loss once its arguments are checked (nll_loss and cross_entropy check them under their names).
Tensor nll_loss_checked(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  int64_t cd = class_dim_of(input);
  Tensor ignored = target.eq(o.ignore_index);
  Tensor safe = target.masked_fill(ignored, 0);
  // picked[i] = input[i, target[i]]: a gather, never a one-hot matrix.
  Tensor picked = input.gather(cd, safe.unsqueeze(cd)).squeeze(cd);
  Tensor w;  // per-target weight, 0 where ignored
  if (o.weight.defined()) {
    w = o.weight.to(input.dtype()).index_select(0, safe.reshape({-1})).view(target.sizes()).masked_fill(ignored, 0);
  } else {
    w = ignored.logical_not().to(input.dtype());
  }
  Tensor loss = -(picked * w);
  // Ignored targets get a zero gradient even when every target is ignored (the mean is then
  // 0 / 0 = NaN, as in PyTorch, but the product rule would make their gradients inf * 0 = NaN).
  if (o.reduction == Reduction::mean) return loss.masked_fill(ignored, 0).sum() / w.sum();
  return reduce(loss, o.reduction, "nll_loss");
}
}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::nll_loss>(input, target, o.weight)) [[unlikely]] {
    NLLLossOptions cast_o = o;
    cast_o.weight = ac[2];
    return nll_loss(ac[0], ac[1], cast_o);
  }
  NABLA_CHECK(DTypeError, input.is_floating_point(), "nll_loss: input must be floating, got ", input.dtype());
  check_class_target(input, target, o.weight, o.ignore_index, "nll_loss");
  return nll_loss_checked(input, target, o);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::cross_entropy>(input, target, o.weight)) [[unlikely]] {
    CrossEntropyOptions cast_o = o;
    cast_o.weight = ac[2];
    return cross_entropy(ac[0], ac[1], cast_o);
  }
  NABLA_CHECK(ValueError, input.defined() && target.defined(), "cross_entropy: input or target is undefined");
  NABLA_CHECK(DTypeError, input.is_floating_point(), "cross_entropy: input must be floating, got ", input.dtype());
  NABLA_CHECK(ShapeError, input.dim() >= 1, "cross_entropy: input must have a class dim, got a 0-dim tensor");
  double ls = o.label_smoothing;
  NABLA_CHECK(ValueError, ls >= 0 && ls <= 1, "cross_entropy: label_smoothing must be in [0, 1], got ", ls);
  int64_t cd = class_dim_of(input), c = input.size(cd);
  Shape wshape(static_cast<size_t>(input.dim()), 1);
  wshape[static_cast<size_t>(cd)] = c;
  Tensor logp = log_softmax(input, cd);

  if (target.is_floating_point()) {
    // Class probabilities: -sum_c w_c t_c log p_c.
    Shape index_shape = input.sizes();
    index_shape.erase(index_shape.begin() + cd);
    NABLA_CHECK(DTypeError, target.sizes() != index_shape || target.sizes() == input.sizes(),
                "cross_entropy: a target of shape ", target.sizes(), " holds class indices, which must be int64, got ",
                target.dtype(),
                " (convert with target.to(kInt64); a floating target holds class probabilities and has the "
                "input's shape ",
                input.sizes(), ")");
    NABLA_CHECK(ShapeError, target.sizes() == input.sizes(),
                "cross_entropy: probability targets must have the input's shape ", input.sizes(), ", got ",
                target.sizes());
    if (o.weight.defined())
      NABLA_CHECK(ShapeError, o.weight.dim() == 1 && o.weight.size(0) == c,
                  "cross_entropy: weight must have one value per class (", c, "), got shape ", o.weight.sizes());
    Tensor t = ls > 0 ? target * (1 - ls) + ls / static_cast<double>(c) : target;
    Tensor prod = logp * t;
    if (o.weight.defined()) prod = prod * o.weight.to(input.dtype()).view(wshape);
    switch (o.reduction) {
      case Reduction::none: return -prod.sum({cd});
      case Reduction::sum: return -prod.sum();
      case Reduction::mean: return -prod.sum() / static_cast<double>(input.numel() / std::max<int64_t>(c, 1));
      default: return reduce(prod, o.reduction, "cross_entropy");
    }
  }

  check_class_target(input, target, o.weight, o.ignore_index, "cross_entropy");
  Tensor nll =
      nll_loss_checked(logp, target, {.weight = o.weight, .ignore_index = o.ignore_index, .reduction = o.reduction});
  if (ls == 0) return nll;
  // Label smoothing: (1 - ls) * nll + ls / C * sum_c (-w_c log p_c), normalized like nll.
  Tensor ignored = target.eq(o.ignore_index);
  Tensor smooth = o.weight.defined() ? -(logp * o.weight.to(input.dtype()).view(wshape)).sum({cd}) : -logp.sum({cd});
  smooth = smooth.masked_fill(ignored, 0);
  Tensor ret;
  switch (o.reduction) {
    case Reduction::none: ret = smooth; break;
    case Reduction::sum: ret = smooth.sum(); break;
    case Reduction::mean: {
      Tensor denom;
      if (o.weight.defined()) {
        Tensor safe = target.masked_fill(ignored, 0).reshape({-1});
        denom = o.weight.to(input.dtype()).index_select(0, safe).masked_fill(ignored.reshape({-1}), 0).sum();
      } else {
        denom = ignored.logical_not().sum().to(input.dtype());
      }
      ret = smooth.sum() / denom;
      break;
    }
    default: ret = reduce(smooth, o.reduction, "cross_entropy");
  }
  return nll * (1 - ls) + ret * (ls / static_cast<double>(c));
}

// ---- regression -----------------------------------------------------------------------------------

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r) {
  if (auto ac = autocast_internal::cast<OpId::mse_loss>(input, target)) [[unlikely]]
    return mse_loss(ac[0], ac[1], r);
  check_same_shape(input, target, "mse_loss");
  Tensor d = input - target;
  return reduce(d * d, r, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction r) {
  if (auto ac = autocast_internal::cast<OpId::l1_loss>(input, target)) [[unlikely]]
    return l1_loss(ac[0], ac[1], r);
  check_same_shape(input, target, "l1_loss");
  return reduce((input - target).abs(), r, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::smooth_l1_loss>(input, target)) [[unlikely]]
    return smooth_l1_loss(ac[0], ac[1], o);
  const Reduction r = o.reduction;
  const double beta = o.beta;
  check_same_shape(input, target, "smooth_l1_loss");
  NABLA_CHECK(ValueError, beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  Tensor d = input - target;
  Tensor ad = d.abs();
  if (beta == 0) return reduce(ad, r, "smooth_l1_loss");
  return reduce(where(ad.lt(beta), d * d * (0.5 / beta), ad - 0.5 * beta), r, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::huber_loss>(input, target)) [[unlikely]]
    return huber_loss(ac[0], ac[1], o);
  const Reduction r = o.reduction;
  const double delta = o.delta;
  check_same_shape(input, target, "huber_loss");
  NABLA_CHECK(ValueError, delta > 0, "huber_loss: delta must be positive, got ", delta);
  Tensor d = input - target;
  Tensor ad = d.abs();
  return reduce(where(ad.lt(delta), d * d * 0.5, (ad - 0.5 * delta) * delta), r, "huber_loss");
}

// ---- binary classification ------------------------------------------------------------------------

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCEOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::binary_cross_entropy>(input, target)) [[unlikely]]
    return binary_cross_entropy(ac[0], ac[1], o);
  check_same_shape(input, target, "binary_cross_entropy");
  Tensor w = o.weight.defined() ? o.weight.to(input.dtype()) : Tensor();
  if (w.defined()) broadcast_shapes(w.sizes(), input.sizes(), "binary_cross_entropy (weight)");
  value_checks::check_min_max<double>(input, [](double lo, double hi) {
    NABLA_CHECK(ValueError, lo >= 0 && hi <= 1,
                "binary_cross_entropy: all elements of input should be between 0 and 1, got [", lo, ", ", hi,
                "] (apply sigmoid first, or use binary_cross_entropy_with_logits)");
  });
  // One node: the logs are clamped at -100 as PyTorch does, and the input gradient uses
  // (x - y) / max(x (1 - x), 1e-12), which stays finite at x = 0 and x = 1.
  Tensor loss;
  {
    autograd::NoGradGuard ng;
    Tensor lx = input.log().clamp_min(-100), l1x = (1 - input).log().clamp_min(-100);
    loss = -(target * lx + (1 - target) * l1x);
    if (w.defined()) loss = loss * w;
    if (loss.sizes() != input.sizes()) loss = loss.expand(input.sizes()).contiguous();
  }
  if (autograd::needs_grad(input, target, w))
    autograd::record(
        "BinaryCrossEntropyBackward", {&input, &target, &w}, {&loss},
        [sx = autograd::save(input), st = autograd::save(target), sw = autograd::save(w)](Node& n, GradList& grads) {
          Tensor x = sx.unpack(n), y = st.unpack(n);
          Tensor wv = sw.defined() ? sw.unpack(n) : Tensor();
          Tensor gw = wv.defined() ? grads[0] * wv : grads[0];
          GradList r(3);
          if (n.needs_input_grad(0)) r[0] = gw * (x - y) / (x * (1 - x)).clamp_min(1e-12);
          Tensor lx = x.log().clamp_min(-100), l1x = (1 - x).log().clamp_min(-100);
          if (n.needs_input_grad(1)) r[1] = gw * (l1x - lx);
          if (n.needs_input_grad(2)) r[2] = autograd::sum_to(-(y * lx + (1 - y) * l1x) * grads[0], wv.sizes());
          return r;
        });
  return reduce(loss, o.reduction, "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::binary_cross_entropy_with_logits>(input, target)) [[unlikely]]
    return binary_cross_entropy_with_logits(ac[0], ac[1], o);
  check_same_shape(input, target, "binary_cross_entropy_with_logits");
  // -log(sigmoid(x)) = log(1 + exp(-x)), exact and with the right gradient at x = 0.
  Tensor neg_log_sig = -logsigmoid(input);
  Tensor loss;
  if (o.pos_weight.defined()) {
    broadcast_shapes(o.pos_weight.sizes(), input.sizes(), "binary_cross_entropy_with_logits (pos_weight)");
    Tensor lw = (o.pos_weight.to(input.dtype()) - 1) * target + 1;
    loss = (1 - target) * input + lw * neg_log_sig;
  } else {
    loss = (1 - target) * input + neg_log_sig;
  }
  if (o.weight.defined()) {
    broadcast_shapes(o.weight.sizes(), input.sizes(), "binary_cross_entropy_with_logits (weight)");
    loss = loss * o.weight.to(input.dtype());
  }
  return reduce(loss, o.reduction, "binary_cross_entropy_with_logits");
}

// ---- distributions --------------------------------------------------------------------------------

Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::kl_div>(input, target)) [[unlikely]]
    return kl_div(ac[0], ac[1], o);
  const Reduction r = o.reduction;
  const bool log_target = o.log_target;
  check_same_shape(input, target, "kl_div");
  Tensor loss;
  if (log_target) {
    loss = target.exp() * (target - input);
  } else {
    // PyTorch's formula: 0 log 0 = 0; a negative target gives NaN, and the gradient with respect
    // to the target, log t + 1 - x, is NaN at t == 0 (t / t in xlogy's gradient in its second operand).
    loss = xlogy(target, target) - target * input;
  }
  if (r == Reduction::batchmean) return input.dim() == 0 ? loss.sum() : loss.sum() / static_cast<double>(input.size(0));
  return reduce(loss, r, "kl_div");
}

// ---- ranking, embedding and margin losses ------------------------------------------------------------

namespace {

// x1, x2 (and y) of one shape, floating x1 and x2.
void check_pair(const Tensor& x1, const Tensor& x2, const char* op) {
  NABLA_CHECK(ValueError, x1.defined() && x2.defined(), op, ": an input is undefined");
  NABLA_CHECK(ShapeError, x1.sizes() == x2.sizes(), op, ": the inputs' shapes ", x1.sizes(), " and ", x2.sizes(),
              " differ");
  NABLA_CHECK(DTypeError, x1.is_floating_point() && x2.is_floating_point(), op, ": inputs must be floating, got ",
              x1.dtype(), " and ", x2.dtype());
}

// (N, D) with (N) targets or (D) with a () target: the dim the loss sums over.
void check_triplet(const Tensor& a, const Tensor& p, const Tensor& n, const char* op) {
  NABLA_CHECK(ValueError, a.defined() && p.defined() && n.defined(), op, ": an input is undefined");
  NABLA_CHECK(ShapeError, a.dim() == p.dim() && a.dim() == n.dim() && (a.dim() == 1 || a.dim() == 2), op,
              ": anchor, positive and negative must all be (N, D) or (D), got ", a.sizes(), ", ", p.sizes(), " and ",
              n.sizes());
}

}  // namespace

Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin, Reduction r) {
  if (auto ac = autocast_internal::cast<OpId::margin_ranking_loss>(x1, x2, y)) [[unlikely]]
    return margin_ranking_loss(ac[0], ac[1], ac[2], margin, r);
  check_pair(x1, x2, "margin_ranking_loss");
  check_same_shape(x1, y.is_floating_point() ? y : y.to(x1.dtype()), "margin_ranking_loss");
  return reduce(clamp_min(-y.to(x1.dtype()) * (x1 - x2) + margin, 0), r, "margin_ranking_loss");
}

Tensor hinge_embedding_loss(const Tensor& x, const Tensor& y, double margin, Reduction r) {
  if (auto ac = autocast_internal::cast<OpId::hinge_embedding_loss>(x, y)) [[unlikely]]
    return hinge_embedding_loss(ac[0], ac[1], margin, r);
  check_same_shape(x, y.is_floating_point() ? y : y.to(x.dtype()), "hinge_embedding_loss");
  Tensor zero = zeros_like(x);
  Tensor t = y.to(x.dtype());
  Tensor out = where(t.ne(1.0), clamp_min(margin - x, 0), zero) + where(t.ne(-1.0), x, zero);
  return reduce(out, r, "hinge_embedding_loss");
}

Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin, Reduction r) {
  if (auto ac = autocast_internal::cast<OpId::cosine_embedding_loss>(x1, x2, y)) [[unlikely]]
    return cosine_embedding_loss(ac[0], ac[1], ac[2], margin, r);
  check_pair(x1, x2, "cosine_embedding_loss");
  NABLA_CHECK(ShapeError, y.dim() <= 1,
              "cosine_embedding_loss: expected a () or (N) target (multi-target is not supported), "
              "got shape ",
              y.sizes());
  NABLA_CHECK(ShapeError, x1.dim() == y.dim() + 1, "cosine_embedding_loss: a target of shape ", y.sizes(),
              " expects inputs of ", y.dim() + 1, " dims, got ", x1.sizes());
  NABLA_CHECK(ShapeError, y.dim() == 0 || y.size(0) == x1.size(0), "cosine_embedding_loss: target of shape ", y.sizes(),
              " for inputs of shape ", x1.sizes());
  const int64_t dim = y.dim();
  constexpr double kEps = 1e-12;  // PyTorch's EPSILON
  Tensor prod = (x1 * x2).sum(dim);
  Tensor m1 = (x1 * x1).sum(dim) + kEps, m2 = (x2 * x2).sum(dim) + kEps;
  Tensor cos = prod / (m1 * m2).sqrt();
  Tensor t = y.to(x1.dtype()), zero = zeros_like(cos);
  Tensor out = where(t.eq(1.0), 1.0 - cos, zero) + where(t.eq(-1.0), clamp_min(cos - margin, 0), zero);
  return reduce(out, r, "cosine_embedding_loss");
}

Tensor triplet_margin_loss(const Tensor& a, const Tensor& p, const Tensor& n, const TripletMarginLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::triplet_margin_loss>(a, p, n)) [[unlikely]]
    return triplet_margin_loss(ac[0], ac[1], ac[2], o);
  check_triplet(a, p, n, "triplet_margin_loss");
  Tensor d_pos = pairwise_distance(a, p, o.p, o.eps), d_neg = pairwise_distance(a, n, o.p, o.eps);
  if (o.swap) d_neg = minimum(d_neg, pairwise_distance(p, n, o.p, o.eps));
  return reduce(clamp_min(o.margin + d_pos - d_neg, 0), o.reduction, "triplet_margin_loss");
}

Tensor triplet_margin_with_distance_loss(const Tensor& a, const Tensor& p, const Tensor& n,
                                         const TripletMarginWithDistanceLossOptions& o) {
  check_triplet(a, p, n, "triplet_margin_with_distance_loss");
  NABLA_CHECK(ValueError, o.margin > 0, "triplet_margin_with_distance_loss: expected margin to be greater than 0, got ",
              o.margin);
  auto dist = [&](const Tensor& u, const Tensor& v) {
    return o.distance_function ? o.distance_function(u, v) : pairwise_distance(u, v);
  };
  Tensor d_pos = dist(a, p), d_neg = dist(a, n);
  if (o.swap) d_neg = minimum(d_neg, dist(p, n));
  return reduce(clamp_min(o.margin + d_pos - d_neg, 0), o.reduction, "triplet_margin_with_distance_loss");
}

Tensor soft_margin_loss(const Tensor& x, const Tensor& y, Reduction r) {
  if (auto ac = autocast_internal::cast<OpId::soft_margin_loss>(x, y)) [[unlikely]]
    return soft_margin_loss(ac[0], ac[1], r);
  Tensor t = y.defined() && !y.is_floating_point() ? y.to(x.dtype()) : y;
  check_same_shape(x, t, "soft_margin_loss");
  NABLA_CHECK(AutogradError, !autograd::needs_grad(t),
              "soft_margin_loss: not differentiable with respect to the target "
              "(as in PyTorch); the target of shape ",
              t.sizes(), " requires grad: pass target.detach()");
  return reduce(log1p(exp(-x * t)), r, "soft_margin_loss");
}

Tensor multilabel_soft_margin_loss(const Tensor& x, const Tensor& y, const Tensor& weight, Reduction r) {
  Tensor t = y.defined() && !y.is_floating_point() ? y.to(x.dtype()) : y;
  check_same_shape(x, t, "multilabel_soft_margin_loss");
  NABLA_CHECK(ShapeError, x.dim() >= 1, "multilabel_soft_margin_loss: input must be (N, C) or (C), got a 0-dim tensor");
  Tensor loss = -(t * logsigmoid(x) + (1.0 - t) * logsigmoid(-x));
  if (weight.defined()) {
    broadcast_shapes(weight.sizes(), x.sizes(), "multilabel_soft_margin_loss (weight)");
    loss = loss * weight.to(x.dtype());
  }
  const int64_t cd = x.dim() - 1;
  loss = loss.sum(cd) / static_cast<double>(x.size(cd));
  return reduce(loss, r, "multilabel_soft_margin_loss");
}

Tensor multi_margin_loss(const Tensor& x, const Tensor& y, const MultiMarginLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::multi_margin_loss>(x, y, o.weight)) [[unlikely]] {
    MultiMarginLossOptions cast_o = o;
    cast_o.weight = ac[2];
    return multi_margin_loss(ac[0], ac[1], cast_o);
  }
  const char* op = "multi_margin_loss";
  NABLA_CHECK(ValueError, x.defined() && y.defined(), op, ": input or target is undefined");
  NABLA_CHECK(DTypeError, x.is_floating_point(), op, ": input must be floating, got ", x.dtype());
  NABLA_CHECK(ValueError, o.p == 1 || o.p == 2, op, ": only p == 1 and p == 2 are supported, got ", o.p);
  check_class_target(x, y, o.weight, /*ignore_index=*/std::nullopt, op);
  NABLA_CHECK(ShapeError, x.dim() <= 2, op, ": input must be (N, C) or (C), got shape ", x.sizes());
  const int64_t cd = x.dim() - 1, c = x.size(cd);
  Tensor yi = y.unsqueeze(cd);
  Tensor z = clamp_min(o.margin - gather(x, cd, yi) + x, 0);
  if (o.p == 2) z = z * z;
  z = z * (1.0 - one_hot(y, c).to(x.dtype()));  // not the target's own class
  if (o.weight.defined()) z = z * gather(o.weight.to(x.dtype()), 0, y.reshape({-1})).reshape(yi.sizes());
  return reduce(z.sum(cd) / static_cast<double>(c), o.reduction, op);
}

// ---- likelihood losses ---------------------------------------------------------------------------------

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::poisson_nll_loss>(input, target)) [[unlikely]]
    return poisson_nll_loss(ac[0], ac[1], o);
  check_same_shape(input, target, "poisson_nll_loss");
  Tensor loss = o.log_input ? exp(input) - target * input : input - target * log(input + o.eps);
  if (o.full) {
    // Stirling's approximation of log(target!), where target > 1 (0 elsewhere, as PyTorch).
    Tensor big = target.gt(1.0);
    Tensor t = where(big, target, 2.0);  // keeps log finite (and its gradient) where the term is masked
    Tensor stirling = t * log(t) - t + 0.5 * log(2.0 * M_PI * t);
    loss = loss + where(big, stirling, 0.0);
  }
  return reduce(loss, o.reduction, "poisson_nll_loss");
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& o) {
  const char* op = "gaussian_nll_loss";
  check_same_shape(input, target, op);
  NABLA_CHECK(ValueError, var.defined(), op, ": var is undefined");
  Tensor v = var.to(input.dtype());
  if (v.sizes() != input.sizes()) {
    Shape lead(input.sizes().begin(), input.sizes().end() - (input.dim() > 0 ? 1 : 0));
    if (input.dim() > 0 && v.sizes() == lead) {
      v = v.unsqueeze(-1);
    } else {
      bool per_sample = input.dim() > 0 && v.dim() == input.dim() && v.size(-1) == 1 &&
                        Shape(v.sizes().begin(), v.sizes().end() - 1) == lead;
      NABLA_CHECK(ShapeError, per_sample, op, ": var of shape ", var.sizes(), " fits neither the input's shape ",
                  input.sizes(), ", nor it without the last dim, nor it with a last dim of 1");
    }
  }
  value_checks::check_min_max<double>(
      v, [op](double lo, double) { NABLA_CHECK(ValueError, lo >= 0, op, ": var has negative entries"); });
  // Clamped at eps, with the clamp invisible to autograd (PyTorch clamps in place under no_grad).
  v = v + (clamp_min(v, o.eps) - v).detach();
  Tensor d = input - target;
  Tensor loss = 0.5 * (log(v) + d * d / v);
  if (o.full) loss = loss + 0.5 * std::log(2.0 * M_PI);
  return reduce(loss, o.reduction, op);
}

}  // namespace nabla::nn::functional
