#include "examples/mnist/models.h"

#include <stdexcept>

namespace mnist {

using namespace nabla;

namespace {

// libtorch's examples/cpp/mnist Net, layer for layer.
struct LeNet : nn::Module {
  LeNet() : nn::Module("LeNet") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 10, 5));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(10, 20, 5));
    conv2_drop = register_module("conv2_drop", std::make_shared<nn::Dropout2d>(0.5));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(320, 50));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(50, 10));
  }
  Tensor forward(Tensor x) override {
    x = max_pool2d(conv1->forward(x), {2}).relu();
    x = max_pool2d(conv2_drop->forward(conv2->forward(x)), {2}).relu();
    x = x.view({-1, 320});
    x = fc1->forward(x).relu();
    x = nn::functional::dropout(x, 0.5, is_training());
    x = fc2->forward(x);
    return log_softmax(x, 1);
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Dropout2d> conv2_drop;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// PyTorch's own examples/mnist Net (main.py), layer for layer and name for name, so the state dict
// its --save-model writes (mnist_cnn.pt) loads with `mnist train --model pytorch --init-from`.
struct PyTorchExampleNet : nn::Module {
  PyTorchExampleNet() : nn::Module("Net") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 32, 3));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(32, 64, 3));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(9216, 128));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
  }
  Tensor forward(Tensor x) override {
    x = conv2->forward(conv1->forward(x).relu()).relu();                              // (B, 64, 24, 24)
    x = nn::functional::dropout(max_pool2d(x, {2}), 0.25, is_training()).flatten(1);  // (B, 9216)
    x = nn::functional::dropout(fc1->forward(x).relu(), 0.5, is_training());
    return log_softmax(fc2->forward(x), 1);
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

std::shared_ptr<nn::Module> conv_block(int64_t in, int64_t out) {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(in, out, 3, nn::Conv2dOptions{.padding = 1, .bias = false}),
      std::make_shared<nn::BatchNorm2d>(out), std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2));
}

}  // namespace

ModelInfo make_model(const std::string& name) {
  if (name == "mlp") {
    return {std::make_shared<nn::Sequential>(std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 256),
                                             std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)),
            false};
  }
  if (name == "lenet") return {std::make_shared<LeNet>(), true};
  if (name == "pytorch") return {std::make_shared<PyTorchExampleNet>(), true};
  if (name == "fast") {  // x: (B, 1, 28, 28) -> (B, 16, 14, 14) -> (B, 32, 7, 7) -> (B, 64, 3, 3) -> (B, 10)
    return {
        std::make_shared<nn::Sequential>(conv_block(1, 16), conv_block(16, 32), conv_block(32, 64),
                                         std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64 * 3 * 3, 10)),
        false};
  }
  if (name == "cnn") {
    return {std::make_shared<nn::Sequential>(conv_block(1, 32), conv_block(32, 64), std::make_shared<nn::Flatten>(),
                                             std::make_shared<nn::Linear>(64 * 7 * 7, 128),
                                             std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 10)),
            false};
  }
  throw std::invalid_argument("unknown model '" + name + "' (expected mlp, lenet, cnn, pytorch or fast)");
}

Recipe default_recipe(const std::string& model) {
  if (model == "lenet") return {"sgd", 0.01, 0.5, 64, "none", 1.0};
  if (model == "mlp") return {"adam", 1e-3, 0.9, 128, "step", 0.5};
  if (model == "pytorch") return {"adadelta", 1.0, 0.9, 64, "step", 0.7};  // as PyTorch's example trains it
  // One epoch: the learning rate rises to 0.02 over the first 30% of the steps and anneals to
  // nearly 0 (onecycle), and label smoothing 0.1 keeps the last steps from overfitting the batch.
  if (model == "fast") return {"adam", 0.02, 0.9, 64, "onecycle", 1.0, /*epochs=*/1, /*label_smoothing=*/0.1};
  return {"adam", 2e-3, 0.9, 64, "step", 0.2};
}

}  // namespace mnist
