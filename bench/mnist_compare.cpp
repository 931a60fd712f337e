// libtorch's C++ MNIST example next to nabla's `mnist train --model lenet` recipe, on the same data
// files, in one process: per-epoch training seconds and test accuracy.
//
//   mnist_compare [--epochs N] [--data DIR] [--threads N]
//
// Both train libtorch's example model (conv 1->10 5x5, maxpool, relu, conv 10->20 5x5, dropout2d,
// maxpool, relu, fc 320->50, relu, dropout 0.5, fc 50->10, log_softmax) with SGD lr 0.01 momentum
// 0.5, batch 64, images in file order, normalized with mean 0.1307 and std 0.3081, as
// pytorch/examples cpp/mnist does (its DataLoader included). libtorch runs at 1 and 2 threads.
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/timing.h"
#include "bench/torch_lenet.h"
#include "examples/mnist/models.h"
#include "nabla.h"

namespace nb = nabla;
using bench::now;

namespace {

// libtorch's example, verbatim in substance: its dataset class, transforms and data loader.
void run_libtorch(const std::string& dir, int epochs, int threads) {
  torch::set_num_threads(threads);
  torch::manual_seed(1);
  auto model = std::make_shared<TorchLeNet>();
  auto train = torch::data::datasets::MNIST(dir)
                   .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                   .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(train), 64);
  auto test = torch::data::datasets::MNIST(dir, torch::data::datasets::MNIST::Mode::kTest)
                  .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                  .map(torch::data::transforms::Stack<>());
  auto test_loader = torch::data::make_data_loader(std::move(test), 1000);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
  for (int e = 1; e <= epochs; ++e) {
    model->train();
    double t0 = now();
    for (auto& batch : *loader) {
      opt.zero_grad();
      auto loss = torch::nll_loss(model->forward(batch.data), batch.target);
      loss.backward();
      opt.step();
    }
    double dt = now() - t0;
    model->eval();
    torch::NoGradGuard ng;
    int64_t correct = 0, n = 0;
    for (const auto& batch : *test_loader) {
      correct += model->forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
      n += batch.target.size(0);
    }
    std::printf("  libtorch 1.13 (%d thread%s)  epoch %d  %6.2f s  test acc %.2f%%\n", threads, threads > 1 ? "s" : "",
                e, dt, 100.0 * correct / n);
    std::fflush(stdout);
  }
}

void run_nabla(const std::string& dir, int epochs) {
  nb::manual_seed(1);
  auto m = mnist::make_model("lenet");
  nb::data::MNIST train(dir, nb::data::Split::train), test(dir, nb::data::Split::test);
  nb::data::DataLoader loader(train, {.batch_size = 64, .shuffle = false});
  nb::data::DataLoader test_loader(test, {.batch_size = 1000});
  nb::optim::SGD opt(m.module->parameters(), {.lr = 0.01, .momentum = 0.5});
  for (int e = 1; e <= epochs; ++e) {
    m.module->train();
    double t0 = now();
    for (auto& batch : loader) {
      opt.zero_grad();
      nb::Tensor loss =
          nb::nn::functional::nll_loss((*m.module)((batch.data - mnist::kMean) / mnist::kStd), batch.target);
      loss.backward();
      opt.step();
    }
    double dt = now() - t0;
    m.module->eval();
    nb::autograd::InferenceMode guard;
    int64_t correct = 0, n = 0;
    for (auto& batch : test_loader) {
      correct +=
          ((*m.module)((batch.data - mnist::kMean) / mnist::kStd).argmax(1) == batch.target).sum().item<int64_t>();
      n += batch.target.numel();
    }
    std::printf("  nabla (%d threads)          epoch %d  %6.2f s  test acc %.2f%%\n", nb::get_num_threads(), e, dt,
                100.0 * correct / n);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 1;
  std::string dir = "data/mnist";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--data") && i + 1 < argc) dir = argv[++i];
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) nb::set_num_threads(std::atoi(argv[++i]));
    else {
      std::printf(
          "usage: mnist_compare [--epochs N] [--data DIR] [--threads N]\n\n"
          "Trains libtorch's C++ MNIST example and nabla's lenet recipe on the same IDX files in\n"
          "DIR (default data/mnist; fetch with scripts/get-data.sh) and prints seconds per epoch\n"
          "and test accuracy of each.\n");
      return std::strcmp(argv[i], "--help") && std::strcmp(argv[i], "-h") ? 2 : 0;
    }
  }
  std::printf("libtorch's MNIST example recipe, %d epoch%s, data in %s\n", epochs, epochs > 1 ? "s" : "", dir.c_str());
  run_nabla(dir, epochs);
  for (int threads : {1, 2}) run_libtorch(dir, epochs, threads);
  return 0;
}
