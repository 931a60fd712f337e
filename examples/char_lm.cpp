// A character-level language model: an LSTM reads a text one character at a time and learns to
// predict the next one, then writes new text in its style, one sampled character after another.
//
//   build/examples/char_lm                                  # the GPL's text, 1,000 steps (about 45 s)
//   build/examples/char_lm --text my.txt --steps 3000 --save my_lm.safetensors
//   build/examples/char_lm --load my_lm.safetensors --text my.txt --steps 0 --prompt "Once"
//
// The default text, /usr/share/common-licenses/GPL-3, is on every Debian system (35 KB). The last
// tenth of the text is held out: the validation loss, in bits per character, says how well the
// model predicts text it never trained on.
#include <nabla.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "examples/amp.h"
#include "examples/flags.h"
using namespace nabla;

const char* kHelp = R"(char_lm: train a character-level LSTM language model on a text file, and sample from it

usage: char_lm [--text FILE] [--steps N] [--batch-size N] [--seq-len N] [--hidden N] [--layers N]
               [--lr X] [--dropout X] [--seed N] [--sample N] [--prompt TEXT] [--temperature X]
               [--save FILE] [--load FILE] [--amp off|bf16|fp16]

  --text FILE       what to learn from (default /usr/share/common-licenses/GPL-3)
  --steps N         training steps (default 1000); 0 only samples (with --load)
  --batch-size N    windows of text per step (default 32)
  --seq-len N       characters per window (default 64)
  --hidden N        the LSTM's width (default 128)
  --layers N        stacked LSTM layers (default 2)
  --lr X            Adam's learning rate (default 0.003)
  --dropout X       dropout between the LSTM's layers, in training (default 0.2)
  --seed N          the windows drawn, the initial weights and the sampling (default 1)
  --sample N        characters to write at the end (default 400)
  --prompt TEXT     how the sample starts (default "This License")
  --temperature X   below 1: safer, more repetitive text; above 1: wilder (default 0.8)
  --save FILE       the trained model (default char_lm.safetensors)
  --load FILE       start from a saved model (trained on the same text: its alphabet must match)
  --amp MODE        off, bf16 or fp16: the training forward and loss under autocast to bfloat16 or
                    float16 (as torch.autocast; the LSTM runs in that dtype), float32 weights, a
                    GradScaler for fp16 (default off)
)";

// Embedding -> LSTM -> Linear: logits for the next character at every position.
struct CharModelImpl : nn::Module {
  CharModelImpl(const std::string& alphabet_chars, int64_t hidden, int64_t layers, double dropout) {
    std::vector<int64_t> codes(alphabet_chars.begin(), alphabet_chars.end());
    for (auto& c : codes) c = static_cast<unsigned char>(c);
    alphabet = register_buffer("alphabet", tensor(codes, kInt64));  // saved with the weights
    const int64_t vocab = static_cast<int64_t>(codes.size());
    embed = register_module("embed", nn::Embedding(vocab, 64));
    lstm =
        register_module("lstm", nn::LSTM(64, hidden, {.num_layers = layers, .batch_first = true, .dropout = dropout}));
    head = register_module("head", nn::Linear(hidden, vocab));
  }
  // tokens (B, T) -> logits (B, T, vocab), and the LSTM's state after the last position.
  nn::LSTMOutput run(const Tensor& tokens, const nn::LSTMState& state = {}) {
    nn::LSTMOutput out = lstm->forward_with_state(embed(tokens), state);
    out.output = head(out.output);
    return out;
  }
  Tensor forward(Tensor tokens) override { return run(tokens).output; }

  Tensor alphabet;
  nn::ModuleHolder<nn::Embedding> embed{nullptr};
  nn::ModuleHolder<nn::LSTM> lstm{nullptr};
  nn::ModuleHolder<nn::Linear> head{nullptr};
};
NABLA_MODULE(CharModel);

// The text as indices into its alphabet (the sorted distinct bytes).
struct Corpus {
  std::string alphabet;
  std::array<int64_t, 256> index{};
  Tensor train, valid;  // int64 (n)

  Corpus(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError("cannot read '" + path + "' (give a text file with --text)");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.size() < 200)
      throw ValueError("'" + path + "' has " + std::to_string(text.size()) +
                       " bytes; a text of at least 200 is needed");
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    index.fill(-1);
    for (int c = 0; c < 256; ++c)
      if (seen[c]) {
        index[c] = static_cast<int64_t>(alphabet.size());
        alphabet.push_back(static_cast<char>(c));
      }
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = index[static_cast<unsigned char>(text[i])];
    Tensor all = tensor(ids, kInt64);
    const auto n = static_cast<int64_t>(ids.size()), cut = n - n / 10;
    train = all.slice(0, 0, cut);
    valid = all.slice(0, cut, n);
  }
  // `batch` random windows of seq_len + 1 characters from `part`: inputs and the next characters.
  static data::Example windows(const Tensor& part, int64_t batch, int64_t seq_len) {
    Tensor starts = randint(part.size(0) - seq_len - 1, {batch, 1}, kInt64);
    Tensor idx = starts + arange(seq_len + 1, kInt64).unsqueeze(0);  // (batch, seq_len + 1)
    Tensor w = part.index({idx});
    return {w.slice(1, 0, seq_len), w.slice(1, 1, seq_len + 1)};
  }
};

// Mean cross entropy on the same windows of the held-out text each time, in bits per character.
double validation_bits(CharModel& model, const Corpus& corpus, int64_t seq_len) {
  NoGradGuard no_grad;
  model->eval();
  const int64_t n = corpus.valid.size(0) - seq_len - 1;  // 64 windows spread evenly over it
  if (n <= 0) return std::nan("");
  Tensor starts = arange(0, n, std::max<int64_t>(1, n / 64), kInt64).slice(0, 0, 64).unsqueeze(1);
  Tensor w = corpus.valid.index({starts + arange(seq_len + 1, kInt64).unsqueeze(0)});
  Tensor logits = model(w.slice(1, 0, seq_len));
  double nats =
      nn::functional::cross_entropy(logits.flatten(0, 1), w.slice(1, 1, seq_len + 1).flatten()).item<double>();
  model->train();
  return nats / std::log(2.0);
}

// Feeds the prompt, then draws each next character from softmax(logits / temperature).
std::string sample(CharModel& model, const Corpus& corpus, const std::string& prompt, int64_t n, double temperature) {
  NoGradGuard no_grad;
  model->eval();
  std::vector<int64_t> ids;
  for (unsigned char c : prompt)
    if (corpus.index[c] >= 0) ids.push_back(corpus.index[c]);
  if (ids.empty()) ids.push_back(0);
  nn::LSTMOutput out = model->run(tensor(ids, kInt64).unsqueeze(0));
  std::string text = prompt;
  for (int64_t i = 0; i < n; ++i) {
    Tensor last = out.output.select(1, out.output.size(1) - 1).squeeze(0);  // (vocab)
    int64_t next = multinomial(softmax(last / temperature, 0), 1).item<int64_t>();
    text.push_back(corpus.alphabet[static_cast<size_t>(next)]);
    out = model->run(full({1, 1}, next, kInt64), {out.h_n, out.c_n});
  }
  model->train();
  return text;
}

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp);
  std::string text_path = flags.str("text", "/usr/share/common-licenses/GPL-3");
  int64_t steps = flags.integer("steps", 1000, 0, 10'000'000);
  int64_t batch = flags.integer("batch-size", 32, 1, 4096);
  int64_t seq_len = flags.integer("seq-len", 64, 2, 4096);
  int64_t hidden = flags.integer("hidden", 128, 1, 8192);
  int64_t layers = flags.integer("layers", 2, 1, 16);
  double lr = flags.number("lr", 3e-3, 1e-9, 10);
  double dropout = flags.number("dropout", 0.2, 0, 0.99);
  int64_t seed = flags.integer("seed", 1, 0, INT64_MAX);
  int64_t sample_chars = flags.integer("sample", 400, 0, 1'000'000);
  std::string prompt = flags.str("prompt", "This License");
  double temperature = flags.number("temperature", 0.8, 0.01, 100);
  std::string save = flags.str("save", "char_lm.safetensors");
  std::string load = flags.str("load", "");
  const std::string amp = examples::amp_mode(flags);
  flags.finish();

  manual_seed(static_cast<uint64_t>(seed));
  Corpus corpus(text_path);
  if (corpus.train.size(0) < seq_len + 2)
    flags.usage("--seq-len " + std::to_string(seq_len) + " is longer than the training text (" +
                std::to_string(corpus.train.size(0)) + " characters)");
  std::printf("%s: %lld characters for training, %lld held out, an alphabet of %zu\n", text_path.c_str(),
              static_cast<long long>(corpus.train.size(0)), static_cast<long long>(corpus.valid.size(0)),
              corpus.alphabet.size());

  CharModel model(corpus.alphabet, hidden, layers, dropout);
  if (!load.empty()) {
    nn::load_weights(*model, load);  // checks every shape, the alphabet's length included
    bool same = true;
    for (size_t i = 0; i < corpus.alphabet.size(); ++i)
      same = same &&
             model->alphabet[static_cast<int64_t>(i)].item<int64_t>() == static_cast<unsigned char>(corpus.alphabet[i]);
    if (!same) throw ValueError("'" + load + "' was trained on a text with another alphabet than '" + text_path + "'");
  }
  optim::Adam optimizer(model->parameters(), {.lr = lr});
  examples::AmpStep stepper(amp);
  if (amp != "off" && steps > 0) std::printf("%s\n", examples::amp_description(amp).c_str());
  double first_loss = 0, recent = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    data::Example b = Corpus::windows(corpus.train, batch, seq_len);
    Tensor loss;
    {
      auto region = examples::amp_region(amp, kCPU);  // the forward and the loss; backward after it
      Tensor logits = model(b.data);
      loss = nn::functional::cross_entropy(logits.flatten(0, 1), b.target.flatten());
    }
    optimizer.zero_grad();
    // Clipping sees the true gradients: under fp16 the scaler unscales them first.
    stepper.step(loss, optimizer, [&] { nn::utils::clip_grad_norm_(model->parameters(), 1.0); });
    double l = loss.item<double>();
    if (step == 1) first_loss = l;
    recent = step == 1 ? l : 0.95 * recent + 0.05 * l;
    if (step == 1 || step % 100 == 0 || step == steps)
      std::printf("step %5lld  loss %.3f bits/char (smoothed)  validation %.3f bits/char\n",
                  static_cast<long long>(step), recent / std::log(2.0), validation_bits(model, corpus, seq_len));
  }
  if (steps > 0) {
    nn::save_weights(*model, save);
    std::printf("first step %.3f bits/char; saved to %s\n", first_loss / std::log(2.0), save.c_str());
  }
  if (sample_chars > 0)
    std::printf("sample (temperature %.2g):\n%s\n", temperature,
                sample(model, corpus, prompt, sample_chars, temperature).c_str());
} catch (const std::exception& e) {
  std::fprintf(stderr, "char_lm: %s\n", e.what());
  return 1;
}
