// Generation speed with and without the KV cache: nn::generate on a GPT-2-shaped model (random
// weights), greedy, from a prompt, the same tokens either way (checked). Without the cache every
// step runs the model over the whole sequence so far; with it, over the one new token.
//
//   build/bench/gpt_generate [--layers 4] [--width 256] [--heads 4] [--vocab 8192] [--prompt 16]
//                            [--new 512] [--rounds 2] [--cached-only] [--gguf FILE]
//
// Prints tokens/s of each and the ratio (cached / uncached), best of the rounds, interleaved.
// --gguf FILE also writes the model as llama.cpp's GGUF (nn::save_gpt2_gguf, with a vocabulary of
// placeholder tokens) and FILE.json: the prompt, the tokens nabla generated with the cache and its
// best seconds, for bench/llama_compare.py, which runs the same generation in llama.cpp.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;

int main(int argc, char** argv) {
  int64_t layers = 4, width = 256, heads = 4, vocab = 8192, prompt_len = 16, new_tokens = 512, rounds = 2;
  bool cached_only = false;
  std::string gguf_path;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> int64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpt_generate: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return std::stoll(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--layers")) layers = value();
    else if (!std::strcmp(argv[i], "--width")) width = value();
    else if (!std::strcmp(argv[i], "--heads")) heads = value();
    else if (!std::strcmp(argv[i], "--vocab")) vocab = value();
    else if (!std::strcmp(argv[i], "--prompt")) prompt_len = value();
    else if (!std::strcmp(argv[i], "--new")) new_tokens = value();
    else if (!std::strcmp(argv[i], "--rounds")) rounds = value();
    else if (!std::strcmp(argv[i], "--cached-only")) cached_only = true;
    else if (!std::strcmp(argv[i], "--gguf") && i + 1 < argc) gguf_path = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: gpt_generate [--layers N] [--width N] [--heads N] [--vocab N] [--prompt N] [--new N] "
                   "[--rounds N] [--cached-only] [--gguf FILE]\n");
      return 2;
    }
  }
  manual_seed(0);
  nn::GPT2LMHeadModel m({.vocab_size = vocab,
                         .n_positions = prompt_len + new_tokens,
                         .n_embd = width,
                         .n_layer = layers,
                         .n_head = heads});
  m.eval();
  Tensor prompt = randint(0, vocab, {1, prompt_len});
  nn::GenerateOptions o{.max_new_tokens = new_tokens, .sampling = {.greedy = true}};
  double best_full = 1e30, best_cached = 1e30;
  Tensor a, b;
  for (int64_t r = 0; r < rounds; ++r) {
    double t0 = bench::now();
    auto caches = m.make_caches(1, prompt_len + new_tokens);
    b = nn::generate(
        [&](const Tensor& t, int64_t past) { return m.forward_cached(t.narrow(1, past, t.size(1) - past), caches); },
        prompt, o);
    best_cached = std::min(best_cached, bench::now() - t0);
    if (cached_only) continue;
    t0 = bench::now();
    a = nn::generate([&](const Tensor& t, int64_t) { return m.forward(t); }, prompt, o);
    best_full = std::min(best_full, bench::now() - t0);
  }
  if (!gguf_path.empty()) {
    gguf::BpeVocab v;  // the 256 bytes (GPT-2's spelling), then placeholders: generation needs no text
    for (int64_t id = 0; id < vocab; ++id) {
      v.tokens.push_back(id < 256 ? text::BytePairTokenizer::byte_to_unicode(static_cast<uint8_t>(id))
                                  : "[T" + std::to_string(id) + "]");
      v.token_types.push_back(1);
    }
    nn::save_gpt2_gguf(m, v, gguf_path);
    const Tensor out = b.squeeze(0).contiguous();
    std::ofstream j(gguf_path + ".json");
    j << "{\"prompt\": [";
    for (int64_t i = 0; i < prompt_len; ++i) j << (i ? ", " : "") << out.data_ptr<int64_t>()[i];
    j << "], \"nabla\": [";
    for (int64_t i = prompt_len; i < out.numel(); ++i) j << (i > prompt_len ? ", " : "") << out.data_ptr<int64_t>()[i];
    j << "], \"nabla_seconds\": " << best_cached << ", \"vocab\": " << vocab << "}\n";
  }
  if (cached_only) {
    std::printf("with the KV cache: %.3f s, %.1f tokens/s\n", best_cached, new_tokens / best_cached);
    return 0;
  }
  if (!equal(a, b)) {
    std::fprintf(stderr, "gpt_generate: the cached and uncached tokens differ\n");
    return 1;
  }
  std::printf(
      "CPU: %s, %d threads; GPT-2-shaped: %lld layers, width %lld, %lld heads, vocabulary %lld; prompt %lld, "
      "%lld new tokens, greedy, best of %lld\n",
      bench::cpu_model().c_str(), get_num_threads(), static_cast<long long>(layers), static_cast<long long>(width),
      static_cast<long long>(heads), static_cast<long long>(vocab), static_cast<long long>(prompt_len),
      static_cast<long long>(new_tokens), static_cast<long long>(rounds));
  std::printf("without the KV cache: %.2f s, %.1f tokens/s\n", best_full, new_tokens / best_full);
  std::printf("with the KV cache:    %.2f s, %.1f tokens/s (%.1fx)\n", best_cached, new_tokens / best_cached,
              best_full / best_cached);
  return 0;
}
