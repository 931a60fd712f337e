// Connectionist temporal classification loss (Graves et al. 2006), as torch.nn.functional.ctc_loss:
// the forward (alpha) and backward (beta) recursions over the blank-extended target in log space,
// one batch element per task, in double precision whatever the input dtype. The loss is one
// autograd node whose backward is the exact gradient with respect to log_probs (see the header).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/autocast.h"
#include "core/error.h"
#include "core/graph.h"
#include "core/parallel.h"
#include "nn/functional.h"

namespace nabla::nn::functional {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// One batch element: lp (T, C) log-probabilities of `classes` entries per time step, `ts` apart, its
// targets, the blank. Returns the negative log-likelihood; fills grad (T, C), laid out as lp, with
// d nll / d lp when grad is non-null.
double ctc_one(const double* lp, int64_t ts, int64_t classes, int64_t t_len, const int64_t* tgt, int64_t s_len,
               int64_t blank, double* grad) {
  const int64_t l = 2 * s_len + 1;  // blank, t0, blank, t1, ..., blank
  auto label = [&](int64_t s) { return s % 2 == 0 ? blank : tgt[s / 2]; };
  if (t_len == 0) { return s_len == 0 ? 0.0 : std::numeric_limits<double>::infinity(); }
  std::vector<double> alpha(static_cast<size_t>(t_len * l), kNegInf), beta(alpha.size(), kNegInf);
  auto A = [&](int64_t t, int64_t s) -> double& { return alpha[static_cast<size_t>(t * l + s)]; };
  auto B = [&](int64_t t, int64_t s) -> double& { return beta[static_cast<size_t>(t * l + s)]; };
  A(0, 0) = lp[blank];
  if (l > 1) A(0, 1) = lp[label(1)];
  for (int64_t t = 1; t < t_len; ++t) {
    const double* row = lp + t * ts;
    for (int64_t s = 0; s < l; ++s) {
      double a = A(t - 1, s);
      if (s > 0) a = log_add(a, A(t - 1, s - 1));
      if (s > 1 && label(s) != blank && label(s) != label(s - 2)) a = log_add(a, A(t - 1, s - 2));
      A(t, s) = a == kNegInf ? kNegInf : a + row[label(s)];
    }
  }
  double ll = A(t_len - 1, l - 1);
  if (l > 1) ll = log_add(ll, A(t_len - 1, l - 2));
  const double nll = -ll;
  if (!grad) return nll;
  // beta_t(s): the paths from (t, s) to the end, lp at t included (as alpha includes it).
  const double* last = lp + (t_len - 1) * ts;
  B(t_len - 1, l - 1) = last[label(l - 1)];
  if (l > 1) B(t_len - 1, l - 2) = last[label(l - 2)];
  for (int64_t t = t_len - 2; t >= 0; --t) {
    const double* row = lp + t * ts;
    for (int64_t s = 0; s < l; ++s) {
      double b = B(t + 1, s);
      if (s + 1 < l) b = log_add(b, B(t + 1, s + 1));
      if (s + 2 < l && label(s) != blank && label(s) != label(s + 2)) b = log_add(b, B(t + 1, s + 2));
      B(t, s) = b == kNegInf ? kNegInf : b + row[label(s)];
    }
  }
  // d nll / d lp[t][c] = -exp(log(sum over s with label c of alpha_t(s) beta_t(s)) + nll - lp[t][c]).
  std::vector<double> lcab;
  for (int64_t t = 0; t < t_len; ++t) {
    const double* row = lp + t * ts;
    double* g = grad + t * ts;
    lcab.assign(static_cast<size_t>(classes), kNegInf);
    for (int64_t s = 0; s < l; ++s) {
      double& v = lcab[static_cast<size_t>(label(s))];
      v = log_add(v, A(t, s) + B(t, s));
    }
    for (int64_t c = 0; c < classes; ++c) {
      const double v = lcab[static_cast<size_t>(c)];
      g[c] = (v == kNegInf || std::isinf(nll)) ? 0.0 : -std::exp(v + nll - row[c]);
    }
  }
  return nll;
}

std::vector<int64_t> lengths_of(const Tensor& t, const char* what) {
  NABLA_CHECK(DTypeError, is_integral(t.dtype()) && t.dtype() != DType::boolean, "ctc_loss: ", what,
              " must be an integer tensor, got ", t.dtype());
  NABLA_CHECK(ShapeError, t.dim() <= 1, "ctc_loss: ", what, " must be 1-D, got shape ", t.sizes());
  Tensor c = t.to(kCPU, DType::i64).contiguous().reshape({-1});
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths, IntArrayRef target_lengths,
                const CTCLossOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::ctc_loss>(log_probs, targets)) [[unlikely]]
    return ctc_loss(ac[0], ac[1], input_lengths, target_lengths, o);
  const char* op = "ctc_loss";
  NABLA_CHECK(ShapeError, log_probs.dim() == 3 || log_probs.dim() == 2, op,
              ": expected log_probs (T, N, C) or unbatched (T, C), got shape ", log_probs.sizes());
  NABLA_CHECK(DTypeError, log_probs.is_floating_point(), op, ": log_probs must be floating, got ", log_probs.dtype());
  NABLA_CHECK(DTypeError, is_integral(targets.dtype()) && targets.dtype() != DType::boolean, op,
              ": targets must be an integer tensor, got ", targets.dtype());
  const bool batched = log_probs.dim() == 3;
  Tensor lp3 = batched ? log_probs : log_probs.unsqueeze(1);
  const int64_t t_max = lp3.size(0), n = lp3.size(1), c = lp3.size(2);
  NABLA_CHECK(ShapeError,
              static_cast<int64_t>(input_lengths.size()) == n && static_cast<int64_t>(target_lengths.size()) == n, op,
              ": expected ", n, " input lengths and target lengths (one per batch element), got ", input_lengths.size(),
              " and ", target_lengths.size());
  NABLA_CHECK(ValueError, o.blank >= 0 && o.blank < c, op, ": blank ", o.blank, " must be a class in [0, ", c, ")");
  // Each element's targets: row i of a padded (N, S) tensor, or the next target_lengths[i] of a
  // concatenated 1-D one.
  Tensor tg = targets.to(kCPU, DType::i64).contiguous();
  const int64_t* tp = tg.data_ptr<int64_t>();
  const bool padded = batched ? targets.dim() == 2 : targets.dim() == 1 && !batched;
  std::vector<int64_t> start(static_cast<size_t>(n));
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t il = input_lengths[static_cast<size_t>(i)], tl = target_lengths[static_cast<size_t>(i)];
    NABLA_CHECK(ValueError, il >= 0 && il <= t_max, op, ": input length ", il, " of batch element ", i,
                " must be in [0, ", t_max, "]");
    NABLA_CHECK(ValueError, tl >= 0, op, ": target length ", tl, " of batch element ", i, " is negative");
    if (padded) {
      const int64_t s_max = batched ? targets.size(1) : targets.size(0);
      NABLA_CHECK(ShapeError, !batched || targets.size(0) == n, op, ": targets of shape ", targets.sizes(),
                  " for a batch of ", n);
      NABLA_CHECK(ValueError, tl <= s_max, op, ": target length ", tl, " of batch element ", i,
                  " exceeds the targets' width ", s_max);
      start[static_cast<size_t>(i)] = i * s_max;
    } else {
      start[static_cast<size_t>(i)] = total;
    }
    total += tl;
    for (int64_t k = 0; k < tl; ++k) {
      const int64_t v = tp[start[static_cast<size_t>(i)] + k];
      NABLA_CHECK(IndexError, v >= 0 && v < c && v != o.blank, op, ": target ", v, " of batch element ", i,
                  " must be a class in [0, ", c, ") other than the blank ", o.blank);
    }
  }
  NABLA_CHECK(ShapeError, padded || tg.numel() >= total, op, ": concatenated targets hold ", tg.numel(),
              " labels, but the target lengths add up to ", total);
  // The recursions in double precision on the host.
  Tensor lpd = lp3.detach().to(kCPU, DType::f64).contiguous();
  const double* lpp = lpd.data_ptr<double>();
  const bool want_grad = autograd::needs_grad(log_probs);
  Tensor grad = want_grad ? zeros({t_max, n, c}, dtype(DType::f64)) : Tensor{};
  double* gp = want_grad ? grad.data_ptr<double>() : nullptr;
  std::vector<double> nll(static_cast<size_t>(n));
  parallel_for(0, n, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const size_t k = static_cast<size_t>(i);
      nll[k] = ctc_one(lpp + i * c, n * c, c, input_lengths[k], tp + start[k], target_lengths[k], o.blank,
                       gp ? gp + i * c : nullptr);
      if (o.zero_infinity && std::isinf(nll[k])) {
        nll[k] = 0;
        if (gp)
          for (int64_t t = 0; t < t_max; ++t) std::fill_n(gp + (t * n + i) * c, c, 0.0);
      }
    }
  });
  const TensorOptions out_opt = dtype(log_probs.dtype()).device(log_probs.device());
  Tensor losses = tensor(nll, dtype(DType::f64)).to(out_opt);  // (N)
  if (want_grad) {
    // The node maps the gradient of the per-element losses to log_probs: g[n] * d nll_n / d lp.
    Tensor d = grad.to(out_opt);
    Tensor out = losses.detach();
    autograd::record("CtcLossBackward", {&lp3}, {&out}, [d](autograd::Node&, autograd::GradList& grads) {
      return autograd::GradList{d * grads[0].view({1, -1, 1})};
    });
    losses = out;
  }
  if (!batched) losses = losses.squeeze(0);
  switch (o.reduction) {
    case Reduction::none: return losses;
    case Reduction::sum: return losses.sum();
    case Reduction::mean: {
      // Each loss divided by its target length (at least 1), then the batch mean, as PyTorch.
      std::vector<double> len(target_lengths.begin(), target_lengths.end());
      for (double& v : len) v = std::max(v, 1.0);
      Tensor lt = tensor(len, out_opt);
      return (losses.reshape({-1}) / lt).mean();
    }
    case Reduction::batchmean: break;
  }
  throw ValueError("ctc_loss: reduction 'batchmean' is only supported by kl_div; use none, mean or sum");
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossOptions& options) {
  std::vector<int64_t> il = lengths_of(input_lengths, "input_lengths");
  std::vector<int64_t> tl = lengths_of(target_lengths, "target_lengths");
  return ctc_loss(log_probs, targets, il, tl, options);
}

}  // namespace nabla::nn::functional
