// One row of the GPT training-step benchmark (bench/gpt_compare.py runs it next to PyTorch): a
// training step of nn::GPT2LMHeadModel on random tokens, as examples/gpt takes it: forward, the
// cross entropy of the next tokens, backward, AdamW (weight decay on the matrices), zero_grad.
//
//   build/bench/gpt_train [--layers 4] [--width 768] [--heads 12] [--context 1024] [--batch 2]
//                         [--vocab 50257] [--reps 3] [--amp off|bf16]
//
// Prints one JSON line: the best and every timed step's seconds (after one warm-up step), tokens/s,
// the model FLOPs per token (forward + backward: 72 L d^2 + 12 L T d + 6 d V, the matrix products of
// the blocks, attention counted in full as nanoGPT's estimate_mfu does, and the tied head), the
// achieved GFLOP/s, and the peak resident memory in MB.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;
namespace F = nn::functional;

int main(int argc, char** argv) {
  int64_t layers = 4, width = 768, heads = 12, context = 1024, batch = 2, vocab = 50257, reps = 3;
  std::string amp = "off";
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpt_train: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--layers")) layers = std::stoll(value());
    else if (!std::strcmp(argv[i], "--width")) width = std::stoll(value());
    else if (!std::strcmp(argv[i], "--heads")) heads = std::stoll(value());
    else if (!std::strcmp(argv[i], "--context")) context = std::stoll(value());
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(value());
    else if (!std::strcmp(argv[i], "--vocab")) vocab = std::stoll(value());
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoll(value());
    else if (!std::strcmp(argv[i], "--amp")) amp = value();
    else {
      std::fprintf(stderr,
                   "usage: gpt_train [--layers N] [--width N] [--heads N] [--context N] [--batch N] [--vocab N] "
                   "[--reps N] [--amp off|bf16]\n");
      return 2;
    }
  }
  if (amp != "off" && amp != "bf16") {
    std::fprintf(stderr, "gpt_train: --amp is off or bf16\n");
    return 2;
  }
  manual_seed(0);
  nn::GPT2LMHeadModel model(
      {.vocab_size = vocab, .n_positions = context, .n_embd = width, .n_layer = layers, .n_head = heads});
  model.train();
  std::vector<Tensor> decay, no_decay;
  for (const auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  optim::AdamW opt({{decay, optim::AdamWOptions{.lr = 3e-4, .betas = {0.9, 0.95}, .weight_decay = 0.1}},
                    {no_decay, optim::AdamWOptions{.lr = 3e-4, .betas = {0.9, 0.95}, .weight_decay = 0.0}}});
  Tensor tokens = randint(0, vocab, {batch, context + 1});
  Tensor x = tokens.slice(1, 0, context).contiguous(), y = tokens.slice(1, 1, context + 1).flatten();
  auto step = [&] {
    Tensor loss;
    {
      std::optional<AutocastGuard> region;
      if (amp == "bf16") region.emplace(autocast(kCPU, kBFloat16));
      loss = F::cross_entropy(model.forward(x).flatten(0, 1), y);
    }
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss.item<double>();
  };
  step();  // warm-up
  std::vector<double> times;
  double best = 1e30;
  for (int64_t r = 0; r < reps; ++r) {
    const double t0 = bench::now();
    step();
    times.push_back(bench::now() - t0);
    best = std::min(best, times.back());
  }
  const double d = static_cast<double>(width), L = static_cast<double>(layers), T = static_cast<double>(context);
  const double flops_per_token = 72 * L * d * d + 12 * L * T * d + 6 * d * static_cast<double>(vocab);
  const double tokens_per_step = static_cast<double>(batch * context);
  std::printf("{\"best_s\": %.6f, \"times\": [", best);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.6f", i ? ", " : "", times[i]);
  std::printf("], \"tokens_per_s\": %.2f, \"flops_per_token\": %.0f, \"gflops\": %.2f, \"peak_mb\": %.1f}\n",
              tokens_per_step / best, flops_per_token, flops_per_token * tokens_per_step / best / 1e9,
              bench::peak_rss_mb());
  return 0;
}
