// End to end: a 2-layer MLP reaches 100% training accuracy on a separable problem with every
// optimizer, and a small CNN with BatchNorm and Dropout lowers its loss.
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include "nabla.h"

using namespace nabla;

namespace {

// XOR blobs: 4 clusters at (+-2, +-2), class 1 where x * y > 0. Not linearly separable, so the
// hidden layer is needed; the clusters are far apart, so 100% is reachable.
std::pair<Tensor, Tensor> xor_blobs(int64_t per_cluster) {
  manual_seed(123);
  std::vector<Tensor> xs, ys;
  for (double cx : {-2.0, 2.0})
    for (double cy : {-2.0, 2.0}) {
      Tensor c = tensor({cx, cy}, kFloat32);
      xs.push_back(randn({per_cluster, 2}) * 0.4 + c);
      ys.push_back(full({per_cluster}, int64_t(cx * cy > 0 ? 1 : 0), dtype(kInt64)));
    }
  return {cat(xs), cat(ys)};
}

struct Mlp : nn::Module {
  Mlp() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 16));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 2));
  }
  Tensor forward(Tensor x) override { return (*fc2)(tanh((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// Full-batch training until every point is classified right; returns the epochs it took (or -1).
int epochs_to_fit(const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make, int max_epochs) {
  Tensor x, y;  // (not a structured binding: the closure below captures them, which clang < 16 cannot)
  std::tie(x, y) = xor_blobs(25);
  manual_seed(7);
  auto model = std::make_shared<Mlp>();
  auto opt = make(model->parameters());
  nn::CrossEntropyLoss criterion;
  {
    autograd::NoGradGuard ng;
    double initial = metrics::accuracy((*model)(x), y, 2).item<double>();
    EXPECT_LT(initial, 0.8) << "the untrained model already separates the data";
  }
  for (int epoch = 1; epoch <= max_epochs; ++epoch) {
    // The closure form every optimizer takes (L-BFGS evaluates it several times per step).
    opt->step([&] {
      opt->zero_grad();
      Tensor loss = criterion((*model)(x), y);
      loss.backward();
      return loss;
    });
    autograd::NoGradGuard ng;
    if (metrics::accuracy((*model)(x), y, 2).item<double>() == 1.0) return epoch;
  }
  return -1;
}

}  // namespace

TEST(NnTrain, MlpFitsASeparableProblemWithEveryOptimizer) {
  struct Case {
    const char* name;
    std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make;
  };
  std::vector<Case> cases = {
      {"SGD", [](auto p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.5}); }},
      {"SGD+nesterov",
       [](auto p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
       }},
      {"Adam", [](auto p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.05}); }},
      {"AdamW",
       [](auto p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.05, .amsgrad = true}); }},
      {"RMSprop", [](auto p) { return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions{.lr = 0.01}); }},
      {"RMSprop centered",
       [](auto p) {
         return std::make_unique<optim::RMSprop>(p,
                                                 optim::RMSpropOptions{.lr = 0.01, .momentum = 0.5, .centered = true});
       }},
      {"Adagrad", [](auto p) { return std::make_unique<optim::Adagrad>(p, optim::AdagradOptions{.lr = 0.2}); }},
      {"Adadelta", [](auto p) { return std::make_unique<optim::Adadelta>(p, optim::AdadeltaOptions{.lr = 1.0}); }},
      {"Adamax", [](auto p) { return std::make_unique<optim::Adamax>(p, optim::AdamaxOptions{.lr = 0.05}); }},
      {"NAdam", [](auto p) { return std::make_unique<optim::NAdam>(p, optim::NAdamOptions{.lr = 0.05}); }},
      {"RAdam", [](auto p) { return std::make_unique<optim::RAdam>(p, optim::RAdamOptions{.lr = 0.05}); }},
      {"LBFGS", [](auto p) { return std::make_unique<optim::LBFGS>(p, optim::LBFGSOptions{.strong_wolfe = true}); }},
  };
  for (const Case& c : cases) {
    int epochs = epochs_to_fit(c.make, 2000);
    EXPECT_GT(epochs, 0) << c.name << " did not reach 100% training accuracy";
    std::printf("%-18s 100%% train accuracy after %d epochs\n", c.name, epochs);
  }
}

TEST(NnTrain, SmallCnnWithBatchNormAndDropoutLowersItsLoss) {
  // 8x8 images of noise with one bright 4x4 quadrant; the class is the quadrant.
  manual_seed(5);
  int64_t n = 64;
  Tensor x = randn({n, 1, 8, 8}) * 0.3;
  Tensor y = randint(0, 4, {n});
  for (int64_t i = 0; i < n; ++i) {
    int64_t q = y[i].item<int64_t>();
    x[i][0].narrow(0, (q / 2) * 4, 4).narrow(1, (q % 2) * 4, 4).add_(1.5);
  }
  auto model = std::make_shared<nn::Sequential>(nn::Conv2d(1, 8, 3, {.padding = 1}), nn::BatchNorm2d(8), nn::ReLU(),
                                                nn::MaxPool2d(2), nn::Dropout2d(0.1), nn::Flatten(), nn::Dropout(0.25),
                                                nn::Linear(8 * 4 * 4, 4));
  optim::Adam opt(model->parameters(), {.lr = 1e-2});
  optim::StepLR sched(opt, 20, 0.5);
  nn::CrossEntropyLoss criterion;
  std::vector<double> losses;
  for (int step = 0; step < 40; ++step) {
    Tensor idx = randperm(n).narrow(0, 0, 16);  // minibatches of 16
    Tensor loss = criterion((*model)(x.index_select(0, idx)), y.index_select(0, idx));
    opt.zero_grad();
    loss.backward();
    opt.step();
    sched.step();
    losses.push_back(loss.item<double>());
  }
  double first = (losses[0] + losses[1] + losses[2] + losses[3] + losses[4]) / 5;
  double last = (losses[35] + losses[36] + losses[37] + losses[38] + losses[39]) / 5;
  std::printf("CNN loss: first 5 steps %.4f, last 5 steps %.4f\n", first, last);
  EXPECT_LT(last, 0.5 * first);
  // In evaluation mode (running statistics, no dropout) it classifies the training images.
  model->eval();
  autograd::NoGradGuard ng;
  EXPECT_GT(metrics::accuracy((*model)(x), y, 4).item<double>(), 0.9);
  auto bn = model->at<nn::BatchNorm2d>(1);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 40);
}
