// A sentence classifier (embedding, 2-layer LSTM, linear head) on token sequences, in libtorch's
// idioms: LSTMOptions(..).num_layers(2).batch_first(true), the LSTM's (output, (h_n, c_n)) tuple,
// a CrossEntropyLoss module, Adam with AdamOptions(..).betas(..), and torch::save / torch::load of
// the model and of the optimizer. Compiled against libtorch 1.13 and nabla's torch layer;
// test_programs.cpp compares the printed numbers.
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

torch::Tensor fixed_values(const std::string& name, torch::IntArrayRef sizes, double scale) {
  double seed = 0;
  for (char c : name) seed += static_cast<unsigned char>(c);
  torch::Tensor idx = torch::arange(0, torch::ones(sizes).numel(), torch::kFloat32);
  return (idx * 0.5377 + seed * 0.071).sin().mul(scale).reshape(sizes);
}

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl(int64_t vocab, int64_t embed, int64_t hidden, int64_t classes) {
    embedding = register_module("embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(vocab, embed)));
    lstm =
        register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(embed, hidden).num_layers(2).batch_first(true)));
    head = register_module("head", torch::nn::Sequential(torch::nn::Linear(2 * hidden, hidden), torch::nn::Tanh(),
                                                         torch::nn::Linear(hidden, classes)));
  }
  torch::Tensor forward(torch::Tensor tokens) {
    torch::Tensor x = embedding->forward(tokens);  // (N, L, E)
    auto out = lstm->forward(x);
    torch::Tensor output = std::get<0>(out);            // (N, L, H)
    torch::Tensor h_n = std::get<0>(std::get<1>(out));  // (layers, N, H)
    torch::Tensor last = output.select(1, output.size(1) - 1);
    torch::Tensor features = torch::cat({last, h_n[0]}, /*dim=*/1);  // (N, 2H)
    return head->forward(features);
  }
  torch::nn::Embedding embedding{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Sequential head{nullptr};
};
TORCH_MODULE(Classifier);

// Sequences of 6 tokens over a vocabulary of 12; the class is whether token 3 or token 7 appears
// more often (0, 1) or neither (2).
std::tuple<torch::Tensor, torch::Tensor> make_batch(int64_t n, int64_t offset) {
  std::vector<int64_t> tokens, labels;
  for (int64_t i = 0; i < n; ++i) {
    int64_t threes = 0, sevens = 0;
    for (int64_t j = 0; j < 6; ++j) {
      int64_t t = ((i + offset) * 7 + j * 5 + (i + offset) * j * 3) % 12;
      tokens.push_back(t);
      threes += t == 3;
      sevens += t == 7;
    }
    labels.push_back(threes > sevens ? 0 : sevens > threes ? 1 : 2);
  }
  return {torch::tensor(tokens).view({n, 6}), torch::tensor(labels)};
}

int main() {
  Classifier model(12, 8, 16, 3);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) p.value().copy_(fixed_values(p.key(), p.value().sizes(), 0.3));
  }
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2).betas(std::make_tuple(0.9, 0.99)));
  torch::nn::CrossEntropyLoss criterion;

  auto [tokens, labels] = make_batch(48, 0);
  for (int step = 1; step <= 30; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = criterion(model(tokens), labels);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 5.0);
    optimizer.step();
    if (step % 5 == 0) std::printf("step %d loss %.6f\n", step, loss.item<double>());
  }

  torch::save(model, "classifier.pt");
  torch::save(optimizer, "classifier_optimizer.pt");
  Classifier restored(12, 8, 16, 3);
  torch::load(restored, "classifier.pt");
  torch::optim::Adam restored_optimizer(restored->parameters(),
                                        torch::optim::AdamOptions(1e-2).betas(std::make_tuple(0.9, 0.99)));
  torch::load(restored_optimizer, "classifier_optimizer.pt");
  // One more step on each: the restored model and optimizer continue exactly as the originals.
  torch::Tensor loss_a = criterion(model(tokens), labels);
  optimizer.zero_grad();
  loss_a.backward();
  optimizer.step();
  torch::Tensor loss_b = criterion(restored(tokens), labels);
  restored_optimizer.zero_grad();
  loss_b.backward();
  restored_optimizer.step();
  double diff = 0;
  for (size_t i = 0; i < model->parameters().size(); ++i)
    diff += (model->parameters()[i] - restored->parameters()[i]).abs().sum().item<double>();
  std::printf("resume loss %.6f %.6f param_diff %.6f\n", loss_a.item<double>(), loss_b.item<double>(), diff);

  torch::NoGradGuard no_grad;
  model->eval();
  auto [test_tokens, test_labels] = make_batch(30, 1000);
  torch::Tensor pred = model(test_tokens).argmax(1);
  std::printf("test correct %lld of 30\n", static_cast<long long>(pred.eq(test_labels).sum().item<int64_t>()));
}
