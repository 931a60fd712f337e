// conv_lowp: bfloat16 and float16 convolutions (core/cpu/conv_nd.cpp, on the low-precision GEMM)
// next to the float32 ones (core/cpu/conv_gemm.cpp), interleaved in one run, best of N batches, at
// the layer shapes of the MNIST CNN (batch 64) and of ResNet-18 (batch 32): the forward alone and
// the forward with both gradients (what a training step runs). GFLOP/s count 2 per multiply-add
// (3 products for forward + backward).
//
//   ./build/bench/conv_lowp [reps]      (default 5)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench/timing.h"
#include "core/cpu/gemm_lowp.h"
#include "nabla.h"

using namespace nabla;

namespace {

struct ConvShape {
  const char* name;
  int64_t n, c, hw, o, k, stride, pad;
  int64_t out() const { return (hw + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * n * o * c * k * k * out() * out(); }
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::printf("CPU: %s, %d threads; bfloat16 GEMM kernel: %s\n\n", bench::cpu_model().c_str(), get_num_threads(),
              cpu::lowp_kernel_name(cpu::lowp_kernel()));
  const ConvShape shapes[] = {
      {"mnist cnn conv1", 64, 1, 28, 32, 3, 1, 0},      {"mnist cnn conv2", 64, 32, 26, 64, 3, 1, 0},
      {"resnet18 stem 7x7/2", 32, 3, 224, 64, 7, 2, 3}, {"resnet18 layer1", 32, 64, 56, 64, 3, 1, 1},
      {"resnet18 layer2", 32, 128, 28, 128, 3, 1, 1},   {"resnet18 layer3", 32, 256, 14, 256, 3, 1, 1},
      {"resnet18 layer4", 32, 512, 7, 512, 3, 1, 1},    {"resnet18 3x3/2 down", 32, 128, 28, 256, 3, 2, 1}};
  std::printf("| layer | pass | f32 ms (GFLOP/s) | bf16 ms (GFLOP/s) | f16 ms (GFLOP/s) | f32/bf16 | f32/f16 |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  manual_seed(0);
  for (const ConvShape& s : shapes) {
    Tensor x32 = randn({s.n, s.c, s.hw, s.hw}), w32 = randn({s.o, s.c, s.k, s.k}) * 0.1;
    const Tensor xs[3] = {x32, x32.to(kBFloat16), x32.to(kFloat16)}, ws[3] = {w32, w32.to(kBFloat16), w32.to(kFloat16)};
    for (bool backward : {false, true}) {
      auto run = [&](int c) {
        Tensor x = xs[c].detach(), w = ws[c].detach();
        if (backward) {
          x.requires_grad_();
          w.requires_grad_();
        }
        Tensor y = conv2d(x, w, {}, s.stride, s.pad);
        if (backward) y.backward(ones_like(y));
      };
      const std::vector<double> t = bench::interleaved(
          3, [](int) {}, run, 0.1, reps);
      const double fl = s.flops() * (backward ? 3 : 1);
      std::printf("| %s | %s | %.2f (%.0f) | %.2f (%.0f) | %.2f (%.0f) | %.2fx | %.2fx |\n", s.name,
                  backward ? "fwd+bwd" : "fwd", t[0] * 1e3, fl / t[0] / 1e9, t[1] * 1e3, fl / t[1] / 1e9, t[2] * 1e3,
                  fl / t[2] / 1e9, t[0] / t[1], t[0] / t[2]);
      std::fflush(stdout);
    }
  }
  return 0;
}
