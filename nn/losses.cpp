// nn::functional losses. Formulas follow PyTorch's (aten/src/ATen/native/Loss*.cpp), including its
// conventions for class weights, ignore_index, label smoothing and reductions.
#include "core/error.h"
#include "core/graph.h"
#include "nn/functional.h"

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
  throw ValueError(detail::str(op, ": reduction 'batchmean' is only supported by kl_div; use none, mean or sum"));
}

void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  check<ValueError>(input.defined() && target.defined(), op, ": input or target is undefined");
  check<ShapeError>(input.sizes() == target.sizes(), op, ": input of shape ", input.sizes(), " and target of shape ",
                    target.sizes(), " differ (broadcasting them is almost always a bug: reshape one of them)");
  check<DTypeError>(input.is_floating_point(), op, ": input must be floating, got ", input.dtype());
}

// The class dim of a classification input: (C) -> 0, (N, C, ...) -> 1.
int64_t class_dim_of(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

// Checks that `target` holds class indices for `input` ((N) for (N, C), (N, d...) for (N, C, d...),
// () for (C)), all in [0, C) except those equal to ignore_index.
void check_class_target(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                        const char* op) {
  check<ShapeError>(input.dim() >= 1, op, ": input must have a class dim, got a 0-dim tensor");
  check<DTypeError>(target.dtype() == DType::i64, op, ": class-index targets must be int64, got ", target.dtype());
  int64_t cd = class_dim_of(input), c = input.size(cd);
  Shape expect = input.sizes();
  expect.erase(expect.begin() + cd);
  check<ShapeError>(target.sizes() == expect, op, ": expected target of shape ", expect, " for input of shape ",
                    input.sizes(), ", got ", target.sizes());
  if (weight.defined())
    check<ShapeError>(weight.dim() == 1 && weight.size(0) == c, op, ": weight must have one value per class (", c,
                      "), got shape ", weight.sizes());
  if (target.numel() == 0) return;
  autograd::NoGradGuard ng;
  // The common case costs two reductions: every target in range.
  int64_t lo = target.min().item<int64_t>(), hi = target.max().item<int64_t>();
  if (lo >= 0 && hi < c) return;
  Tensor valid = target.ne(ignore_index);
  if (!valid.any().item<bool>()) return;
  Tensor t = target.masked_select(valid);
  lo = t.min().item<int64_t>();
  hi = t.max().item<int64_t>();
  check<IndexError>(lo >= 0 && hi < c, op, ": target ", lo < 0 ? lo : hi, " is out of bounds for ", c,
                    " classes (expected values in [0, ", c, ") or ignore_index ", ignore_index, ")");
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
  check<DTypeError>(input.is_floating_point(), "nll_loss: input must be floating, got ", input.dtype());
  check_class_target(input, target, o.weight, o.ignore_index, "nll_loss");
  return nll_loss_checked(input, target, o);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  check<ValueError>(input.defined() && target.defined(), "cross_entropy: input or target is undefined");
  check<DTypeError>(input.is_floating_point(), "cross_entropy: input must be floating, got ", input.dtype());
  check<ShapeError>(input.dim() >= 1, "cross_entropy: input must have a class dim, got a 0-dim tensor");
  double ls = o.label_smoothing;
  check<ValueError>(ls >= 0 && ls <= 1, "cross_entropy: label_smoothing must be in [0, 1], got ", ls);
  int64_t cd = class_dim_of(input), c = input.size(cd);
  Shape wshape(static_cast<size_t>(input.dim()), 1);
  wshape[static_cast<size_t>(cd)] = c;
  Tensor logp = log_softmax(input, cd);

  if (target.is_floating_point()) {
    // Class probabilities: -sum_c w_c t_c log p_c.
    Shape index_shape = input.sizes();
    index_shape.erase(index_shape.begin() + cd);
    check<DTypeError>(target.sizes() != index_shape || target.sizes() == input.sizes(), "cross_entropy: a target of shape ",
                      target.sizes(), " holds class indices, which must be int64, got ", target.dtype(),
                      " (convert with target.to(kInt64); a floating target holds class probabilities and has the "
                      "input's shape ", input.sizes(), ")");
    check<ShapeError>(target.sizes() == input.sizes(), "cross_entropy: probability targets must have the input's shape ",
                      input.sizes(), ", got ", target.sizes());
    if (o.weight.defined())
      check<ShapeError>(o.weight.dim() == 1 && o.weight.size(0) == c, "cross_entropy: weight must have one value per class (",
                        c, "), got shape ", o.weight.sizes());
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
  Tensor nll = nll_loss_checked(logp, target, {.weight = o.weight, .ignore_index = o.ignore_index, .reduction = o.reduction});
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
  check_same_shape(input, target, "mse_loss");
  Tensor d = input - target;
  return reduce(d * d, r, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction r) {
  check_same_shape(input, target, "l1_loss");
  return reduce((input - target).abs(), r, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o) {
  const Reduction r = o.reduction;
  const double beta = o.beta;
  check_same_shape(input, target, "smooth_l1_loss");
  check<ValueError>(beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  Tensor d = input - target;
  Tensor ad = d.abs();
  if (beta == 0) return reduce(ad, r, "smooth_l1_loss");
  return reduce(where(ad.lt(beta), d * d * (0.5 / beta), ad - 0.5 * beta), r, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& o) {
  const Reduction r = o.reduction;
  const double delta = o.delta;
  check_same_shape(input, target, "huber_loss");
  check<ValueError>(delta > 0, "huber_loss: delta must be positive, got ", delta);
  Tensor d = input - target;
  Tensor ad = d.abs();
  return reduce(where(ad.lt(delta), d * d * 0.5, (ad - 0.5 * delta) * delta), r, "huber_loss");
}

// ---- binary classification ------------------------------------------------------------------------

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCEOptions& o) {
  check_same_shape(input, target, "binary_cross_entropy");
  Tensor w = o.weight.defined() ? o.weight.to(input.dtype()) : Tensor();
  if (w.defined()) broadcast_shapes(w.sizes(), input.sizes(), "binary_cross_entropy (weight)");
  if (input.numel() > 0) {
    autograd::NoGradGuard ng;
    double lo = input.min().item<double>(), hi = input.max().item<double>();
    check<ValueError>(lo >= 0 && hi <= 1, "binary_cross_entropy: all elements of input should be between 0 and 1, got [",
                      lo, ", ", hi, "] (apply sigmoid first, or use binary_cross_entropy_with_logits)");
  }
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
    autograd::record("BinaryCrossEntropyBackward", {&input, &target, &w}, {&loss},
                     [sx = autograd::save(input), st = autograd::save(target), sw = autograd::save(w)](Node& n,
                                                                                                  GradList& grads) {
                       Tensor x = sx.unpack(n), y = st.unpack(n);
                       Tensor wv = sw.defined() ? sw.unpack(n) : Tensor();
                       Tensor gw = wv.defined() ? grads[0] * wv : grads[0];
                       GradList r(3);
                       if (n.needs_input_grad(0)) r[0] = gw * (x - y) / (x * (1 - x)).clamp_min(1e-12);
                       Tensor lx = x.log().clamp_min(-100), l1x = (1 - x).log().clamp_min(-100);
                       if (n.needs_input_grad(1)) r[1] = gw * (l1x - lx);
                       if (n.needs_input_grad(2))
                         r[2] = autograd::sum_to(-(y * lx + (1 - y) * l1x) * grads[0], wv.sizes());
                       return r;
                     });
  return reduce(loss, o.reduction, "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsOptions& o) {
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
  const Reduction r = o.reduction;
  const bool log_target = o.log_target;
  check_same_shape(input, target, "kl_div");
  Tensor loss;
  if (log_target) {
    loss = target.exp() * (target - input);
  } else {
    // xlogy(t, t) - t * x, with 0 log 0 = 0.
    Tensor pos = target.gt(0);
    Tensor safe = where(pos, target, 1.0);
    loss = target * safe.log() - target * input;
  }
  if (r == Reduction::batchmean) return input.dim() == 0 ? loss.sum() : loss.sum() / static_cast<double>(input.size(0));
  return reduce(loss, r, "kl_div");
}

}  // namespace nabla::nn::functional
