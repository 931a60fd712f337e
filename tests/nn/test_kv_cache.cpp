// nn::KVCache and MultiheadAttention's kv_cache: a small GPT-shaped decoder (token and position
// embeddings, pre-norm blocks of causal self-attention and an MLP, a head) decoded token by token
// with the cache gives the logits of one full forward at every position, on the fused and the math
// attention paths; chunks of several tokens; prompts of different lengths in one batch (left
// padding); the cache's growth, mask and positions; generate with and without the cache; errors.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <vector>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace F = nn::functional;

namespace {

constexpr int64_t kVocab = 50, kDim = 32, kHeads = 4, kLayers = 2, kContext = 64;

struct TinyGpt {
  std::shared_ptr<nn::Embedding> tok = std::make_shared<nn::Embedding>(kVocab, kDim);
  std::shared_ptr<nn::Embedding> pos = std::make_shared<nn::Embedding>(kContext, kDim);
  std::vector<std::shared_ptr<nn::LayerNorm>> ln1, ln2;
  std::vector<std::shared_ptr<nn::MultiheadAttention>> attn;
  std::vector<std::shared_ptr<nn::Linear>> fc, proj;
  std::shared_ptr<nn::LayerNorm> ln_f = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{kDim});
  std::shared_ptr<nn::Linear> head = std::make_shared<nn::Linear>(kDim, kVocab);

  TinyGpt() {
    for (int64_t l = 0; l < kLayers; ++l) {
      ln1.push_back(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{kDim}));
      ln2.push_back(std::make_shared<nn::LayerNorm>(std::vector<int64_t>{kDim}));
      attn.push_back(
          std::make_shared<nn::MultiheadAttention>(kDim, kHeads, nn::MultiheadAttentionOptions{.batch_first = true}));
      fc.push_back(std::make_shared<nn::Linear>(kDim, 4 * kDim));
      proj.push_back(std::make_shared<nn::Linear>(4 * kDim, kDim));
    }
  }

  std::vector<nn::KVCache> caches(int64_t batch, int64_t capacity = 16) const {
    std::vector<nn::KVCache> c;
    for (int64_t l = 0; l < kLayers; ++l) c.emplace_back(batch, kHeads, kDim / kHeads, capacity);
    return c;
  }

  // Logits (B, T, V) of tokens (B, T) at `positions` (B, T); with caches, the tokens follow what the
  // caches hold.
  Tensor forward(const Tensor& tokens, const Tensor& positions, std::vector<nn::KVCache>* caches = nullptr) {
    Tensor h = tok->forward(tokens) + pos->forward(positions);
    for (int64_t l = 0; l < kLayers; ++l) {
      Tensor x = ln1[l]->forward(h);
      h = h + attn[l]
                  ->forward_attention(x, x, x,
                                      {.need_weights = false,
                                       .is_causal = true,
                                       .kv_cache = caches ? &(*caches)[static_cast<size_t>(l)] : nullptr})
                  .output;
      h = h + proj[l]->forward(F::gelu(fc[l]->forward(ln2[l]->forward(h))));
    }
    return head->forward(ln_f->forward(h));
  }
  // One full forward over tokens (B, T) at positions 0 .. T - 1.
  Tensor full(const Tensor& tokens) {
    return forward(tokens, arange(tokens.size(1), dtype(kInt64)).unsqueeze(0).expand(tokens.sizes()));
  }
};

// Decodes tokens (B, T) through the caches in chunks of the given sizes; the logits of every
// position, (B, T, V).
Tensor decode(TinyGpt& m, const Tensor& tokens, std::vector<nn::KVCache>& caches, const std::vector<int64_t>& chunks) {
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t n : chunks) {
    Tensor positions = caches[0].positions(n);
    out.push_back(m.forward(tokens.narrow(1, at, n), positions, &caches));
    at += n;
  }
  EXPECT_EQ(at, tokens.size(1));
  return cat(out, 1);
}

}  // namespace

TEST(KVCache, DecodeGivesTheFullForwardsLogitsAtEveryPosition) {
  manual_seed(1);
  TinyGpt m;
  autograd::NoGradGuard ng;
  Tensor tokens = randint(0, kVocab, {2, 24});
  Tensor full = m.full(tokens);
  for (F::SdpBackend backend : {F::SdpBackend::flash, F::SdpBackend::math}) {
    auto guard = F::sdpa_kernel(backend);
    // A prompt of 5 in one call, then one token a step, then a chunk of 3 (causal within it), then
    // single tokens again; the caches start at 16 positions and grow.
    auto caches = m.caches(2);
    std::vector<int64_t> chunks{5};
    for (int i = 0; i < 8; ++i) chunks.push_back(1);
    chunks.push_back(3);
    for (int i = 0; i < 8; ++i) chunks.push_back(1);
    Tensor cached = decode(m, tokens, caches, chunks);
    EXPECT_TRUE(tensor_near(cached, full, 1e-5, 1e-5));
    EXPECT_EQ(caches[0].length(), 24);
    EXPECT_GE(caches[0].capacity(), 24);
  }
}

TEST(KVCache, PromptsOfDifferentLengthsInOneBatch) {
  // Row 0 a prompt of 7, row 1 one of 4 left-padded by 3; both then decode the same 6 tokens. Each
  // row's logits are those of its own sequence run alone.
  manual_seed(2);
  TinyGpt m;
  autograd::NoGradGuard ng;
  Tensor a = randint(0, kVocab, {1, 7}), b = randint(0, kVocab, {1, 4}), next = randint(0, kVocab, {1, 6});
  Tensor batch = cat({cat({a, next}, 1), cat({full({1, 3}, 0, dtype(kInt64)), b, next}, 1)}, 0);  // (2, 13)
  for (F::SdpBackend backend : {F::SdpBackend::flash, F::SdpBackend::math}) {
    auto guard = F::sdpa_kernel(backend);
    auto caches = m.caches(2);
    for (auto& c : caches) c.set_left_padding({0, 3});
    EXPECT_TRUE(
        equal(caches[0].positions(7), tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 1, 2, 3}, {2, 7})));
    Tensor logits = decode(m, batch, caches, {7, 1, 1, 1, 1, 1, 1});
    EXPECT_FALSE(isnan(logits).any().item<bool>());  // padded queries stay finite
    Tensor alone_a = m.full(cat({a, next}, 1)), alone_b = m.full(cat({b, next}, 1));
    EXPECT_TRUE(tensor_near(logits.narrow(0, 0, 1), alone_a, 1e-5, 1e-5));
    EXPECT_TRUE(tensor_near(logits.narrow(0, 1, 1).narrow(1, 3, 10), alone_b, 1e-5, 1e-5));
  }
}

TEST(KVCache, GrowsMasksAndResets) {
  nn::KVCache c(1, 2, 3, /*capacity=*/2);
  Tensor k = randn({1, 2, 5, 3}), v = randn({1, 2, 5, 3});
  auto [k1, v1] = c.append(k.narrow(2, 0, 1), v.narrow(2, 0, 1));
  EXPECT_EQ(k1.sizes(), IntArrayRef({1, 2, 1, 3}));
  auto [k5, v5] = c.append(k.narrow(2, 1, 4), v.narrow(2, 1, 4));
  EXPECT_EQ(c.length(), 5);
  EXPECT_EQ(c.capacity(), 5);  // doubled to 4, which is not enough: what is needed
  EXPECT_TRUE(equal(k5, k));
  EXPECT_TRUE(equal(v5, v));
  EXPECT_TRUE(equal(k1, k.narrow(2, 0, 1)));  // an earlier view still reads what it read
  // No padding: one query needs no mask; three causal queries mask the keys after each.
  EXPECT_FALSE(c.attention_bias(1, true, kFloat32).defined());
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(equal(c.attention_bias(3, true, kFloat32),
                    tensor(std::vector<float>{0, 0, 0, -inf, -inf, 0, 0, 0, 0, -inf, 0, 0, 0, 0, 0}, {1, 1, 3, 5})));
  c.reset();
  EXPECT_EQ(c.length(), 0);
  EXPECT_EQ(c.capacity(), 5);
}

TEST(KVCache, GenerateWithTheCacheMatchesWithout) {
  manual_seed(3);
  TinyGpt m;
  Tensor prompt = randint(0, kVocab, {2, 6});
  auto no_cache = [&](const Tensor& tokens, int64_t) { return m.full(tokens); };
  auto caches = m.caches(2);
  auto with_cache = [&](const Tensor& tokens, int64_t past) {
    Tensor fresh = tokens.narrow(1, past, tokens.size(1) - past);
    return m.forward(fresh, caches[0].positions(fresh.size(1)), &caches);
  };
  nn::GenerateOptions o{.max_new_tokens = 30, .sampling = {.greedy = true}};
  Tensor a = nn::generate(no_cache, prompt, o), b = nn::generate(with_cache, prompt, o);
  EXPECT_EQ(a.sizes(), IntArrayRef({2, 36}));
  EXPECT_TRUE(equal(a, b));
}

TEST(KVCache, ErrorsNameTheProblem) {
  nn::KVCache c(2, 4, 8);
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        c.append(randn({2, 4, 3, 6}), randn({2, 4, 3, 6}));
      },
      {"KVCache::append", "[2, 4, 3, 6]", "(2, 4, 8)"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        c.append(randn({2, 4, 1, 8}, dtype(kFloat64)), randn({2, 4, 1, 8}, dtype(kFloat64)));
      },
      {"KVCache::append", "float64"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { c.set_left_padding({1}); }, {"set_left_padding", "2"}));
  c.append(randn({2, 4, 1, 8}), randn({2, 4, 1, 8}));
  EXPECT_TRUE(throws_with<ValueError>([&] { c.set_left_padding({0, 1}); }, {"before the first append"}));
  EXPECT_THROW(nn::KVCache(0, 4, 8), ValueError);
  nn::MultiheadAttention mha(32, 4, {.batch_first = true});
  nn::KVCache mc(1, 4, 8);
  Tensor x = randn({1, 3, 32});
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        mha.forward_attention(x, x, x, {.attn_mask = zeros({3, 3}), .kv_cache = &mc});
      },
      {"kv_cache", "attn_mask"}));
}
