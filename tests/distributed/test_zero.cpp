// optim::ZeroRedundancyOptimizer on 2, 3 and 4 processes: the "zero" scenarios (the workers run
// zero_worker; test_distributed.cpp holds main and the parent side).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda_api.h"
#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/zero_redundancy_optimizer.h"
#include "io/safetensors.h"
#include "nn/clip_grad.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/lbfgs.h"
#include "optim/sgd.h"
#include "workers.h"

using namespace nabla;
namespace dist = nabla::distributed;
namespace F = nabla::nn::functional;

namespace {

using nabla_dist_test::expect;

// Parameters of uneven sizes (35, 30, 6, 30, 5, 9, 3, 7 elements: no world size divides them
// evenly), a frozen layer, an unused one and an output layer tied to the embedding.
struct TiedNet : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::Linear> hidden, frozen, spare;
  Tensor out_bias;
  TiedNet() {
    emb = register_module("emb", std::make_shared<nn::Embedding>(7, 5));
    hidden = register_module("hidden", std::make_shared<nn::Linear>(5, 6));
    frozen = register_module("frozen", std::make_shared<nn::Linear>(6, 5));
    spare = register_module("spare", std::make_shared<nn::Linear>(3, 3));
    out_bias = register_parameter("out_bias", zeros({7}));
    frozen->weight.requires_grad_(false);
    frozen->bias.requires_grad_(false);
  }
  // tokens: (B,) int64 -> logits (B, 7)
  Tensor forward(Tensor tokens) override {
    Tensor h = tanh((*hidden)((*emb)(tokens)));              // (B, 6)
    return (*frozen)(h).matmul(emb->weight.t()) + out_bias;  // tied output
  }
};

// The ranks' device: the CPU (gloo), or each rank's GPU (the "zero_nccl" scenario).
Device g_device = kCPU;

std::shared_ptr<TiedNet> make_net(uint64_t seed, DType dtype) {
  manual_seed(seed);
  auto m = std::make_shared<TiedNet>();
  m->to(dtype);
  m->to(g_device);
  return m;
}

double max_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double d = 0;
  for (size_t i = 0; i < pa.size(); ++i)
    d = std::max(d, (pa[i].to(kFloat64) - pb[i].to(kFloat64)).abs().max().item<double>());
  return d;
}

double state_diff(const StateDict& a, const StateDict& b) {
  expect(a.size() == b.size(), "state dicts of ", a.size(), " and ", b.size(), " entries");
  double d = 0;
  auto ib = b.begin();
  for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) {
    expect(ia->first == ib->first, "keys differ: '", ia->first, "' vs '", ib->first, "'");
    expect(ia->second.sizes() == ib->second.sizes(), ia->first, ": shapes differ");
    if (ia->second.numel())
      d = std::max(d, (ia->second.to(kFloat64) - ib->second.to(kFloat64)).abs().max().item<double>());
  }
  return d;
}

// DDP with find_unused_parameters gives an unused parameter a zero gradient (distributed_data_parallel.h);
// the reference's stays undefined. The same on both sides, so that momentum and weight decay treat
// it alike.
void mirror_unused(nn::Module& ddp_model, nn::Module& ref) {
  auto a = ddp_model.parameters(), b = ref.parameters();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].grad().defined() && !b[i].grad().defined()) b[i].set_grad(zeros_like(b[i]));
}

size_t state_bytes(const StateDict& sd) {
  size_t n = 0;
  for (const auto& [key, t] : sd)
    if (key.rfind("state.", 0) == 0 && t.dim() > 0) n += t.nbytes();
  return n;
}

enum class Kind { sgd, adam_groups, adamw };
const char* kind_name(Kind k) { return k == Kind::sgd ? "SGD" : k == Kind::adam_groups ? "Adam (2 groups)" : "AdamW"; }

std::unique_ptr<optim::Optimizer> make_optimizer(Kind k, nn::Module& m) {
  auto p = m.parameters();
  switch (k) {
    case Kind::sgd:
      return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    case Kind::adam_groups: {
      std::vector<Tensor> a(p.begin(), p.begin() + 3), b(p.begin() + 3, p.end());
      return std::make_unique<optim::Adam>(
          std::vector<optim::Adam::ParamGroup>{{.params = a}, {.params = b, .options = optim::AdamOptions{.lr = 3e-2}}},
          optim::AdamOptions{.lr = 1e-2});
    }
    case Kind::adamw: return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
  }
  return nullptr;
}

// One step's batch: n * B tokens and targets; rank r trains on its B.
std::pair<Tensor, Tensor> batch(int step, int64_t rows) {
  manual_seed(900 + step);
  Tensor x = randint(0, 7, {rows}), y = randint(0, 7, {rows});
  return {x.to(g_device), y.to(g_device)};
}

// n ranks under DDP with ZeRO train as one process with the plain optimizer on the whole batch:
// 20 steps, then the consolidated state equals the plain optimizer's key for key; it and each
// rank's local state resume training in step with the plain one.
void check_training(Kind kind, DType dtype) {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 3;
  const double tol = dtype == kFloat64 ? 1e-12 : 1e-6;
  const std::string what = internal::str(kind_name(kind), " (", dtype, ") on ", n, " ranks");
  auto model = make_net(40 + r, dtype), ref = make_net(40, dtype);  // DDP broadcasts rank 0's
  nn::parallel::DistributedDataParallel ddp(model, {.find_unused_parameters = true});
  optim::ZeroRedundancyOptimizer opt(make_optimizer(kind, *model), {.bucket_cap_mb = 100.0 / (1024 * 1024)});
  auto ref_opt = make_optimizer(kind, *ref);
  expect(opt.buckets().size() >= static_cast<size_t>(n), what, ": a 100-byte cap should make several buckets");

  // The partition: balanced to within the largest parameter (35 elements).
  std::vector<int64_t> held(static_cast<size_t>(n), 0);
  auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) held[static_cast<size_t>(opt.owners()[i])] += params[i].numel();
  for (int64_t h : held) expect(std::abs(h - held[0]) <= 35, what, ": unbalanced shards ", IntArrayRef(held));

  auto train = [&](optim::Optimizer& o, int from, int to) {
    for (int step = from; step < to; ++step) {
      o.zero_grad();
      ref_opt->zero_grad();
      auto [x, y] = batch(step, n * B);
      F::cross_entropy(ddp(x.narrow(0, r * B, B)), y.narrow(0, r * B, B)).backward();
      F::cross_entropy((*ref)(x), y).backward();
      mirror_unused(*model, *ref);
      o.step();
      ref_opt->step();
    }
  };
  train(opt, 0, 20);
  expect(max_diff(*model, *ref) < tol, what, ": ended ", max_diff(*model, *ref), " away from one process");
  expect(equal(model->frozen->weight, ref->frozen->weight) && equal(model->spare->weight, ref->spare->weight), what,
         ": frozen and unused parameters must not move");

  // Memory: this rank holds only its shard's state.
  const StateDict local = opt.local_state_dict(), full = ref_opt->state_dict();
  const size_t per_param = kind == Kind::sgd ? 1 : 2;  // momentum buffer; exp_avg and exp_avg_sq
  const size_t largest = 35 * per_param * (dtype == kFloat64 ? 8 : 4);
  expect(state_bytes(local) <= state_bytes(full) / static_cast<size_t>(n) + largest, what, ": rank ", r, " holds ",
         state_bytes(local), " bytes of state, more than 1/", n, " of ", state_bytes(full), " + one parameter's");

  // The consolidated state, on the last rank, is the plain optimizer's.
  try {
    (void)opt.state_dict();
    expect(false, what, ": state_dict before consolidate_state_dict should throw");
  } catch (const ValueError& e) {
    expect(std::string(e.what()).find("consolidate_state_dict") != std::string::npos, e.what());
  }
  opt.consolidate_state_dict(n - 1);
  const std::string path =
      internal::str(std::getenv("NABLA_TEST_DIR"), "/zero_", static_cast<int>(kind), ".safetensors");
  if (r == n - 1) {
    const StateDict whole = opt.state_dict();
    expect(state_diff(whole, full) < tol, what, ": consolidated state differs from the plain optimizer's by ",
           state_diff(whole, full));
    safetensors::save_file(whole, path);
    auto plain = make_optimizer(kind, *make_net(1, dtype));
    plain->load_state_dict(whole);  // loads into a plain optimizer
  } else {
    try {
      (void)opt.state_dict();
      expect(false, what, ": state_dict on a rank that did not gather should throw");
    } catch (const ValueError&) {}
  }
  dist::barrier();

  // Resume from the consolidated file into a fresh ZeroRedundancyOptimizer, and from this rank's
  // local state into another: both keep step with the plain optimizer.
  optim::ZeroRedundancyOptimizer resumed(make_optimizer(kind, *model));
  resumed.load_state_dict(safetensors::load_file(path).tensors);
  train(resumed, 20, 23);
  optim::ZeroRedundancyOptimizer again(make_optimizer(kind, *model));
  again.load_state_dict(resumed.local_state_dict());
  train(again, 23, 26);
  expect(max_diff(*model, *ref) < tol, what, ": after resuming, ", max_diff(*model, *ref), " away from one process");
  dist::barrier();
}

// clip_grad_norm_ from the shards equals nn::utils::clip_grad_norm_ over everything; with a
// GradScaler every rank skips the same step.
void check_clip_and_scaler() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 2;
  auto model = make_net(5, kFloat32), ref = make_net(5, kFloat32);
  nn::parallel::DistributedDataParallel ddp(model, {.find_unused_parameters = true});
  auto opt = optim::ZeroRedundancyOptimizer::make<optim::SGD>(model->parameters(), {.lr = 0.5, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.5, .momentum = 0.9});
  amp::GradScaler scaler({.init_scale = 256.0, .growth_interval = 2});
  for (int step = 0; step < 6; ++step) {
    opt.zero_grad();
    ref_opt.zero_grad();
    auto [x, y] = batch(step, n * B);
    Tensor loss = F::cross_entropy(ddp(x.narrow(0, r * B, B)), y.narrow(0, r * B, B));
    if (step == 3 && r == n - 1) loss = loss * std::numeric_limits<float>::infinity();
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    const double norm = opt.clip_grad_norm_(0.05);
    const bool stepped = scaler.step(opt);
    scaler.update();
    expect(stepped == (step != 3), "rank ", r, " step ", step, ": stepped ", stepped);
    if (step == 3) continue;
    F::cross_entropy((*ref)(x), y).backward();
    mirror_unused(*model, *ref);
    const double want = nn::utils::clip_grad_norm_(ref->parameters(), 0.05);
    expect(std::abs(norm - want) <= 1e-5 * want, "step ", step, ": norm ", norm, " from the shards, ", want,
           " over all parameters");
    ref_opt.step();
  }
  expect(max_diff(*model, *ref) < 1e-6, "clipped ZeRO ended ", max_diff(*model, *ref), " away from one process");
}

void check_mistakes() {
  auto model = make_net(5, kFloat64);
  auto message = [](auto&& make) -> std::string {
    try {
      make();
    } catch (const ValueError& e) { return e.what(); }
    return "no ValueError";
  };
  std::string m =
      message([&] { optim::ZeroRedundancyOptimizer z(std::make_unique<optim::LBFGS>(model->parameters())); });
  expect(m.find("LBFGS can't be sharded") != std::string::npos, m);
  auto stepped = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  F::cross_entropy((*model)(zeros({2}, kInt64)), zeros({2}, kInt64)).backward();
  stepped->step();
  m = message([&] { optim::ZeroRedundancyOptimizer z(std::move(stepped)); });
  expect(m.find("already has state") != std::string::npos, m);
  auto opt = optim::ZeroRedundancyOptimizer::make<optim::SGD>(model->parameters(), {.lr = 0.1});
  m = message([&] { opt.consolidate_state_dict(dist::get_world_size()); });
  expect(m.find("is not in the group") != std::string::npos, m);
  // A plain optimizer's state loads; one with a wrong shape is refused on every rank, whoever
  // owns the parameter, and leaves the state as it was.
  auto ref = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  F::cross_entropy((*model)(zeros({2}, kInt64)), zeros({2}, kInt64)).backward();
  ref->step();
  StateDict good = ref->state_dict(), bad = good;
  opt.set_option(0, "momentum", 0.9);
  opt.load_state_dict(good);
  *bad.find("state.0.momentum_buffer") = zeros({2, 2}, kFloat64);
  std::string shape;
  try {
    opt.load_state_dict(bad);
  } catch (const ShapeError& e) { shape = e.what(); }
  const std::string want = internal::str("'state.0.momentum_buffer' has shape [2, 2] but parameter 0 has shape ",
                                         model->parameters()[0].sizes());
  expect(shape.find(want) != std::string::npos, "rank ", dist::get_rank(), ": ",
         shape.empty() ? "no ShapeError" : shape);
}

}  // namespace

namespace nabla_dist_test {

int zero_worker(const std::string& scenario) {
  const bool nccl = scenario == "zero_nccl";  // one GPU per rank
  return worker_frame(scenario, nccl, [&] {
    if (nccl) {
      g_device = Device::cuda(static_cast<int16_t>(dist::get_rank()));
      check_training(Kind::adam_groups, kFloat64);
      check_training(Kind::adamw, kFloat32);
    } else if (scenario == "zero") {
      check_training(Kind::sgd, kFloat64);
      check_training(Kind::adam_groups, kFloat64);
      check_training(Kind::adamw, kFloat64);
      check_training(Kind::adamw, kFloat32);
      check_mistakes();
    } else if (scenario == "zero_clip_scaler") {
      check_clip_and_scaler();
    } else if (scenario == "zero_peer_dies") {
      // The last rank leaves before the step's broadcasts.
      auto model = make_net(5, kFloat64);
      auto opt = optim::ZeroRedundancyOptimizer::make<optim::Adam>(model->parameters());
      expect_dead_last_rank_fails(dist::get_rank(), dist::get_world_size(), "broadcast", [&] {
        F::cross_entropy((*model)(zeros({2}, kInt64)), zeros({2}, kInt64)).backward();
        opt.step();
      });
    } else {
      expect(false, "unknown scenario ", scenario);
    }
  });
}

}  // namespace nabla_dist_test

namespace {

using nabla_dist_test::all_ranks;
using nabla_dist_test::expect_all_ok;
using nabla_dist_test::run_workers;

TEST(ZeroRedundancyOptimizer, TwoThreeAndFourRanksTrainAsOneProcessOnTheWholeBatch) {
  for (int n : {1, 2, 3, 4}) expect_all_ok(run_workers("zero", n, all_ranks(n), 20000));
  // With the signature checks: every rank issues the same broadcasts and gathers, in the same order.
  expect_all_ok(run_workers("zero", 3, all_ranks(3), 20000, {{"NABLA_DISTRIBUTED_DEBUG", "1"}}));
}

TEST(ZeroRedundancyOptimizer, ClipsOverTheShardsAndSkipsStepsWithAGradScaler) {
  expect_all_ok(run_workers("zero_clip_scaler", 3, all_ranks(3), 20000));
}

TEST(ZeroRedundancyOptimizer, ADeadPeerFailsTheStepWithinTheTimeout) {
  auto results = run_workers("zero_peer_dies", 3, all_ranks(3), 2000);
  expect_all_ok(results);
}

// The nccl backend: the same training, state on the GPU, consolidation through NCCL's gather
// (scripts/gpu-verify.sh runs it; a world of one on one GPU, two on two).
TEST(DistributedNccl, ZeroRedundancyOptimizerOnOneAndTwoGpus) {
  if (std::string why = nabla_dist_test::nccl_unavailable(1); !why.empty()) GTEST_SKIP() << why;
  expect_all_ok(run_workers("zero_nccl", 1, all_ranks(1), 60000));
  if (nabla_dist_test::nccl_unavailable(2).empty()) expect_all_ok(run_workers("zero_nccl", 2, all_ranks(2), 60000));
}

TEST(ZeroRedundancyOptimizer, WithoutAProcessGroupIsRefused) {
  auto model = make_net(3, kFloat64);
  EXPECT_THROW(optim::ZeroRedundancyOptimizer::make<optim::SGD>(model->parameters(), {.lr = 0.1}),
               dist::DistributedError);
}

}  // namespace
