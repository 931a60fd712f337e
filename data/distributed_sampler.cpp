#include "data/distributed_sampler.h"

#include <limits>
#include <random>

#include "core/error.h"

namespace nabla::data {

std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed) {
  // PyTorch's CPU generator is MT19937 seeded with the low 32 bits of the seed; randperm is a
  // Fisher-Yates pass drawing one 32-bit number per position (for n below 2^32 / 20; beyond, it
  // draws 64-bit numbers, two 32-bit draws, first one high: not checked against PyTorch).
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::vector<int64_t> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  const bool small = n < static_cast<int64_t>(std::numeric_limits<uint32_t>::max() / 20);
  for (int64_t i = 0; i + 1 < n; ++i) {
    uint64_t draw = gen();
    if (!small) draw = (draw << 32) | gen();
    int64_t z = static_cast<int64_t>(draw % static_cast<uint64_t>(n - i));
    std::swap(r[i], r[z + i]);
  }
  return r;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : n_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed) {
  NABLA_CHECK(ValueError, dataset_size >= 0, "DistributedSampler: dataset size must be non-negative, got ",
              dataset_size);
  NABLA_CHECK(ValueError, num_replicas >= 1, "DistributedSampler: num_replicas must be at least 1, got ", num_replicas);
  NABLA_CHECK(ValueError, rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank,
              " is not in [0, num_replicas - 1 = ", num_replicas - 1, "]");
  // As PyTorch: with drop_last the tail that cannot be split evenly is dropped; otherwise padded.
  if (drop_last && n_ % num_replicas_ != 0) num_samples_ = (n_ - num_replicas_ + num_replicas_ - 1) / num_replicas_;
  else num_samples_ = (n_ + num_replicas_ - 1) / num_replicas_;
  if (num_samples_ < 0) num_samples_ = 0;  // drop_last with fewer samples than replicas
}

std::vector<int64_t> DistributedSampler::indices(uint64_t /*loader_seed*/, int64_t epoch) const {
  std::vector<int64_t> all;
  if (shuffle_) {
    all = torch_randperm(n_, seed_ + static_cast<uint64_t>(epoch));
  } else {
    all.resize(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) all[i] = i;
  }
  const int64_t total = total_size();
  if (!drop_last_) {
    NABLA_CHECK(ValueError, n_ > 0 || total == 0, "DistributedSampler: the dataset is empty");
    // Repeat the first indices (the whole list as often as needed) up to total.
    for (int64_t i = 0; static_cast<int64_t>(all.size()) < total; ++i) all.push_back(all[i % n_]);
  } else {
    all.resize(static_cast<size_t>(total));
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

}  // namespace nabla::data
