// libtorch's data API: datasets (CRTP), examples, transforms, samplers and the data loader.
//
//   struct Digits : torch::data::datasets::Dataset<Digits> {
//     torch::data::Example<> get(size_t i) override { return {images[i], labels[i]}; }
//     torch::optional<size_t> size() const override { return images.size(0); }
//     torch::Tensor images, labels;
//   };
//   auto ds = Digits{...}.map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
//                        .map(torch::data::transforms::Stack<>());
//   auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
//       std::move(ds), torch::data::DataLoaderOptions().batch_size(64).workers(2));
//   for (auto& batch : *loader) model->forward(batch.data) ... batch.target
//
// libtorch's semantics, which nabla::data's (one Example type, collated by the loader) do not
// have: a batch is whatever the dataset's get_batch returns (a std::vector<Example<>> until a
// Stack<> collates it), transforms apply per example or per batch, and the default sampler of
// make_data_loader is a RandomSampler (nabla's default generator draws its permutations, so
// torch::manual_seed fixes them). With workers > 0, that many batches are built ahead on other
// threads and handed out in order (libtorch's enforce_ordering); the dataset's get_batch must then
// be safe to call from several threads at once, as libtorch's stateless loader requires too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "archive.h"
#include "arg.h"
#include "types.h"

namespace torch::data {

template <class Data = Tensor, class Target = Tensor>
struct Example {
  using DataType = Data;
  using TargetType = Target;
  Example() = default;
  Example(Data data, Target target) : data(std::move(data)), target(std::move(target)) {}
  Data data;
  Target target;
};

namespace datasets {
template <class Source, class AppliedTransform>
class MapDataset;

// A dataset whose get_batch takes a request (indices) and returns a Batch.
namespace detail {
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
}  // namespace detail

template <class Self, class Batch = std::vector<Example<>>, class BatchRequest = ArrayRef<size_t>>
class BatchDataset {
 public:
  using SelfType = Self;
  using BatchType = Batch;
  using BatchRequestType = BatchRequest;
  // A stateful dataset's get_batch returns an optional batch (none: the epoch is over).
  static constexpr bool is_stateful = detail::is_optional<Batch>::value;
  virtual ~BatchDataset() = default;
  virtual Batch get_batch(BatchRequest request) = 0;
  virtual std::optional<size_t> size() const = 0;

  // A dataset that applies `transform` to each batch this one returns.
  template <class Transform>
  MapDataset<Self, Transform> map(Transform transform) & {
    return MapDataset<Self, Transform>(static_cast<Self&>(*this), std::move(transform));
  }
  template <class Transform>
  MapDataset<Self, Transform> map(Transform transform) && {
    return MapDataset<Self, Transform>(std::move(static_cast<Self&>(*this)), std::move(transform));
  }
};

// A dataset of single examples: get(index) is the one thing to write.
template <class Self, class SingleExample = Example<>>
class Dataset : public BatchDataset<Self, std::vector<SingleExample>> {
 public:
  using ExampleType = SingleExample;
  virtual ExampleType get(size_t index) = 0;
  std::vector<ExampleType> get_batch(ArrayRef<size_t> indices) override {
    std::vector<ExampleType> batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(get(i));
    return batch;
  }
};

// A dataset that keeps its own position: get_batch(batch_size) returns the next batch or none at
// the epoch's end; reset() starts a new epoch (the loader calls it at each begin()); save / load
// write and read its position in an archive.
template <class Self, class Batch = std::vector<Example<>>, class BatchRequest = size_t>
class StatefulDataset : public BatchDataset<Self, std::optional<Batch>, BatchRequest> {
 public:
  virtual void reset() = 0;
  virtual void save(serialize::OutputArchive& archive) const = 0;
  virtual void load(serialize::InputArchive& archive) = 0;
};

namespace detail {
// What a MapDataset's get_batch returns: the transform's batch, optional when the source's is.
template <class Source, class Transform>
using map_batch_t = std::conditional_t<Source::is_stateful, std::optional<typename Transform::OutputBatchType>,
                                       typename Transform::OutputBatchType>;
}  // namespace detail

template <class Source, class AppliedTransform>
class MapDataset
    : public BatchDataset<MapDataset<Source, AppliedTransform>, detail::map_batch_t<Source, AppliedTransform>,
                          typename Source::BatchRequestType> {
 public:
  using DatasetType = Source;
  using TransformType = AppliedTransform;
  using OutputBatchType = detail::map_batch_t<Source, AppliedTransform>;
  using BatchRequestType = typename Source::BatchRequestType;

  MapDataset(Source dataset, AppliedTransform transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}
  OutputBatchType get_batch(BatchRequestType request) override {
    if constexpr (Source::is_stateful) {
      auto batch = dataset_.get_batch(std::move(request));
      if (!batch) return std::nullopt;
      return transform_.apply_batch(std::move(*batch));
    } else {
      return transform_.apply_batch(dataset_.get_batch(std::move(request)));
    }
  }
  std::optional<size_t> size() const override { return dataset_.size(); }
  void reset() requires requires(Source& d) { d.reset(); }
  { dataset_.reset(); }
  const Source& dataset() const { return dataset_; }
  const AppliedTransform& transform() const { return transform_; }

 private:
  Source dataset_;
  AppliedTransform transform_;
};

// A dataset of two tensors' rows: {data[i], target[i]}.
class TensorDataset : public Dataset<TensorDataset> {
 public:
  TensorDataset(Tensor data, Tensor target) : data_(std::move(data)), target_(std::move(target)) {}
  Example<> get(size_t index) override {
    const auto i = static_cast<int64_t>(index);
    return {data_[i], target_[i]};
  }
  std::optional<size_t> size() const override { return static_cast<size_t>(data_.size(0)); }

 private:
  Tensor data_, target_;
};

// MNIST from root/{train,t10k}-{images-idx3,labels-idx1}-ubyte (plain or .gz), read by
// nabla::data::MNIST: images float32 (N, 1, 28, 28) in [0, 1], targets int64 (N).
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);
  Example<> get(size_t index) override;
  std::optional<size_t> size() const override { return static_cast<size_t>(images_.size(0)); }
  bool is_train() const noexcept { return train_; }
  const Tensor& images() const { return images_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor images_, targets_;
  bool train_;
};
}  // namespace datasets

namespace transforms {
template <class InputBatch, class OutputBatch>
class BatchTransform {
 public:
  using InputBatchType = InputBatch;
  using OutputBatchType = OutputBatch;
  virtual ~BatchTransform() = default;
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

// A transform of single examples, applied to each example of a batch.
template <class Input, class Output>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
 public:
  using InputType = Input;
  using OutputType = Output;
  virtual Output apply(Input input) = 0;
  std::vector<Output> apply_batch(std::vector<Input> input_batch) override {
    std::vector<Output> out;
    out.reserve(input_batch.size());
    for (Input& e : input_batch) out.push_back(apply(std::move(e)));
    return out;
  }
};

template <class Input, class Output = Input>
class Lambda : public Transform<Input, Output> {
 public:
  using FunctionType = std::function<Output(Input)>;
  explicit Lambda(FunctionType function) : function_(std::move(function)) {}
  Output apply(Input input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

template <class Batch, class Output = Batch>
class BatchLambda : public BatchTransform<Batch, Output> {
 public:
  using FunctionType = std::function<Output(Batch)>;
  explicit BatchLambda(FunctionType function) : function_(std::move(function)) {}
  Output apply_batch(Batch batch) override { return function_(std::move(batch)); }

 private:
  FunctionType function_;
};

// A transform of an example's data tensor (the target passes through).
template <class Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  using E = Example<Tensor, Target>;
  virtual Tensor operator()(Tensor input) = 0;
  E apply(E input) override { return {(*this)(std::move(input.data)), std::move(input.target)}; }
};

template <class Target = Tensor>
class TensorLambda : public TensorTransform<Target> {
 public:
  using FunctionType = std::function<Tensor(Tensor)>;
  explicit TensorLambda(FunctionType function) : function_(std::move(function)) {}
  Tensor operator()(Tensor input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

// (data - mean) / stddev per channel: mean and stddev hold one value per channel (or one for all),
// broadcast over (C, H, W) as (C, 1, 1), as libtorch's.
template <class Target = Tensor>
class Normalize : public TensorTransform<Target> {
 public:
  Normalize(ArrayRef<double> mean, ArrayRef<double> stddev)
      : mean(channel_values(mean, "mean")), stddev(channel_values(stddev, "stddev")) {}
  Tensor operator()(Tensor input) override { return input.sub(mean).div(stddev); }
  Tensor mean, stddev;

 private:
  static Tensor channel_values(ArrayRef<double> v, const char* what) {
    NABLA_CHECK(nabla::ValueError, !v.empty(), "torch::data::transforms::Normalize: no ", what, " values");
    std::vector<float> f(v.begin(), v.end());
    return nabla::tensor(f, kFloat32).unsqueeze(1).unsqueeze(2);
  }
};

template <class T = Example<>>
struct Stack;
// Collates a std::vector<Example<>> into one Example<> of stacked data and stacked targets.
template <>
struct Stack<Example<>> : BatchTransform<std::vector<Example<>>, Example<>> {
  Example<> apply_batch(std::vector<Example<>> examples) override {
    std::vector<Tensor> data, targets;
    data.reserve(examples.size());
    targets.reserve(examples.size());
    for (Example<>& e : examples) {
      data.push_back(std::move(e.data));
      targets.push_back(std::move(e.target));
    }
    return {nabla::stack(data), nabla::stack(targets)};
  }
};
}  // namespace transforms

namespace samplers {
// Which indices the loader asks the dataset for next.
class Sampler {
 public:
  using BatchRequestType = std::vector<size_t>;
  virtual ~Sampler() = default;
  virtual void reset(std::optional<size_t> new_size = std::nullopt) = 0;
  virtual std::optional<std::vector<size_t>> next(size_t batch_size) = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(size_t size) : size_(size) {}
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept { return index_; }

 private:
  size_t size_, index_ = 0;
};

// A fresh permutation of 0..size-1 at each reset, drawn from nabla's default generator.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t size, ScalarType index_dtype = kInt64);
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept { return index_; }

 private:
  std::vector<size_t> order_;
  size_t index_ = 0;
};
}  // namespace samplers

struct DataLoaderOptions {
  DataLoaderOptions() = default;
  DataLoaderOptions(size_t batch_size) : batch_size_(batch_size) {}  // NOLINT: make_data_loader(ds, 64)
  TORCH_ARG(size_t, batch_size) = 1;
  TORCH_ARG(size_t, workers) = 0;
  TORCH_ARG(std::optional<size_t>, max_jobs);
  TORCH_ARG(bool, enforce_ordering) = true;  // batches come in order whatever this says
  TORCH_ARG(bool, drop_last) = false;
};

namespace detail {
// What a loader's begin() returns: *it is the loader's current batch, ++it makes the next, and an
// iterator equals end() once there is none.
template <class Loader, class Batch>
class LoaderIterator {
 public:
  explicit LoaderIterator(Loader* loader) : loader_(loader) {}
  Batch& operator*() const { return *loader_->current_; }
  Batch* operator->() const { return &*loader_->current_; }
  LoaderIterator& operator++() {
    loader_->advance();
    return *this;
  }
  bool operator==(const LoaderIterator& other) const { return done() == other.done(); }

 private:
  bool done() const { return loader_ == nullptr || !loader_->current_; }
  Loader* loader_;
};
}  // namespace detail

// The loader make_data_loader returns: each begin() resets the sampler (a new epoch) and
// iterates the batches of Dataset::get_batch.
template <class Dataset, class Sampler>
class StatelessDataLoader {
 public:
  using BatchType = typename Dataset::BatchType;

  StatelessDataLoader(Dataset dataset, Sampler sampler, DataLoaderOptions options)
      : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)) {
    NABLA_CHECK(nabla::ValueError, options_.batch_size() > 0, "torch::data::make_data_loader: batch_size is 0");
  }
  StatelessDataLoader(const StatelessDataLoader&) = delete;
  StatelessDataLoader& operator=(const StatelessDataLoader&) = delete;
  ~StatelessDataLoader() { drain(); }

  using Iterator = detail::LoaderIterator<StatelessDataLoader, BatchType>;
  friend Iterator;

  Iterator begin() {
    drain();
    sampler_.reset();
    exhausted_ = false;
    fill();
    advance();
    return Iterator(this);
  }
  Iterator end() { return Iterator(nullptr); }
  const DataLoaderOptions& options() const noexcept { return options_; }

 private:
  // The next request of the sampler, or none (the epoch's end, or a short last batch with drop_last).
  std::optional<std::vector<size_t>> next_request() {
    if (exhausted_) return std::nullopt;
    auto r = sampler_.next(options_.batch_size());
    if (!r || r->empty() || (options_.drop_last() && r->size() < options_.batch_size())) {
      exhausted_ = true;
      return std::nullopt;
    }
    return r;
  }
  // Starts up to `workers` batches ahead (none without workers).
  void fill() {
    while (pending_.size() < options_.workers()) {
      auto r = next_request();
      if (!r) return;
      pending_.push_back(std::async(
          std::launch::async, [this, r = std::move(*r)]() mutable { return dataset_.get_batch(ArrayRef<size_t>(r)); }));
    }
  }
  void advance() {
    current_.reset();
    if (options_.workers() == 0) {
      if (auto r = next_request()) current_.emplace(dataset_.get_batch(ArrayRef<size_t>(*r)));
      return;
    }
    if (pending_.empty()) return;
    std::future<BatchType> f = std::move(pending_.front());
    pending_.pop_front();
    fill();
    current_.emplace(f.get());
  }
  void drain() {
    for (auto& f : pending_) f.wait();
    pending_.clear();
  }

  Dataset dataset_;
  Sampler sampler_;
  DataLoaderOptions options_;
  std::optional<BatchType> current_;
  std::deque<std::future<BatchType>> pending_;
  bool exhausted_ = false;
};

// The loader of a stateful dataset: begin() resets the dataset, each batch is
// get_batch(batch_size) until it returns none (batches are built on the calling thread).
template <class Dataset>
class StatefulDataLoader {
 public:
  using BatchType = typename Dataset::BatchType::value_type;

  StatefulDataLoader(Dataset dataset, DataLoaderOptions options)
      : dataset_(std::move(dataset)), options_(std::move(options)) {
    NABLA_CHECK(nabla::ValueError, options_.batch_size() > 0, "torch::data::make_data_loader: batch_size is 0");
  }
  using Iterator = detail::LoaderIterator<StatefulDataLoader, BatchType>;
  friend Iterator;
  Iterator begin() {
    dataset_.reset();
    advance();
    return Iterator(this);
  }
  Iterator end() { return Iterator(nullptr); }
  const DataLoaderOptions& options() const noexcept { return options_; }

 private:
  void advance() {
    current_ = dataset_.get_batch(options_.batch_size());
    if (current_ && options_.drop_last() && batch_size_of(*current_) < options_.batch_size()) current_.reset();
  }
  template <class B>
  static size_t batch_size_of(const B& b) {
    if constexpr (requires { b.size(); }) return b.size();
    else return static_cast<size_t>(b.data.size(0));
  }
  Dataset dataset_;
  DataLoaderOptions options_;
  std::optional<BatchType> current_;
};

template <class Dataset>
requires Dataset::is_stateful std::unique_ptr<StatefulDataLoader<Dataset>> make_data_loader(
    Dataset dataset, DataLoaderOptions options = {}) {
  return std::make_unique<StatefulDataLoader<Dataset>>(std::move(dataset), std::move(options));
}

template <class Sampler = samplers::RandomSampler, class Dataset>
requires(!Dataset::is_stateful) std::unique_ptr<StatelessDataLoader<Dataset, Sampler>> make_data_loader(
    Dataset dataset, DataLoaderOptions options = {}) {
  std::optional<size_t> size = dataset.size();
  NABLA_CHECK(nabla::ValueError, size.has_value(),
              "torch::data::make_data_loader: the dataset has no size (its size() returned nullopt)");
  Sampler sampler(*size);
  return std::make_unique<StatelessDataLoader<Dataset, Sampler>>(std::move(dataset), std::move(sampler),
                                                                 std::move(options));
}
template <class Dataset, class Sampler>
requires std::derived_from<Sampler, samplers::Sampler> std::unique_ptr<StatelessDataLoader<Dataset, Sampler>>
make_data_loader(Dataset dataset, Sampler sampler, DataLoaderOptions options = {}) {
  return std::make_unique<StatelessDataLoader<Dataset, Sampler>>(std::move(dataset), std::move(sampler),
                                                                 std::move(options));
}

}  // namespace torch::data
