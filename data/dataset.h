// Datasets: the Dataset interface (size, get(i) -> Example), TensorDataset, Subset, ConcatDataset,
// random_split, and the default collate step that stacks examples into a batch.
//
//   struct Squares {                       // any struct with size() and get(i) is a dataset
//     int64_t size() const { return 100; }
//     data::Example get(int64_t i) const { return {scalar_tensor(double(i)), scalar_tensor(i * i)}; }
//   };
//   data::DataLoader loader(Squares{}, {.batch_size = 10});
//
// A struct's get(i) may also return other samples (a struct, tuple, map, ... of tensors, numbers
// and strings): data::BasicDataLoader stacks them with data::default_collate (data/collate.h) or a
// collate of the caller's. The Dataset interface, Subset, ConcatDataset and transforms are Example's.
//
// get() (and get_batch()) may be called from several DataLoader worker threads at once, so they must
// not modify the dataset; datasets that read files open them per call.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "../core/tensor.h"

namespace nabla::data {

// One example, or a batch of them: data (e.g. an image (C, H, W), or (B, C, H, W) for a batch) and
// target (a label (), or (B) for a batch; undefined for unlabeled data).
struct Example {
  Tensor data;
  Tensor target;
};
using Batch = Example;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The example at `index`, 0 <= index < size().
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices` (each already checked to be in range), stacked into one batch. The
  // default collates get(i) for each index; datasets holding their data in memory override it with
  // a single gather.
  virtual Example get_batch(std::span<const int64_t> indices) const;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

template <class D>
concept DatasetLike = requires(const D& d, int64_t i) {
  { d.size() } -> std::convertible_to<int64_t>;
  { d.get(i) } -> std::convertible_to<Example>;
};

namespace internal {
// The library's private helpers (internal::str, ...) are reachable from here as well.
using namespace ::nabla::internal;
template <class T>
struct is_dataset_shared_ptr : std::false_type {};
template <class T>
struct is_dataset_shared_ptr<std::shared_ptr<T>> : std::bool_constant<std::derived_from<std::remove_cv_t<T>, Dataset>> {
};

// Wraps a struct that has size() and get(i) (and optionally get_batch(span)) as a Dataset.
template <class D>
class DatasetAdapter final : public Dataset {
 public:
  explicit DatasetAdapter(D d) : d_(std::move(d)) {}
  int64_t size() const override { return static_cast<int64_t>(d_.size()); }
  Example get(int64_t index) const override { return d_.get(index); }
  Example get_batch(std::span<const int64_t> indices) const override {
    if constexpr (requires {
                    { d_.get_batch(indices) } -> std::convertible_to<Example>;
                  })
      return d_.get_batch(indices);
    else return Dataset::get_batch(indices);
  }

 private:
  D d_;
};
}  // namespace internal

// A shared handle to `ds`: a shared_ptr to a Dataset is used as is; a Dataset subclass or any struct
// with size() and get(i) is moved (or copied) into a new shared object. Built-in datasets hold their
// data in tensors or file lists, so copying them is cheap.
template <class D>
DatasetPtr share(D&& ds) {
  using T = std::remove_cvref_t<D>;
  if constexpr (internal::is_dataset_shared_ptr<T>::value) {
    return DatasetPtr(std::forward<D>(ds));
  } else if constexpr (std::derived_from<T, Dataset>) {
    return std::make_shared<const T>(std::forward<D>(ds));
  } else {
    static_assert(DatasetLike<T>, "a dataset needs `int64_t size() const` and `Example get(int64_t) const`");
    return std::make_shared<const internal::DatasetAdapter<T>>(std::forward<D>(ds));
  }
}

// Stacks examples into a batch: data (B, ...) and target (B, ...). Every example must have data of
// the same shape, and either all or none have a target. Throws ShapeError naming the first
// example that differs.
Example collate(std::span<const Example> examples);

// Examples held in tensors: example i is {data[i], target[i]}. target may be undefined.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(Tensor data, Tensor target = {});
  int64_t size() const override { return data_.size(0); }
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;
  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_, target_;
};

// The examples of `dataset` at `indices`, in that order.
class Subset : public Dataset {
 public:
  Subset(DatasetPtr dataset, std::vector<int64_t> indices);
  template <class D>
  requires(!std::convertible_to<D, DatasetPtr>) Subset(D&& dataset, std::vector<int64_t> indices)
      : Subset(share(std::forward<D>(dataset)), std::move(indices)) {}

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;
  const DatasetPtr& dataset() const { return dataset_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  DatasetPtr dataset_;
  std::vector<int64_t> indices_;
};

// Several datasets one after another.
class ConcatDataset : public Dataset {
 public:
  explicit ConcatDataset(std::vector<DatasetPtr> datasets);
  int64_t size() const override { return offsets_.back(); }
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;
  const std::vector<DatasetPtr>& datasets() const { return datasets_; }

 private:
  std::vector<DatasetPtr> datasets_;
  std::vector<int64_t> offsets_;  // offsets_[k]: index of dataset k's first example; back(): size
};

// Splits `dataset` into non-overlapping random subsets of the given lengths (which must add up to
// its size); the same seed gives the same split.
std::vector<Subset> random_split(DatasetPtr dataset, const std::vector<int64_t>& lengths, uint64_t seed);
template <class D>
requires(!std::convertible_to<D, DatasetPtr>) std::vector<Subset> random_split(D&& dataset,
                                                                               const std::vector<int64_t>& lengths,
                                                                               uint64_t seed) {
  return random_split(share(std::forward<D>(dataset)), lengths, seed);
}
// The same with fractions of the dataset that add up to 1 (torch.utils.data.random_split's other
// form): each subset gets floor(fraction * size) examples, and the examples left over go one each
// to the subsets in order.
//   auto parts = data::random_split_fractions(dataset, {0.8, 0.1, 0.1}, /*seed=*/42);
std::vector<Subset> random_split_fractions(DatasetPtr dataset, const std::vector<double>& fractions, uint64_t seed);
template <class D>
requires(!std::convertible_to<D, DatasetPtr>) std::vector<Subset> random_split_fractions(
    D&& dataset, const std::vector<double>& fractions, uint64_t seed) {
  return random_split_fractions(share(std::forward<D>(dataset)), fractions, seed);
}

}  // namespace nabla::data
