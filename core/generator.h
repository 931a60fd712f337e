// Random numbers: a seedable, counter-based generator (Philox4x32-10). Each op reserves a range of
// counters, and element i of its output is a pure function of (seed, offset, i), so results do not
// depend on the number of threads, and the CUDA kernels produce the same streams.
#pragma once

#include <cstdint>
#include <mutex>

#include "device.h"
#include "dtype.h"

namespace nabla {

struct Philox {
  // The round multipliers and the key schedule's Weyl increments (Salmon et al., Random123).
  static constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  static constexpr int kRounds = 10;
  // Four 32-bit random words for (key, counter).
  static NABLA_HOST_DEVICE inline void block(uint64_t key, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    for (int r = 0; r < kRounds; ++r) {
      uint64_t p0 = static_cast<uint64_t>(kMul0) * c0, p1 = static_cast<uint64_t>(kMul1) * c2;
      uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
      uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
  // Uniform float in [0, 1) from 24 random bits; uniform double from 53.
  static NABLA_HOST_DEVICE inline float to_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }
  static NABLA_HOST_DEVICE inline double to_double(uint32_t hi, uint32_t lo) {
    return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
  }
};

namespace trace {
class Tracer;
extern constinit thread_local Tracer* tl_current;
void notify_random_draw();  // tells the tracer (core/trace.h, Tracer::on_random_draw)
}  // namespace trace

class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  void manual_seed(uint64_t seed) {
    std::lock_guard lock(mu_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  // Reserves `blocks` Philox counters; returns (seed, first counter).
  std::pair<uint64_t, uint64_t> reserve(uint64_t blocks) {
    if (trace::tl_current) [[unlikely]]
      trace::notify_random_draw();
    std::lock_guard lock(mu_);
    uint64_t first = offset_;
    offset_ += blocks;
    return {seed_, first};
  }
  struct State {
    uint64_t seed, offset;
  };
  State get_state() const {
    std::lock_guard lock(mu_);
    return {seed_, offset_};
  }
  void set_state(State s) {
    std::lock_guard lock(mu_);
    seed_ = s.seed;
    offset_ = s.offset;
  }

 private:
  mutable std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The generator ops use by default for `device` (one per device type).
Generator& default_generator(Device device = kCPU);

}  // namespace nabla
