// The CUDA caching allocator: reuse without cudaMalloc, statistics, empty_cache, out-of-memory
// errors after which smaller allocations still work, record_stream, pinned host memory.
#include "cuda_test_util.h"

namespace nabla {
namespace {

TEST(CudaAllocator, FreedBlocksAreReusedWithoutCudamalloc) {
  NABLA_REQUIRE_CUDA();
  cuda::synchronize();
  { Tensor warm = empty({1000, 257}, kCUDA); }  // the bucket is now cached
  uint64_t before = cuda::memory_stats().device_allocs;
  for (int i = 0; i < 20; ++i) {
    Tensor t = empty({1000, 257}, kCUDA);
    t.fill_(1);
  }
  EXPECT_EQ(cuda::memory_stats().device_allocs, before) << "steady-state allocations must come from the cache";
}

TEST(CudaAllocator, AllocatedAndReservedBytes) {
  NABLA_REQUIRE_CUDA();
  size_t a0 = cuda::memory_allocated();
  size_t peak0 = cuda::max_memory_allocated();
  (void)peak0;
  {
    Tensor t = empty({1 << 20}, kCUDA);  // 4 MiB
    size_t a1 = cuda::memory_allocated();
    EXPECT_GE(a1 - a0, size_t(4) << 20);
    EXPECT_LE(a1 - a0, size_t(5) << 20);  // rounding stays modest
    EXPECT_GE(cuda::memory_reserved(), a1);
    EXPECT_GE(cuda::max_memory_allocated(), a1);
  }
  EXPECT_EQ(cuda::memory_allocated(), a0);
  EXPECT_GE(cuda::memory_reserved(), a0 + (size_t(4) << 20));  // cached, not freed
  size_t cached_before = cuda::memory_reserved() - cuda::memory_allocated();
  cuda::empty_cache();
  size_t cached_after = cuda::memory_reserved() - cuda::memory_allocated();
  // Segments that hold a live block stay (cuda/caching_allocator.h); the rest went back.
  EXPECT_LE(cached_after, cached_before);
  if (a0 == 0) EXPECT_EQ(cached_after, 0u);
  cuda::reset_peak_memory_stats();
  EXPECT_EQ(cuda::max_memory_allocated(), cuda::memory_allocated());
}

TEST(CudaAllocator, OutOfMemoryIsAnErrorAndSmallerAllocationsStillWork) {
  NABLA_REQUIRE_CUDA();
  cuda::MemInfo m = cuda::mem_get_info();
  int64_t too_many = static_cast<int64_t>(m.total_bytes / 4) * 2;  // twice the device's memory, in floats
  uint64_t ooms = cuda::memory_stats().num_ooms;
  try {
    Tensor t = empty({too_many}, kCUDA);
    FAIL() << "expected CudaOutOfMemory";
  } catch (const CudaOutOfMemory& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tried to allocate"), std::string::npos) << msg;
    EXPECT_NE(msg.find("free"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(too_many * 4)), std::string::npos) << msg;  // the requested bytes
  }
  EXPECT_EQ(cuda::memory_stats().num_ooms, ooms + 1);
  // A CudaOutOfMemory is a CudaError.
  EXPECT_THROW(empty({too_many}, kCUDA), CudaError);
  // The device is fine afterwards: allocate, compute, read back.
  Tensor x = ones({1000}, kCUDA);
  EXPECT_EQ((x * 2).sum().item<double>(), 2000.0);
}

TEST(CudaAllocator, RecordStreamDelaysReuseUntilTheOtherStreamIsDone) {
  NABLA_REQUIRE_CUDA();
  cuda::Stream side = cuda::new_stream();
  Tensor x = ones({1 << 16}, kCUDA);
  cuda::Event filled;
  filled.record();  // x's fill, on the current stream: the side stream does not wait for it by itself
  Tensor y;
  {
    cuda::StreamGuard g(side);
    side.wait(filled);
    y = x * 3;  // reads x on the side stream
  }
  cuda::record_stream(x, side);
  void* p = x.data_ptr();
  x = Tensor();  // freed while the side stream may still read it
  Tensor z = empty({1 << 16}, kCUDA);
  // Until the side stream's work completes, the block is not handed out again. Afterwards the
  // result must be right either way.
  side.synchronize();
  (void)p;
  EXPECT_EQ(y.sum().item<double>(), 3.0 * (1 << 16));
}

TEST(CudaAllocator, PinnedMemory) {
  NABLA_REQUIRE_CUDA();
  Tensor x = arange(1000, kFloat32);
  Tensor p = x.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.is_cpu());
  EXPECT_TRUE(equal(p, x));
  EXPECT_TRUE(p.pin_memory().is_same(p));
  Tensor q = empty({16}, TensorOptions().pinned_memory(true));
  EXPECT_TRUE(q.is_pinned());
  EXPECT_GT(cuda::memory_stats().pinned_reserved_bytes, 0u);
  EXPECT_THROW(ones({2}, kCUDA).pin_memory(), DeviceError);
}

TEST(CudaAllocator, EmptyTensorsNeedNoMemory) {
  NABLA_REQUIRE_CUDA();
  Tensor e = empty({0, 5}, kCUDA);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.sum().item<double>(), 0.0);
  EXPECT_EQ(e.cpu().numel(), 0);
}

}  // namespace
}  // namespace nabla
