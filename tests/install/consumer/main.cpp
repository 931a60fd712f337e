// Trains y = 2x + 1 with an installed nabla: checks headers, linking and autograd end to end.
#include <core/backend.h>  // has_backend (scripts/check-static.sh)
#include <nabla.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// A custom Function from <nabla.h> alone, with libtorch's one gradient per argument.
struct Triple : nabla::autograd::Function<Triple> {
  static nabla::Tensor forward(nabla::autograd::Context&, const nabla::Tensor& x, double) { return x * 3; }
  static nabla::autograd::GradList backward(nabla::autograd::Context&, nabla::autograd::GradList g) {
    return {g[0] * 3, nabla::Tensor()};
  }
};

int check_old_include_paths();  // old_paths.cpp

int main() {
  using namespace nabla;
  if (check_old_include_paths() != 0) {
    std::printf("FAILED: the old include paths do not reach the moved functions\n");
    return 1;
  }
  {
    Tensor x = ones({2}, requires_grad());
    Triple::apply(x, 1.0).sum().backward();
    if (std::fabs(x.grad()[0].item<double>() - 3) > 1e-12) {
      std::printf("FAILED: the custom Function's gradient is %f\n", x.grad()[0].item<double>());
      return 1;
    }
  }
  manual_seed(0);
  Tensor x = linspace(-1, 1, 16).unsqueeze(1);
  Tensor y = x * 2 + 1;
  Tensor w = zeros({1, 1}, requires_grad()), b = zeros({1}, requires_grad());
  for (int step = 0; step < 300; ++step) {
    Tensor loss = (linear(x, w, b) - y).square().mean();
    loss.backward();
    autograd::NoGradGuard ng;
    w.sub_(w.grad() * 0.3);
    b.sub_(b.grad() * 0.3);
    w.zero_grad();
    b.zero_grad();
  }
  double wv = w.item<double>(), bv = b.item<double>();
  if (std::fabs(wv - 2) > 1e-3 || std::fabs(bv - 1) > 1e-3) {
    std::printf("FAILED: w=%f b=%f\n", wv, bv);
    return 1;
  }
  std::printf("ok: w=%.4f b=%.4f\n", wv, bv);
  // scripts/check-static.sh: a static libnabla built with CUDA must bring its CUDA backend along
  // (registered even without a GPU; is_available() then says why there is no device).
  if (const char* e = std::getenv("NABLA_CONSUMER_EXPECT_CUDA"); e && std::strcmp(e, "1") == 0) {
    if (!has_backend(DeviceType::cuda)) {
      std::printf("FAILED: no CUDA backend in this program: %s\n", cuda::unavailable_reason().c_str());
      return 1;
    }
    std::printf("ok: CUDA backend linked in; is_available() = %d%s%s\n", cuda::is_available() ? 1 : 0,
                cuda::is_available() ? "" : ": ", cuda::unavailable_reason().c_str());
  }
  return 0;
}
