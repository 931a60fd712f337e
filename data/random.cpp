#include "data/random.h"

#include "core/error.h"

namespace nabla::data {

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Rng Rng::from(Generator& gen) {
  auto [seed, counter] = gen.reserve(1);
  return Rng(mix_seed(seed, counter));
}

uint32_t Rng::next_u32() {
  if (pos_ == 4) {
    Philox::block(key_, counter_++, buf_);
    pos_ = 0;
  }
  return buf_[pos_++];
}

int64_t Rng::randint(int64_t lo, int64_t hi) {
  NABLA_CHECK(ValueError, lo < hi, "randint: empty range [", lo, ", ", hi, ")");
  uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  // Reject the top partial copy of [0, range) so every value is equally likely.
  uint64_t limit = UINT64_MAX - (UINT64_MAX % range + 1) % range;
  uint64_t x;
  do { x = next_u64(); } while (x > limit);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range);
}

namespace {
thread_local Generator* tl_sample_generator = nullptr;
}

Generator& sample_generator() { return tl_sample_generator ? *tl_sample_generator : default_generator(kCPU); }

SampleGeneratorGuard::SampleGeneratorGuard(Generator& gen) : prev_(tl_sample_generator) { tl_sample_generator = &gen; }
SampleGeneratorGuard::~SampleGeneratorGuard() { tl_sample_generator = prev_; }

}  // namespace nabla::data
