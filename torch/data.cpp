#include "torch/data.h"

#include <numeric>

#include "core/ops.h"
#include "data/datasets.h"

namespace torch::data {

datasets::MNIST::MNIST(const std::string& root, Mode mode) : train_(mode == Mode::kTrain) {
  nabla::data::MNIST source(root, train_ ? nabla::data::Split::train : nabla::data::Split::test);
  images_ = source.images().to(kFloat32).div(255);  // (N, 1, 28, 28) u8 -> float32 in [0, 1]
  targets_ = source.targets();
}

Example<> datasets::MNIST::get(size_t index) {
  const auto n = static_cast<size_t>(images_.size(0));
  NABLA_CHECK(nabla::IndexError, index < n, "torch::data::datasets::MNIST: index ", index, " is out of range for ", n,
              " examples");
  const auto i = static_cast<int64_t>(index);
  return {images_[i], targets_[i]};
}

void samplers::SequentialSampler::reset(std::optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  index_ = 0;
}

std::optional<std::vector<size_t>> samplers::SequentialSampler::next(size_t batch_size) {
  if (index_ >= size_) return std::nullopt;
  const size_t n = std::min(batch_size, size_ - index_);
  std::vector<size_t> out(n);
  std::iota(out.begin(), out.end(), index_);
  index_ += n;
  return out;
}

samplers::RandomSampler::RandomSampler(int64_t size, ScalarType /*index_dtype*/) {
  NABLA_CHECK(nabla::ValueError, size >= 0, "torch::data::samplers::RandomSampler: negative size ", size);
  order_.resize(static_cast<size_t>(size));
  reset();
}

void samplers::RandomSampler::reset(std::optional<size_t> new_size) {
  if (new_size) order_.resize(*new_size);
  const auto n = static_cast<int64_t>(order_.size());
  Tensor perm = nabla::randperm(n, kInt64);  // nabla's default generator: torch::manual_seed fixes it
  const int64_t* p = perm.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = static_cast<size_t>(p[i]);
  index_ = 0;
}

std::optional<std::vector<size_t>> samplers::RandomSampler::next(size_t batch_size) {
  if (index_ >= order_.size()) return std::nullopt;
  const size_t n = std::min(batch_size, order_.size() - index_);
  std::vector<size_t> out(order_.begin() + static_cast<std::ptrdiff_t>(index_),
                          order_.begin() + static_cast<std::ptrdiff_t>(index_ + n));
  index_ += n;
  return out;
}

}  // namespace torch::data
