// Random numbers for the data pipeline: a small Philox-backed stream (Rng) for samplers and
// transforms, seed mixing, and the per-batch "sample generator" the DataLoader installs while a
// batch is being built, so that random transforms are reproducible whatever the worker count.
#pragma once

#include <cstdint>

#include "../core/generator.h"

namespace nabla::data {

// Mixes two 64-bit values into one well-scrambled seed (splitmix64 finalizer over a combination).
uint64_t mix_seed(uint64_t a, uint64_t b);
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c) { return mix_seed(mix_seed(a, b), c); }

// A stream of random numbers: Philox4x32-10 keyed by `key`, counters from 0. Cheap to create;
// not thread-safe (make one per thread or per task).
class Rng {
 public:
  explicit Rng(uint64_t key) : key_(key) {}
  // A fresh, independent stream drawn from `gen` (it reserves one counter of gen's sequence).
  static Rng from(Generator& gen);

  uint32_t next_u32();
  uint64_t next_u64() {
    uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }     // [lo, hi)
  // Uniform integer in [lo, hi) without modulo bias; requires lo < hi.
  int64_t randint(int64_t lo, int64_t hi);

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
  uint32_t buf_[4] = {};
  int pos_ = 4;
};

// The generator random transforms use when none is passed explicitly: while the DataLoader builds a
// batch, a generator seeded from (loader seed, epoch, position of the batch in the epoch) on the
// thread that builds it; elsewhere the default CPU generator.
Generator& sample_generator();

// Makes `gen` this thread's sample generator for the guard's scope.
class SampleGeneratorGuard {
 public:
  explicit SampleGeneratorGuard(Generator& gen);
  ~SampleGeneratorGuard();
  SampleGeneratorGuard(const SampleGeneratorGuard&) = delete;
  SampleGeneratorGuard& operator=(const SampleGeneratorGuard&) = delete;

 private:
  Generator* prev_;
};

}  // namespace nabla::data
