// Text generation from a language model's logits: the logits processors of Hugging Face's
// `generate` (repetition penalty, temperature, top-k, top-p), the choice of the next token (greedy
// or sampled), and a `generate` loop with stop tokens.
//
//   nn::SamplingOptions s{.temperature = 0.8, .top_k = 40, .top_p = 0.95};
//   Tensor next = nn::sample_next_token(logits.select(1, -1), s, tokens);  // (B, V) -> (B)
//
//   auto step = [&](const Tensor& tokens, int64_t past) { return model->forward(tokens); };
//   Tensor out = nn::generate(step, prompt, {.max_new_tokens = 100, .sampling = s, .stop_tokens = {eos}, .seed = 1});
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "../core/tensor.h"

namespace nabla::nn {

// How the next token is chosen from logits (B, V). Applied in Hugging Face's order: repetition
// penalty, temperature, top-k, top-p; then a draw from the softmax, or the argmax when greedy.
struct SamplingOptions {
  bool greedy = false;              // the most likely token (temperature, top-k and top-p then change nothing)
  double temperature = 1.0;         // logits / temperature; must be positive unless greedy
  int64_t top_k = 0;                // keep the k most likely tokens (ties with the k-th kept too); 0: all
  double top_p = 1.0;               // keep the fewest most likely tokens whose probability reaches top_p; 1: all
  double repetition_penalty = 1.0;  // tokens already in the sequence: logit / penalty if > 0, * penalty if < 0
};

// The logits after the repetition penalty, temperature, top-k and top-p (removed tokens at -inf), in
// float32 (float64 for float64 logits). logits: (B, V); previous: the tokens so far (B, T), int64,
// for the repetition penalty (undefined: none). No autograd.
Tensor process_logits(const Tensor& logits, const SamplingOptions& options, const Tensor& previous = {});

// The next token of each row, (B) int64: the argmax of the processed logits when greedy, else a draw
// from their softmax by the default CPU generator (manual_seed makes it reproducible).
Tensor sample_next_token(const Tensor& logits, const SamplingOptions& options, const Tensor& previous = {});

struct GenerateOptions {
  int64_t max_new_tokens = 32;
  SamplingOptions sampling{};
  std::vector<int64_t> stop_tokens{};  // a row that emits one of these is finished (the token is kept)
  int64_t pad_token = -1;              // what finished rows get after their stop token (-1: the stop token itself)
  std::optional<uint64_t> seed{};      // manual_seed(seed) once before the first draw
};

// The model as generate calls it: step(tokens, past) with tokens (B, T), the whole sequence so far,
// and past, how many of its positions the previous call already saw (0 on the first call). It returns
// logits (B, T', V) whose last row along dim 1 scores the next token; a model that caches its keys and
// values reads only tokens[:, past:] and returns T' = T - past rows, one that does not simply runs
// on all of tokens.
using StepFn = std::function<Tensor(const Tensor& tokens, int64_t past)>;

// Extends prompt (B, T) int64 by up to max_new_tokens tokens, under NoGrad, and returns the prompt and
// what was generated (B, T + n): n stops early when every row has emitted a stop token. The rows of a
// batch are prompts of the same length.
Tensor generate(const StepFn& step, const Tensor& prompt, const GenerateOptions& options = {});

}  // namespace nabla::nn
