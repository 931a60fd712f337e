// A training step in steady state makes no calls to the system allocator: tensor memory comes from
// the CPU caching allocator, tensors and autograd nodes from the small-object pool, and scratch
// buffers are reused.
#include <gtest/gtest.h>

#include "malloc_hook.h"
#include "nabla.h"

using namespace nabla;
using nabla::testing::MallocCounter;

namespace {

Tensor param(IntArrayRef shape, double bound) { return ((rand(shape) * 2 - 1) * bound).requires_grad_(); }

// One step of libtorch's MNIST example model, written with core ops, and a plain SGD update.
struct LeNetStep {
  Tensor x = rand({64, 1, 28, 28}), y = randint(0, 10, {64});
  Tensor c1w = param({10, 1, 5, 5}, .2), c1b = param({10}, .2), c2w = param({20, 10, 5, 5}, .06), c2b = param({20}, .06);
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
