// Copies between the host and the GPU: every dtype, non-contiguous and broadcast views, dtype
// conversion on the way, copy_ into views, pinned buffers and non_blocking copies.
#include "cuda_test_util.h"

namespace nabla {
namespace {

using testing::close_on_host;

TEST(CudaCopy, RoundTripEveryDtype) {
  NABLA_REQUIRE_CUDA();
  Tensor base = (arange(24, kFloat64) - 7.5).view({2, 3, 4});
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kUInt8, kBool, kFloat16, kBFloat16}) {
    Tensor h = base.to(dt);
    Tensor d = h.to(kCUDA);
    EXPECT_EQ(d.dtype(), dt);
    EXPECT_TRUE(d.is_cuda());
    Tensor back = d.cpu();
    EXPECT_TRUE(equal(back, h)) << dtype_name(dt);
  }
}

TEST(CudaCopy, NonContiguousViewsBothWays) {
  NABLA_REQUIRE_CUDA();
  Tensor h = arange(60, kFloat32).view({3, 4, 5});
  Tensor d = h.cuda();
  // Device -> host from strided views.
  EXPECT_TRUE(equal(d.transpose(0, 2).cpu(), h.transpose(0, 2)));
  EXPECT_TRUE(equal(d.slice(2, 1, std::nullopt, 2).cpu(), h.slice(2, 1, std::nullopt, 2)));
  EXPECT_TRUE(equal(d.select(1, 2).cpu(), h.select(1, 2)));
  EXPECT_TRUE(equal(d.narrow(0, 1, 2).permute({2, 0, 1}).cpu(), h.narrow(0, 1, 2).permute({2, 0, 1})));
  EXPECT_TRUE(equal(d.diagonal(0, 1, 2).cpu(), h.diagonal(0, 1, 2)));
  // Host -> device from strided views.
  EXPECT_TRUE(equal(h.transpose(0, 1).cuda().cpu(), h.transpose(0, 1)));
  EXPECT_TRUE(equal(h.slice(1, 0, std::nullopt, 3).cuda().cpu(), h.slice(1, 0, std::nullopt, 3)));
  // Broadcast views carry only their distinct values across, then expand on the device.
  Tensor row = arange(5, kFloat32);
  EXPECT_TRUE(equal(row.expand({4, 5}).cuda().cpu(), row.expand({4, 5})));
  EXPECT_TRUE(equal(d.select(0, 0).select(0, 0).expand({3, 5}).cpu(), h[0][0].expand({3, 5})));
  // Device -> device strided (contiguous()).
  EXPECT_TRUE(equal(d.transpose(1, 2).contiguous().cpu(), h.transpose(1, 2).contiguous()));
}

TEST(CudaCopy, DtypeConversionWithTheCpuSemantics) {
  NABLA_REQUIRE_CUDA();
  Tensor f = tensor({-2.7, -0.5, 0.0, 0.4, 1.5, 300.0, 1e10, -1e10}, kFloat64);
  for (DType dt : {kFloat32, kInt64, kInt32, kUInt8, kBool, kFloat16, kBFloat16}) {
    Tensor on_gpu = f.cuda().to(dt).cpu();  // converted on the device
    Tensor on_cpu = f.to(dt);
    EXPECT_TRUE(equal(on_gpu, on_cpu)) << dtype_name(dt) << "\n" << on_gpu << "\n" << on_cpu;
    Tensor direct = f.to(kCUDA, dt).cpu();  // converted during the transfer
    EXPECT_TRUE(equal(direct, on_cpu)) << dtype_name(dt);
  }
  Tensor nan = tensor({std::nan(""), 1.0}, kFloat32);
  EXPECT_TRUE(equal(nan.cuda().to(kInt32).cpu(), nan.to(kInt32)));
}

TEST(CudaCopy, CopyIntoViewsAcrossDevices) {
  NABLA_REQUIRE_CUDA();
  Tensor d = zeros({4, 6}, kCUDA);
  Tensor src = arange(12, kFloat32).view({3, 4});
  d.slice(0, 1).slice(1, 1, 5).copy_(src);  // host -> strided device view
  Tensor want = zeros({4, 6});
  want.slice(0, 1).slice(1, 1, 5).copy_(src);
  EXPECT_TRUE(equal(d.cpu(), want));
  Tensor h = zeros({6, 4});
  h.t().copy_(d);  // device -> strided host view
  EXPECT_TRUE(equal(h.t(), want));
  Tensor d2 = zeros({4, 6}, dtype(kFloat64).device(kCUDA));
  d2.copy_(d.to(kInt64));  // device -> device with conversion
  EXPECT_TRUE(equal(d2.cpu(), want.to(kFloat64)));
  // Broadcasting copy_.
  Tensor b = zeros({3, 4}, kCUDA);
  b.copy_(arange(4, kFloat32));
  EXPECT_TRUE(equal(b.cpu(), arange(4, kFloat32).expand({3, 4})));
}

TEST(CudaCopy, PinnedNonBlockingCopiesAreRightAfterSynchronization) {
  NABLA_REQUIRE_CUDA();
  Tensor h = randn({1 << 20}).pin_memory();
  Tensor d = h.to(kCUDA, /*non_blocking=*/true);
  Tensor y = d * 2;
  Tensor back = empty({1 << 20}, TensorOptions().pinned_memory(true));
  back.copy_(y);  // copy_ is blocking: values are there on return
  EXPECT_TRUE(close_on_host(back, h * 2, 0));
  // non_blocking device -> host lands in pinned memory: wait on the stream, then read.
  Tensor out = y.to(kCPU, /*non_blocking=*/true);
  EXPECT_TRUE(out.is_pinned());
  cuda::current_stream().synchronize();
  EXPECT_TRUE(close_on_host(out, h * 2, 0));
  // The pinned source may be freed right after a non_blocking upload: the allocator waits for the
  // copy before reusing it.
  for (int i = 0; i < 10; ++i) {
    Tensor src = full({1 << 18}, static_cast<double>(i)).pin_memory();
    Tensor dv = src.to(kCUDA, true);
    src = Tensor();
    Tensor other = full({1 << 18}, -1.0).pin_memory();  // may get the same pinned block back
    EXPECT_EQ(dv.sum().item<double>(), static_cast<double>(i) * (1 << 18));
  }
}

TEST(CudaCopy, ItemAndPrintingReadBackSynchronously) {
  NABLA_REQUIRE_CUDA();
  Tensor x = arange(10, dtype(kFloat32).device(kCUDA));
  EXPECT_EQ(x.sum().item<float>(), 45.0f);
  EXPECT_EQ(x[3].item<int>(), 3);
  EXPECT_NE(x.str().find("device='cuda:0'"), std::string::npos);
}

TEST(CudaCopy, LargeTransferAndScalarTensors) {
  NABLA_REQUIRE_CUDA();
  Tensor big = arange(1 << 24, kFloat32);
  Tensor back = big.cuda().cpu();
  EXPECT_TRUE(equal(back, big));
  Tensor s = scalar_tensor(3.5).cuda();
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 3.5);
}

}  // namespace
}  // namespace nabla
