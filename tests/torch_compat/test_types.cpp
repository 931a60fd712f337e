// torch:: types, macros and the ATen free functions, by value.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "tests/common/value_helpers.h"

TEST(TorchTypes, DeviceTypeConstantsConvertToDevices) {
  torch::DeviceType t = torch::kCUDA;
  torch::Device d(t);
  EXPECT_TRUE(d.is_cuda());
  torch::Device cpu = torch::kCPU;
  EXPECT_TRUE(cpu.is_cpu());
  torch::Tensor x = torch::zeros({2}, torch::device(torch::kCPU).dtype(torch::kFloat64));
  EXPECT_EQ(x.dtype(), torch::kDouble);
}
