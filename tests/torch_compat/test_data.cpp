// torch::data: datasets, map and transforms, samplers, the loader (with workers), MNIST.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "tests/common/value_helpers.h"

using nabla::testing::int_values;
using nabla::testing::tensor_is;
using nabla::testing::throws_with;

namespace {
// Example i: data (1, 2, 2) filled with i, target i.
struct Counting : torch::data::datasets::Dataset<Counting> {
  explicit Counting(size_t n) : n(n) {}
  torch::data::Example<> get(size_t index) override {
    return {torch::full({1, 2, 2}, static_cast<double>(index)), torch::tensor(static_cast<int64_t>(index))};
  }
  torch::optional<size_t> size() const override { return n; }
  size_t n;
};
}  // namespace

TEST(TorchData, MapNormalizeAndStackMakeBatches) {
  auto ds = Counting(10).map(torch::data::transforms::Normalize<>(1.0, 2.0)).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(ds), torch::data::DataLoaderOptions().batch_size(4));
  std::vector<int64_t> sizes, targets;
  for (auto& batch : *loader) {
    sizes.push_back(batch.data.size(0));
    for (int64_t t : int_values(batch.target)) targets.push_back(t);
    // (i - 1) / 2 for each element of example i.
    EXPECT_NEAR(batch.data[0][0][0][0].item<double>(), (batch.target[0].item<double>() - 1) / 2, 1e-6);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(targets, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // A second pass is a new epoch.
  int batches = 0;
  for (auto& batch : *loader) batches += static_cast<int>(batch.data.size(0) > 0);
  EXPECT_EQ(batches, 3);
}

TEST(TorchData, BatchesAreVectorsBeforeStackAndWorkersKeepTheOrder) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Counting(7), torch::data::DataLoaderOptions().batch_size(3).workers(3).drop_last(true));
  std::vector<size_t> sizes;
  std::vector<int64_t> firsts;
  for (std::vector<torch::data::Example<>>& batch : *loader) {
    sizes.push_back(batch.size());
    firsts.push_back(batch[0].target.item<int64_t>());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3}));  // drop_last: the 7th example is left out
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 3}));
}

TEST(TorchData, LambdaTransformsAndTheRandomSampler) {
  using E = torch::data::Example<>;
  auto doubled = Counting(6)
                     .map(torch::data::transforms::Lambda<E>([](E e) {
                       return E{e.data * 2, e.target};
                     }))
                     .map(torch::data::transforms::TensorLambda<>([](torch::Tensor t) { return t + 1; }))
                     .map(torch::data::transforms::Stack<>());
  torch::manual_seed(5);
  auto loader = torch::data::make_data_loader(std::move(doubled), 6);  // RandomSampler, libtorch's default
  std::vector<int64_t> seen;
  for (auto& batch : *loader) {
    seen = int_values(batch.target);
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_DOUBLE_EQ(batch.data[i][0][1][1].item<double>(), 2.0 * static_cast<double>(seen[i]) + 1);
  }
  std::vector<int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  torch::data::samplers::RandomSampler a(20), b(20);
  torch::manual_seed(9);
  a.reset();
  torch::manual_seed(9);
  b.reset();
  EXPECT_EQ(*a.next(20), *b.next(20));
  EXPECT_FALSE(a.next(1).has_value());
}

namespace {
// A dataset that builds whole batches itself, in c10::'s spellings.
struct Squares : torch::data::datasets::BatchDataset<Squares, torch::data::Example<>> {
  torch::data::Example<> get_batch(c10::ArrayRef<size_t> indices) override {
    std::vector<int64_t> v(indices.begin(), indices.end());
    torch::Tensor i = torch::tensor(v);
    return {i * i, i};
  }
  c10::optional<size_t> size() const override { return 5; }
};
}  // namespace

TEST(TorchData, BatchDatasetsBuildTheirOwnBatches) {
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(Squares(), 2);
  std::vector<int64_t> squares;
  for (auto& batch : *loader)
    for (int64_t s : int_values(batch.data)) squares.push_back(s);
  EXPECT_EQ(squares, (std::vector<int64_t>{0, 1, 4, 9, 16}));
}

TEST(TorchData, TensorDatasetAndLoaderErrors) {
  torch::data::datasets::TensorDataset ds(torch::arange(6, torch::kFloat32).view({3, 2}), torch::tensor({7, 8, 9}));
  EXPECT_TRUE(tensor_is(ds.get(1).data, {2}, {2, 3}));
  EXPECT_EQ(ds.get(2).target.item<int64_t>(), 9);
  EXPECT_TRUE(throws_with<nabla::ValueError>(
      [&] { torch::data::make_data_loader(ds, torch::data::DataLoaderOptions().batch_size(0)); }, {"batch_size"}));
}

TEST(TorchData, MnistReadsIdxFilesWithLibtorchsModes) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("nabla_torch_mnist_" + std::to_string(getpid()));
  fs::create_directories(root);
  auto be32 = [](std::ofstream& f, uint32_t v) {
    unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                          static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
    f.write(reinterpret_cast<const char*>(b), 4);
  };
  {
    std::ofstream img(root / "t10k-images-idx3-ubyte", std::ios::binary),
        lbl(root / "t10k-labels-idx1-ubyte", std::ios::binary);
    be32(img, 0x803);
    be32(img, 2);
    be32(img, 28);
    be32(img, 28);
    for (int i = 0; i < 2 * 28 * 28; ++i) img.put(static_cast<char>(i < 28 * 28 ? 255 : 51));
    be32(lbl, 0x801);
    be32(lbl, 2);
    lbl.put(4);
    lbl.put(9);
  }
  torch::data::datasets::MNIST test(root.string(), torch::data::datasets::MNIST::Mode::kTest);
  EXPECT_FALSE(test.is_train());
  EXPECT_EQ(*test.size(), 2u);
  EXPECT_EQ(test.images().dtype(), torch::kFloat32);
  auto e = test.get(1);
  EXPECT_EQ(e.target.item<int64_t>(), 9);
  EXPECT_EQ(nabla::testing::shape_of(e.data), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_NEAR(e.data.max().item<double>(), 0.2, 1e-6);
  EXPECT_NEAR(test.get(0).data.min().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(throws_with<nabla::IndexError>([&] { test.get(2); }, {"MNIST", "out of range"}));
  fs::remove_all(root);
}

namespace {
// Hands out 0, 1, ..., n - 1 in batches of the requested size, remembering where it is.
struct Counter : torch::data::datasets::StatefulDataset<Counter> {
  explicit Counter(int64_t n) : n(n) {}
  torch::optional<std::vector<torch::data::Example<>>> get_batch(size_t batch_size) override {
    if (next >= n) return torch::nullopt;
    std::vector<torch::data::Example<>> batch;
    for (size_t i = 0; i < batch_size && next < n; ++i, ++next)
      batch.push_back({torch::full({1}, static_cast<double>(next)), torch::tensor(next)});
    return batch;
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n); }
  void reset() override { next = 0; }
  void save(torch::serialize::OutputArchive& archive) const override { archive.write("next", torch::IValue(next)); }
  void load(torch::serialize::InputArchive& archive) override {
    torch::IValue v;
    archive.read("next", v);
    next = v.toInt();
  }
  int64_t n, next = 0;
};
}  // namespace

TEST(TorchData, StatefulDatasetsKeepTheirPositionAndAreReset) {
  auto loader = torch::data::make_data_loader(Counter(7).map(torch::data::transforms::Stack<>()),
                                              torch::data::DataLoaderOptions().batch_size(3));
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (auto& batch : *loader)
      for (int64_t t : int_values(batch.target)) seen.push_back(t);
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  }
  Counter c(10);
  c.get_batch(4);
  torch::serialize::OutputArchive out;
  c.save(out);
  Counter d(10);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("nabla_torch_counter_" + std::to_string(getpid()))).string();
  out.save_to(path);
  torch::serialize::InputArchive in;
  in.load_from(path);
  d.load(in);
  EXPECT_EQ(d.next, 4);
  std::filesystem::remove(path);
}
