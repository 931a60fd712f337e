// nabla::autocast (core/autocast.h): the op lists by output dtype, nesting, the per-thread state,
// the weight-cast cache, backward outside and inside a region, checkpointing, and the errors.
#include <gtest/gtest.h>

#include <thread>

#include "nabla.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {
namespace F = nn::functional;

// Under autocast(kCPU, kBFloat16), as PyTorch 2.x's CPU lists: the products and convolutions in
// bfloat16, the losses in float32, cat in the widest input dtype, the rest in the inputs' dtype.
TEST(Autocast, CpuListsByOutputDtype) {
  Tensor a = randn({4, 5}), b = randn({5, 3}), x = randn({2, 3, 8, 8}), w = randn({4, 3, 3, 3});
  Tensor t = tensor(std::vector<int64_t>{1, 0, 2, 1});
  auto guard = autocast(kCPU, kBFloat16);
  EXPECT_TRUE(is_autocast_enabled(DeviceType::cpu));
  EXPECT_EQ(autocast_dtype(DeviceType::cpu), kBFloat16);
  EXPECT_EQ(mm(a, b).dtype(), kBFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
  EXPECT_EQ(linear(a, b.t(), Tensor()).dtype(), kBFloat16);
  EXPECT_EQ(addmm(randn({3}), a, b).dtype(), kBFloat16);
  EXPECT_EQ(conv2d(x, w).dtype(), kBFloat16);
  EXPECT_EQ(F::conv2d(x, w).dtype(), kBFloat16);
  Tensor logits = mm(a, b);  // bfloat16
  EXPECT_EQ(F::cross_entropy(logits, t).dtype(), kFloat32);
  EXPECT_EQ(F::mse_loss(logits, zeros({4, 3})).dtype(), kFloat32);
  EXPECT_EQ(cat({logits, zeros({1, 3})}).dtype(), kFloat32);
  EXPECT_EQ(stack({logits, zeros({4, 3})}).dtype(), kFloat32);
  // Not on the CPU's lists: the inputs' dtype.
  EXPECT_EQ(softmax(logits, 1).dtype(), kBFloat16);
  EXPECT_EQ(exp(a).dtype(), kFloat32);
  EXPECT_EQ(sum(logits).dtype(), kBFloat16);
  EXPECT_EQ(relu(logits).dtype(), kBFloat16);
  // float64 is never cast.
  EXPECT_EQ(mm(a.to(kFloat64), b.to(kFloat64)).dtype(), kFloat64);
  // Values: the bfloat16 product of the rounded inputs.
  EXPECT_EQ(values(mm(a, b)), values(mm(a.to(kBFloat16), b.to(kBFloat16))));
}

TEST(Autocast, CpuFloat16AndTheListsAsData) {
  auto guard = autocast(kCPU, kHalf);
  EXPECT_EQ(mm(randn({2, 2}), randn({2, 2})).dtype(), kHalf);
  EXPECT_EQ(autocast_policy(OpId::conv2d, DeviceType::cpu), CastPolicy::lower);
  EXPECT_EQ(autocast_policy(OpId::softmax, DeviceType::cpu), CastPolicy::none);
  EXPECT_EQ(autocast_policy(OpId::softmax, DeviceType::cuda), CastPolicy::fp32);
  EXPECT_EQ(autocast_policy(OpId::exp, DeviceType::cuda), CastPolicy::fp32);
  EXPECT_EQ(autocast_policy(OpId::addcmul, DeviceType::cuda), CastPolicy::promote);
  EXPECT_EQ(autocast_policy(OpId::binary_cross_entropy, DeviceType::cuda), CastPolicy::banned);
  EXPECT_EQ(autocast_policy(OpId::binary_cross_entropy, DeviceType::cpu), CastPolicy::fp32);
  EXPECT_EQ(autocast_policy(OpId::linalg_inv, DeviceType::cpu), CastPolicy::fp32);
}

TEST(Autocast, NestingRestoresAndDisabledRegions) {
  Tensor a = randn({3, 3});
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
  {
    auto outer = autocast(kCPU);
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
    {
      auto off = autocast(kCPU, /*enabled=*/false);
      EXPECT_FALSE(is_autocast_enabled(DeviceType::cpu));
      EXPECT_EQ(mm(a, a).dtype(), kFloat32);
      {
        auto half = autocast(kCPU, kHalf);
        EXPECT_EQ(mm(a, a).dtype(), kHalf);
      }
      EXPECT_EQ(mm(a, a).dtype(), kFloat32);
    }
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::cpu));
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
}

TEST(Autocast, StateIsPerThread) {
  auto guard = autocast(kCPU);
  DType other = kFloat64;
  std::thread([&] { other = mm(randn({2, 2}), randn({2, 2})).dtype(); }).join();
  EXPECT_EQ(other, kFloat32);
  EXPECT_EQ(mm(randn({2, 2}), randn({2, 2})).dtype(), kBFloat16);
}

// A weight used twice in a region is cast once (the cache); the gradient reaches the float32 weight
// through both uses; a weight changed in place since its cast is cast again.
TEST(Autocast, WeightCastsAreCachedAndDifferentiable) {
  Tensor w = randn({4, 3}, requires_grad()), x = randn({2, 3});
  Tensor y;
  {
    auto guard = autocast(kCPU);
    Tensor y1 = linear(x, w, Tensor()), y2 = linear(x, w, Tensor());
    EXPECT_EQ(y1.dtype(), kBFloat16);
    y = (y1.to(kFloat32) + y2.to(kFloat32)).sum();
    {
      autograd::NoGradGuard ng;
      w.mul_(2);
    }
    Tensor y3 = linear(x, w, Tensor());
    EXPECT_EQ(values(y3), values(linear(x.to(kBFloat16), w.detach().to(kBFloat16), Tensor())));
  }
  y.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  // d/dw of 2 * sum(x w^T) = 2 * (column sums of x) for every row, in bfloat16's rounding of x.
  Tensor want = (x.to(kBFloat16).to(kFloat32).sum(0) * 2).expand({4, 3});
  EXPECT_TRUE(values_near(values(w.grad()), values(want), 2e-2, 2e-2));
}

// Backward runs with autocast off: gradients have the forward's dtypes, inside a region or not.
TEST(Autocast, BackwardRunsInTheForwardsDtypes) {
  for (bool inside : {false, true}) {
    Tensor w = randn({3, 3}, requires_grad()), x = randn({5, 3}, requires_grad());
    std::optional<AutocastGuard> guard;
    guard.emplace(autocast(kCPU));
    Tensor loss = F::cross_entropy(linear(x, w, Tensor()), tensor(std::vector<int64_t>{0, 1, 2, 0, 1}));
    EXPECT_EQ(loss.dtype(), kFloat32);
    if (!inside) guard.reset();
    loss.backward();
    EXPECT_EQ(w.grad().dtype(), kFloat32);
    EXPECT_EQ(x.grad().dtype(), kFloat32);
  }
}

// A checkpointed segment recomputes under the forward's autocast state, not the engine's.
TEST(Autocast, CheckpointRecomputesUnderTheForwardsState) {
  Tensor w = randn({3, 3}, requires_grad()), x = randn({4, 3});
  Tensor ref_grad;
  for (bool ckpt : {false, true}) {
    w.mutable_grad() = Tensor();
    Tensor y;
    {
      auto guard = autocast(kCPU);
      auto f = [&](const Tensor& in) { return relu(linear(in, w, Tensor())); };
      y = ckpt ? autograd::checkpoint(f, x) : f(x);
      EXPECT_EQ(y.dtype(), kBFloat16);
    }
    y.to(kFloat32).sum().backward();
    if (!ckpt) ref_grad = w.grad().clone();
    else EXPECT_EQ(values(w.grad()), values(ref_grad));
  }
}

TEST(Autocast, ErrorsNameTheFix) {
  EXPECT_TRUE(
      throws_with<ValueError>([] { (void)autocast(kCPU, kFloat32); }, {"autocast", "float32", "kBFloat16", "kHalf"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)autocast(kCPU, kFloat64); }, {"autocast", "float64"}));
}

// A small convolutional classifier trains under autocast: bfloat16 forward, float32 loss and
// gradients, and the loss falls.
TEST(Autocast, ConvNetTrainsUnderBFloat16) {
  manual_seed(0);
  nn::Sequential net(nn::Conv2d(1, 8, 3, nn::Conv2dOptions{.padding = 1}), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                     nn::Linear(8 * 4 * 4, 3));
  optim::SGD opt(net->parameters(), optim::SGDOptions{.lr = 0.1});
  Tensor x = randn({12, 1, 8, 8}), y = randint(0, 3, {12});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      auto guard = autocast(kCPU);
      loss = F::cross_entropy(net->forward(x), y);
    }
    loss.backward();
    for (const Tensor& p : net->parameters()) ASSERT_EQ(p.grad().dtype(), kFloat32);
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.5);
}

}  // namespace
}  // namespace nabla::testing
