// float16 and bfloat16 on the device: the conversion instructions core/dtype.h uses under
// __CUDA_ARCH__ against the host conversions (which test_half_conversions.cpp checks exhaustively
// against independent references), and the native 16-bit atomics of cuda/block.cuh.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "cuda_test_util.h"

namespace nabla {
namespace {

bool half_nan(uint16_t h, DType dt) {
  return dt == kFloat16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

TEST(CudaHalf, Every16BitPatternConvertsToFloatAsOnTheCpu) {
  NABLA_REQUIRE_CUDA();
  std::vector<uint16_t> bits(65536);
  std::iota(bits.begin(), bits.end(), uint16_t(0));
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor h = from_blob(bits.data(), {65536}, TensorOptions().dtype(dt));
    Tensor dev = h.to(kCUDA).to(kFloat32).cpu().contiguous();
    Tensor host = h.to(kFloat32).contiguous();
    const float* d = dev.data_ptr<float>();
    const float* c = host.data_ptr<float>();
    for (int i = 0; i < 65536; ++i) {
      if (half_nan(uint16_t(i), dt)) {
        ASSERT_TRUE(std::isnan(d[i])) << dt << " " << std::hex << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(d + i, c + i, 4), 0)
          << dt << " " << std::hex << i << ": device " << d[i] << ", host " << c[i];
    }
  }
}

// All 2^32 float bit patterns, in chunks of 2^26, to float16 and bfloat16 on the device and on the
// host: the same bits, except NaN (canonical 0x7fff on the device, as in PyTorch's CUDA code).
TEST(CudaHalf, EveryFloatConvertsAsOnTheCpu) {
  NABLA_REQUIRE_CUDA();
  constexpr int64_t kChunk = int64_t(1) << 26;
  std::vector<uint32_t> bits(kChunk);
  int64_t mismatches = 0, nans = 0;
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += kChunk) {
    for (int64_t i = 0; i < kChunk; ++i) bits[i] = uint32_t(base + uint64_t(i));
    Tensor f = from_blob(bits.data(), {kChunk}, TensorOptions().dtype(kFloat32));
    Tensor fd = f.to(kCUDA);
    for (DType dt : {kFloat16, kBFloat16}) {
      Tensor dev = fd.to(dt).cpu().contiguous();
      Tensor host = f.to(dt).contiguous();
      const auto* d = static_cast<const uint16_t*>(dev.data_ptr());
      const auto* c = static_cast<const uint16_t*>(host.data_ptr());
      if (std::memcmp(d, c, size_t(kChunk) * 2) == 0) continue;
      for (int64_t i = 0; i < kChunk; ++i) {
        if (d[i] == c[i]) continue;
        if (half_nan(d[i], dt) && half_nan(c[i], dt)) {
          ++nans;
          continue;
        }
        if (++mismatches <= 5)
          ADD_FAILURE() << dt << ": float bits " << std::hex << bits[i] << " give " << d[i] << " on the device, "
                        << c[i] << " on the host";
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(nans, 0);  // the NaN patterns did differ in their bits, and only they
}

// index_add with many indices on few rows: the native 16-bit atomics. Every partial sum is exact in
// its dtype (multiples of 0.25 up to 250 in float16, of 0.5 up to 100 in bfloat16), so the result
// is exact whatever the order.
TEST(CudaHalf, AtomicAddsOf16BitFloatsAreExactWhereTheSumsAre) {
  NABLA_REQUIRE_CUDA();
  struct Case {
    DType dt;
    int64_t n;
    double v, want;
  };
  for (Case c : {Case{kFloat16, 4000, 0.25, 250.0}, Case{kBFloat16, 800, 0.5, 100.0}}) {
    Tensor idx = remainder(arange(c.n, kInt64), 4).to(kCUDA);
    Tensor src = full({c.n, 3}, c.v, TensorOptions().dtype(c.dt).device(kCUDA));
    Tensor out = index_add(zeros({4, 3}, TensorOptions().dtype(c.dt).device(kCUDA)), 0, idx, src);
    EXPECT_TRUE(equal(out.to(kCPU, kFloat64), full({4, 3}, c.want, TensorOptions().dtype(kFloat64)))) << c.dt << "\n"
                                                                                                      << out.cpu();
  }
}

}  // namespace
}  // namespace nabla
