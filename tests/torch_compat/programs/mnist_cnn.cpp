// An MNIST-style CNN trained through libtorch's data API, in libtorch's idioms (its own MNIST
// example's model). It compiles unchanged against libtorch 1.13 and against nabla's torch layer;
// tests/torch_compat/test_programs.cpp compares what the two print. Weights and data come from
// fixed formulas (not torch's random generator), so both runs compute the same numbers.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

// Deterministic values for a parameter: a function of its name and the element index.
torch::Tensor fixed_values(const std::string& name, torch::IntArrayRef sizes, double scale) {
  double seed = 0;
  for (char c : name) seed += static_cast<unsigned char>(c);
  torch::Tensor idx = torch::arange(0, torch::ones(sizes).numel(), torch::kFloat32);
  return (idx * 0.7311 + seed * 0.13).sin().mul(scale).reshape(sizes);
}

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(torch::nn::Conv2dOptions(1, 6, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(6, 12, 3).stride(1).bias(false)),
        bn(torch::nn::BatchNorm2dOptions(12).momentum(0.2)),
        fc1(12 * 5 * 5, 32),
        fc2(torch::nn::LinearOptions(32, 10).bias(true)) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("bn", bn);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));                                    // (N, 6, 12, 12)
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(bn->forward(conv2->forward(x))), 2));  // (N, 12, 5, 5)
    x = x.view({-1, 12 * 5 * 5});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.0, /*train=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn;
  torch::nn::Dropout2d conv2_drop{torch::nn::Dropout2dOptions(0.0)};
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Net);

// 28x28 "digits" made from sines: class k has its own frequency pattern.
struct Digits : torch::data::datasets::Dataset<Digits> {
  explicit Digits(int64_t n) : n_(n) {}
  torch::data::Example<> get(size_t index) override {
    const auto i = static_cast<int64_t>(index);
    const int64_t label = i % 10;
    torch::Tensor r = torch::arange(0, 28, torch::kFloat32).view({28, 1});
    torch::Tensor c = torch::arange(0, 28, torch::kFloat32).view({1, 28});
    torch::Tensor img = ((r * (0.1 + 0.05 * label) + c * (0.2 - 0.01 * label)).sin() * 0.5 + 0.5) * (0.9 + 0.001 * i);
    return {img.unsqueeze(0), torch::tensor(label, torch::kLong)};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n_); }
  int64_t n_;
};

int main() {
  torch::DeviceType device_type = torch::kCPU;
  torch::Device device(device_type);
  Net model;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) p.value().copy_(fixed_values(p.key(), p.value().sizes(), 0.2));
  }
  model->to(device);

  auto train_set =
      Digits(200).map(torch::data::transforms::Normalize<>(0.5, 0.25)).map(torch::data::transforms::Stack<>());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_set), torch::data::DataLoaderOptions().batch_size(32).workers(2));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Digits(60).map(torch::data::transforms::Normalize<>(0.5, 0.25)).map(torch::data::transforms::Stack<>()), 20);

  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.5));
  for (int epoch = 1; epoch <= 3; ++epoch) {
    model->train();
    double total = 0;
    int batches = 0;
    for (auto& batch : *train_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      torch::Tensor output = model->forward(data);
      torch::Tensor loss = torch::nll_loss(output, targets);
      AT_ASSERT(!std::isnan(loss.template item<float>()));
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::SGDOptions&>(group.options())
          .lr(static_cast<torch::optim::SGDOptions&>(group.options()).lr() * 0.5);
    std::printf("epoch %d train_loss %.6f batches %d\n", epoch, total / batches, batches);

    model->eval();
    torch::NoGradGuard no_grad;
    double test_loss = 0;
    int64_t correct = 0;
    for (const auto& batch : *test_loader) {
      torch::Tensor output = model->forward(batch.data);
      test_loss += torch::nll_loss(output, batch.target, /*weight=*/{}, torch::Reduction::Sum).item<double>();
      torch::Tensor pred = output.argmax(1);
      correct += pred.eq(batch.target).sum().item<int64_t>();
    }
    std::printf("epoch %d test_loss %.6f correct %lld\n", epoch, test_loss / 60, static_cast<long long>(correct));
  }

  // The trained weights through torch::save / torch::load: the reloaded model predicts the same.
  torch::save(model, "mnist_cnn_model.pt");
  Net reloaded;
  torch::load(reloaded, "mnist_cnn_model.pt");
  reloaded->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = Digits(4).get(3).data.unsqueeze(0);
  double diff = (model->forward(x) - reloaded->forward(x)).abs().max().item<double>();
  std::printf("reload max_diff %.6f\n", diff);
  std::printf("bn running_mean_sum %.6f\n", model->bn->running_mean.sum().item<double>());
}
