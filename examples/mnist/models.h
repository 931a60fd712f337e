// The mnist program's models and what goes with them.
//   mlp    784-256-10 with ReLU
//   lenet  libtorch's own C++ MNIST example model (conv 1->10 5x5, maxpool, relu, conv 10->20 5x5,
//          dropout2d, maxpool, relu, fc 320->50, relu, dropout 0.5, fc 50->10, log_softmax)
//   cnn    the default: two 3x3 conv blocks with batch norm (32 and 64 channels), max pooling,
//          fc 3136->128, fc 128->10 (batch norm regularizes enough for 3 epochs)
//   pytorch  PyTorch's examples/mnist Net (conv 1->32 3x3, conv 32->64 3x3, maxpool, dropout, fc
//          9216->128, dropout, fc 128->10, log_softmax): its mnist_cnn.pt loads with --init-from
//   fast   99% in seconds: three 3x3 conv blocks with batch norm and max pooling (16, 32, 64
//          channels, 28 -> 14 -> 7 -> 3), fc 576->10; its recipe trains one epoch with a one-cycle
//          learning rate and label smoothing
#pragma once

#include <memory>
#include <string>

#include "nabla.h"

namespace mnist {

struct ModelInfo {
  std::shared_ptr<nabla::nn::Module> module;
  bool outputs_log_probs;  // lenet ends in log_softmax and trains with nll_loss, as its original
};

ModelInfo make_model(const std::string& name);

// Training defaults per model, used when the command line does not say otherwise.
struct Recipe {
  std::string optimizer;
  double lr, momentum;
  int64_t batch_size;
  std::string scheduler;
  double gamma;  // per-epoch learning-rate decay of the "step" scheduler
  int64_t epochs = 3;
  double label_smoothing = 0;  // of the cross-entropy loss
};
Recipe default_recipe(const std::string& model);

// The normalization applied to every image (MNIST's mean and standard deviation), as in
// libtorch's example.
inline constexpr double kMean = 0.1307, kStd = 0.3081;

}  // namespace mnist
