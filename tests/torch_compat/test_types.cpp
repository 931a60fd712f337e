// torch:: types, the check macros and the ATen free functions, by value.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "tests/common/value_helpers.h"

using nabla::testing::tensor_is;
using nabla::testing::throws_with;

TEST(TorchTypes, DeviceTypeConstantsConvertToDevices) {
  torch::DeviceType t = torch::kCUDA;
  torch::Device d(t);
  EXPECT_TRUE(d.is_cuda());
  torch::Device cpu = torch::kCPU;
  EXPECT_TRUE(cpu.is_cpu());
  torch::Tensor x = torch::zeros({2}, torch::device(torch::kCPU).dtype(torch::kFloat64));
  EXPECT_EQ(x.dtype(), torch::kDouble);
  EXPECT_EQ(torch::cuda::is_available(), nabla::cuda::is_available());
  EXPECT_TRUE(x.to(torch::kCPU).is_cpu());
  EXPECT_TRUE(t == torch::kCUDA);
  EXPECT_FALSE(torch::kCPU == t);
  auto name = [](torch::DeviceType type) {
    switch (type) {
      case torch::kCPU: return "cpu";
      case torch::kCUDA: return "cuda";
    }
    return "?";
  };
  EXPECT_STREQ(name(torch::kCUDA), "cuda");
  EXPECT_EQ(torch::Device(torch::kCUDA), torch::Device("cuda:0"));
  using namespace torch::indexing;
  torch::Tensor m = torch::arange(6, torch::kFloat32).view({2, 3});
  EXPECT_TRUE(tensor_is(m.index({1, Slice(None, 2)}), {2}, {3, 4}));
}

TEST(TorchTypes, TorchCheckThrowsWithLibtorchsMessages) {
  auto fail_with_message = [] { TORCH_CHECK(1 + 1 == 3, "arithmetic: ", 2, " != ", 3); };
  EXPECT_TRUE(throws_with<c10::Error>(fail_with_message, {"arithmetic: 2 != 3"}));
  auto fail_bare = [] { TORCH_CHECK(false); };
  EXPECT_TRUE(throws_with<nabla::Error>(fail_bare, {"Expected false to be true, but got false."}));
  auto fail_assert = [] { AT_ASSERT(2 < 1); };
  EXPECT_TRUE(throws_with<nabla::Error>(fail_assert, {"INTERNAL ASSERT FAILED", "2 < 1"}));
  int evaluated = 0;
  TORCH_CHECK(true, "never built ", ++evaluated);
  EXPECT_EQ(evaluated, 0);
}

TEST(TorchFunctions, LossesTakeAtenReductionCodes) {
  torch::Tensor logp = torch::log_softmax(torch::tensor({{1.0, 2.0, 3.0}, {1.0, 0.0, -1.0}}), 1);
  torch::Tensor target = torch::tensor({2, 0});
  double mean = torch::nll_loss(logp, target).item<double>();
  double sum = torch::nll_loss(logp, target, {}, torch::Reduction::Sum).item<double>();
  EXPECT_NEAR(sum, 2 * mean, 1e-6);
  EXPECT_NEAR(sum, -(logp[0][2].item<double>() + logp[1][0].item<double>()), 1e-6);
  EXPECT_TRUE(tensor_is(torch::nll_loss(logp, target, {}, at::Reduction::None), {2},
                        {-logp[0][2].item<double>(), -logp[1][0].item<double>()}, 1e-6));
  EXPECT_TRUE(throws_with<nabla::ValueError>([&] { torch::nll_loss(logp, target, {}, 7); },
                                             {"torch::nll_loss", "reduction 7"}));

  torch::Tensor a = torch::tensor({0.0, 1.0, 4.0}), b = torch::tensor({0.5, 1.0, 1.0});
  EXPECT_NEAR(torch::mse_loss(a, b).item<double>(), (0.25 + 0 + 9) / 3, 1e-6);
  EXPECT_NEAR(torch::mse_loss(a, b, torch::Reduction::Sum).item<double>(), 9.25, 1e-6);
  // smooth_l1 with beta 1: 0.5 d^2 where |d| < 1, |d| - 0.5 elsewhere.
  EXPECT_NEAR(torch::smooth_l1_loss(a, b, torch::Reduction::Sum).item<double>(), 0.125 + 0 + 2.5, 1e-6);
  EXPECT_NEAR(torch::smooth_l1_loss(a, b, torch::Reduction::Sum, 4.0).item<double>(), 0.5 * 0.25 / 4 + 0.5 * 9 / 4,
              1e-6);
  torch::Tensor p = torch::tensor({0.25, 0.5}), y = torch::tensor({1.0, 0.0});
  EXPECT_NEAR(torch::binary_cross_entropy(p, y, {}, torch::Reduction::Sum).item<double>(),
              -(std::log(0.25) + std::log(0.5)), 1e-6);
  EXPECT_NEAR(torch::cross_entropy_loss(torch::tensor({{0.0, 0.0}}), torch::tensor({1})).item<double>(), std::log(2.0),
              1e-6);
}

TEST(TorchFunctions, DropoutAndCreationFollowAten) {
  torch::Tensor x = torch::ones({4, 5});
  EXPECT_TRUE(torch::equal(torch::dropout(x, 0.5, /*train=*/false), x));
  torch::manual_seed(3);
  torch::Tensor d = torch::dropout(x, 0.5, /*train=*/true);
  for (double v : nabla::testing::values(d)) EXPECT_TRUE(v == 0.0 || v == 2.0);
  EXPECT_TRUE(tensor_is(torch::arange(1, 4, torch::kFloat64), {3}, {1, 2, 3}));
  EXPECT_EQ(torch::arange(1, 4, torch::kFloat64).dtype(), torch::kFloat64);
  EXPECT_TRUE(tensor_is(torch::log_softmax(torch::tensor({0.0, 0.0}), 0, torch::kFloat64), {2},
                        {std::log(0.5), std::log(0.5)}));
  EXPECT_EQ(torch::log_softmax(torch::tensor({0.0, 0.0}), 0, torch::kFloat64).dtype(), torch::kFloat64);
  EXPECT_TRUE(tensor_is(torch::max_pool2d(torch::arange(16, torch::kFloat32).view({1, 1, 4, 4}), 2), {1, 1, 2, 2},
                        {5, 7, 13, 15}));
  EXPECT_TRUE(tensor_is(torch::cat({torch::ones({1}), torch::zeros({2})}), {3}, {1, 0, 0}));
}

TEST(TorchTypes, ArrayRefTakesOneValueAListOrAVector) {
  auto sum = [](torch::ArrayRef<double> v) {
    double s = 0;
    for (double x : v) s += x;
    return s * 10 + static_cast<double>(v.size());
  };
  EXPECT_EQ(sum(2.0), 21.0);
  EXPECT_EQ(sum({1.0, 2.0}), 32.0);
  EXPECT_EQ(sum(std::vector<double>{1, 1, 1}), 33.0);
}
