// DistributedSampler: each rank of a data-parallel job visits its own share of the dataset, as
// torch.utils.data.DistributedSampler does, index for index:
//
//   data::DataLoader loader(train, {.batch_size = 32, .sampler = std::make_shared<data::DistributedSampler>(
//       train.size(), dist::get_world_size(), dist::get_rank())});
//
// Epoch e: the indices 0..n-1, shuffled (shuffle = true) by torch.randperm(n) with a generator
// seeded seed + e (MT19937, as PyTorch's CPU generator, so the order equals PyTorch's); then
// padded by repeating the first indices until every rank gets num_samples() of them, or with
// drop_last cut to a multiple of num_replicas; rank r takes positions r, r + num_replicas, ...
//
// Differs from PyTorch: no set_epoch. The epoch comes from the DataLoader (epoch e visits
// indices(seed, e); DataLoader::set_epoch jumps), so there is no sampler.set_epoch() to forget. The
// order depends on the sampler's own `seed`, never on the loader's seed, so ranks agree whatever
// seeds their loaders use (the loader's seed still drives random transforms).
#pragma once

#include "sampler.h"

namespace nabla::data {

class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  // This rank's indices for `epoch`; the loader's seed is not used (see above).
  std::vector<int64_t> indices(uint64_t loader_seed, int64_t epoch) const override;
  int64_t num_samples() const { return num_samples_; }  // per rank, every epoch
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t n_, num_replicas_, rank_, num_samples_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
};

// torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the CPU.
std::vector<int64_t> torch_randperm(int64_t n, uint64_t seed);

}  // namespace nabla::data
