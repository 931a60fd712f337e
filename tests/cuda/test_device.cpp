// The device API of core/cuda_api.h: what it answers without a GPU (this suite's first half runs on
// every machine) and with one (the second half skips without a GPU).
#include <cstdlib>
#include <fstream>

#include "core/backend.h"
#include "cuda_test_util.h"
#include "tests/common/run_self.h"

namespace nabla {
namespace {

// ---- every machine ------------------------------------------------------------------------------

// The CUDA backend is a plugin (core/cuda_plugin.cpp): a program that does CPU work and asks whether
// CUDA is there maps none of CUDA's libraries unless a driver made it load the plugin.
TEST(CudaPlugin, ACpuProgramMapsNoCudaLibrary) {
  Tensor y = (randn({64, 64}).matmul(randn({64, 64})) + 1).relu();
  (void)cuda::is_available();
  if (cuda::hooks())
    GTEST_SKIP() << "the CUDA backend is loaded in this process (a driver is installed, or an "
                    "earlier test loaded it): "
                 << cuda::unavailable_reason();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int lines = 0;
  while (std::getline(maps, line)) {
    ++lines;
    for (const char* lib : {"libcudart", "libcublas", "libcudnn", "libnabla_cuda"})
      EXPECT_EQ(line.find(lib), std::string::npos) << line;
  }
  EXPECT_GT(lines, 10);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
}

// Loaded on request even without a driver (as it is on a GPU machine on the first CUDA query): the
// backend registers, and the runtime says why there is no GPU.
TEST(CudaPlugin, LoadsWithoutADriverAndExplainsTheMissingGpu) {
  if (!internal::load_cuda_backend(/*skip_driver_check=*/true)) {
    const std::string why = internal::cuda_backend_missing_reason();
    if (why.find("no CUDA backend") != std::string::npos || why.find("NABLA_DISABLE_CUDA") != std::string::npos)
      GTEST_SKIP() << why;
    FAIL() << "the CUDA plugin did not load: " << why;
  }
  EXPECT_TRUE(has_backend(DeviceType::cuda));
  EXPECT_GT(cuda::runtime_version(), 0);
  EXPECT_GT(cuda::cudnn::version(), 0);
  if (!cuda::is_available()) {
    EXPECT_NE(cuda::unavailable_reason().find("cudaGetDeviceCount"), std::string::npos) << cuda::unavailable_reason();
    EXPECT_THROW(zeros({2}, kCUDA), DeviceError);
  }
  EXPECT_TRUE(internal::load_cuda_backend());  // once loaded, loaded
}

TEST(CudaDevice, AvailabilityIsConsistent) {
  EXPECT_EQ(cuda::is_available(), cuda::device_count() > 0);
  if (cuda::is_available()) {
    EXPECT_TRUE(cuda::unavailable_reason().empty());
  } else {
    EXPECT_FALSE(cuda::unavailable_reason().empty());
    std::printf("CUDA unavailable: %s\n", cuda::unavailable_reason().c_str());
  }
}

// Run by disable_env_forces_cpu with NABLA_DISABLE_CUDA=1. The variable is read once, at the first
// CUDA query: setting it later in the process changes nothing.
TEST(CudaDevice, DISABLED_DisabledByEnvironment) {
  ASSERT_STREQ(std::getenv("NABLA_DISABLE_CUDA"), "1");
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_NE(cuda::unavailable_reason().find("NABLA_DISABLE_CUDA"), std::string::npos);
  EXPECT_THROW(zeros({2}, kCUDA), DeviceError);
  setenv("NABLA_DISABLE_CUDA", "0", 1);
  EXPECT_FALSE(cuda::is_available()) << "NABLA_DISABLE_CUDA must be read once";
  std::printf("checked under NABLA_DISABLE_CUDA=1\n");
}

TEST(CudaDevice, DisableEnvForcesCpu) {
  std::string out = testing::run_self("NABLA_DISABLE_CUDA=1", "CudaDevice.DISABLED_DisabledByEnvironment");
  EXPECT_NE(out.find("checked under NABLA_DISABLE_CUDA=1"), std::string::npos) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

TEST(CudaDevice, MathModeSwitchesRoundTrip) {
  bool tf32 = cuda::allow_tf32(), bench = cuda::cudnn::benchmark(), det = cuda::cudnn::deterministic();
  bool ctf32 = cuda::cudnn::allow_tf32();
  cuda::IndexChecks checks = cuda::index_checks_mode();
  EXPECT_FALSE(tf32) << "TF32 must be off by default";
  EXPECT_FALSE(ctf32) << "cuDNN TF32 must be off by default";
  cuda::set_allow_tf32(true);
  cuda::cudnn::set_benchmark(true);
  cuda::cudnn::set_deterministic(true);
  cuda::cudnn::set_allow_tf32(true);
  cuda::set_index_checks(false);
  EXPECT_TRUE(cuda::allow_tf32());
  EXPECT_TRUE(cuda::cudnn::benchmark());
  EXPECT_TRUE(cuda::cudnn::deterministic());
  EXPECT_TRUE(cuda::cudnn::allow_tf32());
  EXPECT_FALSE(cuda::index_checks());
  EXPECT_EQ(cuda::index_checks_mode(), cuda::IndexChecks::off);
  cuda::set_index_checks(true);  // on means deferred (the default)
  EXPECT_EQ(cuda::index_checks_mode(), cuda::IndexChecks::deferred);
  cuda::set_index_checks(cuda::IndexChecks::immediate);
  EXPECT_TRUE(cuda::index_checks());
  cuda::set_allow_tf32(tf32);
  cuda::cudnn::set_benchmark(bench);
  cuda::cudnn::set_deterministic(det);
  cuda::cudnn::set_allow_tf32(ctf32);
  cuda::set_index_checks(checks);
}

// ---- without a GPU: clear errors, zero statistics, CPU fallbacks ---------------------------------

class CudaDeviceWithoutGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::is_available()) GTEST_SKIP() << "a CUDA GPU is available; these tests check the behaviour without one";
  }
};

TEST_F(CudaDeviceWithoutGpu, CudaTensorsAreADeviceErrorNamingTheReason) {
  try {
    Tensor t = zeros({2, 3}, kCUDA);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not available"), std::string::npos) << msg;
  }
  EXPECT_THROW(ones({2}).cuda(), DeviceError);
  EXPECT_THROW(ones({2}).to(Device("cuda:1")), DeviceError);
}

TEST_F(CudaDeviceWithoutGpu, QueriesThatNeedAGpuThrowDeviceError) {
  EXPECT_THROW(cuda::current_device(), DeviceError);
  EXPECT_THROW(cuda::set_device(0), DeviceError);
  EXPECT_THROW(cuda::synchronize(), DeviceError);
  EXPECT_THROW(cuda::get_device_properties(), DeviceError);
  EXPECT_THROW(cuda::mem_get_info(), DeviceError);
  EXPECT_THROW(cuda::new_stream(), DeviceError);
  EXPECT_THROW(cuda::default_stream(), DeviceError);
  cuda::Event e;
  EXPECT_THROW(e.record(), DeviceError);
  EXPECT_TRUE(e.query());  // never recorded: nothing to wait for
  try {
    cuda::current_device();
  } catch (const DeviceError& err) {
    EXPECT_NE(std::string(err.what()).find("cuda::current_device"), std::string::npos) << err.what();
  }
}

TEST_F(CudaDeviceWithoutGpu, StatisticsAreZeroAndEmptyCacheIsHarmless) {
  EXPECT_EQ(cuda::memory_allocated(), 0u);
  EXPECT_EQ(cuda::memory_reserved(), 0u);
  EXPECT_EQ(cuda::max_memory_allocated(), 0u);
  cuda::empty_cache();
  cuda::reset_peak_memory_stats();
}

TEST_F(CudaDeviceWithoutGpu, PinMemoryFallsBackToAPlainCopy) {
  Tensor x = arange(6, kFloat32).view({2, 3});
  Tensor p = x.pin_memory();
  EXPECT_FALSE(p.is_pinned());
  EXPECT_TRUE(equal(p, x));
  Tensor q = empty({4}, TensorOptions().pinned_memory(true));
  EXPECT_FALSE(q.is_pinned());
}

TEST_F(CudaDeviceWithoutGpu, TheBackendIsCompiledInOrAbsentCleanly) {
  if (has_backend(DeviceType::cuda)) {
    std::printf("CUDA backend compiled in (runtime %d, cuDNN %d); no GPU: %s\n", cuda::runtime_version(),
                cuda::cudnn::version(), cuda::unavailable_reason().c_str());
    EXPECT_GT(cuda::cudnn::version(), 0);
  } else {  // no CUDA in this build, or no driver to load the plugin for
    EXPECT_EQ(cuda::runtime_version(), 0);
    const std::string why = cuda::unavailable_reason();
    EXPECT_TRUE(why.find("no CUDA backend") != std::string::npos || why.find("no NVIDIA driver") != std::string::npos)
        << why;
  }
  EXPECT_FALSE(cuda::cudnn::is_available());
}

// ---- with a GPU -----------------------------------------------------------------------------------

TEST(CudaDeviceGpu, PropertiesAndMemoryInfo) {
  NABLA_REQUIRE_CUDA();
  cuda::DeviceProperties p = cuda::get_device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(cuda::get_device_name(0), p.name);
  EXPECT_GT(p.total_memory, size_t(1) << 30);
  EXPECT_GE(p.major, 7);
  EXPECT_GT(p.multiprocessor_count, 0);
  cuda::MemInfo m = cuda::mem_get_info();
  EXPECT_GT(m.total_bytes, 0u);
  EXPECT_LE(m.free_bytes, m.total_bytes);
  EXPECT_GT(cuda::runtime_version(), 0);
  EXPECT_GT(cuda::driver_version(), 0);
  EXPECT_GT(cuda::cudnn::version(), 0);
  EXPECT_TRUE(cuda::cudnn::is_available());
  std::printf("%s: %d SMs, sm_%d%d, %.1f GiB; runtime %d, driver %d, cuDNN %d\n", p.name.c_str(),
              p.multiprocessor_count, p.major, p.minor, double(p.total_memory) / (1 << 30), cuda::runtime_version(),
              cuda::driver_version(), cuda::cudnn::version());
}

TEST(CudaDeviceGpu, SetDeviceAndGuards) {
  NABLA_REQUIRE_CUDA();
  EXPECT_EQ(cuda::current_device(), 0);
  cuda::set_device(0);
  {
    cuda::DeviceGuard g(0);
    EXPECT_EQ(cuda::current_device(), 0);
  }
  EXPECT_THROW(cuda::set_device(cuda::device_count()), DeviceError);
  EXPECT_THROW(cuda::set_device(-1), DeviceError);
  cuda::synchronize();
  cuda::synchronize(0);
}

TEST(CudaDeviceGpu, TensorsLiveOnTheGpu) {
  NABLA_REQUIRE_CUDA();
  Tensor x = ones({2, 3}, kCUDA);
  EXPECT_TRUE(x.is_cuda());
  EXPECT_EQ(x.device(), Device::cuda(0));
  EXPECT_EQ(x.sum().item<double>(), 6.0);
  std::string s = x.str();
  EXPECT_NE(s.find("cuda:0"), std::string::npos) << s;
  // Ops between a CUDA tensor and a CPU tensor with dims are a DeviceError naming both.
  EXPECT_THROW(x + ones({2, 3}), DeviceError);
  // A 0-dim CPU tensor joins a CUDA tensor, as in PyTorch.
  Tensor y = x * scalar_tensor(2.0);
  EXPECT_TRUE(y.is_cuda());
  EXPECT_EQ(y.sum().item<double>(), 12.0);
}

}  // namespace
}  // namespace nabla
