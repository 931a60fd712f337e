#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/ops.h"
#include "data/impl.h"
#include "data/random.h"

namespace nabla::data {

Example Dataset::get_batch(std::span<const int64_t> indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t i : indices) examples.push_back(get(i));
  return collate(examples);
}

Example collate(std::span<const Example> examples) {
  NABLA_CHECK(ValueError, !examples.empty(), "collate: no examples to stack");
  const Example& first = examples[0];
  NABLA_CHECK(ValueError, first.data.defined(), "collate: example 0 has no data");
  bool has_target = first.target.defined();
  std::vector<Tensor> data, target;
  data.reserve(examples.size());
  if (has_target) target.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const Example& e = examples[i];
    NABLA_CHECK(ValueError, e.data.defined(), "collate: example ", i, " has no data");
    NABLA_CHECK(ShapeError, e.data.sizes() == first.data.sizes(), "collate: example ", i, " has data of shape ",
                e.data.sizes(), " but example 0 has ", first.data.sizes(),
                "; resize or crop examples to one size, or pass a custom collate");
    NABLA_CHECK(DTypeError, e.data.dtype() == first.data.dtype(), "collate: example ", i, " has data of dtype ",
                e.data.dtype(), " but example 0 has ", first.data.dtype());
    NABLA_CHECK(ValueError, e.target.defined() == has_target, "collate: example ", i,
                e.target.defined() ? " has a target but example 0 has none" : " has no target but example 0 has one");
    data.push_back(e.data);
    if (has_target) {
      NABLA_CHECK(ShapeError, e.target.sizes() == first.target.sizes(), "collate: example ", i,
                  " has a target of shape ", e.target.sizes(), " but example 0 has ", first.target.sizes());
      NABLA_CHECK(DTypeError, e.target.dtype() == first.target.dtype(), "collate: example ", i,
                  " has a target of dtype ", e.target.dtype(), " but example 0 has ", first.target.dtype());
      target.push_back(e.target);
    }
  }
  Example batch;
  batch.data = stack(data, 0);
  if (has_target) batch.target = stack(target, 0);
  return batch;
}

// ---- TensorDataset ------------------------------------------------------------------------------
TensorDataset::TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {
  NABLA_CHECK(ValueError, data_.defined(), "TensorDataset: data is undefined");
  NABLA_CHECK(ShapeError, data_.dim() >= 1, "TensorDataset: data must have a leading example dim, got shape ",
              data_.sizes());
  if (target_.defined()) {
    NABLA_CHECK(ShapeError, target_.dim() >= 1 && target_.size(0) == data_.size(0), "TensorDataset: data has shape ",
                data_.sizes(), " but target has shape ", target_.sizes(), " (the first dims must match)");
    NABLA_CHECK(DeviceError, target_.device() == data_.device(), "TensorDataset: data is on ", data_.device(),
                " but target is on ", target_.device());
  }
}

Example TensorDataset::get(int64_t index) const {
  internal::check_index("TensorDataset", index, size());
  return {data_.select(0, index), target_.defined() ? target_.select(0, index) : Tensor()};
}

Example TensorDataset::get_batch(std::span<const int64_t> indices) const {
  Tensor idx = internal::index_tensor(indices).to(data_.device());
  return {data_.index_select(0, idx), target_.defined() ? target_.index_select(0, idx) : Tensor()};
}

// ---- Subset -------------------------------------------------------------------------------------
Subset::Subset(DatasetPtr dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  NABLA_CHECK(ValueError, dataset_ != nullptr, "Subset: the dataset is null");
  int64_t n = dataset_->size();
  for (size_t k = 0; k < indices_.size(); ++k)
    NABLA_CHECK(IndexError, indices_[k] >= 0 && indices_[k] < n, "Subset: index ", indices_[k], " at position ", k,
                " is out of range for a dataset of ", n, " examples");
}

Example Subset::get(int64_t index) const {
  internal::check_index("Subset", index, size());
  return dataset_->get(indices_[index]);
}

Example Subset::get_batch(std::span<const int64_t> indices) const {
  std::vector<int64_t> mapped(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) mapped[k] = indices_[indices[k]];
  return dataset_->get_batch(mapped);
}

// ---- ConcatDataset ------------------------------------------------------------------------------
ConcatDataset::ConcatDataset(std::vector<DatasetPtr> datasets) : datasets_(std::move(datasets)) {
  offsets_.push_back(0);
  for (size_t k = 0; k < datasets_.size(); ++k) {
    NABLA_CHECK(ValueError, datasets_[k] != nullptr, "ConcatDataset: dataset ", k, " is null");
    offsets_.push_back(offsets_.back() + datasets_[k]->size());
  }
}

Example ConcatDataset::get(int64_t index) const {
  internal::check_index("ConcatDataset", index, size());
  // The dataset k with offsets_[k] <= index < offsets_[k + 1].
  size_t k = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), index) - offsets_.begin()) - 1;
  return datasets_[k]->get(index - offsets_[k]);
}

Example ConcatDataset::get_batch(std::span<const int64_t> indices) const {
  // One dataset's fast batch path when every index falls in it; otherwise example by example.
  if (!indices.empty()) {
    auto [lo, hi] = std::minmax_element(indices.begin(), indices.end());
    size_t k = static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), *lo) - offsets_.begin()) - 1;
    if (*hi < offsets_[k + 1]) {
      std::vector<int64_t> local(indices.begin(), indices.end());
      for (auto& i : local) i -= offsets_[k];
      return datasets_[k]->get_batch(local);
    }
  }
  return Dataset::get_batch(indices);
}

// ---- random_split -------------------------------------------------------------------------------
std::vector<Subset> random_split(DatasetPtr dataset, const std::vector<int64_t>& lengths, uint64_t seed) {
  NABLA_CHECK(ValueError, dataset != nullptr, "random_split: the dataset is null");
  int64_t n = dataset->size(), total = 0;
  for (int64_t len : lengths) {
    NABLA_CHECK(ValueError, len >= 0, "random_split: lengths must be non-negative, got ", len);
    total += len;
  }
  NABLA_CHECK(ValueError, total == n, "random_split: lengths add up to ", total, " but the dataset has ", n,
              " examples");
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  Rng rng(mix_seed(seed, 0x5b11u));
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.randint(0, i + 1)]);
  std::vector<Subset> out;
  out.reserve(lengths.size());
  int64_t start = 0;
  for (int64_t len : lengths) {
    out.emplace_back(dataset, std::vector<int64_t>(perm.begin() + start, perm.begin() + start + len));
    start += len;
  }
  return out;
}

std::vector<Subset> random_split_fractions(DatasetPtr dataset, const std::vector<double>& fractions, uint64_t seed) {
  NABLA_CHECK(ValueError, dataset != nullptr, "random_split_fractions: the dataset is null");
  NABLA_CHECK(ValueError, !fractions.empty(), "random_split_fractions: no fractions given");
  double sum = 0;
  for (double f : fractions) {
    NABLA_CHECK(ValueError, f >= 0 && f <= 1, "random_split_fractions: fractions must be in [0, 1], got ", f);
    sum += f;
  }
  NABLA_CHECK(ValueError, std::abs(sum - 1) < 1e-6, "random_split_fractions: fractions add up to ", sum, ", not 1");
  const int64_t n = dataset->size();
  std::vector<int64_t> lengths;
  int64_t given = 0;
  for (double f : fractions) {
    lengths.push_back(static_cast<int64_t>(std::floor(static_cast<double>(n) * f)));
    given += lengths.back();
  }
  for (int64_t i = 0; given < n; ++i, ++given) ++lengths[static_cast<size_t>(i) % lengths.size()];
  return random_split(std::move(dataset), lengths, seed);
}

}  // namespace nabla::data

namespace nabla::data::internal {
Tensor index_tensor(std::span<const int64_t> indices) {
  int64_t n = static_cast<int64_t>(indices.size());
  return from_blob(const_cast<int64_t*>(indices.data()), IntArrayRef(&n, 1), kInt64);
}
}  // namespace nabla::data::internal
