// A user's program built next to headers of its own named as every one of nabla's (tests/install/
// run.cmake makes them, each an #error, in a folder given with -I ahead of nabla's) with -Wall
// -Wextra -Werror: nabla's headers include only each other, and the habits below (designated
// initialisers that name some fields of an options struct) compile without a warning.
#include <nabla.h>

#include <cstdio>

int main() {
  using namespace nabla;
  manual_seed(0);
  nn::Sequential net(std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = 1, .bias = false}),
                     std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4 * 8 * 8, 3));
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::AdamW adamw(net.parameters(), {.lr = 1e-3});
  Tensor x = randn({5, 1, 8, 8}), y = tensor({0, 1, 2, 0, 1}, kInt64);
  data::TensorDataset ds(x, y);
  data::DataLoader loader(ds, {.batch_size = 2, .shuffle = true, .seed = 1});
  auto full_loss = [&] {
    autograd::NoGradGuard ng;
    return nn::functional::cross_entropy(net(x), y).item<double>();
  };
  const double first = full_loss();
  for (int epoch = 0; epoch < 20; ++epoch) {
    for (auto& batch : loader) {
      Tensor loss = nn::functional::cross_entropy(net(batch.data), batch.target, {.label_smoothing = 0.1});
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  const double last = full_loss();
  if (!(last < first)) {
    std::printf("FAILED: the loss did not fall (%f -> %f)\n", first, last);
    return 1;
  }
  std::printf("ok: loss %.4f -> %.4f\n", first, last);
  return 0;
}
