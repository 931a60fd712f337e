#include "data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "core/backend.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/graph.h"
#include "data/random.h"

namespace nabla::data {

namespace internal {

// One epoch of a DataLoader: the plan (order, start, batch size) and, with workers, the threads that
// build batches ahead into a ring of slots. Batch k lives in slot k % capacity; a worker may claim
// batch k only while k < wanted + capacity, where `wanted` is the batch the consumer waits for
// next, so a slot is always free when its batch is claimed.
class EpochRun {
 public:
  struct Plan {
    BatchBuilder build;
    bool pin_memory = false;  // and a CUDA backend is present
    std::shared_ptr<const std::vector<int64_t>> order;
    int64_t start = 0, batch_size = 1, num_batches = 0;
    uint64_t seed = 0;
    int64_t epoch = 0;
  };

  EpochRun(Plan plan, int num_workers, int prefetch_factor, std::shared_ptr<LoaderState> progress)
      : plan_(std::move(plan)), progress_(std::move(progress)) {
    if (num_workers > 0 && plan_.num_batches > 0) {
      int workers = static_cast<int>(std::min<int64_t>(num_workers, plan_.num_batches));
      slots_.resize(static_cast<size_t>(std::max(1, num_workers * std::max(1, prefetch_factor))));
      threads_.reserve(static_cast<size_t>(workers));
      try {
        for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { worker(); });
      } catch (...) {
        shutdown();
        throw;
      }
    }
    advance();  // batch 0
  }

  ~EpochRun() { shutdown(); }

  bool done() const { return next_ > plan_.num_batches; }
  void* current() const {
    NABLA_CHECK(IndexError, !done(), "DataLoader: the iterator is past the end of the epoch");
    return current_.get();
  }

  // Moves to the next batch: makes it current (waiting for a worker if needed) and records the
  // position, or marks the epoch done.
  void advance() {
    NABLA_CHECK(IndexError, !done(), "DataLoader: the iterator is past the end of the epoch");
    int64_t k = next_++;
    if (k == plan_.num_batches) {
      current_ = {};
      *progress_ = {plan_.seed, plan_.epoch + 1, 0};
      shutdown();
      return;
    }
    try {
      current_ = threads_.empty() ? build(k) : take(k);
    } catch (...) {
      next_ = plan_.num_batches + 1;  // an error ends the epoch; the position stays before batch k
      current_ = {};
      shutdown();
      throw;
    }
    auto [begin, end] = range(k);
    *progress_ = {plan_.seed, plan_.epoch, end};
    (void)begin;
  }

 private:
  struct Slot {
    bool ready = false;
    AnyBatch batch;
    std::exception_ptr error;
  };

  // Positions [begin, end) of the order that batch k covers.
  std::pair<int64_t, int64_t> range(int64_t k) const {
    int64_t n = static_cast<int64_t>(plan_.order->size());
    int64_t b = plan_.start + k * plan_.batch_size;
    return {b, std::min(n, b + plan_.batch_size)};
  }

  // Builds batch k; runs on a worker or, without workers, on the consumer's thread.
  AnyBatch build(int64_t k) const {
    auto [b, e] = range(k);
    std::span<const int64_t> idx(plan_.order->data() + b, static_cast<size_t>(e - b));
    autograd::NoGradGuard no_grad;
    // Random transforms draw from a generator that depends only on (seed, epoch, position).
    Generator gen(mix_seed(plan_.seed, static_cast<uint64_t>(plan_.epoch), static_cast<uint64_t>(b)));
    SampleGeneratorGuard guard(gen);
    return plan_.build(idx, plan_.pin_memory);
  }

  void worker() {
    const int64_t capacity = static_cast<int64_t>(slots_.size());
    for (;;) {
      int64_t k;
      {
        std::unique_lock lock(mu_);
        space_.wait(lock, [&] { return stop_ || claimed_ >= plan_.num_batches || claimed_ < wanted_ + capacity; });
        if (stop_ || claimed_ >= plan_.num_batches) return;
        k = claimed_++;
      }
      Slot result;
      try {
        result.batch = build(k);
      } catch (...) { result.error = std::current_exception(); }
      {
        std::lock_guard lock(mu_);
        if (result.error) claimed_ = std::max(claimed_, plan_.num_batches);  // build nothing after a failure
        Slot& slot = slots_[static_cast<size_t>(k % capacity)];
        slot = std::move(result);
        slot.ready = true;
      }
      ready_.notify_all();
    }
  }

  // Waits for batch k from the workers; rethrows the exception that building it raised.
  AnyBatch take(int64_t k) {
    const int64_t capacity = static_cast<int64_t>(slots_.size());
    Slot slot;
    {
      std::unique_lock lock(mu_);
      Slot& s = slots_[static_cast<size_t>(k % capacity)];
      ready_.wait(lock, [&] { return s.ready; });
      slot = std::move(s);
      s = Slot();
      wanted_ = k + 1;
    }
    space_.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
  }

  void shutdown() {
    if (threads_.empty()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    slots_.clear();
  }

  Plan plan_;
  std::shared_ptr<LoaderState> progress_;
  int64_t next_ = 0;  // the batch advance() delivers next; num_batches + 1 once past the end
  AnyBatch current_;

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable space_, ready_;
  std::vector<Slot> slots_;
  int64_t claimed_ = 0, wanted_ = 0;
  bool stop_ = false;
};

// ---- Epoch -------------------------------------------------------------------------------------
Epoch::Epoch(std::unique_ptr<EpochRun> run) : run_(std::move(run)) {}
Epoch::Epoch(Epoch&&) noexcept = default;
Epoch& Epoch::operator=(Epoch&&) noexcept = default;
Epoch::~Epoch() = default;

void* Epoch::current() const {
  NABLA_CHECK(IndexError, run_ != nullptr, "DataLoader: dereferencing an empty iterator");
  return run_->current();
}

void Epoch::advance() {
  NABLA_CHECK(IndexError, run_ != nullptr, "DataLoader: incrementing an empty iterator");
  run_->advance();
}

bool Epoch::done() const { return !run_ || run_->done(); }

LoaderSource example_source(DatasetPtr dataset, Collate collate) {
  NABLA_CHECK(ValueError, dataset != nullptr, "DataLoader: the dataset is null");
  const int64_t n = dataset->size();
  BatchBuilder build = [dataset, collate = std::move(collate)](std::span<const int64_t> idx, bool pin) {
    Example batch;
    if (collate) {
      std::vector<Example> examples;
      examples.reserve(idx.size());
      for (int64_t i : idx) examples.push_back(dataset->get(i));
      batch = collate(examples);
    } else {
      batch = dataset->get_batch(idx);
    }
    if (pin) pin_tensors(batch);
    return erase_batch(std::move(batch));
  };
  return {n, std::move(build), std::move(dataset)};
}

}  // namespace internal

// ---- DataLoader ---------------------------------------------------------------------------------
DataLoaderBase::DataLoaderBase(internal::LoaderSource source, Options options)
    : dataset_size_(source.size),
      build_(std::move(source.build)),
      dataset_(std::move(source.dataset)),
      options_(std::move(options)),
      progress_(std::make_shared<LoaderState>()) {
  const int64_t n = dataset_size_;
  NABLA_CHECK(ValueError, n > 0, "DataLoader: the dataset is empty");
  NABLA_CHECK(ValueError, options_.batch_size > 0, "DataLoader: batch_size must be positive, got ",
              options_.batch_size);
  NABLA_CHECK(ValueError, options_.num_workers >= 0, "DataLoader: num_workers must be non-negative, got ",
              options_.num_workers);
  NABLA_CHECK(ValueError, options_.prefetch_factor > 0, "DataLoader: prefetch_factor must be positive, got ",
              options_.prefetch_factor);
  NABLA_CHECK(ValueError, !(options_.shuffle && options_.sampler),
              "DataLoader: shuffle and sampler are mutually exclusive (shuffle with a RandomSampler instead)");
  if (options_.sampler) sampler_ = options_.sampler;
  else if (options_.shuffle) sampler_ = std::make_shared<RandomSampler>(n);
  else sampler_ = std::make_shared<SequentialSampler>(n);
  if (options_.seed) {
    seed_ = *options_.seed;
  } else {
    auto [s, counter] = default_generator(kCPU).reserve(1);
    seed_ = mix_seed(s, counter);
  }
  *progress_ = {seed_, 0, 0};
}

DataLoaderBase::DataLoaderBase(DataLoaderBase&&) noexcept = default;
DataLoaderBase& DataLoaderBase::operator=(DataLoaderBase&&) noexcept = default;
DataLoaderBase::~DataLoaderBase() = default;

std::shared_ptr<const std::vector<int64_t>> DataLoaderBase::epoch_order(int64_t epoch) const {
  if (cached_order_ && cached_epoch_ == epoch) return cached_order_;
  auto order = std::make_shared<const std::vector<int64_t>>(sampler_->indices(seed_, epoch));
  const int64_t n = dataset_size_;
  for (size_t k = 0; k < order->size(); ++k) {
    int64_t i = (*order)[k];
    NABLA_CHECK(IndexError, i >= 0 && i < n, "DataLoader: the sampler gave index ", i, " at position ", k, " of epoch ",
                epoch, " but the dataset has ", n, " examples");
  }
  cached_epoch_ = epoch;
  cached_order_ = order;
  return order;
}

static int64_t num_batches(int64_t samples, int64_t batch_size, bool drop_last) {
  if (samples <= 0) return 0;
  return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

int64_t DataLoaderBase::size() const {
  return num_batches(static_cast<int64_t>(epoch_order(next_epoch_)->size()), options_.batch_size, options_.drop_last);
}

internal::Epoch DataLoaderBase::begin_epoch() {
  const int64_t epoch = next_epoch_, start = next_index_;
  internal::EpochRun::Plan plan;
  plan.build = build_;
  plan.pin_memory = options_.pin_memory && has_backend(DeviceType::cuda);
  plan.order = epoch_order(epoch);
  const int64_t n = static_cast<int64_t>(plan.order->size());
  NABLA_CHECK(IndexError, start >= 0 && start <= n, "DataLoader: cannot resume epoch ", epoch, " at index ", start,
              ": the epoch has ", n, " samples");
  plan.start = start;
  plan.batch_size = options_.batch_size;
  plan.num_batches = num_batches(n - start, options_.batch_size, options_.drop_last);
  plan.seed = seed_;
  plan.epoch = epoch;
  next_epoch_ = epoch + 1;
  next_index_ = 0;
  *progress_ = {seed_, epoch, start};
  return internal::Epoch(
      std::make_unique<internal::EpochRun>(std::move(plan), options_.num_workers, options_.prefetch_factor, progress_));
}

LoaderState DataLoaderBase::state() const { return *progress_; }

void DataLoaderBase::load_state(const LoaderState& state) {
  NABLA_CHECK(ValueError, state.epoch >= 0 && state.index >= 0,
              "DataLoader: load_state: epoch and index must be non-negative, got epoch ", state.epoch, " index ",
              state.index);
  seed_ = state.seed;
  cached_order_.reset();
  next_epoch_ = state.epoch;
  next_index_ = state.index;
  *progress_ = state;
}

void DataLoaderBase::set_epoch(int64_t epoch) {
  NABLA_CHECK(ValueError, epoch >= 0, "DataLoader: set_epoch: epoch must be non-negative, got ", epoch);
  next_epoch_ = epoch;
  next_index_ = 0;
  *progress_ = {seed_, epoch, 0};
}

}  // namespace nabla::data
