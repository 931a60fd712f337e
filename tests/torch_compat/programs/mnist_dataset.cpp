// torch::data::datasets::MNIST in libtorch's idioms: the program writes an MNIST-format test split
// (10000 28x28 images, as libtorch's reader requires, drawn from fixed formulas), reads it with
// MNIST(root, MNIST::Mode::kTest), normalizes and stacks it through the data API, and trains a
// linear classifier on it with two loader workers. Compiled against libtorch 1.13 and nabla's torch
// layer; test_programs.cpp compares the printed numbers.
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

void write_be32(std::ofstream& f, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  f.write(b, 4);
}

// Image i of class i % 10: a bright band whose position and slope depend on the class.
void write_test_split(const std::string& root, uint32_t count) {
  std::ofstream images(root + "/t10k-images-idx3-ubyte", std::ios::binary);
  std::ofstream labels(root + "/t10k-labels-idx1-ubyte", std::ios::binary);
  write_be32(images, 2051);
  write_be32(images, count);
  write_be32(images, 28);
  write_be32(images, 28);
  write_be32(labels, 2049);
  write_be32(labels, count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t label = i % 10;
    for (uint32_t r = 0; r < 28; ++r)
      for (uint32_t c = 0; c < 28; ++c) {
        const uint32_t d = (r + label * c / 3 + 2 * label + i % 7) % 28;
        images.put(static_cast<char>(d < 6 ? 255 - 20 * d : (r * 7 + c * 3 + i) % 40));
      }
    labels.put(static_cast<char>(label));
  }
}

int main() {
  write_test_split(".", 10000);
  torch::data::datasets::MNIST raw(".", torch::data::datasets::MNIST::Mode::kTest);
  std::printf("size %lld train %d images %lld %lld %lld %lld\n", static_cast<long long>(*raw.size()),
              static_cast<int>(raw.is_train()), static_cast<long long>(raw.images().size(0)),
              static_cast<long long>(raw.images().size(1)), static_cast<long long>(raw.images().size(2)),
              static_cast<long long>(raw.images().size(3)));
  std::printf("pixel_mean %.6f targets_sum %lld first_label %lld\n", raw.images().mean().item<double>(),
              static_cast<long long>(raw.targets().sum().item<int64_t>()),
              static_cast<long long>(raw.get(3).target.item<int64_t>()));

  auto dataset = torch::data::datasets::MNIST(".", torch::data::datasets::MNIST::Mode::kTest)
                     .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                     .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(500).workers(2));

  torch::nn::Linear model(784, 10);
  {
    torch::NoGradGuard no_grad;
    torch::Tensor i = torch::arange(0, 7840, torch::kFloat32);
    model->weight.copy_((i * 0.377).sin().mul(0.01).view({10, 784}));
    model->bias.zero_();
  }
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int epoch = 1; epoch <= 2; ++epoch) {
    int batch_index = 0;
    double total = 0;
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      torch::Tensor loss =
          torch::nn::functional::cross_entropy(model(batch.data.view({batch.data.size(0), -1})), batch.target);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      if (++batch_index % 10 == 0)
        std::printf("epoch %d batch %d loss %.6f\n", epoch, batch_index, loss.item<double>());
    }
    std::printf("epoch %d mean_loss %.6f\n", epoch, total / batch_index);
  }
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (auto& batch : *loader)
    correct += model(batch.data.view({batch.data.size(0), -1})).argmax(1).eq(batch.target).sum().item<int64_t>();
  std::printf("correct %lld of 10000\n", static_cast<long long>(correct));
}
