// DataLoader: batches of a dataset in a seeded order, optionally built ahead of time by worker
// threads while the model trains.
//
//   auto train = data::MNIST("data/mnist", data::Split::train);
//   data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1, .num_workers = 2});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto& batch : loader) {   // each begin() starts the next epoch
//       // batch.data: (64, 1, 28, 28) float32, batch.target: (64) int64
//     }
//
// Order: epoch e visits sampler.indices(seed, e), so the same seed gives the same batches in every
// run, with 0 or N workers. Random transforms draw from data::sample_generator(), which the loader
// seeds per batch from (seed, epoch, position), so augmentation is reproducible too.
//
// Workers: num_workers threads build batches ahead (at most num_workers * prefetch_factor), and the
// loop receives them in order. An exception thrown while building batch k is rethrown by the
// iterator when the loop reaches batch k. Leaving the loop early (break, exception) stops and joins
// the workers when the iterator is destroyed; a worker finishes the batch it is building first.
//
// Resuming: state() is where the next batch would come from ({seed, epoch, index}); inside the loop
// body of batch k it points just past batch k. Save it with a checkpoint, and after load_state()
// the next begin() continues that epoch from that index, with the same order and the same
// augmentation. (After leaving a loop early, state() still points into the abandoned epoch, so a
// checkpoint taken then resumes it; a plain begin() moves on to the next epoch.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dataset.h"
#include "sampler.h"

namespace nabla::data {

using Collate = std::function<Example(std::span<const Example>)>;

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;            // a fresh random permutation each epoch (RandomSampler)
  std::optional<uint64_t> seed{};  // unset: drawn once from the default CPU generator (see manual_seed)
  int num_workers = 0;             // 0: batches are built on the calling thread when needed
  bool drop_last = false;          // drop the last batch if it is smaller than batch_size
  SamplerPtr sampler{};            // a custom order (exclusive with shuffle)
  Collate collate{};               // unset: dataset.get_batch (data::collate unless overridden)
  int prefetch_factor = 2;         // batches queued ahead per worker
  bool pin_memory = false;         // page-locked batches, for faster copies to a GPU
};

// Where a DataLoader's next batch comes from: epoch `epoch` of the order seeded by `seed`, starting
// at position `index` of that epoch's index list (a multiple of the batch size mid-epoch).
struct LoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t index = 0;
  bool operator==(const LoaderState&) const = default;
};

namespace internal {
// The library's private helpers (internal::str, ...) are reachable from here as well.
using namespace ::nabla::internal;
class EpochRun;
}  // namespace internal

class DataLoader {
 public:
  using Options = DataLoaderOptions;

  // `dataset`: any Dataset, a shared_ptr to one, or a struct with size() and get(i) (see share()).
  template <class D>
  requires(!std::same_as<std::remove_cvref_t<D>, DataLoader>) explicit DataLoader(D&& dataset, Options options = {})
      : DataLoader(share(std::forward<D>(dataset)), std::move(options), 0) {}

  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;
  ~DataLoader();

  class Sentinel {};
  // An input iterator over one epoch's batches; move-only, owns that epoch's worker threads.
  class Iterator {
   public:
    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;
    ~Iterator();
    Example& operator*() const;
    Example* operator->() const { return &**this; }
    Iterator& operator++();
    bool operator==(Sentinel) const;

   private:
    friend class DataLoader;
    explicit Iterator(std::unique_ptr<internal::EpochRun> run);
    std::unique_ptr<internal::EpochRun> run_;
  };

  // Starts the next epoch (or resumes the one given to load_state). Only one epoch can be iterated
  // at a time; the DataLoader must outlive its iterators.
  Iterator begin();
  Sentinel end() const { return {}; }

  // Batches in one full epoch (the epoch begin() would start next).
  int64_t size() const;
  const DatasetPtr& dataset() const { return dataset_; }
  const Options& options() const { return options_; }
  uint64_t seed() const { return seed_; }

  LoaderState state() const;
  // The next begin() continues epoch state.epoch from state.index, with state.seed.
  void load_state(const LoaderState& state);
  // The next begin() starts epoch `epoch` from its beginning.
  void set_epoch(int64_t epoch);

 private:
  DataLoader(DatasetPtr dataset, Options options, int);
  // The index order of `epoch`, checked to be in range (cached for the last epoch asked).
  std::shared_ptr<const std::vector<int64_t>> epoch_order(int64_t epoch) const;

  DatasetPtr dataset_;
  Options options_;
  SamplerPtr sampler_;
  uint64_t seed_ = 0;
  // The next begin() starts epoch next_epoch_ at index next_index_.
  int64_t next_epoch_ = 0, next_index_ = 0;
  // Progress of the current (or last) epoch, updated as batches are delivered.
  std::shared_ptr<LoaderState> progress_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_order_;
};

}  // namespace nabla::data
