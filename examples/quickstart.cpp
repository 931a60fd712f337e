// PyTorch's "Learn the Basics" quickstart (Fashion-MNIST, a three-layer MLP) translated line for
// line: examples/README.md puts the Python next to this file, step by step.
//
//   build/examples/quickstart                    # 5 epochs as the tutorial: 64.5% test accuracy, 10 s
//   build/examples/quickstart --epochs 10 --data data/fashion-mnist --device cuda
//
// Fashion-MNIST comes from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) or
// scripts/get-data.sh fashion (data/fashion-mnist); the folder holds the four IDX files.
#include <nabla.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "examples/flags.h"
using namespace nabla;

const char* kHelp = R"(quickstart: PyTorch's "Learn the Basics" quickstart in nabla (Fashion-MNIST, an MLP)

usage: quickstart [--data DIR] [--epochs N] [--batch-size N] [--lr X] [--device cpu|cuda] [--save FILE]

  --data DIR        the Fashion-MNIST IDX files (default: /usr/share/datasets/fashion-mnist when
                    Debian's dataset-fashion-mnist is installed, else data/fashion-mnist)
  --epochs N        passes over the 60,000 training images (default 5)
  --batch-size N    images per step (default 64)
  --lr X            SGD's learning rate (default 0.001, as the tutorial)
  --device D        cpu or cuda (default: cuda when a GPU is usable, else cpu)
  --save FILE       where the trained weights go, in PyTorch's format (default model.pth;
                    Python reads them with model.load_state_dict(torch.load("model.pth")))
)";

// class NeuralNetwork(nn.Module)
struct NeuralNetworkImpl : nn::Module {
  NeuralNetworkImpl() {
    flatten = register_module("flatten", nn::Flatten());
    linear_relu_stack = register_module(
        "linear_relu_stack",
        nn::Sequential(nn::Linear(28 * 28, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(), nn::Linear(512, 10)));
  }
  Tensor forward(Tensor x) override {
    x = flatten(x);
    Tensor logits = linear_relu_stack(x);
    return logits;
  }
  nn::ModuleHolder<nn::Flatten> flatten{nullptr};
  nn::ModuleHolder<nn::Sequential> linear_relu_stack{nullptr};
};
NABLA_MODULE(NeuralNetwork);

void train(data::DataLoader& dataloader, NeuralNetwork& model, nn::CrossEntropyLoss& loss_fn,
           optim::Optimizer& optimizer, Device device) {
  int64_t size = dataloader.dataset()->size();
  model->train();
  int64_t batch = 0;
  for (auto& b : dataloader) {
    Tensor X = b.data.to(device), y = b.target.to(device);
    // Compute prediction error
    Tensor pred = model(X);
    Tensor loss = loss_fn(pred, y);
    // Backpropagation
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    if (batch % 100 == 0) {
      int64_t current = (batch + 1) * X.size(0);
      std::printf("loss: %f  [%5lld/%5lld]\n", loss.item<double>(), static_cast<long long>(current),
                  static_cast<long long>(size));
    }
    ++batch;
  }
}

void test(data::DataLoader& dataloader, NeuralNetwork& model, nn::CrossEntropyLoss& loss_fn, Device device) {
  int64_t size = dataloader.dataset()->size();
  int64_t num_batches = dataloader.size();
  model->eval();
  double test_loss = 0, correct = 0;
  {
    NoGradGuard no_grad;
    for (auto& b : dataloader) {
      Tensor X = b.data.to(device), y = b.target.to(device);
      Tensor pred = model(X);
      test_loss += loss_fn(pred, y).item<double>();
      correct += (pred.argmax(1) == y).to(kFloat32).sum().item<double>();
    }
  }
  test_loss /= static_cast<double>(num_batches);
  correct /= static_cast<double>(size);
  std::printf("Test Error: \n Accuracy: %0.1f%%, Avg loss: %8f \n\n", 100 * correct, test_loss);
}

int main(int argc, char** argv) try {
  examples::Flags flags(argc, argv, kHelp);
  const std::string debian = "/usr/share/datasets/fashion-mnist";
  std::string root = flags.str("data", std::filesystem::exists(debian) ? debian : "data/fashion-mnist");
  int64_t epochs = flags.integer("epochs", 5, 1, 1000);
  int64_t batch_size = flags.integer("batch-size", 64, 1, 60000);
  double lr = flags.number("lr", 1e-3, 1e-9, 10);
  std::string device_name = flags.str("device", cuda::is_available() ? "cuda" : "cpu");
  std::string save_path = flags.str("save", "model.pth");
  flags.finish();
  if (device_name != "cpu" && device_name != "cuda") flags.usage("--device is cpu or cuda, got '" + device_name + "'");
  if (device_name == "cuda" && !cuda::is_available())
    flags.usage("--device cuda: no usable GPU (" + cuda::unavailable_reason() + ")");

  // Download training data from open datasets. (nabla reads the files; it downloads nothing.)
  data::FashionMNIST training_data(root, data::Split::train);
  data::FashionMNIST test_data(root, data::Split::test);

  // Create data loaders.
  data::DataLoader train_dataloader(training_data, {.batch_size = batch_size});
  data::DataLoader test_dataloader(test_data, {.batch_size = batch_size});
  for (auto& b : test_dataloader) {
    std::cout << "Shape of X [N, C, H, W]: " << b.data.sizes() << "\n";
    std::cout << "Shape of y: " << b.target.sizes() << " " << b.target.dtype() << std::endl;
    break;
  }

  // Get cpu or gpu device for training.
  Device device(device_name);
  std::printf("Using %s device\n", device_name.c_str());

  NeuralNetwork model;
  model->to(device);
  std::cout << model << "\n";

  nn::CrossEntropyLoss loss_fn;
  optim::SGD optimizer(model->parameters(), {.lr = lr});

  for (int64_t t = 0; t < epochs; ++t) {
    std::printf("Epoch %lld\n-------------------------------\n", static_cast<long long>(t + 1));
    train(train_dataloader, model, loss_fn, optimizer, device);
    test(test_dataloader, model, loss_fn, device);
  }
  std::printf("Done!\n");

  nn::save_torch_weights(*model, save_path);
  std::printf("Saved PyTorch Model State to %s\n", save_path.c_str());

  NeuralNetwork model2;
  model2->to(device);
  nn::load_torch_weights(*model2, save_path);

  const std::vector<std::string> classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  model2->eval();
  data::Example first = test_data.get(0);
  {
    NoGradGuard no_grad;
    Tensor x = first.data.unsqueeze(0).to(device);  // a batch of one
    Tensor pred = model2(x);
    std::string predicted = classes[pred[0].argmax(0).item<int64_t>()], actual = classes[first.target.item<int64_t>()];
    std::printf("Predicted: \"%s\", Actual: \"%s\"\n", predicted.c_str(), actual.c_str());
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "quickstart: %s\n", e.what());
  return 1;
}
