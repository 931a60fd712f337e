// default_collate over samples of any structure (as torch.utils.data.default_collate), and the
// DataLoader over datasets of such samples: custom collates, workers, resume, samplers, pinning.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "data/distributed_sampler.h"
#include "nabla.h"
#include "optim/checkpoint.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
namespace data = nabla::data;
using nabla::testing::throws_with;

namespace {

std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.to(kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}
std::vector<double> reals(const Tensor& t) {
  Tensor c = t.to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// A review of the text-classification course: a label, its text and the text's token ids.
struct Review {
  int64_t label;
  std::string text;
  Tensor ids;  // (L) int64
};
struct ReviewBatch {
  Tensor label;     // (B) int64
  Tensor text_ids;  // (sum of L) int64, the ids one after another
  Tensor offsets;   // (B) int64, where each review's ids start
};

// Review i: label i % 4, text "review i", ids i, i+1, ..., of length 1 + i % 3.
struct Reviews {
  int64_t n;
  int64_t bad = -1;  // get(bad) throws
  int64_t size() const { return n; }
  Review get(int64_t i) const {
    if (i == bad) throw IOError("Reviews: review " + std::to_string(i) + " is corrupt");
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < 1 + i % 3; ++k) ids.push_back(i + k);
    return {i % 4, "review " + std::to_string(i), tensor(ids)};
  }
};

ReviewBatch collate_reviews(std::span<const Review> batch) {
  std::vector<int64_t> labels;
  std::vector<std::vector<int64_t>> ids;
  for (const Review& r : batch) {
    labels.push_back(r.label);
    ids.push_back(ints(r.ids));
  }
  text::BagBatch bag = text::bag_token_ids(ids);
  return {tensor(labels), bag.input, bag.offsets};
}

// One epoch of a loader of ReviewBatches, as plain numbers: label, text_ids and offsets per batch.
template <class Loader>
std::vector<std::vector<std::vector<int64_t>>> review_epoch(Loader& loader) {
  std::vector<std::vector<std::vector<int64_t>>> out;
  for (ReviewBatch& b : loader) out.push_back({ints(b.label), ints(b.text_ids), ints(b.offsets)});
  return out;
}

// A sample with a declared batch type.
struct Pair {
  Tensor x;  // (2) float32
  int64_t y;
  struct batch_type {
    Tensor x;  // (B, 2)
    Tensor y;  // (B) int64
  };
};

struct Inner {
  double w;
  std::vector<int> v;
};
struct Outer {
  Inner inner;
  std::optional<Tensor> mask;
  std::array<int64_t, 2> span;
};

}  // namespace

// A type outside the rules, made collatable by specializing Collator: (B, 2) int64.
struct Interval {
  int64_t lo = 0, hi = 0;
  Interval() = default;
  Interval(int64_t lo, int64_t hi) : lo(lo), hi(hi) {}
};
template <>
struct nabla::data::Collator<Interval> {
  using batch_type = Tensor;
  static Tensor collate(std::span<const Interval> s) {
    std::vector<int64_t> v;
    for (const Interval& i : s) v.insert(v.end(), {i.lo, i.hi});
    return tensor(v, {static_cast<int64_t>(s.size()), 2});
  }
};

// ---- default_collate ------------------------------------------------------------------------------
TEST(DefaultCollate, TensorsStack) {
  std::vector<Tensor> xs = {tensor({1.f, 2.f}), tensor({3.f, 4.f}), tensor({5.f, 6.f})};
  Tensor b = data::default_collate(xs);
  EXPECT_EQ(b.sizes(), (Shape{3, 2}));
  EXPECT_EQ(b.dtype(), kFloat32);
  EXPECT_EQ(reals(b), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // 0-dim tensors stack to (B); mixed dtypes promote as torch.stack.
  std::vector<Tensor> scalars = {scalar_tensor(1, kInt64), scalar_tensor(2.5, kFloat64)};
  Tensor s = data::default_collate(scalars);
  EXPECT_EQ(s.sizes(), (Shape{2}));
  EXPECT_EQ(s.dtype(), kFloat64);
  EXPECT_EQ(reals(s), (std::vector<double>{1, 2.5}));
}

TEST(DefaultCollate, NumbersBecomeTensorsAsPyTorch) {
  // torch: default_collate([True, False]) is bool, of ints int64, of floats float64.
  std::vector<bool> flags = {true, false, true};
  Tensor f = data::default_collate(std::vector<char>{1, 0});  // char is an integer: int64
  EXPECT_EQ(f.dtype(), kInt64);
  std::array<bool, 3> fa = {flags[0], flags[1], flags[2]};
  Tensor b = data::default_collate(fa);
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(ints(b), (std::vector<int64_t>{1, 0, 1}));
  Tensor i = data::default_collate(std::vector<int>{3, -1, 7});
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(ints(i), (std::vector<int64_t>{3, -1, 7}));
  Tensor u = data::default_collate(std::vector<uint8_t>{255, 0});
  EXPECT_EQ(u.dtype(), kInt64);
  EXPECT_EQ(ints(u), (std::vector<int64_t>{255, 0}));
  Tensor d = data::default_collate(std::vector<float>{0.5f, -2.f});
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(d.sizes(), (Shape{2}));
  EXPECT_EQ(reals(d), (std::vector<double>{0.5, -2}));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        data::default_collate(std::vector<uint64_t>{1, UINT64_MAX});
      },
      {"sample 1 holds 18446744073709551615", "int64"}));
  EXPECT_TRUE(throws_with<ValueError>([] { data::default_collate(std::vector<int>{}); }, {"no samples"}));
}

TEST(DefaultCollate, StringsStayAList) {
  std::vector<std::string> s = {"a", "bc"};
  std::vector<std::string> b = data::default_collate(s);
  EXPECT_EQ(b, s);
}

TEST(DefaultCollate, PairsAndTuplesCollateEachField) {
  using Sample = std::tuple<int64_t, std::string, Tensor>;
  std::vector<Sample> s = {{1, "x", tensor({1.f, 2.f})}, {2, "y", tensor({3.f, 4.f})}};
  auto [label, text, ids] = data::default_collate(s);
  static_assert(std::is_same_v<data::collate_t<Sample>, std::tuple<Tensor, std::vector<std::string>, Tensor>>);
  EXPECT_EQ(ints(label), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(text, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(ids.sizes(), (Shape{2, 2}));
  EXPECT_EQ(reals(ids), (std::vector<double>{1, 2, 3, 4}));

  std::vector<std::pair<double, bool>> p = {{1.5, true}, {2.5, false}};
  std::pair<Tensor, Tensor> pb = data::default_collate(p);
  EXPECT_EQ(reals(pb.first), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ(pb.second.dtype(), kBool);
}

TEST(DefaultCollate, VectorsAndArraysTranspose) {
  // torch: default_collate([[1, 2, 3], [4, 5, 6]]) == [tensor([1, 4]), tensor([2, 5]), tensor([3, 6])]
  std::vector<std::vector<int>> s = {{1, 2, 3}, {4, 5, 6}};
  std::vector<Tensor> b = data::default_collate(s);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(ints(b[0]), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(ints(b[2]), (std::vector<int64_t>{3, 6}));
  std::vector<std::array<Tensor, 2>> a = {{tensor({1.f}), tensor({2.f})}, {tensor({3.f}), tensor({4.f})}};
  std::array<Tensor, 2> ab = data::default_collate(a);
  EXPECT_EQ(ab[1].sizes(), (Shape{2, 1}));
  EXPECT_EQ(reals(ab[1]), (std::vector<double>{2, 4}));

  s.push_back({7, 8});
  EXPECT_TRUE(throws_with<ValueError>(
      [&] { data::default_collate(s); },
      {"each element in list of batch should be of equal size", "sample 2 has 2 elements but sample 0 has 3"}));
}

TEST(DefaultCollate, MapsCollateEachKey) {
  using Sample = std::map<std::string, Tensor>;
  std::vector<Sample> s = {{{"ids", tensor({1.f, 2.f})}, {"y", scalar_tensor(0, kInt64)}},
                           {{"ids", tensor({3.f, 4.f})}, {"y", scalar_tensor(1, kInt64)}}};
  std::map<std::string, Tensor> b = data::default_collate(s);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b["ids"].sizes(), (Shape{2, 2}));
  EXPECT_EQ(ints(b["y"]), (std::vector<int64_t>{0, 1}));

  std::vector<Sample> missing = {s[0], {{"ids", tensor({1.f, 2.f})}, {"z", scalar_tensor(0, kInt64)}}};
  EXPECT_TRUE(throws_with<ValueError>([&] { data::default_collate(missing); }, {"sample 1 has no key \"y\""}));
  std::vector<Sample> fewer = {s[0], {{"ids", tensor({1.f, 2.f})}}};
  EXPECT_TRUE(
      throws_with<ValueError>([&] { data::default_collate(fewer); }, {"sample 1 has 1 keys but sample 0 has 2"}));
}

TEST(DefaultCollate, ShapeErrorsNameTheSampleAndWhere) {
  std::vector<Tensor> xs = {tensor({1.f, 2.f}), tensor({1.f, 2.f}), tensor({1.f, 2.f, 3.f})};
  EXPECT_TRUE(
      throws_with<ShapeError>([&] { data::default_collate(xs); }, {"sample 2 has shape [3] but sample 0 has [2]"}));
  using Sample = std::tuple<int, std::map<std::string, Tensor>>;
  std::vector<Sample> s = {{0, {{"ids", tensor({1.f, 2.f})}}}, {1, {{"ids", tensor({1.f})}}}};
  EXPECT_TRUE(throws_with<ShapeError>([&] { data::default_collate(s); },
                                      {"sample 1 has shape [1] but sample 0 has [2] (in field 1, key \"ids\")"}));
  std::vector<std::vector<Tensor>> v = {{tensor({1.f}), tensor({1.f})}, {tensor({1.f}), tensor({1.f, 2.f})}};
  EXPECT_TRUE(throws_with<ShapeError>([&] { data::default_collate(v); }, {"(in element 1)"}));
}

TEST(DefaultCollate, UndefinedTensorsAndOptionals) {
  std::vector<Tensor> none = {Tensor(), Tensor()};
  EXPECT_FALSE(data::default_collate(none).defined());
  std::vector<Tensor> mixed = {tensor({1.f}), Tensor()};
  EXPECT_TRUE(throws_with<ValueError>([&] { data::default_collate(mixed); }, {"sample 1 has an undefined tensor"}));

  std::vector<std::optional<int>> all = {3, 4}, empty = {std::nullopt, std::nullopt}, half = {3, std::nullopt};
  std::optional<Tensor> a = data::default_collate(all);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(ints(*a), (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(data::default_collate(empty).has_value());
  EXPECT_TRUE(
      throws_with<ValueError>([&] { data::default_collate(half); }, {"sample 1 is std::nullopt but sample 0 is not"}));
}

TEST(DefaultCollate, ExamplesKeepDataCollate) {
  std::vector<data::Example> ex = {{tensor({1.f, 2.f}), scalar_tensor(3, kInt64)},
                                   {tensor({4.f, 5.f}), scalar_tensor(6, kInt64)}};
  data::Example b = data::default_collate(ex);
  EXPECT_EQ(b.data.sizes(), (Shape{2, 2}));
  EXPECT_EQ(ints(b.target), (std::vector<int64_t>{3, 6}));
  ex.push_back({tensor({1.f, 2.f, 3.f}), scalar_tensor(0, kInt64)});
  EXPECT_TRUE(throws_with<ShapeError>([&] { data::default_collate(ex); },
                                      {"collate: example 2 has data of shape [3] but example 0 has [2]"}));
}

TEST(DefaultCollate, StructsByFieldWithOrWithoutABatchType) {
  std::vector<Pair> s = {{tensor({1.f, 2.f}), 7}, {tensor({3.f, 4.f}), 8}};
  Pair::batch_type b = data::default_collate(s);
  EXPECT_EQ(b.x.sizes(), (Shape{2, 2}));
  EXPECT_EQ(ints(b.y), (std::vector<int64_t>{7, 8}));

  // Without a batch_type the batch is a tuple of the collated fields; structs nest.
  std::vector<Outer> o = {{{0.5, {1, 2}}, tensor({true, false}), {10, 11}},
                          {{1.5, {3, 4}}, tensor({true, true}), {12, 13}}};
  auto ob = data::default_collate(o);
  static_assert(std::is_same_v<decltype(ob), std::tuple<std::tuple<Tensor, std::vector<Tensor>>, std::optional<Tensor>,
                                                        std::array<Tensor, 2>>>);
  auto& [inner, mask, span] = ob;
  EXPECT_EQ(reals(std::get<0>(inner)), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(ints(std::get<1>(inner)[1]), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(mask->sizes(), (Shape{2, 2}));
  EXPECT_EQ(ints(span[0]), (std::vector<int64_t>{10, 12}));

  std::vector<Review> r = {{1, "a", tensor({1.f})}, {2, "b", tensor({2.f, 3.f})}};
  EXPECT_TRUE(throws_with<ShapeError>([&] { data::default_collate(r); }, {"(in field 2)"}));
}

TEST(DefaultCollate, CollatorSpecialization) {
  std::vector<std::pair<Interval, int>> s = {{{1, 2}, 0}, {{3, 5}, 1}};
  auto [spans, k] = data::default_collate(s);
  EXPECT_EQ(spans.sizes(), (Shape{2, 2}));
  EXPECT_EQ(ints(spans), (std::vector<int64_t>{1, 2, 3, 5}));
  EXPECT_EQ(ints(k), (std::vector<int64_t>{0, 1}));
}

TEST(DefaultCollate, ForEachTensorVisitsEveryField) {
  std::tuple<Tensor, std::vector<std::string>, std::map<std::string, Tensor>, std::optional<Tensor>, ReviewBatch> b{
      zeros({1}), {"s"}, {{"a", zeros({1})}, {"b", zeros({1})}}, zeros({1}), {zeros({1}), zeros({1}), Tensor()}};
  int n = 0;
  data::for_each_tensor(b, [&](Tensor& t) {
    t = t + 1;
    ++n;
  });
  EXPECT_EQ(n, 6);  // the undefined offsets are skipped
  EXPECT_EQ(reals(std::get<2>(b)["b"]), (std::vector<double>{1}));
  EXPECT_EQ(reals(std::get<4>(b).text_ids), (std::vector<double>{1}));
}

// ---- the DataLoader over structured samples -------------------------------------------------------
TEST(DataLoaderStructured, CustomCollateWithAndWithoutWorkers) {
  std::vector<std::vector<std::vector<int64_t>>> reference;
  for (int workers : {0, 2}) {
    data::BasicDataLoader loader(Reviews{23}, {.batch_size = 4, .shuffle = true, .seed = 5, .num_workers = workers},
                                 collate_reviews);
    static_assert(std::is_same_v<decltype(loader), data::BasicDataLoader<ReviewBatch>>);
    EXPECT_EQ(loader.size(), 6);
    EXPECT_EQ(loader.dataset(), nullptr);
    auto epoch = review_epoch(loader);
    ASSERT_EQ(epoch.size(), 6u);
    if (workers == 0) {
      reference = epoch;
      // The order is the sampler's; each batch's fields agree with its reviews.
      auto order = data::RandomSampler(23).indices(5, 0);
      for (size_t k = 0; k < epoch.size(); ++k) {
        std::vector<int64_t> labels, ids, offsets;
        for (size_t j = 4 * k; j < std::min<size_t>(23, 4 * k + 4); ++j) {
          int64_t i = order[j];
          labels.push_back(i % 4);
          offsets.push_back(static_cast<int64_t>(ids.size()));
          for (int64_t t = 0; t < 1 + i % 3; ++t) ids.push_back(i + t);
        }
        EXPECT_EQ(epoch[k][0], labels) << "batch " << k;
        EXPECT_EQ(epoch[k][1], ids) << "batch " << k;
        EXPECT_EQ(epoch[k][2], offsets) << "batch " << k;
      }
    } else {
      EXPECT_EQ(epoch, reference);
    }
  }
}

TEST(DataLoaderStructured, DefaultCollateOfAStruct) {
  struct Points {
    int64_t size() const { return 10; }
    Pair get(int64_t i) const { return {full({2}, static_cast<double>(i)), i * 10}; }
  };
  data::BasicDataLoader loader(Points{}, {.batch_size = 4, .num_workers = 2, .drop_last = true, .prefetch_factor = 1});
  static_assert(std::is_same_v<decltype(loader)::batch_type, Pair::batch_type>);
  EXPECT_EQ(loader.size(), 2);
  std::vector<int64_t> ys;
  int n = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.x.sizes(), (Shape{4, 2}));
    EXPECT_TRUE(batch.x.select(1, 0).equal(batch.y.to(kFloat32).div(10)));
    auto y = ints(batch.y);
    ys.insert(ys.end(), y.begin(), y.end());
    ++n;
  }
  EXPECT_EQ(n, 2);
  EXPECT_EQ(ys, (std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60, 70}));

  // A tuple sample, default-collated, iterated with a structured binding.
  struct Tuples {
    int64_t size() const { return 3; }
    std::tuple<int64_t, std::string> get(int64_t i) const { return {i, std::string(static_cast<size_t>(i), 'a')}; }
  };
  data::BasicDataLoader tl(Tuples{}, {.batch_size = 3});
  for (auto& [label, text] : tl) {
    EXPECT_EQ(ints(label), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(text, (std::vector<std::string>{"", "a", "aa"}));
  }
  // A dataset held by shared_ptr, whose samples are bare tensors: batches are stacked tensors.
  struct Rows {
    int64_t size() const { return 5; }
    Tensor get(int64_t i) const { return full({3}, static_cast<double>(i)); }
  };
  auto rows = std::make_shared<const Rows>();
  data::BasicDataLoader rl(rows, {.batch_size = 2, .num_workers = 2});
  static_assert(std::is_same_v<decltype(rl)::batch_type, Tensor>);
  std::vector<Shape> shapes;
  for (Tensor& t : rl) shapes.push_back(t.sizes());
  EXPECT_EQ(shapes, (std::vector<Shape>{{2, 3}, {2, 3}, {1, 3}}));
  // options.collate takes Examples: for other samples the collate is the third argument.
  EXPECT_TRUE(throws_with<ValueError>(
      [] { data::BasicDataLoader bad(Tuples{}, {.collate = [](std::span<const data::Example> e) { return e[0]; }}); },
      {"third argument"}));
}

TEST(DataLoaderStructured, OwnGetBatchIsUsed) {
  struct Fast {
    int64_t size() const { return 6; }
    Pair get(int64_t) const { throw ValueError("Fast: get must not be called"); }
    Pair::batch_type get_batch(std::span<const int64_t> idx) const {
      return {zeros({static_cast<int64_t>(idx.size()), 2}), tensor(std::vector<int64_t>(idx.begin(), idx.end()))};
    }
  };
  data::BasicDataLoader loader(Fast{}, {.batch_size = 4});
  std::vector<std::vector<int64_t>> ys;
  for (auto& b : loader) ys.push_back(ints(b.y));
  EXPECT_EQ(ys, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5}}));
}

TEST(DataLoaderStructured, ResumeMidEpochGivesTheSameRest) {
  data::DataLoader::Options opts{.batch_size = 3, .shuffle = true, .seed = 17, .num_workers = 2};
  data::BasicDataLoader original(Reviews{20}, opts, collate_reviews);
  review_epoch(original);  // epoch 0
  data::LoaderState saved;
  std::vector<std::vector<std::vector<int64_t>>> rest;
  int k = 0;
  for (ReviewBatch& b : original) {
    if (k == 2) saved = original.state();
    if (k > 2) rest.push_back({ints(b.label), ints(b.text_ids), ints(b.offsets)});
    ++k;
  }
  EXPECT_EQ(saved, (data::LoaderState{17, 1, 9}));
  for (int workers : {0, 3}) {
    auto o = opts;
    o.seed = 1;  // the saved state's seed wins
    o.num_workers = workers;
    data::BasicDataLoader resumed(Reviews{20}, o, collate_reviews);
    resumed.load_state(saved);
    EXPECT_EQ(review_epoch(resumed), rest) << workers << " workers";
    EXPECT_EQ(resumed.state(), (data::LoaderState{17, 2, 0}));
  }
}

TEST(DataLoaderStructured, ErrorAtBatchKAndDistributedSampler) {
  for (int workers : {0, 2}) {
    data::BasicDataLoader loader(Reviews{.n = 20, .bad = 9}, {.batch_size = 4, .num_workers = workers},
                                 collate_reviews);
    int delivered = 0;
    EXPECT_TRUE(throws_with<IOError>(
        [&] {
          for (ReviewBatch& b : loader) {
            (void)b;
            ++delivered;
          }
        },
        {"review 9 is corrupt"}));
    EXPECT_EQ(delivered, 2) << workers << " workers";  // batch 2 (reviews 8..11) failed
    EXPECT_EQ(loader.state().index, 8);
  }
  // Two ranks of a DistributedSampler see disjoint halves of the reviews.
  std::vector<int64_t> seen;
  for (int64_t rank : {0, 1}) {
    auto sampler = std::make_shared<data::DistributedSampler>(10, 2, rank, true, 3);
    data::BasicDataLoader loader(Reviews{10}, {.batch_size = 2, .num_workers = 2, .sampler = sampler}, collate_reviews);
    std::vector<int64_t> mine;
    for (ReviewBatch& b : loader) {
      auto ids = ints(b.text_ids), off = ints(b.offsets);
      for (int64_t o : off) mine.push_back(ids[static_cast<size_t>(o)]);  // a review's first id is its index
    }
    EXPECT_EQ(mine, sampler->indices(0, 0)) << "rank " << rank;
    seen.insert(seen.end(), mine.begin(), mine.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(DataLoaderStructured, PinMemoryReachesEveryTensor) {
  data::BasicDataLoader plain(Reviews{8}, {.batch_size = 4}, collate_reviews);
  data::BasicDataLoader pinned(Reviews{8}, {.batch_size = 4, .num_workers = 1, .pin_memory = true}, collate_reviews);
  EXPECT_EQ(review_epoch(plain), review_epoch(pinned));
  // Pinned only where a CUDA backend is present (as for Example batches).
  const bool cuda = has_backend(DeviceType::cuda);
  for (ReviewBatch& b : pinned) {
    EXPECT_EQ(b.label.is_pinned(), cuda);
    EXPECT_EQ(b.text_ids.is_pinned(), cuda);
    EXPECT_EQ(b.offsets.is_pinned(), cuda);
  }
}

TEST(DataLoaderStructured, ExampleDatasetsWithAStructuredCollate) {
  // An Example dataset (with its fast get_batch) given a collate that returns another type.
  data::TensorDataset ds(arange(10, kFloat32).view({5, 2}), arange(5, kInt64));
  data::BasicDataLoader loader(ds, {.batch_size = 2}, [](const std::vector<data::Example>& ex) {
    return std::make_pair(static_cast<int64_t>(ex.size()), data::collate(ex));
  });
  std::vector<int64_t> sizes;
  for (auto& [n, batch] : loader) {
    sizes.push_back(n);
    EXPECT_EQ(batch.data.size(0), n);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2, 1}));
  // And the plain DataLoader is still an Example loader using get_batch.
  data::DataLoader plain(ds, {.batch_size = 5});
  EXPECT_EQ(plain.dataset()->size(), 5);
  for (data::Example& b : plain) EXPECT_EQ(ints(b.target), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// The PyTorch text-classification course's collate_batch, for AG_NEWS-style (label, text) pairs:
//   def collate_batch(batch):
//       label_list, text_list, offsets = [], [], [0]
//       for (_label, _text) in batch:
//           label_list.append(label_pipeline(_label))          # int(_label) - 1
//           processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
//           text_list.append(processed_text)
//           offsets.append(processed_text.size(0))
//       label_list = torch.tensor(label_list, dtype=torch.int64)
//       offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
//       text_list = torch.cat(text_list)
//       return label_list, text_list, offsets
TEST(DataLoaderStructured, CourseCollateBatch) {
  struct News {
    std::vector<std::pair<int64_t, std::string>> rows;
    int64_t size() const { return static_cast<int64_t>(rows.size()); }
    std::pair<int64_t, std::string> get(int64_t i) const { return rows[static_cast<size_t>(i)]; }
  };
  News news{{{3, "Wall St. bears claw back"}, {4, "a new chip"}, {1, "the game"}, {3, "stocks fall, bears"}}};
  auto tokenizer = text::get_tokenizer("basic_english");
  std::vector<std::vector<std::string>> docs;
  for (auto& [label, line] : news.rows) docs.push_back(tokenizer(line));
  text::Vocab vocab = text::build_vocab_from_iterator(docs, {.specials = {"<unk>"}});
  vocab.set_default_index(vocab["<unk>"]);

  auto collate_batch = [&](std::span<const std::pair<int64_t, std::string>> batch) {
    std::vector<int64_t> labels;
    std::vector<std::vector<int64_t>> ids;
    for (const auto& [label, line] : batch) {
      labels.push_back(label - 1);
      ids.push_back(vocab.lookup_indices(tokenizer(line)));
    }
    text::BagBatch bag = text::bag_token_ids(ids);
    return std::make_tuple(tensor(labels), bag.input, bag.offsets);
  };
  data::BasicDataLoader loader(news, {.batch_size = 2, .num_workers = 2}, collate_batch);
  std::vector<std::vector<int64_t>> labels, texts, offsets;
  for (auto& [label, text_ids, offs] : loader) {
    labels.push_back(ints(label));
    texts.push_back(ints(text_ids));
    offsets.push_back(ints(offs));
  }
  auto ids_of = [&](const std::string& line) { return vocab.lookup_indices(tokenizer(line)); };
  auto cat = [](std::vector<int64_t> a, const std::vector<int64_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  // "wall st . bears claw back" is 6 tokens, so the second review starts at 6.
  ASSERT_EQ(ids_of("Wall St. bears claw back").size(), 6u);
  EXPECT_EQ(labels, (std::vector<std::vector<int64_t>>{{2, 3}, {0, 2}}));
  EXPECT_EQ(texts[0], cat(ids_of("Wall St. bears claw back"), ids_of("a new chip")));
  EXPECT_EQ(texts[1], cat(ids_of("the game"), ids_of("stocks fall, bears")));
  EXPECT_EQ(offsets, (std::vector<std::vector<int64_t>>{{0, 6}, {0, 2}}));
  // "bears" is in two reviews: the vocab puts it first after <unk> (count 2), one id for both.
  EXPECT_EQ(texts[0][3], texts[1].back());
}

// A checkpoint takes any loader (a DataLoaderBase*): a structured loader saved mid-epoch resumes
// there in another loader.
TEST(DataLoaderStructured, CheckpointResumesAStructuredLoader) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("nabla_collate_ckpt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "loader.safetensors").string();
  data::BasicDataLoader a(Reviews{14}, {.batch_size = 3, .shuffle = true, .seed = 2}, collate_reviews);
  std::vector<std::vector<int64_t>> rest;
  int k = 0;
  for (ReviewBatch& b : a) {
    if (k == 1) optim::save_checkpoint(path, {.rng = false, .loader = &a});
    if (k > 1) rest.push_back(ints(b.text_ids));
    ++k;
  }
  data::BasicDataLoader b(Reviews{14}, {.batch_size = 3, .shuffle = true, .seed = 50}, collate_reviews);
  optim::Checkpoint ck{.rng = false, .loader = &b};
  optim::load_checkpoint(path, ck);
  std::vector<std::vector<int64_t>> got;
  for (ReviewBatch& batch : b) got.push_back(ints(batch.text_ids));
  EXPECT_EQ(got, rest);
  EXPECT_EQ(rest.size(), 3u);  // 5 batches, resumed after batch 1
  fs::remove_all(dir);
}
