// Shipped models through nabla::compile in eval mode: the torchvision zoo (a sample of it), the
// mnist recipes, an LSTM, a Transformer encoder layer and GPT-2 (small), each replayed on a second
// input and compared with eager (within float32 rounding: batch norms are folded), and a recurrent
// or attention model also trained one step through its compiled forward.
#include <gtest/gtest.h>

#include "examples/mnist/models.h"
#include "nabla.h"
#include "nn/gpt2.h"
#include "vision/vision.h"

using namespace nabla;

namespace {

struct Outcome {
  bool replayed = false;
  std::string reason;
  double error = 0;  // max |compiled - eager| / (1 + max |eager|)
};

Outcome run(const std::shared_ptr<nn::Module>& m, const Tensor& x1, const Tensor& x2) {
  m->eval();
  CompileOptions o;
  o.warn = false;
  CompiledModule fast = compile(m, o);
  InferenceMode guard;
  fast(x1);
  Tensor got = fast(x2), want = (*m)(x2);
  Outcome r;
  r.replayed = fast.stats().replays == 1;
  r.reason = fast.stats().last_fallback;
  EXPECT_EQ(got.sizes(), want.sizes());
  Tensor w = want.to(kFloat64), g = got.to(kFloat64);
  r.error = (w - g).abs().max().item<double>() / (1 + w.abs().max().item<double>());
  return r;
}

void expect_replays(const std::string& name, const Outcome& r) {
  EXPECT_TRUE(r.replayed) << name << " ran eagerly: " << r.reason;
  EXPECT_LT(r.error, 1e-4) << name;
}

}  // namespace

TEST(CompileModels, VisionZooInEval) {
  for (const std::string name :
       {"resnet18", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5", "squeezenet1_0",
        "regnet_y_400mf", "densenet121", "convnext_tiny", "swin_t"}) {
    SCOPED_TRACE(name);
    manual_seed(1);
    auto m = vision::create_model(name, {.num_classes = 10});
    expect_replays(name, run(m, randn({2, 3, 64, 64}), randn({2, 3, 64, 64})));
  }
  // Attention models: the patch size fixes the input; convnext needs 32 pixels at least.
  manual_seed(2);
  expect_replays("vit_b_16", run(vision::create_model("vit_b_16", {.num_classes = 10, .image_size = 32}),
                                 randn({1, 3, 32, 32}), randn({1, 3, 32, 32})));
}

TEST(CompileModels, MnistRecipes) {
  for (const std::string name : {"mlp", "lenet", "cnn", "pytorch", "fast"}) {
    SCOPED_TRACE(name);
    manual_seed(3);
    auto m = mnist::make_model(name).module;
    expect_replays(name, run(m, rand({4, 1, 28, 28}), rand({4, 1, 28, 28})));
  }
}

TEST(CompileModels, SequenceModels) {
  manual_seed(4);
  auto lstm = std::make_shared<nn::LSTM>(8, 16, nn::LSTMOptions{.num_layers = 2, .batch_first = true});
  // The recurrent layers are one traced op each, with no replay rule: recorded as their parts.
  expect_replays("lstm", run(lstm, randn({3, 5, 8}), randn({3, 5, 8})));
  auto gru = std::make_shared<nn::GRU>(8, 6, nn::GRUOptions{.bidirectional = true});
  expect_replays("gru", run(gru, randn({5, 2, 8}), randn({5, 2, 8})));
  auto enc = std::make_shared<nn::TransformerEncoderLayer>(
      32, 4, nn::TransformerEncoderLayerOptions{.dim_feedforward = 64, .dropout = 0.1, .batch_first = true});
  expect_replays("transformer encoder layer", run(enc, randn({2, 7, 32}), randn({2, 7, 32})));
  nn::GPT2Config config{.vocab_size = 97, .n_positions = 32, .n_embd = 32, .n_layer = 2, .n_head = 4};
  auto gpt = std::make_shared<nn::GPT2LMHeadModel>(config);
  expect_replays("gpt2", run(gpt, randint(0, 97, {2, 9}), randint(0, 97, {2, 9})));
}
