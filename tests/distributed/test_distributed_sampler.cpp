// data::DistributedSampler against torch.utils.data.DistributedSampler (Debian's PyTorch), index
// for index, shuffled included: nabla draws torch.randperm's permutation with the same MT19937.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "tests/common/python_torch.h"

using namespace nabla;

namespace {

struct Case {
  int64_t n, replicas, rank;
  bool shuffle, drop_last;
  uint64_t seed;
  int64_t epoch;
  std::string key() const {
    std::ostringstream os;
    os << n << "," << replicas << "," << rank << "," << shuffle << "," << drop_last << "," << seed << "," << epoch;
    return os.str();
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t n : {0, 1, 2, 7, 10, 101})
    for (int64_t replicas : {1, 2, 3, 4})
      for (int64_t rank = 0; rank < replicas; ++rank)
        for (bool shuffle : {false, true})
          for (bool drop_last : {false, true})
            for (uint64_t seed : {0ull, 5ull, (1ull << 32) + 3})
              for (int64_t epoch : {0, 3}) {
                if (!shuffle && (seed != 0 || epoch != 0)) continue;
                out.push_back({n, replicas, rank, shuffle, drop_last, seed, epoch});
              }
  return out;
}

// PyTorch's lists, one line per case: "<key>:<i> <i> ...".
std::map<std::string, std::vector<int64_t>> torch_lists(const std::vector<Case>& cs) {
  std::string script =
      "import sys, torch\n"
      "from torch.utils.data import DistributedSampler\n"
      "for line in sys.stdin:\n"
      "    k = line.strip()\n"
      "    n, r, rank, sh, dl, seed, ep = [int(x) for x in k.split(',')]\n"
      "    s = DistributedSampler(range(n), num_replicas=r, rank=rank, shuffle=bool(sh), seed=seed, "
      "drop_last=bool(dl))\n"
      "    s.set_epoch(ep)\n"
      "    print(k + ':' + ' '.join(str(i) for i in s))\n";
  std::string dir = testing::TempDir();
  std::string py = dir + "/nabla_dist_sampler.py", in = dir + "/nabla_dist_sampler.in";
  FILE* f = std::fopen(py.c_str(), "w");
  std::fputs(script.c_str(), f);
  std::fclose(f);
  f = std::fopen(in.c_str(), "w");
  for (auto& c : cs) std::fprintf(f, "%s\n", c.key().c_str());
  std::fclose(f);
  std::string cmd = nabla_test::test_python() + " " + py + " < " + in;
  FILE* p = popen(cmd.c_str(), "r");
  std::map<std::string, std::vector<int64_t>> out;
  char buf[1 << 16];
  while (p && std::fgets(buf, sizeof buf, p)) {
    std::string line(buf);
    auto colon = line.find(':');
    std::istringstream is(line.substr(colon + 1));
    std::vector<int64_t> v;
    for (int64_t x; is >> x;) v.push_back(x);
    out[line.substr(0, colon)] = v;
  }
  if (p) pclose(p);
  return out;
}

TEST(DistributedSampler, EqualsPyTorchIndexForIndex) {
  NABLA_NEEDS_PYTHON_MODULES_IN(nabla_test::test_python(), "torch");
  auto cs = cases();
  auto want = torch_lists(cs);
  ASSERT_EQ(want.size(), cs.size()) << "PyTorch answered for " << want.size() << " of " << cs.size() << " cases";
  for (auto& c : cs) {
    data::DistributedSampler s(c.n, c.replicas, c.rank, c.shuffle, c.seed, c.drop_last);
    auto got = s.indices(/*loader_seed=*/12345, c.epoch);
    EXPECT_EQ(got, want[c.key()]) << "case n,replicas,rank,shuffle,drop_last,seed,epoch = " << c.key();
    EXPECT_EQ(static_cast<int64_t>(got.size()), s.num_samples()) << c.key();
  }
}

TEST(DistributedSampler, RanksShareTheDatasetAndEpochsReshuffleAlike) {
  const int64_t n = 23, replicas = 3;
  for (int64_t epoch : {0, 1}) {
    std::multiset<int64_t> seen;
    for (int64_t r = 0; r < replicas; ++r) {
      data::DistributedSampler s(n, replicas, r, true, 7);
      auto a = s.indices(1, epoch);
      EXPECT_EQ(a, s.indices(999, epoch)) << "the loader's seed must not change the order";
      EXPECT_EQ(a.size(), 8u);
      seen.insert(a.begin(), a.end());
    }
    // 24 = 23 + one padding index (the first of the permutation, repeated)
    EXPECT_EQ(seen.size(), 24u);
    for (int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  }
  data::DistributedSampler s(n, replicas, 0, true, 7);
  EXPECT_NE(s.indices(0, 0), s.indices(0, 1)) << "epochs reshuffle";
  EXPECT_THROW(data::DistributedSampler(10, 2, 2), ValueError);
  EXPECT_THROW(data::DistributedSampler(10, 0, 0), ValueError);
}

TEST(DistributedSampler, DrivesTheDataLoader) {
  // 10 samples whose data is their index; 3 ranks, batch 2: each rank 4 samples (2 padded).
  data::TensorDataset ds(arange(10, kInt64));
  std::multiset<int64_t> seen;
  for (int64_t r = 0; r < 3; ++r) {
    auto sampler = std::make_shared<data::DistributedSampler>(ds.size(), 3, r, true, 1);
    data::DataLoader loader(ds, {.batch_size = 2, .sampler = sampler});
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<int64_t> got;
      for (auto& batch : loader) {
        const int64_t* p = batch.data.contiguous().data_ptr<int64_t>();
        got.insert(got.end(), p, p + batch.data.numel());
      }
      EXPECT_EQ(got, sampler->indices(0, epoch)) << "rank " << r << " epoch " << epoch;
      if (epoch == 0) seen.insert(got.begin(), got.end());
    }
  }
  EXPECT_EQ(seen.size(), 12u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), 1u) << i;
}

TEST(DistributedSampler, ResumesMidEpochThroughTheLoaderState) {
  // Rank 1 of 2 over 21 samples, batch 3: stop after 2 batches of epoch 1, resume in a new loader.
  data::TensorDataset ds(arange(21, kInt64));
  auto sampler = std::make_shared<data::DistributedSampler>(ds.size(), 2, 1, true, 3);
  auto values_of = [](const Tensor& t) {
    const int64_t* p = t.contiguous().data_ptr<int64_t>();
    return std::vector<int64_t>(p, p + t.numel());
  };
  data::DataLoader first(ds, {.batch_size = 3, .sampler = sampler});
  first.set_epoch(1);
  std::vector<int64_t> seen;
  data::LoaderState saved;
  int k = 0;
  for (auto& batch : first) {
    auto v = values_of(batch.data);
    seen.insert(seen.end(), v.begin(), v.end());
    if (++k == 2) {
      saved = first.state();
      break;
    }
  }
  EXPECT_EQ(saved.epoch, 1);
  data::DataLoader resumed(ds, {.batch_size = 3, .sampler = sampler});
  resumed.load_state(saved);
  for (auto& batch : resumed) {
    auto v = values_of(batch.data);
    seen.insert(seen.end(), v.begin(), v.end());
  }
  EXPECT_EQ(seen, sampler->indices(0, 1)) << "the resumed epoch continues where the first loader stopped";
}

}  // namespace
