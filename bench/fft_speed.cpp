// The FFT benchmark's nabla side (bench/fft_compare.py runs it next to numpy's pocketfft and
// PyTorch in the same run): seconds per call of fft::rfft or fft::fft (float32 / complex64) over
// the last dim of a (batch, n) tensor, of stft (n_fft 400, hop 160, hann), or of
// audio::transforms::MelSpectrogram (16 kHz, n_fft 400, hop 160, 64 mels) over (batch, n) clips;
// best of several timed batches, one JSON line per length.
//
//   build/bench/fft_speed --kind rfft --batch 8 --n 1024,1000,4097
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "nabla.h"

using namespace nabla;

namespace {
[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "fft_speed: %s\n"
               "usage: fft_speed --kind rfft|fft|stft|melspec [--batch N] [--n N,N,...] [--batches N]\n",
               why);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  std::string kind = "rfft", lengths = "1024";
  int64_t batch = 1, batches = 7;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--kind")) kind = value();
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(value());
    else if (!std::strcmp(argv[i], "--n")) lengths = value();
    else if (!std::strcmp(argv[i], "--batches")) batches = std::stoll(value());
    else usage((std::string("unknown option ") + argv[i]).c_str());
  }
  if (kind != "rfft" && kind != "fft" && kind != "stft" && kind != "melspec")
    usage("--kind is rfft, fft, stft or melspec");
  if (batch < 1 || batches < 1) usage("--batch and --batches must be at least 1");
  std::stringstream ss(lengths);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const int64_t n = std::stoll(item);
    if (n < 1) usage("lengths must be at least 1");
    manual_seed(0);
    Tensor x = randn({batch, n});
    Tensor xc = kind == "fft" ? x.to(kComplex64) : x;
    Tensor window = hann_window(400);
    audio::transforms::MelSpectrogram melspec({.sample_rate = 16000, .n_fft = 400, .hop_length = 160, .n_mels = 64});
    auto call = [&] {
      NoGradGuard no_grad;
      if (kind == "rfft") return (void)fft::rfft(xc);
      if (kind == "fft") return (void)fft::fft(xc);
      if (kind == "melspec") return (void)melspec(xc);
      (void)stft(xc, 400, {.hop_length = 160, .window = window});
    };
    const int64_t reps = bench::calibrate(call, 0.05);
    double best = 1e30;
    for (int64_t b = 0; b < batches; ++b) best = std::min(best, bench::time_batch(call, reps));
    std::printf("{\"kind\": \"%s\", \"n\": %lld, \"batch\": %lld, \"seconds\": %.9g}\n", kind.c_str(),
                static_cast<long long>(n), static_cast<long long>(batch), best);
  }
  return 0;
}
