// Generation speed with and without the KV cache: nn::generate on a GPT-2-shaped model (random
// weights), greedy, from a prompt, the same tokens either way (checked). Without the cache every
// step runs the model over the whole sequence so far; with it, over the one new token.
//
//   build/bench/gpt_generate [--layers 4] [--width 256] [--heads 4] [--vocab 8192] [--prompt 16]
//                            [--new 512] [--rounds 2]
//
// Prints tokens/s of each and the ratio (cached / uncached), best of the rounds, interleaved.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;

int main(int argc, char** argv) {
  int64_t layers = 4, width = 256, heads = 4, vocab = 8192, prompt_len = 16, new_tokens = 512, rounds = 2;
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
    else {
      std::fprintf(stderr,
                   "usage: gpt_generate [--layers N] [--width N] [--heads N] [--vocab N] [--prompt N] [--new N] "
                   "[--rounds N]\n");
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
    t0 = bench::now();
    a = nn::generate([&](const Tensor& t, int64_t) { return m.forward(t); }, prompt, o);
    best_full = std::min(best_full, bench::now() - t0);
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
