// nn::GPT2LMHeadModel against Hugging Face's GPT-2: a checkpoint with HF's names and layouts (Conv1D
// weights, tied lm_head, the old causal-mask buffers), written by Debian's torch with random weights
// (tests/nn/gpt2_reference.py), loads and gives the logits of HF's forward (computed in float64) to
// 1e-5; the same without the "transformer." prefix and through safetensors; decoding with the KV
// caches gives the full forward's logits at every position; generate; the parameter names; errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "io/npy.h"
#include "nabla.h"
#include "nn/gpt2.h"
#include "tests/common/python_torch.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace fs = std::filesystem;

namespace {

const nn::GPT2Config kSmall{.vocab_size = 101, .n_positions = 40, .n_embd = 48, .n_layer = 3, .n_head = 4};

// The reference files of tests/nn/gpt2_reference.py, made once per process.
const fs::path& reference_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("nabla_gpt2_" + std::to_string(::getpid()));
    const std::string cmd = nabla_test::test_python() + " " + NABLA_TESTS_DIR + "/nn/gpt2_reference.py " + d.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return d;
  }();
  return dir;
}

struct RemoveReferences : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("nabla_gpt2_" + std::to_string(::getpid())), ec);
  }
};
const auto* kRemove = ::testing::AddGlobalTestEnvironment(new RemoveReferences);

}  // namespace

TEST(Gpt2, ParameterNamesAreHuggingFaces) {
  nn::GPT2LMHeadModel m(kSmall);
  auto names = m.state_dict().keys();
  ASSERT_EQ(names.size(), 2 + 3 * 12 + 2u);
  EXPECT_EQ(names[0], "transformer.wte.weight");
  EXPECT_EQ(names[1], "transformer.wpe.weight");
  EXPECT_EQ(names[2], "transformer.h.0.ln_1.weight");
  EXPECT_EQ(names[4], "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(names[13], "transformer.h.0.mlp.c_proj.bias");
  EXPECT_EQ(names.back(), "transformer.ln_f.bias");
  EXPECT_EQ(m.transformer->blocks[0]->attn->c_attn->weight.sizes(), IntArrayRef({48, 144}));  // Conv1D: (in, out)
  EXPECT_EQ(m.transformer->blocks[0]->mlp->c_proj->weight.sizes(), IntArrayRef({192, 48}));
  // HF's initialization: N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 n_layer)).
  nn::GPT2LMHeadModel big({.vocab_size = 1000, .n_positions = 64, .n_embd = 96, .n_layer = 2, .n_head = 4});
  EXPECT_NEAR(big.transformer->wte->weight.std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(big.transformer->blocks[1]->mlp->c_proj->weight.std().item<double>(), 0.01, 0.001);
}

TEST(Gpt2, HuggingFaceCheckpointGivesItsLogits) {
  NABLA_NEEDS_PYTHON_MODULES("torch, numpy");
  const fs::path& d = reference_dir();
  Tensor tokens = load_npy((d / "tokens.npy").string()), want = load_npy((d / "logits.npy").string());
  for (const char* file : {"gpt2_hf.bin", "gpt2_noprefix.bin"}) {
    SCOPED_TRACE(file);
    nn::GPT2LMHeadModel m(kSmall);
    m.eval();
    nn::load_gpt2_weights(m, (d / file).string());
    autograd::NoGradGuard ng;
    Tensor logits = m.forward(tokens);
    EXPECT_EQ(logits.sizes(), IntArrayRef({2, 33, 101}));
    EXPECT_TRUE(tensor_near(logits.to(kFloat64), want, 1e-5, 1e-5));
    // On the math attention path too.
    auto g = nn::functional::sdpa_kernel(nn::functional::SdpBackend::math);
    EXPECT_TRUE(tensor_near(m.forward(tokens).to(kFloat64), want, 1e-5, 1e-5));
  }
  // Through safetensors (as Hugging Face's model.safetensors: no lm_head, no buffers).
  nn::GPT2LMHeadModel a(kSmall), b(kSmall);
  nn::load_gpt2_weights(a, (d / "gpt2_hf.bin").string());
  const std::string st = (d / "model.safetensors").string();
  nn::save_weights(a, st);
  nn::load_gpt2_weights(b, st);
  autograd::NoGradGuard ng;
  EXPECT_TRUE(equal(a.forward(tokens), b.forward(tokens)));
}

TEST(Gpt2, CachedDecodingGivesTheFullForwardsLogits) {
  manual_seed(5);
  nn::GPT2LMHeadModel m(kSmall);
  m.eval();
  autograd::NoGradGuard ng;
  Tensor tokens = randint(0, 101, {3, 30});
  Tensor full = m.forward(tokens);
  auto caches = m.make_caches(3, /*capacity=*/8);
  std::vector<Tensor> parts{m.forward_cached(tokens.narrow(1, 0, 10), caches)};
  for (int64_t t = 10; t < 30; ++t) parts.push_back(m.forward_cached(tokens.narrow(1, t, 1), caches));
  EXPECT_TRUE(tensor_near(cat(parts, 1), full, 1e-5, 1e-5));
  EXPECT_EQ(caches[2].length(), 30);
  // generate with the caches: the tokens of generate over full forwards.
  Tensor prompt = tokens.narrow(1, 0, 4);
  auto fresh = m.make_caches(3);
  auto cached_step = [&](const Tensor& t, int64_t past) {
    return m.forward_cached(t.narrow(1, past, t.size(1) - past), fresh);
  };
  auto full_step = [&](const Tensor& t, int64_t) { return m.forward(t); };
  nn::GenerateOptions o{.max_new_tokens = 20, .sampling = {.top_k = 10}, .seed = 3};
  EXPECT_TRUE(equal(nn::generate(cached_step, prompt, o), nn::generate(full_step, prompt, o)));
}

TEST(Gpt2, ErrorsNameTheProblem) {
  NABLA_NEEDS_PYTHON_MODULES("torch, numpy");
  const fs::path& d = reference_dir();
  nn::GPT2LMHeadModel two_layers({.vocab_size = 101, .n_positions = 40, .n_embd = 48, .n_layer = 2, .n_head = 4});
  EXPECT_TRUE(throws_with<ValueError>([&] { nn::load_gpt2_weights(two_layers, (d / "gpt2_hf.bin").string()); },
                                      {"load_gpt2_weights", "gpt2_hf.bin", "n_layer 2", "transformer.h.2"}));
  nn::GPT2LMHeadModel m(kSmall);
  EXPECT_THROW(nn::load_gpt2_weights(m, (d / "missing.bin").string()), IOError);
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        m.forward(zeros({1, 41}, dtype(kInt64)));
      },
      {"GPT2Model", "41 positions", "40"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { m.forward(zeros({41}, dtype(kInt64))); }, {"GPT2Model", "(B, T)"}));
  EXPECT_THROW(nn::GPT2LMHeadModel({.n_embd = 50, .n_head = 4}), ValueError);
}
