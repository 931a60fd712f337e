// nn/generation.h: the logits processors (values worked by hand from Hugging Face's definitions),
// the next-token choice (greedy; sampled draws follow the processed softmax and repeat under a
// seed), and generate's loop: the step function's arguments, stop tokens, padding, early end, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> row(const Tensor& t) { return values(t.to(kFloat64).reshape({-1})); }

// A toy language model over V tokens: the next token is (last + 1) % V with logit 10, the others 0.
Tensor count_up(const Tensor& tokens, int64_t V) {
  Tensor last = tokens.select(1, tokens.size(1) - 1);
  Tensor next = remainder(last + 1, V);
  return zeros({tokens.size(0), V}).scatter(1, next.unsqueeze(1), 10.0).unsqueeze(1);  // (B, 1, V)
}

}  // namespace

TEST(Generation, ProcessLogitsAsHuggingFacesProcessors) {
  Tensor l = tensor({1.0, 2.0, 3.0}).unsqueeze(0);
  EXPECT_EQ(row(nn::process_logits(l, {.temperature = 2.0})), (std::vector<double>{0.5, 1.0, 1.5}));
  // top-k keeps the k largest, and ties with the k-th.
  EXPECT_EQ(row(nn::process_logits(tensor({1.0, 3.0, 2.0, 0.0}).unsqueeze(0), {.top_k = 2})),
            (std::vector<double>{-kInf, 3.0, 2.0, -kInf}));
  EXPECT_EQ(row(nn::process_logits(tensor({1.0, 3.0, 2.0, 3.0}).unsqueeze(0), {.top_k = 1})),
            (std::vector<double>{-kInf, 3.0, -kInf, 3.0}));
  // top-p: probabilities 0.5, 0.3, 0.15, 0.05; 0.75 keeps the first two (they hold 0.8), 0.85 three.
  Tensor p = tensor({0.15, 0.5, 0.05, 0.3}, kFloat64).log().unsqueeze(0);
  std::vector<double> kept = row(nn::process_logits(p, {.top_p = 0.75}));
  EXPECT_EQ(kept[0], -kInf);
  EXPECT_EQ(kept[2], -kInf);
  EXPECT_NEAR(kept[1], std::log(0.5), 1e-15);
  EXPECT_NEAR(kept[3], std::log(0.3), 1e-15);
  kept = row(nn::process_logits(p, {.top_p = 0.85}));
  EXPECT_EQ(kept[2], -kInf);
  EXPECT_NEAR(kept[0], std::log(0.15), 1e-15);
  // Repetition penalty on the tokens already there (once each, however often): positive logits
  // divided, negative ones multiplied; it applies when greedy too.
  Tensor r = tensor({2.0, 1.0, -1.0, 0.5}).unsqueeze(0);
  Tensor prev = tensor({0, 0, 2}, kInt64).unsqueeze(0);
  EXPECT_EQ(row(nn::process_logits(r, {.greedy = true, .repetition_penalty = 2.0}, prev)),
            (std::vector<double>{1.0, 1.0, -2.0, 0.5}));
  EXPECT_EQ(nn::process_logits(r.to(kBFloat16), {}).dtype(), kFloat32);
  EXPECT_EQ(nn::process_logits(r.to(kFloat64), {}).dtype(), kFloat64);
  // Bad options and inputs are named.
  EXPECT_THROW(nn::process_logits(l, {.temperature = 0}), ValueError);
  EXPECT_THROW(nn::process_logits(l, {.top_p = 0}), ValueError);
  EXPECT_THROW(nn::process_logits(l, {.top_k = -1}), ValueError);
  EXPECT_THROW(nn::process_logits(l, {.repetition_penalty = 0}), ValueError);
  EXPECT_THROW(nn::process_logits(tensor({1.0, 2.0}), {}), ShapeError);
  EXPECT_THROW(nn::process_logits(l, {.repetition_penalty = 1.5}, tensor({0, 3}, kInt64).unsqueeze(0)), IndexError);
}

TEST(Generation, SampledTokensFollowTheProcessedSoftmaxAndRepeatUnderASeed) {
  // Probabilities 1/6, 2/6, 3/6 (and a token top-k removes).
  Tensor l = tensor({0.0, std::log(2.0), std::log(3.0), -1.0}).unsqueeze(0).expand({20000, 4}).contiguous();
  manual_seed(11);
  Tensor draws = nn::sample_next_token(l, {.top_k = 3});
  ASSERT_EQ(draws.sizes(), (Shape{20000}));
  EXPECT_EQ(draws.dtype(), kInt64);
  for (int64_t t = 0; t < 4; ++t) {
    const double freq = (draws == t).to(kFloat64).mean().item<double>();
    EXPECT_NEAR(freq, t == 3 ? 0.0 : (t + 1) / 6.0, 0.015) << "token " << t;
  }
  manual_seed(11);
  EXPECT_TRUE(equal(nn::sample_next_token(l, {.top_k = 3}), draws));
  EXPECT_TRUE(equal(nn::sample_next_token(l, {.greedy = true}), full({20000}, 2, kInt64)));
  EXPECT_TRUE(equal(nn::sample_next_token(l, {.top_k = 1}), full({20000}, 2, kInt64)));
}

TEST(Generation, GenerateStopsPadsAndPassesWhatTheModelSaw) {
  const int64_t V = 5;
  std::vector<int64_t> pasts;
  auto step = [&](const Tensor& tokens, int64_t past) {
    pasts.push_back(past);
    return count_up(tokens, V);
  };
  Tensor prompt = tensor({0, 3}, kInt64).unsqueeze(1);  // two prompts of one token
  Tensor out = nn::generate(step, prompt, {.max_new_tokens = 4, .sampling = {.greedy = true}});
  EXPECT_TRUE(equal(out, tensor({0, 1, 2, 3, 4, 3, 4, 0, 1, 2}, kInt64).view({2, 5})));
  EXPECT_EQ(pasts, (std::vector<int64_t>{0, 1, 2, 3}));
  // Stop token 2: row 0 stops after 3 tokens and repeats it, row 1 after 5; then the loop ends
  // (max_new_tokens 9 is not reached).
  out = nn::generate(step, prompt, {.max_new_tokens = 9, .sampling = {.greedy = true}, .stop_tokens = {2}});
  EXPECT_TRUE(equal(out, tensor({0, 1, 2, 2, 2, 3, 4, 0, 1, 2}, kInt64).view({2, 5})));
  out = nn::generate(step, prompt,
                     {.max_new_tokens = 9, .sampling = {.greedy = true}, .stop_tokens = {2}, .pad_token = 9});
  EXPECT_TRUE(equal(out, tensor({0, 1, 2, 9, 9, 3, 4, 0, 1, 2}, kInt64).view({2, 5})));
  // A sampling run repeats under the same seed.
  auto noisy = [&](const Tensor& tokens, int64_t) { return randn({tokens.size(0), 2, V}); };
  Tensor a = nn::generate(noisy, prompt, {.max_new_tokens = 6, .seed = 3});
  Tensor b = nn::generate(noisy, prompt, {.max_new_tokens = 6, .seed = 3});
  EXPECT_TRUE(equal(a, b));
  EXPECT_EQ(a.sizes(), (Shape{2, 7}));
  EXPECT_TRUE(equal(nn::generate(step, prompt, {.max_new_tokens = 0}), prompt));
  // Mistakes.
  EXPECT_THROW(nn::generate(step, prompt.to(kFloat32)), DTypeError);
  EXPECT_THROW(nn::generate(step, tensor({1, 2}, kInt64)), ShapeError);
  EXPECT_THROW(nn::generate([](const Tensor& t, int64_t) { return zeros({t.size(0), V}); }, prompt), ShapeError);
  EXPECT_THROW(nn::generate(step, prompt, {.max_new_tokens = -1}), ValueError);
  EXPECT_THROW(nn::generate(nn::StepFn(), prompt), ValueError);
}
