// What the program tests share: running a program and reading what it printed, and a learnable toy
// dataset in MNIST's IDX format.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "nabla.h"

namespace nabla::program_test {

struct Result {
  int code;         // the exit status, or 128 + the signal that ended the program
  std::string out;  // stdout and stderr together
};

// Runs `binary args` through the shell (args are shell words), stdout and stderr together.
inline Result run_program(const std::string& binary, const std::string& args) {
  std::string cmd = binary + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// A learnable toy dataset in MNIST's format (also Fashion-MNIST's): each class is a bright bar at
// its own place on noise; `dir` gets train-* (n_train images) and t10k-* (n_test) IDX files.
inline void write_dataset(const std::filesystem::path& dir, int64_t n_train, int64_t n_test) {
  std::filesystem::create_directories(dir);
  auto make = [&](int64_t n, const char* prefix, uint64_t seed) {
    manual_seed(seed);
    Tensor labels = randint(0, 10, {n});
    Tensor images = (rand({n, 28, 28}) * 60).to(kUInt8);
    Tensor lc = labels.contiguous();
    uint8_t* px = images.data_ptr<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t l = lc.data_ptr<int64_t>()[i];
      for (int64_t r = 4 + 2 * l; r < 6 + 2 * l; ++r)
        for (int64_t c = 4; c < 24; ++c) px[(i * 28 + r) * 28 + c] = 250;
    }
    data::write_idx((dir / (std::string(prefix) + "-images-idx3-ubyte")).string(), images);
    data::write_idx((dir / (std::string(prefix) + "-labels-idx1-ubyte")).string(), labels.to(kUInt8));
  };
  make(n_train, "train", 1);
  make(n_test, "t10k", 2);
}

}  // namespace nabla::program_test
