// nabla::autocast on CUDA tensors (core/autocast.h): the lists of CUDA, float16 by default, on a
// GPU. (tests/ops/test_autocast_ops.cpp checks every op of these lists on CPU tensors; this suite
// checks that the casts, the 16-bit products and the float32 list run on the device.)
#include "cuda_test_util.h"
#include "tests/common/value_helpers.h"

namespace nabla {
namespace {
namespace F = nn::functional;

TEST(CudaAutocast, ListsOnTheGpu) {
  NABLA_REQUIRE_CUDA();
  Tensor a = randn({8, 16}).to(kCUDA), b = randn({16, 4}).to(kCUDA);
  Tensor w = randn({4, 16}).to(kCUDA).requires_grad_();
  Tensor ref = mm(a, b);
  Tensor y, loss;
  {
    auto guard = autocast(kCUDA);
    EXPECT_EQ(autocast_dtype(DeviceType::cuda), kHalf);
    EXPECT_FALSE(is_autocast_enabled(DeviceType::cpu));
    y = mm(a, b);
    EXPECT_EQ(y.dtype(), kHalf);
    EXPECT_EQ(y.device(), a.device());
    EXPECT_TRUE(testing::close_on_host(y, ref, 2e-2));
    Tensor logits = linear(a, w, Tensor());
    EXPECT_EQ(logits.dtype(), kHalf);
    EXPECT_EQ(softmax(logits, 1).dtype(), kFloat32);  // CUDA's float32 list
    EXPECT_EQ(exp(logits).dtype(), kFloat32);
    EXPECT_EQ(mm(a.cpu(), b.cpu()).dtype(), kFloat32);  // CPU tensors: the CPU has no region open
    loss = F::cross_entropy(logits, tensor(std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}).to(kCUDA));
    EXPECT_EQ(loss.dtype(), kFloat32);
    EXPECT_TRUE(testing::throws_with<ValueError>(
        [&] { (void)F::binary_cross_entropy(rand({4}).to(kCUDA), rand({4}).to(kCUDA)); },
        {"binary_cross_entropy", "unsafe to autocast", "binary_cross_entropy_with_logits"}));
  }
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(w.grad().device(), w.device());
}

TEST(CudaAutocast, BFloat16Products) {
  NABLA_REQUIRE_CUDA();
  Tensor x = randn({2, 3, 8, 8}).to(kCUDA), k = randn({4, 3, 3, 3}).to(kCUDA);
  Tensor ref = conv2d(x, k);
  auto guard = autocast(kCUDA, kBFloat16);
  Tensor y = conv2d(x, k);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(testing::close_on_host(y, ref, 5e-2));
}

}  // namespace
}  // namespace nabla
