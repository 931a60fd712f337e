// Streams and events: current streams per thread, StreamGuard, cross-stream ordering with events,
// timing.
#include <thread>

#include "cuda_test_util.h"

namespace nabla {
namespace {

TEST(CudaStreams, CurrentStreamAndGuard) {
  NABLA_REQUIRE_CUDA();
  cuda::Stream def = cuda::default_stream();
  EXPECT_EQ(def.handle(), nullptr);
  EXPECT_TRUE(cuda::current_stream() == def);
  cuda::Stream s = cuda::new_stream();
  EXPECT_NE(s.handle(), nullptr);
  EXPECT_EQ(s.device(), Device::cuda(0));
  {
    cuda::StreamGuard g(s);
    EXPECT_TRUE(cuda::current_stream() == s);
    Tensor x = ones({1000}, kCUDA) * 2;  // queued on s
    EXPECT_EQ(x.sum().item<double>(), 2000.0);
  }
  EXPECT_TRUE(cuda::current_stream() == def);
  cuda::set_current_stream(s);
  EXPECT_TRUE(cuda::current_stream() == s);
  cuda::set_current_stream(def);
  // Current streams are per thread.
  cuda::StreamGuard g(s);
  std::thread t([&] { EXPECT_TRUE(cuda::current_stream() == cuda::default_stream()); });
  t.join();
}

TEST(CudaStreams, EventsOrderWorkAcrossStreams) {
  NABLA_REQUIRE_CUDA();
  cuda::Stream producer = cuda::new_stream(), consumer = cuda::new_stream();
  Tensor x;
  cuda::Event ready;
  {
    cuda::StreamGuard g(producer);
    x = randn({1 << 20}, kCUDA);
    for (int i = 0; i < 10; ++i) x = x * 1.0001 + 0.5;
    ready.record();
  }
  Tensor y;
  {
    cuda::StreamGuard g(consumer);
    consumer.wait(ready);
    y = x.sum();
    cuda::record_stream(x, consumer);
  }
  consumer.synchronize();
  EXPECT_TRUE(ready.query());
  producer.synchronize();  // pool streams do not synchronize with the default stream
  Tensor expected = x.sum();
  EXPECT_NEAR(y.item<double>(), expected.item<double>(), 1e-2 * std::abs(expected.item<double>()) + 1e-3);
}

TEST(CudaStreams, EventTiming) {
  NABLA_REQUIRE_CUDA();
  cuda::Event start(true), end(true);
  start.record();
  Tensor a = randn({512, 512}, kCUDA);
  for (int i = 0; i < 5; ++i) a = mm(a, a) * 0.01;
  end.record();
  end.synchronize();
  EXPECT_TRUE(end.query());
  float ms = start.elapsed_time(end);
  EXPECT_GE(ms, 0.0f);
  cuda::Event untimed;
  untimed.record();
  EXPECT_THROW(untimed.elapsed_time(end), ValueError);
}

TEST(CudaStreams, StreamQueryAndSynchronize) {
  NABLA_REQUIRE_CUDA();
  cuda::Stream s = cuda::new_stream(-1, /*high_priority=*/true);
  {
    cuda::StreamGuard g(s);
    Tensor a = randn({1024, 1024}, kCUDA);
    Tensor b = mm(a, a);
  }
  s.synchronize();
  EXPECT_TRUE(s.query());
}

}  // namespace
}  // namespace nabla
