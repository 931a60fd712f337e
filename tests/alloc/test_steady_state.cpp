// A training step in steady state makes no calls to the system allocator: tensor memory comes from
// the CPU caching allocator, tensors and autograd nodes from the small-object pool, and scratch
// buffers are reused. Checked on a step written with core ops, and on the steps a user writes:
// nn modules, a loss from nn::functional, an optimizer and a learning-rate scheduler.
#include <gtest/gtest.h>

#include "examples/mnist/models.h"  // the mnist example's models
#include "malloc_hook.h"
#include "nabla.h"

using namespace nabla;
using nabla::testing::MallocCounter;

namespace {

Tensor param(IntArrayRef shape, double bound) { return ((rand(shape) * 2 - 1) * bound).requires_grad_(); }

// One step of libtorch's MNIST example model, written with core ops, and a plain SGD update.
struct LeNetStep {
  Tensor x = rand({64, 1, 28, 28}), y = randint(0, 10, {64});
  Tensor c1w = param({10, 1, 5, 5}, .2), c1b = param({10}, .2), c2w = param({20, 10, 5, 5}, .06),
         c2b = param({20}, .06);
  Tensor f1w = param({50, 320}, .05), f1b = param({50}, .05), f2w = param({10, 50}, .14), f2b = param({10}, .14);
  std::vector<Tensor> params{c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b};
  double run() {
    Tensor h = max_pool2d(conv2d(x, c1w, c1b), {2}).relu();
    h = max_pool2d(conv2d(h, c2w, c2b), {2}).relu().view({-1, 320});
    h = linear(h, f1w, f1b).relu();
    Tensor loss = -log_softmax(linear(h, f2w, f2b), 1).gather(1, y.unsqueeze(1)).mean();
    for (Tensor& p : params) p.zero_grad();
    loss.backward();
    autograd::NoGradGuard ng;
    for (Tensor& p : params) p.sub_(p.grad(), 0.01);
    return 0;
  }
};

struct ModuleStep {
  virtual ~ModuleStep() = default;
  virtual void run() = 0;
};

// LeNet (dropout masks every step), nll_loss, SGD with momentum: libtorch's example recipe.
struct LeNetModuleStep : ModuleStep {
  std::shared_ptr<nn::Module> model = mnist::make_model("lenet").module;
  optim::SGD opt{model->parameters(), {.lr = 0.01, .momentum = 0.5}};
  Tensor x = rand({64, 1, 28, 28}), y = randint(0, 10, {64});
  void run() override {
    opt.zero_grad();
    nn::functional::nll_loss(model->forward(x), y).backward();
    opt.step();
  }
};

// The default recipe's CNN (BatchNorm in training mode), cross_entropy with label smoothing,
// Adam under a one-cycle schedule stepped every batch.
struct CnnModuleStep : ModuleStep {
  std::shared_ptr<nn::Module> model = mnist::make_model("cnn").module;
  optim::Adam opt{model->parameters(), {.lr = 1e-3}};
  optim::OneCycleLR sched{opt, 3e-3, {.total_steps = 1000}};
  Tensor x = rand({32, 1, 28, 28}), y = randint(0, 10, {32});
  void run() override {
    opt.zero_grad();
    nn::functional::cross_entropy(model->forward(x), y, {.label_smoothing = 0.1}).backward();
    opt.step();
    sched.step();
  }
};

}  // namespace

TEST(SteadyState, HookCountsAllocations) {
  MallocCounter c;
  void* volatile p = std::malloc(16);  // volatile: the compiler may not elide the pair
  std::free(p);
  int* volatile q = new int[4];
  delete[] q;
  EXPECT_EQ(c.count(), 2);
}

TEST(SteadyState, RawLeNetTrainingStepDoesNotCallMalloc) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    LeNetStep step;
    for (int i = 0; i < 3; ++i) step.run();  // warm up caches, pools and scratch buffers
    MallocCounter c;
    for (int i = 0; i < 5; ++i) step.run();
    EXPECT_EQ(c.count(), 0) << "with " << threads << " threads";
  }
}

TEST(SteadyState, ModuleTrainingStepsDoNotCallMalloc) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int which = 0; which < 2; ++which) {
      std::unique_ptr<ModuleStep> step;
      if (which == 0) step = std::make_unique<LeNetModuleStep>();
      else step = std::make_unique<CnnModuleStep>();
      for (int i = 0; i < 3; ++i) step->run();  // warm up (the optimizer creates its state here)
      MallocCounter c;
      for (int i = 0; i < 5; ++i) step->run();
      EXPECT_EQ(c.count(), 0) << (which == 0 ? "LeNet, nll_loss, SGD" : "CNN, cross_entropy, Adam, OneCycleLR")
                              << " with " << threads << " threads";
    }
  }
}
