#include "data/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "data/random.h"

namespace nabla::data {

namespace {
// Each sampler kind salts the seed so two kinds with one seed do not share a stream.
Rng epoch_rng(uint64_t seed, int64_t epoch, uint64_t salt) {
  return Rng(mix_seed(seed, static_cast<uint64_t>(epoch), salt));
}

void shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[rng.randint(0, i + 1)]);
}
}  // namespace

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  NABLA_CHECK(ValueError, n >= 0, "SequentialSampler: size must be non-negative, got ", n);
}

std::vector<int64_t> SequentialSampler::indices(uint64_t, int64_t) const {
  std::vector<int64_t> out(static_cast<size_t>(n_));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

RandomSampler::RandomSampler(int64_t n, bool replacement, std::optional<int64_t> num_samples)
    : n_(n), num_samples_(num_samples.value_or(n)), replacement_(replacement) {
  NABLA_CHECK(ValueError, n >= 0, "RandomSampler: size must be non-negative, got ", n);
  NABLA_CHECK(ValueError, num_samples_ >= 0, "RandomSampler: num_samples must be non-negative, got ", num_samples_);
  NABLA_CHECK(ValueError, replacement || !num_samples || *num_samples == n, "RandomSampler: num_samples (",
              num_samples_, ") can differ from the dataset size (", n, ") only with replacement");
  NABLA_CHECK(ValueError, num_samples_ == 0 || n > 0, "RandomSampler: cannot draw ", num_samples_,
              " samples from an empty dataset");
}

std::vector<int64_t> RandomSampler::indices(uint64_t seed, int64_t epoch) const {
  Rng rng = epoch_rng(seed, epoch, 0x52414e44u);
  if (replacement_) {
    std::vector<int64_t> out(static_cast<size_t>(num_samples_));
    for (auto& i : out) i = rng.randint(0, n_);
    return out;
  }
  std::vector<int64_t> out(static_cast<size_t>(n_));
  std::iota(out.begin(), out.end(), int64_t{0});
  shuffle(out, rng);
  return out;
}

SubsetRandomSampler::SubsetRandomSampler(std::vector<int64_t> indices) : indices_(std::move(indices)) {}

std::vector<int64_t> SubsetRandomSampler::indices(uint64_t seed, int64_t epoch) const {
  Rng rng = epoch_rng(seed, epoch, 0x53554253u);
  std::vector<int64_t> out = indices_;
  shuffle(out, rng);
  return out;
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, bool replacement)
    : weights_(std::move(weights)), num_samples_(num_samples), replacement_(replacement) {
  NABLA_CHECK(ValueError, !weights_.empty(), "WeightedRandomSampler: no weights");
  NABLA_CHECK(ValueError, num_samples >= 0, "WeightedRandomSampler: num_samples must be non-negative, got ",
              num_samples);
  double total = 0;
  int64_t positive = 0;
  cdf_.reserve(weights_.size());
  for (size_t i = 0; i < weights_.size(); ++i) {
    double w = weights_[i];
    NABLA_CHECK(ValueError, std::isfinite(w) && w >= 0, "WeightedRandomSampler: weight ", i, " is ", w,
                " (weights must be finite and non-negative)");
    total += w;
    positive += w > 0;
    cdf_.push_back(total);
  }
  NABLA_CHECK(ValueError, total > 0, "WeightedRandomSampler: all weights are zero");
  NABLA_CHECK(ValueError, replacement || num_samples <= positive, "WeightedRandomSampler: cannot draw ", num_samples,
              " distinct indices without replacement: only ", positive, " weights are positive");
}

std::vector<int64_t> WeightedRandomSampler::indices(uint64_t seed, int64_t epoch) const {
  Rng rng = epoch_rng(seed, epoch, 0x57474854u);
  const int64_t n = static_cast<int64_t>(weights_.size());
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  if (replacement_) {
    const double total = cdf_.back();
    for (int64_t k = 0; k < num_samples_; ++k) {
      double u = rng.uniform() * total;
      // The first i with cdf[i] > u; zero-weight entries have cdf[i] == cdf[i - 1] and are skipped.
      auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
      int64_t i = std::min<int64_t>(it - cdf_.begin(), n - 1);
      while (weights_[i] == 0 && i > 0) --i;  // u rounded up to the total: step back to a positive weight
      out.push_back(i);
    }
    return out;
  }
  // Without replacement: keys u^(1/w) (Efraimidis-Spirakis); the num_samples largest keys win, in
  // order of decreasing key. Computed as log(u) / w to stay accurate.
  std::vector<std::pair<double, int64_t>> keys;
  keys.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double u = rng.uniform();
    if (weights_[i] > 0) keys.emplace_back(std::log1p(-u) / weights_[i], i);  // log(1 - u), 1 - u in (0, 1]
  }
  std::partial_sort(keys.begin(), keys.begin() + num_samples_, keys.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  for (int64_t k = 0; k < num_samples_; ++k) out.push_back(keys[k].second);
  return out;
}

}  // namespace nabla::data
