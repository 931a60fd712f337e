// Trains y = 2x + 1 with an installed nabla: checks headers, linking and autograd end to end.
#include <nabla.h>

#include <cmath>
#include <cstdio>

int main() {
  using namespace nabla;
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
  return 0;
}
