// One row of the vision benchmark in nabla (bench/vision_compare.py runs it next to PyTorch, each
// row in its own process so that the peak memory is the row's): a torchvision architecture from
// nabla's zoo with random weights, inference (eval, InferenceMode) or a training step (forward,
// cross_entropy, backward, SGD with momentum), on a batch of random 224x224 images. With --amp bf16
// the forward (and the loss) run under autocast(kCPU, kBFloat16), as torch.autocast("cpu").
// --model gpt is the one non-vision row: a GPT-shaped decoder (GptShaped below) trained with
// AdamW on random tokens, for the mixed-precision benchmark.
//
//   build/bench/vision_speed --model resnet50 --batch 8 --mode infer --reps 3
//   build/bench/vision_speed --model resnet18 --batch 32 --mode train --amp bf16
//
// Prints one JSON line: the best and every timed iteration's seconds (after one warm-up iteration),
// the peak resident memory of the process (getrusage) and the resident memory before the model was
// built, in MB.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;

namespace {

using bench::peak_rss_mb;
using bench::rss_mb;

// GPT-shaped: token and position embeddings, `layers` pre-norm Transformer layers (d 768, 12 heads,
// feed-forward 3072, GELU, no dropout) under a causal mask, a final LayerNorm and a head over a
// vocabulary of 8192. bench/vision_compare.py builds the same model from torch.nn.
struct GptShaped : nn::Module {
  static constexpr int64_t kDim = 768, kHeads = 12, kVocab = 8192;
  GptShaped(int64_t layers, int64_t context) : nn::Module("GptShaped") {
    tok = register_module("tok", std::make_shared<nn::Embedding>(kVocab, kDim));
    pos = register_module("pos", std::make_shared<nn::Embedding>(context, kDim));
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module(
          "block" + std::to_string(i),
          std::make_shared<nn::TransformerEncoderLayer>(kDim, kHeads,
                                                        nn::TransformerEncoderLayerOptions{.dim_feedforward = 4 * kDim,
                                                                                           .dropout = 0.0,
                                                                                           .activation = "gelu",
                                                                                           .batch_first = true,
                                                                                           .norm_first = true})));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{kDim}));
    head = register_module("head", std::make_shared<nn::Linear>(kDim, kVocab));
    mask = nn::generate_square_subsequent_mask(context);
  }
  Tensor forward(Tensor tokens) override {  // (B, T) -> (B, T, vocab)
    Tensor h = tok->forward(tokens) + pos->forward(arange(tokens.size(1), kInt64));
    for (auto& b : blocks) h = b->forward(h, {.src_mask = mask});
    return head->forward(norm->forward(h));
  }
  std::shared_ptr<nn::Embedding> tok, pos;
  std::vector<std::shared_ptr<nn::TransformerEncoderLayer>> blocks;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
  Tensor mask;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "vision_speed: %s\n"
               "usage: vision_speed --model NAME [--batch N] [--mode infer|train] [--reps N] [--size PIXELS] "
               "[--amp off|bf16]\n"
               "  NAME: any of nabla::vision::model_names() (resnet50, mobilenet_v2, vit_b_16, ...)\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_name, mode = "infer", amp = "off";
  int64_t batch = 1, reps = 3, size = 224;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--model")) model_name = value();
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(value());
    else if (!std::strcmp(argv[i], "--mode")) mode = value();
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoll(value());
    else if (!std::strcmp(argv[i], "--size")) size = std::stoll(value());
    else if (!std::strcmp(argv[i], "--amp")) amp = value();
    else usage((std::string("unknown option ") + argv[i]).c_str());
  }
  if (model_name.empty()) usage("--model is required");
  if (mode != "infer" && mode != "train") usage("--mode is infer or train");
  if (amp != "off" && amp != "bf16") usage("--amp is off or bf16");
  if (batch < 1 || reps < 1 || size < 32) usage("--batch and --reps must be at least 1, --size at least 32");

  const double rss_before = rss_mb();
  manual_seed(0);
  vision::ModelOptions options;
  if (model_name == "vit_b_16") options.image_size = size;
  // gpt: --size is the context (tokens per sequence), 4 layers.
  const bool gpt = model_name == "gpt";
  std::shared_ptr<nn::Module> model =
      gpt ? std::make_shared<GptShaped>(4, size) : vision::create_model(model_name, options);
  Tensor x = gpt ? randint(0, GptShaped::kVocab, {batch, size}) : randn({batch, 3, size, size});
  Tensor y = gpt ? randint(0, GptShaped::kVocab, {batch * size}) : randint(0, 1000, {batch});
  std::unique_ptr<optim::Optimizer> opt;
  if (mode == "train") {
    model->train();
    if (gpt) opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
    else opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  } else {
    model->eval();
  }
  auto region = [&] {
    std::optional<AutocastGuard> r;
    if (amp == "bf16") r.emplace(autocast(kCPU, kBFloat16));
    return r;
  };
  auto iteration = [&] {
    if (mode == "infer") {
      autograd::InferenceMode guard;
      auto ac = region();
      Tensor out = (*model)(x);
      (void)out.data_ptr();
    } else {
      opt->zero_grad();
      Tensor loss;
      {
        auto ac = region();  // the forward and the loss; backward after the region, as in PyTorch
        Tensor out = (*model)(x);
        loss = nn::functional::cross_entropy(gpt ? out.flatten(0, 1) : out, y);
      }
      loss.backward();
      opt->step();
    }
  };
  iteration();  // warm-up: caches, the allocator's pools, lazily made buffers
  std::vector<double> times;
  for (int64_t r = 0; r < reps; ++r) times.push_back(bench::time_batch(iteration, 1));
  double best = *std::min_element(times.begin(), times.end());
  std::printf(
      "{\"framework\": \"nabla\", \"model\": \"%s\", \"mode\": \"%s\", \"batch\": %lld, \"amp\": \"%s\", "
      "\"threads\": %d, \"best_s\": %.6f, \"times_s\": [",
      model_name.c_str(), mode.c_str(), static_cast<long long>(batch), amp.c_str(), get_num_threads(), best);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.6f", i ? ", " : "", times[i]);
  std::printf("], \"peak_rss_mb\": %.1f, \"rss_before_model_mb\": %.1f}\n", peak_rss_mb(), rss_before);
  return 0;
}
