#include "examples/mnist/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace mnist {

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string format_duration(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
  } else {
    long t = std::lround(s);
    if (t >= 3600) std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else std::snprintf(buf, sizeof(buf), "%ld:%02ld", t / 60, t % 60);
  }
  return buf;
}

std::string format_count(double n) {
  std::string digits = std::to_string(std::llround(n)), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t batches, bool interactive)
    : epoch_(epoch),
      epochs_(epochs),
      batches_(batches),
      interactive_(interactive),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t batch, double loss, double accuracy, int64_t images) {
  if (!interactive_) return;
  auto now = std::chrono::steady_clock::now();
  if (batch < batches_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double elapsed = seconds(), frac = batches_ > 0 ? static_cast<double>(batch) / batches_ : 1.0;
  double rate = elapsed > 0 ? images / elapsed : 0;
  double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
  const int width = 20;
  int filled = static_cast<int>(frac * width);
  std::string bar(filled, '#');
  bar += std::string(width - filled, '.');
  char line[256];
  int n = std::snprintf(line, sizeof(line),
                        "\repoch %lld/%lld [%s] %3.0f%%  %lld/%lld  loss %.4f  acc %.2f%%  %s img/s  ETA %s",
                        static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(), frac * 100,
                        static_cast<long long>(batch), static_cast<long long>(batches_), loss, accuracy * 100,
                        format_count(rate).c_str(), format_duration(eta).c_str());
  size_t w = n > 0 ? static_cast<size_t>(n) : 0;
  std::string pad = w < last_width_ ? std::string(last_width_ - w, ' ') : "";
  last_width_ = w;
  std::fputs(line, stdout);
  std::fputs(pad.c_str(), stdout);
  std::fflush(stdout);
}

void Progress::finish() {
  if (!interactive_ || last_width_ == 0) return;
  std::printf("\r%s\r", std::string(last_width_, ' ').c_str());
  std::fflush(stdout);
  last_width_ = 0;
}

}  // namespace mnist
