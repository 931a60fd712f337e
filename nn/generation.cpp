#include "nn/generation.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"

namespace nabla::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_options(const char* op, const SamplingOptions& o) {
  NABLA_CHECK(ValueError, o.greedy || (o.temperature > 0 && std::isfinite(o.temperature)), op,
              ": temperature must be positive and finite (or greedy = true), got ", o.temperature);
  NABLA_CHECK(ValueError, o.top_k >= 0, op, ": top_k must be 0 (off) or positive, got ", o.top_k);
  NABLA_CHECK(ValueError, o.top_p > 0 && o.top_p <= 1, op, ": top_p must be in (0, 1], got ", o.top_p);
  NABLA_CHECK(ValueError, o.repetition_penalty > 0 && std::isfinite(o.repetition_penalty), op,
              ": repetition_penalty must be positive, got ", o.repetition_penalty);
}

}  // namespace

Tensor process_logits(const Tensor& logits, const SamplingOptions& o, const Tensor& previous) {
  const char* op = "process_logits";
  NABLA_CHECK(ValueError, logits.defined(), op, ": logits are undefined");
  NABLA_CHECK(DTypeError, is_floating(logits.dtype()), op, ": expected floating logits (B, V), got ",
              nabla::internal::describe(logits));
  NABLA_CHECK(ShapeError, logits.dim() == 2 && logits.size(1) >= 1, op,
              ": expected logits of shape (B, V) with V >= 1, got ", logits.sizes());
  check_options(op, o);
  NoGradGuard no_grad;
  const int64_t V = logits.size(1);
  const DType wide = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  // A copy in the wide dtype (to() already copies when it converts).
  Tensor s = logits.dtype() == wide ? logits.detach().clone() : logits.detach().to(wide);
  if (previous.defined() && previous.numel() > 0 && o.repetition_penalty != 1.0) {
    NABLA_CHECK(DTypeError, previous.dtype() == DType::i64, op, ": previous tokens must be int64, got ",
                nabla::internal::describe(previous));
    NABLA_CHECK(ShapeError, previous.dim() == 2 && previous.size(0) == logits.size(0), op,
                ": previous tokens must be (B, T) with B = ", logits.size(0), ", got ", previous.sizes());
    Tensor prev = previous.to(s.device());
    NABLA_CHECK(IndexError, prev.min().item<int64_t>() >= 0 && prev.max().item<int64_t>() < V, op,
                ": previous tokens must lie in [0, ", V, "), the vocabulary of the logits");
    Tensor seen = s.gather(1, prev);  // a token seen twice is penalised once: both writes are the same value
    s = s.scatter(1, prev, where(seen > 0, seen / o.repetition_penalty, seen * o.repetition_penalty));
  }
  if (o.greedy) return s;
  if (o.temperature != 1.0) s = s / o.temperature;
  if (o.top_k > 0 && o.top_k < V) {
    Tensor kth = std::get<0>(s.topk(o.top_k, 1)).narrow(1, o.top_k - 1, 1);  // (B, 1)
    s = s.masked_fill(s < kth, kNegInf);
  }
  if (o.top_p < 1.0) {
    auto [sorted, order] = s.sort(1, /*descending=*/true);
    Tensor p = sorted.softmax(1);
    // A token goes when the more likely ones before it already hold top_p of the mass (the first stays).
    Tensor drop = (p.cumsum(1) - p) >= o.top_p;
    s = s.scatter(1, order, sorted.masked_fill(drop, kNegInf));
  }
  return s;
}

Tensor sample_next_token(const Tensor& logits, const SamplingOptions& o, const Tensor& previous) {
  Tensor s = process_logits(logits, o, previous);
  NoGradGuard no_grad;
  if (o.greedy) return s.argmax(1);
  return multinomial(s.softmax(1), 1).squeeze(1);
}

Tensor generate(const StepFn& step, const Tensor& prompt, const GenerateOptions& o) {
  const char* op = "generate";
  NABLA_CHECK(ValueError, static_cast<bool>(step), op, ": the step function is empty");
  NABLA_CHECK(DTypeError, prompt.defined() && prompt.dtype() == DType::i64, op,
              ": the prompt must be int64 tokens (B, T), got ",
              prompt.defined() ? nabla::internal::describe(prompt) : std::string("an undefined tensor"));
  NABLA_CHECK(ShapeError, prompt.dim() == 2 && prompt.size(0) >= 1 && prompt.size(1) >= 1, op,
              ": the prompt must be (B, T) with B, T >= 1, got ", prompt.sizes());
  NABLA_CHECK(ValueError, o.max_new_tokens >= 0, op, ": max_new_tokens must not be negative, got ", o.max_new_tokens);
  check_options(op, o.sampling);
  NoGradGuard no_grad;
  if (o.seed) manual_seed(*o.seed);
  const int64_t B = prompt.size(0);
  Tensor tokens = prompt;
  Tensor stops = o.stop_tokens.empty() ? Tensor() : tensor(o.stop_tokens, dtype(DType::i64).device(prompt.device()));
  Tensor finished = zeros({B}, dtype(DType::boolean).device(prompt.device()));
  int64_t past = 0;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    Tensor logits = step(tokens, past);
    NABLA_CHECK(ShapeError, logits.defined() && logits.dim() == 3 && logits.size(0) == B && logits.size(1) >= 1, op,
                ": the step function must return logits (B, T', V) with B = ", B, " and T' >= 1, got ",
                logits.defined() ? nabla::internal::str(logits.sizes()) : std::string("an undefined tensor"));
    past = tokens.size(1);
    Tensor next = sample_next_token(logits.select(1, logits.size(1) - 1), o.sampling, tokens).to(prompt.device());
    if (stops.defined()) {
      Tensor pad = o.pad_token >= 0 ? full({B}, o.pad_token, dtype(DType::i64).device(prompt.device()))
                                    : tokens.select(1, tokens.size(1) - 1);
      next = where(finished, pad, next);
      finished = logical_or(finished, (next.unsqueeze(1) == stops.unsqueeze(0)).any(1));
    }
    tokens = cat({tokens, next.unsqueeze(1)}, 1);
    if (stops.defined() && finished.all().item<bool>()) break;
  }
  return tokens;
}

}  // namespace nabla::nn
