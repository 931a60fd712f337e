// Datasets, samplers and the DataLoader: ordering, seeds, workers, errors, early exit, resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include "nabla.h"

using namespace nabla;
namespace data = nabla::data;

namespace {

// Example i: data (2) filled with i, target i.
struct Counting {
  int64_t n;
  int64_t size() const { return n; }
  data::Example get(int64_t i) const { return {full({2}, static_cast<double>(i)), scalar_tensor(i, kInt64)}; }
};

// Like Counting, but get(bad) throws, and every get is counted and may sleep.
struct Instrumented {
  int64_t n;
  int64_t bad = -1;
  int sleep_us = 0;
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  int64_t size() const { return n; }
  data::Example get(int64_t i) const {
    calls->fetch_add(1);
    if (sleep_us) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    if (i == bad) throw IOError("Instrumented: example " + std::to_string(i) + " is corrupt");
    return {full({2}, static_cast<double>(i)), scalar_tensor(i, kInt64)};
  }
};

std::vector<int64_t> to_vec(const Tensor& t) {
  Tensor c = t.to(kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// The targets of each batch of one epoch.
std::vector<std::vector<int64_t>> epoch_targets(data::DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) out.push_back(to_vec(batch.target));
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

bool is_permutation_of_range(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), int64_t{0});
  return v == r;
}

}  // namespace

// ---- datasets -----------------------------------------------------------------------------------
TEST(DataDataset, TensorDatasetGetAndBatch) {
  Tensor x = arange(12, kFloat32).view({6, 2});
  Tensor y = arange(6, kInt64).mul(10);
  data::TensorDataset ds(x, y);
  EXPECT_EQ(ds.size(), 6);
  auto e = ds.get(4);
  EXPECT_TRUE(e.data.equal(tensor({8.f, 9.f})));
  EXPECT_EQ(e.target.item<int64_t>(), 40);
  std::vector<int64_t> idx = {5, 0, 3};
  auto b = ds.get_batch(idx);
  EXPECT_TRUE(b.data.equal(tensor({{10.f, 11.f}, {0.f, 1.f}, {6.f, 7.f}})));
  EXPECT_EQ(to_vec(b.target), (std::vector<int64_t>{50, 0, 30}));
  EXPECT_THROW(ds.get(6), IndexError);
  EXPECT_THROW(data::TensorDataset(x, arange(5, kInt64)), ShapeError);
}

TEST(DataDataset, CollateStacksAndNamesMismatches) {
  std::vector<data::Example> ex = {{tensor({1.f, 2.f}), scalar_tensor(3, kInt64)},
                                   {tensor({4.f, 5.f}), scalar_tensor(6, kInt64)}};
  auto b = data::collate(ex);
  EXPECT_EQ(b.data.sizes(), (Shape{2, 2}));
  EXPECT_EQ(to_vec(b.target), (std::vector<int64_t>{3, 6}));
  ex.push_back({tensor({1.f, 2.f, 3.f}), scalar_tensor(0, kInt64)});
  try {
    data::collate(ex);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& err) {
    EXPECT_NE(std::string(err.what()).find("example 2 has data of shape [3] but example 0 has [2]"), std::string::npos)
        << err.what();
  }
  std::vector<data::Example> unlabeled = {{tensor({1.f}), {}}, {tensor({2.f}), {}}};
  EXPECT_FALSE(data::collate(unlabeled).target.defined());
  unlabeled.push_back({tensor({3.f}), scalar_tensor(1, kInt64)});
  EXPECT_THROW(data::collate(unlabeled), ValueError);
}

TEST(DataDataset, UserStructSubsetAndConcat) {
  auto base = data::share(Counting{10});
  EXPECT_EQ(base->size(), 10);
  data::Subset sub(base, {7, 2, 9});
  EXPECT_EQ(sub.size(), 3);
  EXPECT_EQ(sub.get(1).target.item<int64_t>(), 2);
  std::vector<int64_t> idx = {2, 0};
  EXPECT_EQ(to_vec(sub.get_batch(idx).target), (std::vector<int64_t>{9, 7}));
  EXPECT_THROW(data::Subset(base, {10}), IndexError);

  data::TensorDataset tail(full({3, 2}, -1.0), tensor(std::vector<int64_t>{100, 101, 102}));
  data::ConcatDataset cat({base, data::share(tail), data::share(Counting{0}), data::share(Counting{2})});
  EXPECT_EQ(cat.size(), 15);
  EXPECT_EQ(cat.get(9).target.item<int64_t>(), 9);
  EXPECT_EQ(cat.get(10).target.item<int64_t>(), 100);
  EXPECT_EQ(cat.get(13).target.item<int64_t>(), 0);
  std::vector<int64_t> within = {12, 10}, across = {9, 11, 14};
  EXPECT_EQ(to_vec(cat.get_batch(within).target), (std::vector<int64_t>{102, 100}));
  EXPECT_EQ(to_vec(cat.get_batch(across).target), (std::vector<int64_t>{9, 101, 1}));
  EXPECT_THROW(cat.get(15), IndexError);
}

TEST(DataDataset, RandomSplitIsSeededAndDisjoint) {
  auto parts = data::random_split(Counting{100}, {70, 20, 10}, 42);
  ASSERT_EQ(parts.size(), 3u);
  std::vector<int64_t> all;
  for (auto& p : parts) all.insert(all.end(), p.indices().begin(), p.indices().end());
  EXPECT_EQ(parts[0].size(), 70);
  EXPECT_EQ(parts[2].size(), 10);
  EXPECT_TRUE(is_permutation_of_range(all, 100));
  auto again = data::random_split(Counting{100}, {70, 20, 10}, 42);
  EXPECT_EQ(again[1].indices(), parts[1].indices());
  auto other = data::random_split(Counting{100}, {70, 20, 10}, 43);
  EXPECT_NE(other[0].indices(), parts[0].indices());
  EXPECT_THROW(data::random_split(Counting{100}, {70, 20}, 1), ValueError);
}

TEST(DataDataset, RandomSplitByFractions) {
  // torch.utils.data.random_split(range(10), [0.5, 0.3, 0.2]) has lengths 5, 3, 2; for 11 examples
  // floor gives 5, 3, 2 and the one left over goes to the first subset: 6, 3, 2. For 7 with
  // thirds: 2, 2, 2 and then one to the first.
  auto parts = data::random_split_fractions(Counting{11}, {0.5, 0.3, 0.2}, 42);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].size(), 6);
  EXPECT_EQ(parts[1].size(), 3);
  EXPECT_EQ(parts[2].size(), 2);
  std::vector<int64_t> all;
  for (auto& p : parts) all.insert(all.end(), p.indices().begin(), p.indices().end());
  EXPECT_TRUE(is_permutation_of_range(all, 11));
  // The same seed and lengths give the same split as random_split with the lengths.
  EXPECT_EQ(data::random_split(Counting{11}, {6, 3, 2}, 42)[1].indices(), parts[1].indices());
  auto thirds = data::random_split_fractions(Counting{7}, {1.0 / 3, 1.0 / 3, 1.0 / 3}, 1);
  EXPECT_EQ(thirds[0].size(), 3);
  EXPECT_EQ(thirds[1].size(), 2);
  EXPECT_EQ(thirds[2].size(), 2);
  EXPECT_THROW(data::random_split_fractions(Counting{10}, {0.5, 0.4}, 1), ValueError);   // adds up to 0.9
  EXPECT_THROW(data::random_split_fractions(Counting{10}, {1.5, -0.5}, 1), ValueError);  // out of [0, 1]
  EXPECT_THROW(data::random_split_fractions(Counting{10}, {}, 1), ValueError);
}

// ---- samplers -----------------------------------------------------------------------------------
TEST(DataSampler, SequentialAndRandom) {
  EXPECT_EQ(data::SequentialSampler(4).indices(1, 3), (std::vector<int64_t>{0, 1, 2, 3}));
  data::RandomSampler rs(50);
  auto e0 = rs.indices(7, 0), e1 = rs.indices(7, 1);
  EXPECT_TRUE(is_permutation_of_range(e0, 50));
  EXPECT_TRUE(is_permutation_of_range(e1, 50));
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, rs.indices(7, 0));
  EXPECT_NE(e0, rs.indices(8, 0));
  auto with = data::RandomSampler(5, true, 1000).indices(1, 0);
  EXPECT_EQ(with.size(), 1000u);
  EXPECT_EQ(std::set<int64_t>(with.begin(), with.end()).size(), 5u);
  EXPECT_THROW(data::RandomSampler(5, false, 3), ValueError);
  auto sub = data::SubsetRandomSampler({3, 30, 300}).indices(1, 0);
  EXPECT_EQ(std::set<int64_t>(sub.begin(), sub.end()), (std::set<int64_t>{3, 30, 300}));
}

TEST(DataSampler, WeightedFollowsWeights) {
  data::WeightedRandomSampler ws({1, 0, 3, 0}, 40000);
  auto idx = ws.indices(123, 0);
  ASSERT_EQ(idx.size(), 40000u);
  int64_t counts[4] = {0, 0, 0, 0};
  for (int64_t i : idx) ++counts[i];
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(static_cast<double>(counts[2]) / 40000, 0.75, 0.01);
  EXPECT_EQ(idx, ws.indices(123, 0));

  auto distinct = data::WeightedRandomSampler({5, 1, 0, 2, 1}, 4, false).indices(9, 2);
  EXPECT_EQ(std::set<int64_t>(distinct.begin(), distinct.end()), (std::set<int64_t>{0, 1, 3, 4}));
  // Heavier items come first more often.
  int first_is_0 = 0;
  for (int e = 0; e < 2000; ++e)
    first_is_0 += data::WeightedRandomSampler({5, 1, 1, 1}, 4, false).indices(1, e)[0] == 0;
  EXPECT_NEAR(first_is_0 / 2000.0, 5.0 / 8.0, 0.04);
  EXPECT_THROW(data::WeightedRandomSampler({1, 0}, 2, false), ValueError);
  EXPECT_THROW(data::WeightedRandomSampler({1, -1}, 2), ValueError);
  EXPECT_THROW(data::WeightedRandomSampler({0, 0}, 2), ValueError);
}

// ---- DataLoader ---------------------------------------------------------------------------------
TEST(DataLoader, SequentialBatchesAndDropLast) {
  data::DataLoader loader(Counting{10}, {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  auto batches = epoch_targets(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<int64_t>{8, 9}));
  int n = 0;
  for (auto& b : loader) {
    EXPECT_EQ(b.data.sizes()[1], 2);
    EXPECT_TRUE(b.data.select(1, 0).equal(b.target.to(kFloat32)));
    ++n;
  }
  EXPECT_EQ(n, 3);

  data::DataLoader dropping(Counting{10}, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.size(), 2);
  EXPECT_EQ(flat(epoch_targets(dropping)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoader, ShuffleIsSeededPerEpoch) {
  data::DataLoader a(Counting{37}, {.batch_size = 5, .shuffle = true, .seed = 11});
  data::DataLoader b(Counting{37}, {.batch_size = 5, .shuffle = true, .seed = 11});
  data::DataLoader c(Counting{37}, {.batch_size = 5, .shuffle = true, .seed = 12});
  auto a0 = epoch_targets(a), a1 = epoch_targets(a);
  auto b0 = epoch_targets(b), b1 = epoch_targets(b);
  EXPECT_EQ(a0, b0);
  EXPECT_EQ(a1, b1);
  EXPECT_NE(flat(a0), flat(a1));
  EXPECT_TRUE(is_permutation_of_range(flat(a0), 37));
  EXPECT_TRUE(is_permutation_of_range(flat(a1), 37));
  EXPECT_NE(flat(epoch_targets(c)), flat(a0));
  // The order is sampler.indices(seed, epoch).
  EXPECT_EQ(flat(a0), data::RandomSampler(37).indices(11, 0));
  // set_epoch replays an epoch.
  a.set_epoch(1);
  EXPECT_EQ(epoch_targets(a), a1);
}

TEST(DataLoader, DefaultSeedFollowsManualSeed) {
  manual_seed(5);
  data::DataLoader a(Counting{3}, {.shuffle = true});
  manual_seed(5);
  data::DataLoader b(Counting{3}, {.shuffle = true});
  data::DataLoader c(Counting{3}, {.shuffle = true});
  EXPECT_EQ(a.seed(), b.seed());
  EXPECT_NE(b.seed(), c.seed());
}

TEST(DataLoader, WorkersGiveTheSameBatchesInOrder) {
  // Random per-example augmentation, and examples that take varying time, so workers finish out of order.
  auto noisy = [](const Tensor& x, Generator& gen) {
    auto rng = data::Rng::from(gen);
    return x + rng.uniform();
  };
  Instrumented slow{.n = 53};
  slow.sleep_us = 300;
  auto ds = data::TransformDataset(slow, noisy);
  std::vector<std::vector<float>> reference;
  for (int workers : {0, 1, 3}) {
    data::DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = 3, .num_workers = workers});
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<float> values;
      for (auto& batch : loader) {
        Tensor d = batch.data.contiguous();
        values.insert(values.end(), d.data_ptr<float>(), d.data_ptr<float>() + d.numel());
        // The augmentation is noise in [0, 1) on top of the index.
        Tensor diff = batch.data.select(1, 0) - batch.target.to(kFloat32);
        EXPECT_TRUE(diff.ge(0).all().item<bool>() && diff.lt(1).all().item<bool>());
      }
      if (workers == 0) reference.push_back(values);
      else EXPECT_EQ(values, reference[static_cast<size_t>(epoch)]) << workers << " workers, epoch " << epoch;
    }
  }
  EXPECT_NE(reference[0], reference[1]);
}

TEST(DataLoader, WorkerExceptionReachesTheLoopAtItsBatch) {
  for (int workers : {0, 2}) {
    Instrumented ds{.n = 40, .bad = 13};
    data::DataLoader loader(ds, {.batch_size = 4, .num_workers = workers});
    std::vector<int64_t> seen;
    try {
      for (auto& batch : loader) {
        auto t = to_vec(batch.target);
        seen.insert(seen.end(), t.begin(), t.end());
      }
      FAIL() << "expected the dataset's IOError";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find("example 13 is corrupt"), std::string::npos) << e.what();
    }
    // Batches 0..2 arrived, batch 3 (indices 12..15) failed.
    EXPECT_EQ(seen.size(), 12u) << workers << " workers";
    EXPECT_EQ(loader.state().index, 12);
    // The loader is usable afterwards.
    loader.set_epoch(0);
    auto it = loader.begin();
    EXPECT_EQ(to_vec(it->target), (std::vector<int64_t>{0, 1, 2, 3}));
  }
}

TEST(DataLoader, ExceptionInFirstBatchAndInCollate) {
  Instrumented ds{.n = 8, .bad = 0};
  data::DataLoader loader(ds, {.batch_size = 4, .num_workers = 2});
  EXPECT_THROW(loader.begin(), IOError);
  data::DataLoader bad_collate(
      Counting{8}, {.batch_size = 4, .num_workers = 2, .collate = [](std::span<const data::Example>) -> data::Example {
                      throw ValueError("collate failed");
                    }});
  EXPECT_THROW(for (auto& b : bad_collate)(void) b, ValueError);
}

TEST(DataLoader, EarlyBreakStopsWorkers) {
  Instrumented ds{.n = 10000};
  ds.sleep_us = 200;
  auto calls = ds.calls;
  {
    data::DataLoader loader(ds, {.batch_size = 8, .num_workers = 3, .prefetch_factor = 2});
    int n = 0;
    for (auto& batch : loader) {
      (void)batch;
      if (++n == 3) break;
    }
    // After the break the iterator is gone and its workers joined: nothing else gets built.
    int after = calls->load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(calls->load(), after);
    // At most the delivered batches plus the queue plus one batch per worker in flight were built.
    EXPECT_LE(after, 8 * (3 + 3 * 2 + 3));
    EXPECT_EQ(loader.state().index, 24);
    // The next begin() is the next epoch.
    auto it = loader.begin();
    EXPECT_EQ(loader.state().epoch, 1);
  }
  // Destroying a loader in the middle of an epoch returns promptly too.
  {
    data::DataLoader loader(ds, {.batch_size = 8, .num_workers = 2});
    auto it = loader.begin();
    ++it;
  }
  SUCCEED();
}

TEST(DataLoader, ResumeMidEpochReplaysTheRest) {
  // Seeded augmentation: the data (2) becomes (1, 2) + noise; the noise shows whether a resumed run
  // reproduces it.
  auto augment = data::Compose({[](const Tensor& x) {
                                  return x.view({1, 2});
                                },
                                data::RandomHorizontalFlip(),
                                [](const Tensor& x, Generator& g) { return x + data::Rng::from(g).uniform(); }});
  auto ds = data::TransformDataset(Counting{50}, augment);
  data::DataLoader::Options opts{.batch_size = 6, .shuffle = true, .seed = 99, .num_workers = 2};
  data::DataLoader original(ds, opts);
  std::vector<std::vector<int64_t>> epoch1;
  data::LoaderState saved;
  epoch_targets(original);  // epoch 0
  std::vector<Tensor> rest_data;
  int k = 0;
  for (auto& batch : original) {
    if (k == 3) saved = original.state();
    if (k >= 3) {
      epoch1.push_back(to_vec(batch.target));
      rest_data.push_back(batch.data);
    }
    ++k;
  }
  auto epoch2 = epoch_targets(original);
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.index, 6 * 4);  // taken inside the body of batch 3: batches 0..3 are consumed
  EXPECT_EQ(saved.seed, 99u);

  for (int workers : {0, 3}) {
    auto o = opts;
    o.seed = 1;  // overridden by the saved state
    o.num_workers = workers;
    data::DataLoader resumed(ds, o);
    resumed.load_state(saved);
    EXPECT_EQ(resumed.state(), saved);
    std::vector<std::vector<int64_t>> rest;
    size_t j = 0;
    for (auto& batch : resumed) {
      rest.push_back(to_vec(batch.target));
      if (j + 1 < rest_data.size()) EXPECT_TRUE(batch.data.equal(rest_data[j + 1])) << "batch " << j;
      ++j;
    }
    // The saved position was after batch 3, so the resumed run starts at batch 4.
    std::vector<std::vector<int64_t>> expected(epoch1.begin() + 1, epoch1.end());
    EXPECT_EQ(rest, expected);
    EXPECT_EQ(resumed.state(), (data::LoaderState{99, 2, 0}));
    EXPECT_EQ(epoch_targets(resumed), epoch2);
  }
}

TEST(DataLoader, UserDefinedSampler) {
  struct EvensThenOdds : data::Sampler {
    int64_t n;
    explicit EvensThenOdds(int64_t n) : n(n) {}
    std::vector<int64_t> indices(uint64_t, int64_t) const override {
      std::vector<int64_t> v;
      for (int64_t i = 0; i < n; i += 2) v.push_back(i);
      for (int64_t i = 1; i < n; i += 2) v.push_back(i);
      return v;
    }
  };
  data::DataLoader loader(Counting{7}, {.batch_size = 3, .sampler = std::make_shared<EvensThenOdds>(7)});
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<int64_t>>{{0, 2, 4}, {6, 1, 3}, {5}}));
  data::DataLoader weighted(
      Counting{4}, {.batch_size = 100,
                    .sampler = std::make_shared<data::WeightedRandomSampler>(std::vector<double>{0, 0, 1, 0}, 100)});
  EXPECT_EQ(flat(epoch_targets(weighted)), std::vector<int64_t>(100, 2));
  data::DataLoader broken(Counting{4}, {.sampler = std::make_shared<EvensThenOdds>(9)});
  EXPECT_THROW(broken.begin(), IndexError);
}

TEST(DataLoader, RejectsBadOptions) {
  EXPECT_THROW(data::DataLoader(Counting{0}), ValueError);
  EXPECT_THROW(data::DataLoader(Counting{3}, {.batch_size = 0}), ValueError);
  EXPECT_THROW(data::DataLoader(Counting{3}, {.num_workers = -1}), ValueError);
  EXPECT_THROW(
      data::DataLoader(Counting{3}, {.shuffle = true, .sampler = std::make_shared<data::SequentialSampler>(3)}),
      ValueError);
  data::DataLoader loader(Counting{3});
  loader.load_state({0, 0, 5});
  EXPECT_THROW(loader.begin(), IndexError);
}

TEST(DataLoader, IteratorPastTheEnd) {
  data::DataLoader loader(Counting{2}, {.batch_size = 2});
  auto it = loader.begin();
  EXPECT_FALSE(it == loader.end());
  ++it;
  EXPECT_TRUE(it == loader.end());
  EXPECT_THROW(*it, IndexError);
  EXPECT_THROW(++it, IndexError);
  EXPECT_EQ(loader.state(), (data::LoaderState{loader.seed(), 1, 0}));
}
