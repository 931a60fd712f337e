// Samplers: the order in which a DataLoader visits a dataset's indices, one epoch at a time.
//
// A sampler's indices(seed, epoch) must be a pure function of its arguments: the DataLoader asks
// for an epoch's order when the epoch starts, and again when a saved run resumes mid-epoch, and
// both must agree. A user-defined sampler subclasses Sampler:
//
//   struct EvenFirst : data::Sampler {
//     std::vector<int64_t> indices(uint64_t seed, int64_t epoch) const override { ... }
//   };
//   data::DataLoader loader(ds, {.batch_size = 8, .sampler = std::make_shared<EvenFirst>()});
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace nabla::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Dataset indices for `epoch`, in visiting order.
  virtual std::vector<int64_t> indices(uint64_t seed, int64_t epoch) const = 0;
};
using SamplerPtr = std::shared_ptr<const Sampler>;

// 0, 1, ..., n - 1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(uint64_t seed, int64_t epoch) const override;

 private:
  int64_t n_;
};

// A fresh random permutation of 0..n-1 each epoch; with replacement, num_samples independent
// uniform draws (num_samples defaults to n).
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t n, bool replacement = false, std::optional<int64_t> num_samples = std::nullopt);
  std::vector<int64_t> indices(uint64_t seed, int64_t epoch) const override;

 private:
  int64_t n_, num_samples_;
  bool replacement_;
};

// A random permutation of the given indices each epoch (e.g. a validation split).
class SubsetRandomSampler : public Sampler {
 public:
  explicit SubsetRandomSampler(std::vector<int64_t> indices);
  std::vector<int64_t> indices(uint64_t seed, int64_t epoch) const override;

 private:
  std::vector<int64_t> indices_;
};

// Index i with probability weights[i] / sum(weights): num_samples draws, with replacement by
// default; without replacement, num_samples distinct indices (weighted sampling without
// replacement, as torch.multinomial does it).
class WeightedRandomSampler : public Sampler {
 public:
  WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, bool replacement = true);
  std::vector<int64_t> indices(uint64_t seed, int64_t epoch) const override;

 private:
  std::vector<double> weights_, cdf_;
  int64_t num_samples_;
  bool replacement_;
};

}  // namespace nabla::data
