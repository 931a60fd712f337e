// One row of the attention benchmark (bench/attention_compare.py runs the rows side by side, each in
// its own process so that the peak memory is the row's): scaled_dot_product_attention forward and
// backward on (batch, heads, seq, dim) float32 inputs, on the fused kernel (--path flash) or the
// math path (--path math: matmul, softmax, matmul, the (seq, seq) weights stored for backward).
//
//   build/bench/attention_speed --path flash --seq 4096 --heads 8 --dim 64 --causal --reps 3
//
// Prints one JSON line: the best and every timed iteration's seconds (one forward and backward,
// after one warm-up iteration), the FLOP rate of the work the math path does (4 products of
// seq x seq x dim forward and backward, half of them under causal masking), the peak resident
// memory of the process and the resident memory with the inputs allocated, in MB.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;
namespace F = nn::functional;

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "attention_speed: %s\n"
               "usage: attention_speed --path flash|math [--seq N] [--heads N] [--dim N] [--batch N] [--causal] "
               "[--dtype f32|bf16] [--reps N]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, dt_name = "f32";
  int64_t seq = 4096, heads = 8, dim = 64, batch = 1, reps = 3;
  bool causal = false;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--path")) path = value();
    else if (!std::strcmp(argv[i], "--seq")) seq = std::stoll(value());
    else if (!std::strcmp(argv[i], "--heads")) heads = std::stoll(value());
    else if (!std::strcmp(argv[i], "--dim")) dim = std::stoll(value());
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(value());
    else if (!std::strcmp(argv[i], "--dtype")) dt_name = value();
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoll(value());
    else if (!std::strcmp(argv[i], "--causal")) causal = true;
    else usage((std::string("unknown option ") + argv[i]).c_str());
  }
  if (path != "flash" && path != "math") usage("--path is flash or math");
  if (dt_name != "f32" && dt_name != "bf16") usage("--dtype is f32 or bf16");
  if (seq < 1 || heads < 1 || dim < 1 || batch < 1 || reps < 1) usage("sizes and --reps must be at least 1");
  const DType dt = dt_name == "bf16" ? kBFloat16 : kFloat32;

  manual_seed(0);
  Tensor q = randn({batch, heads, seq, dim}).to(dt).requires_grad_(),
         k = randn({batch, heads, seq, dim}).to(dt).requires_grad_(),
         v = randn({batch, heads, seq, dim}).to(dt).requires_grad_(), g = randn({batch, heads, seq, dim}).to(dt);
  const double rss_inputs = bench::rss_mb();
  auto guard = F::sdpa_kernel(path == "flash" ? F::SdpBackend::flash : F::SdpBackend::math);
  auto step = [&] {
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    Tensor out = F::scaled_dot_product_attention(q, k, v, {.is_causal = causal});
    out.backward(g);
  };
  std::vector<double> times;
  for (int64_t r = 0; r <= reps; ++r) {
    const double t0 = bench::now();
    step();
    if (r > 0) times.push_back(bench::now() - t0);
  }
  const double best = *std::min_element(times.begin(), times.end());
  // q k^T and w v forward, 3 products backward (dv, dw, dq and dk: 4): 6 of 2 * seq^2 * dim each.
  const double flop = 6.0 * 2.0 * static_cast<double>(batch * heads) * static_cast<double>(seq) *
                      static_cast<double>(seq) * static_cast<double>(dim) * (causal ? 0.5 : 1.0);
  std::printf(
      "{\"path\": \"%s\", \"seq\": %lld, \"heads\": %lld, \"dim\": %lld, \"batch\": %lld, \"causal\": %s, "
      "\"dtype\": \"%s\", \"cpu\": \"%s\", \"threads\": %d, \"best_s\": %.4f, \"times\": [",
      path.c_str(), static_cast<long long>(seq), static_cast<long long>(heads), static_cast<long long>(dim),
      static_cast<long long>(batch), causal ? "true" : "false", dt_name.c_str(), bench::cpu_model().c_str(),
      get_num_threads(), best);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? ", " : "", times[i]);
  std::printf("], \"gflops\": %.1f, \"peak_rss_mb\": %.1f, \"rss_inputs_mb\": %.1f}\n", flop / best / 1e9,
              bench::peak_rss_mb(), rss_inputs);
  return 0;
}
