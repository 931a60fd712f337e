// Training progress: a live bar on a terminal, quiet otherwise (the per-epoch lines are printed by
// the caller either way).
//
//   epoch 1/3 [##########......]  62%  582/938  loss 0.1432  acc 95.71%  6,120 img/s  ETA 0:04
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mnist {

class Progress {
 public:
  // interactive: redraw a bar in place (stdout is a terminal and not --quiet).
  Progress(int64_t epoch, int64_t epochs, int64_t batches, bool interactive);
  // After each batch: running mean loss and accuracy so far, images done this epoch.
  void update(int64_t batch, double loss, double accuracy, int64_t images);
  // Clears the bar (before the epoch line is printed).
  void finish();
  double seconds() const;

 private:
  int64_t epoch_, epochs_, batches_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  size_t last_width_ = 0;
};

// "1:05", "12.3 s" and "6,120" style formatting for humans.
std::string format_duration(double seconds);
std::string format_count(double n);
bool stdout_is_terminal();

}  // namespace mnist
