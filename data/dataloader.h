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
// Batches of any structure: a dataset's get(i) may return any sample data::default_collate stacks
// (a struct, tuple, map, ... of tensors, numbers and strings; data/collate.h), and a collate, the
// third argument, may return any batch type. data::BasicDataLoader<B> yields B&; its B is deduced:
//
//   struct Review { int64_t label; std::string text; Tensor ids; };       // what reviews.get(i) returns
//   struct ReviewBatch { Tensor label, text_ids, offsets; };
//   ReviewBatch collate_batch(std::span<const Review> batch);              // or const std::vector<Review>&
//   data::BasicDataLoader loader(reviews, {.batch_size = 8, .num_workers = 2}, collate_batch);
//   for (ReviewBatch& batch : loader) model(batch.text_ids, batch.offsets) ...
//
//   data::BasicDataLoader plain(reviews, {.batch_size = 8});   // default_collate: a batch of
//   for (auto& [label, text, ids] : plain) ...                 //   std::tuple<Tensor, std::vector<std::string>, Tensor>
//
// data::DataLoader is BasicDataLoader<Example>, the loader of {data, target} batches; it stays a
// plain type (not a template) so that code naming it (`data::DataLoader&` parameters,
// `std::optional<data::DataLoader>`, `data::DataLoader::Options`) is unchanged. Example datasets
// build batches with get_batch (MNIST's one-pass gather) or options.collate over get(i); other
// datasets with their own get_batch(std::span<const int64_t>) when they have one returning the
// batch, else default_collate. The epoch engine (order, workers, errors, resume, pinning) is one
// type-erased implementation in dataloader.cpp whatever the batch type: each batch is built by a
// function the template makes, and held as an owned void* that BasicDataLoader<B> casts back.
// DataLoaderBase is what all loaders share (size, seed, options, state, load_state, set_epoch); a
// checkpoint takes a DataLoaderBase*.
//
// Order: epoch e visits sampler.indices(seed, e), so the same seed gives the same batches in every
// run, with 0 or N workers. Random transforms draw from data::sample_generator(), which the loader
// seeds per batch from (seed, epoch, position), so augmentation is reproducible too.
//
// Workers: num_workers threads build batches ahead (at most num_workers * prefetch_factor), and the
// loop receives them in order. An exception thrown while building batch k (in get, get_batch or the
// collate) is rethrown by the iterator when the loop reaches batch k. Leaving the loop early
// (break, exception) stops and joins the workers when the iterator is destroyed; a worker finishes
// the batch it is building first. get(i) and the collate run on several workers at once.
//
// pin_memory: every CPU tensor of the batch, wherever it sits in the batch's structure (see
// for_each_tensor in data/collate.h), is page-locked, when a CUDA backend is present.
//
// Resuming: state() is where the next batch would come from ({seed, epoch, index}); inside the loop
// body of batch k it points just past batch k. Save it with a checkpoint, and after load_state()
// the next begin() continues that epoch from that index, with the same order and the same
// augmentation. (After leaving a loop early, state() still points into the abandoned epoch, so a
// checkpoint taken then resumes it; a plain begin() moves on to the next epoch.)
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "collate.h"
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
  Collate collate{};               // Example datasets only; unset: dataset.get_batch (data::collate
                                   // unless overridden). Other samples: the DataLoader's 3rd argument
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

// A batch of any type with its owner: what the type-erased epoch engine (dataloader.cpp) builds,
// queues and hands out; BasicDataLoader<B> knows it holds a B.
struct BatchDeleter {
  void (*destroy)(void*) = nullptr;
  void operator()(void* p) const {
    if (p) destroy(p);
  }
};
using AnyBatch = std::unique_ptr<void, BatchDeleter>;
template <class B>
AnyBatch erase_batch(B batch) {
  return AnyBatch(new B(std::move(batch)), BatchDeleter{[](void* p) { delete static_cast<B*>(p); }});
}
// Builds the batch of the samples at `indices` (each in range); `pin`: page-lock its CPU tensors.
// Called from worker threads, one batch each, with the loader's generator and no-grad guards set.
using BatchBuilder = std::function<AnyBatch(std::span<const int64_t> indices, bool pin)>;

// What a loader iterates: the dataset's size and how to build its batches; `dataset` when its
// samples are Examples (DataLoaderBase::dataset()).
struct LoaderSource {
  int64_t size = 0;
  BatchBuilder build;
  DatasetPtr dataset;
};
// A Dataset's Example batches: dataset->get_batch(indices), or collate over get(i) when set.
LoaderSource example_source(DatasetPtr dataset, Collate collate);

template <class B>
void pin_tensors(B& batch) {
  for_each_tensor(batch, [](Tensor& t) {
    if (t.is_cpu()) t = t.pin_memory();
  });
}

// Batches of any dataset `ds` (a shared_ptr to it) whose get(i) returns T: collate(samples) with
// the samples in a const std::vector<T>, converted to B.
template <class B, class T, class Ptr, class C>
LoaderSource sample_source(Ptr ds, C collate) {
  NABLA_CHECK(ValueError, ds != nullptr, "DataLoader: the dataset is null");
  const int64_t n = static_cast<int64_t>(ds->size());
  auto fn = std::make_shared<C>(std::move(collate));
  return {n,
          [ds, fn](std::span<const int64_t> indices, bool pin) {
            std::vector<T> samples;
            samples.reserve(indices.size());
            for (int64_t i : indices) samples.push_back(ds->get(i));
            B batch = std::invoke(*fn, std::as_const(samples));
            if (pin) pin_tensors(batch);
            return erase_batch(std::move(batch));
          },
          nullptr};
}
// Batches from the dataset's own get_batch(indices), converted to B.
template <class B, class Ptr>
LoaderSource get_batch_source(Ptr ds) {
  NABLA_CHECK(ValueError, ds != nullptr, "DataLoader: the dataset is null");
  const int64_t n = static_cast<int64_t>(ds->size());
  return {n,
          [ds](std::span<const int64_t> indices, bool pin) {
            B batch = ds->get_batch(indices);
            if (pin) pin_tensors(batch);
            return erase_batch(std::move(batch));
          },
          nullptr};
}

// A dataset argument: a Dataset or a struct with size() and get(i), by value or as a shared_ptr.
template <class D>
struct dataset_type {
  using type = std::remove_cvref_t<D>;
};
template <class X>
struct dataset_type<std::shared_ptr<X>> {
  using type = std::remove_cv_t<X>;
};
template <class D>
using dataset_t = typename dataset_type<std::remove_cvref_t<D>>::type;

template <class D>
concept ExampleDataset = std::derived_from<D, Dataset> || DatasetLike<D>;
template <class D>
concept AnyDataset = requires(const D& d, int64_t i) {
  { d.size() } -> std::convertible_to<int64_t>;
  d.get(i);
};
struct NotADataset {};
template <class D>
struct sample_type {
  using type = NotADataset;
};
template <AnyDataset D>
struct sample_type<D> {
  using type = std::remove_cvref_t<decltype(std::declval<const D&>().get(int64_t{}))>;
};
// What dataset D's get(i) returns (Example for every Dataset).
template <class D>
using sample_t = typename sample_type<dataset_t<D>>::type;

template <class D>
concept HasGetBatch = requires(const D& d, std::span<const int64_t> idx) {
  d.get_batch(idx);
};
template <class D, class B>
concept GetBatchGives = requires(const D& d, std::span<const int64_t> idx) {
  { d.get_batch(idx) } -> std::convertible_to<B>;
};

// The batch a loader over D gives without a collate: Example for Example datasets; else what D's
// own get_batch returns, or the default_collate of its samples.
template <class D, class Ds = dataset_t<D>>
struct default_batch {
  using type = typename batch_or_tag<sample_t<D>>::type;
};
template <class D, ExampleDataset Ds>
struct default_batch<D, Ds> {
  using type = Example;
};
template <class D, class Ds>
requires(!ExampleDataset<Ds> && HasGetBatch<Ds>) struct default_batch<D, Ds> {
  using type = std::remove_cvref_t<decltype(std::declval<const Ds&>().get_batch(std::span<const int64_t>{}))>;
};
template <class D>
using default_batch_t = typename default_batch<D>::type;

struct NotACollate {};
template <class D, class C>
struct collate_result {
  using type = NotACollate;
};
template <class D, class C>
requires std::invocable < C&, const std::vector<sample_t<D>>
& > struct collate_result<D, C> {
  using type = std::remove_cvref_t<std::invoke_result_t<C&, const std::vector<sample_t<D>>&>>;
};
template <class D, class C>
using collate_result_t = typename collate_result<D, std::remove_cvref_t<C>>::type;

// The shared handle a loader keeps of `dataset`: share() for Example datasets, else a shared_ptr
// to a copy (or the shared_ptr given).
template <class D>
auto hold(D&& dataset) {
  using Ds = dataset_t<D>;
  if constexpr (ExampleDataset<Ds>) return share(std::forward<D>(dataset));
  else if constexpr (!std::is_same_v<std::remove_cvref_t<D>, Ds>) return std::shared_ptr<const Ds>(dataset);
  else return std::make_shared<const Ds>(std::forward<D>(dataset));
}

class EpochRun;

// One epoch being iterated: the engine's handle, which BasicDataLoader<B>::Iterator wraps.
class Epoch {
 public:
  explicit Epoch(std::unique_ptr<EpochRun> run);
  Epoch(Epoch&&) noexcept;
  Epoch& operator=(Epoch&&) noexcept;
  ~Epoch();
  void* current() const;  // the current batch; IndexError past the end
  void advance();
  bool done() const;

 private:
  std::unique_ptr<EpochRun> run_;
};
}  // namespace internal

// What every DataLoader has whatever its batch type: the order, seed, workers and position. (A
// checkpoint saves and restores a loader through this; see optim/checkpoint.h.)
class DataLoaderBase {
 public:
  using Options = DataLoaderOptions;

  // Batches in one full epoch (the epoch begin() would start next).
  int64_t size() const;
  // The dataset when its samples are Examples (a Dataset, or a struct whose get(i) returns an
  // Example); null for other datasets.
  const DatasetPtr& dataset() const { return dataset_; }
  const Options& options() const { return options_; }
  uint64_t seed() const { return seed_; }

  LoaderState state() const;
  // The next begin() continues epoch state.epoch from state.index, with state.seed.
  void load_state(const LoaderState& state);
  // The next begin() starts epoch `epoch` from its beginning.
  void set_epoch(int64_t epoch);

 protected:
  DataLoaderBase(internal::LoaderSource source, Options options);
  DataLoaderBase(DataLoaderBase&&) noexcept;
  DataLoaderBase& operator=(DataLoaderBase&&) noexcept;
  ~DataLoaderBase();
  // Starts the next epoch (or resumes the one given to load_state).
  internal::Epoch begin_epoch();

 private:
  // The index order of `epoch`, checked to be in range (cached for the last epoch asked).
  std::shared_ptr<const std::vector<int64_t>> epoch_order(int64_t epoch) const;

  int64_t dataset_size_ = 0;
  internal::BatchBuilder build_;
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

template <class B = Example>
class BasicDataLoader : public DataLoaderBase {
 public:
  using batch_type = B;

  // `dataset`: any Dataset, a shared_ptr to one, a struct with size() and get(i), or a shared_ptr
  // to such a struct. Batches: Example datasets' get_batch (options.collate over get(i) when set);
  // other datasets' own get_batch(std::span<const int64_t>) when they have one, else
  // default_collate of their samples.
  template <class D>
  requires(!std::derived_from<std::remove_cvref_t<D>, DataLoaderBase>) explicit BasicDataLoader(D&& dataset,
                                                                                                Options options = {})
      : DataLoaderBase(default_source(std::forward<D>(dataset), options), options) {}

  // `collate`: any callable taking the batch's samples as std::span<const T> or const
  // std::vector<T>& (T: what dataset.get(i) returns) and returning the batch (converted to B). It
  // runs on the worker threads, several at once: it must not modify shared state.
  template <class D, class C>
  requires(!std::derived_from<std::remove_cvref_t<D>, DataLoaderBase>)
      BasicDataLoader(D&& dataset, Options options, C collate)
      : DataLoaderBase(collate_source(std::forward<D>(dataset), options, std::move(collate)), options) {}

  BasicDataLoader(BasicDataLoader&&) noexcept = default;
  BasicDataLoader& operator=(BasicDataLoader&&) noexcept = default;
  ~BasicDataLoader() = default;

  class Sentinel {};
  // An input iterator over one epoch's batches; move-only, owns that epoch's worker threads.
  class Iterator {
   public:
    Iterator(Iterator&&) noexcept = default;
    Iterator& operator=(Iterator&&) noexcept = default;
    ~Iterator() = default;
    B& operator*() const { return *static_cast<B*>(epoch_.current()); }
    B* operator->() const { return &**this; }
    Iterator& operator++() {
      epoch_.advance();
      return *this;
    }
    bool operator==(Sentinel) const { return epoch_.done(); }

   private:
    friend class BasicDataLoader;
    explicit Iterator(internal::Epoch epoch) : epoch_(std::move(epoch)) {}
    internal::Epoch epoch_;
  };

  // Starts the next epoch (or resumes the one given to load_state). Only one epoch can be iterated
  // at a time; the DataLoader must outlive its iterators.
  Iterator begin() { return Iterator(begin_epoch()); }
  Sentinel end() const { return {}; }

 private:
  template <class D>
  static internal::LoaderSource default_source(D&& dataset, const Options& options) {
    using Ds = internal::dataset_t<D>;
    using T = internal::sample_t<D>;
    static_assert(!std::is_same_v<T, internal::NotADataset>,
                  "data::DataLoader: a dataset needs `int64_t size() const` and `get(int64_t) const` (returning an "
                  "Example, or any sample data::default_collate can stack; see data/collate.h)");
    if constexpr (internal::ExampleDataset<Ds>) {
      static_assert(std::is_same_v<B, Example>,
                    "data::BasicDataLoader<B>: this dataset's samples are Examples, which collate to an Example: "
                    "give a collate that returns a B");
      return internal::example_source(share(std::forward<D>(dataset)), options.collate);
    } else {
      NABLA_CHECK(ValueError, !options.collate,
                  "DataLoader: options.collate takes Examples, but this dataset's samples are another type: pass "
                  "the collate as the DataLoader's third argument");
      if constexpr (internal::GetBatchGives<Ds, B>) {
        return internal::get_batch_source<B>(internal::hold(std::forward<D>(dataset)));
      } else {
        static_assert(Collatable<T>,
                      "data::DataLoader: this dataset's samples cannot be collated by data::default_collate (see "
                      "data/collate.h for the types it stacks): give the DataLoader a collate as its third argument");
        if constexpr (Collatable<T>) {
          static_assert(std::convertible_to<collate_t<T>, B>,
                        "data::DataLoader's batches are Examples, but this dataset's samples collate to another type: "
                        "use data::BasicDataLoader (which deduces the batch type), or give a collate that returns an "
                        "Example");
          return internal::sample_source<B, T>(internal::hold(std::forward<D>(dataset)),
                                               [](const std::vector<T>& s) { return default_collate(s); });
        } else {
          return {};
        }
      }
    }
  }

  template <class D, class C>
  static internal::LoaderSource collate_source(D&& dataset, const Options& options, C collate) {
    using T = internal::sample_t<D>;
    static_assert(!std::is_same_v<T, internal::NotADataset>,
                  "data::DataLoader: a dataset needs `int64_t size() const` and `get(int64_t) const`");
    static_assert(std::invocable<C&, const std::vector<T>&>,
                  "data::DataLoader: the collate must be callable with the samples of a batch, as std::span<const T> "
                  "or const std::vector<T>& (T: what the dataset's get(i) returns)");
    if constexpr (std::invocable<C&, const std::vector<T>&>) {
      static_assert(std::convertible_to<std::invoke_result_t<C&, const std::vector<T>&>, B>,
                    "data::BasicDataLoader<B>: the collate's result does not convert to B (data::DataLoader's B is "
                    "Example; data::BasicDataLoader deduces B from the collate)");
      NABLA_CHECK(ValueError, !options.collate,
                  "DataLoader: both options.collate and a collate argument were given; pass one");
      return internal::sample_source<B, T>(internal::hold(std::forward<D>(dataset)), std::move(collate));
    } else {
      return {};
    }
  }
};

// The batch type comes from the dataset (its samples' default_collate, or Example) or from the
// collate's result:  data::BasicDataLoader loader(reviews, {.batch_size = 8}, collate_batch);
template <class D>
BasicDataLoader(D&&) -> BasicDataLoader<internal::default_batch_t<D>>;
template <class D>
BasicDataLoader(D&&, DataLoaderOptions) -> BasicDataLoader<internal::default_batch_t<D>>;
template <class D, class C>
BasicDataLoader(D&&, DataLoaderOptions, C) -> BasicDataLoader<internal::collate_result_t<D, C>>;

// The loader of Example batches, which most programs use:
//   data::DataLoader loader(train, {.batch_size = 64});  for (auto& batch : loader) batch.data ...
using DataLoader = BasicDataLoader<Example>;

}  // namespace nabla::data
