// nn::parallel::FullyShardedDataParallel on 1 to 4 processes: the "fsdp" scenarios (the workers
// run fsdp_worker; test_distributed.cpp holds main and the parent side).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "core/cuda_api.h"
#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "distributed/fully_sharded_data_parallel.h"
#include "nn/clip_grad.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/gpt2.h"
#include "nn/linear.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "workers.h"

using namespace nabla;
namespace dist = nabla::distributed;
namespace F = nabla::nn::functional;
namespace fs = std::filesystem;
using nabla_dist_test::expect;
using nn::parallel::FullyShardedDataParallel;

namespace {

Device g_device = kCPU;

// Two linear layers with a tanh, optionally under activation checkpointing.
struct Block : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  bool checkpointed = false;
  explicit Block(int64_t d) : Module("Block") {
    a = register_module("a", std::make_shared<nn::Linear>(d, d + 1));
    b = register_module("b", std::make_shared<nn::Linear>(d + 1, d));
  }
  Tensor inner(const Tensor& x) { return x + (*b)(tanh((*a)(x))); }
  Tensor forward(Tensor x) override {
    if (!checkpointed) return inner(x);
    return autograd::checkpoint([this](const Tensor& t) { return inner(t); }, x);
  }
};

// An embedding tied to the output layer (in the root unit), two blocks, a frozen layer and an
// unused one: parameters of uneven sizes that no world size divides.
struct Net : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<Block> b1, b2;
  std::shared_ptr<nn::Linear> frozen, spare;
  Tensor out_bias;
  Net() : Module("Net") {
    emb = register_module("emb", std::make_shared<nn::Embedding>(7, 5));
    b1 = register_module("b1", std::make_shared<Block>(5));
    b2 = register_module("b2", std::make_shared<Block>(5));
    frozen = register_module("frozen", std::make_shared<nn::Linear>(5, 5));
    spare = register_module("spare", std::make_shared<nn::Linear>(3, 3));
    out_bias = register_parameter("out_bias", zeros({7}));
    frozen->weight.requires_grad_(false);
    frozen->bias.requires_grad_(false);
  }
  Tensor forward(Tensor tokens) override {  // (B,) -> (B, 7)
    Tensor h = (*b2)((*b1)((*emb)(tokens)));
    return (*frozen)(h).matmul(emb->weight.t()) + out_bias;
  }
};

std::shared_ptr<Net> make_net(uint64_t seed, DType dtype, bool checkpointed = false) {
  manual_seed(seed);
  auto m = std::make_shared<Net>();
  m->b1->checkpointed = m->b2->checkpointed = checkpointed;
  m->to(dtype);
  m->to(g_device);
  return m;
}

std::pair<Tensor, Tensor> batch(int step, int64_t rows) {
  manual_seed(700 + step);
  Tensor x = randint(0, 7, {rows}), y = randint(0, 7, {rows});
  return {x.to(g_device), y.to(g_device)};
}

double state_dict_diff(const StateDict& a, const StateDict& b) {
  expect(a.size() == b.size(), "state dicts of ", a.size(), " and ", b.size(), " entries");
  double d = 0;
  for (const auto& [k, t] : a) {
    const Tensor* u = b.find(k);
    expect(u != nullptr, "'", k, "' is missing");
    expect(t.sizes() == u->sizes(), k, ": shapes differ");
    d = std::max(d, (t.to(kFloat64) - u->to(kFloat64)).abs().max().item<double>());
  }
  return d;
}

// FSDP gives an unreached parameter of a unit that gets gradients a zero gradient (its flat
// gradient holds zeros there, as PyTorch's); the reference does the same.
void mirror_unreached(const FullyShardedDataParallel& fsdp, nn::Module& ref) {
  auto named = ref.named_parameters();
  for (const auto& u : fsdp.units()) {
    bool any = false;
    for (const auto& n : u.params) any = any || named.find(n)->grad().defined();
    if (!any) continue;
    for (const auto& n : u.params)
      if (Tensor* p = named.find(n); !p->grad().defined()) p->set_grad(zeros_like(*p));
  }
}

enum class Kind { sgd, adam, adamw };
const char* kind_name(Kind k) { return k == Kind::sgd ? "SGD" : k == Kind::adam ? "Adam" : "AdamW"; }
std::unique_ptr<optim::Optimizer> make_optimizer(Kind k, std::vector<Tensor> p) {
  if (k == Kind::sgd) return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  if (k == Kind::adam) return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 1e-2});
  return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.1});
}

struct Config {
  const char* policy;  // "root", "blocks", "nested" (blocks and their Linear layers)
  Kind kind;
  DType dtype;
  bool prefetch = true, reshard = true, checkpointed = false;
};

nn::parallel::WrapPolicy policy_of(const std::string& p) {
  if (p == "blocks") return nn::parallel::wrap_modules_named({"Block"});
  if (p == "nested") return nn::parallel::wrap_modules_named({"Block", "Linear"});
  return nullptr;
}

// n ranks under FSDP train as one process on the whole batch: 10 plain steps, then 10 of two
// micro-batches (gradients accumulate over the backward calls), clipped; the whole state equals the
// plain model's; a sharded checkpoint and the whole state dict both resume in step.
void check_training(const Config& c) {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 3;
  const double tol = c.dtype == kFloat64 ? 1e-12 : 1e-6;
  const std::string what =
      internal::str(kind_name(c.kind), " (", c.dtype, ", policy ", c.policy, c.prefetch ? "" : ", no prefetch",
                    c.reshard ? "" : ", no reshard", c.checkpointed ? ", checkpointed" : "", ") on ", n, " ranks");
  auto model = make_net(30 + r, c.dtype, c.checkpointed), ref = make_net(30, c.dtype, c.checkpointed);
  FullyShardedDataParallel fsdp(model, {.auto_wrap_policy = policy_of(c.policy),
                                        .reshard_after_forward = c.reshard,
                                        .forward_prefetch = c.prefetch,
                                        .backward_prefetch = c.prefetch});
  auto opt = make_optimizer(c.kind, fsdp.parameters());
  auto ref_opt = make_optimizer(c.kind, ref->parameters());
  int64_t total = 0, mine = 0;
  for (const auto& u : fsdp.units()) total += u.numel;
  for (const Tensor& s : fsdp.parameters()) mine += s.numel();
  expect(mine <= total / n + static_cast<int64_t>(fsdp.units().size()), what, ": rank ", r, " holds ", mine, " of ",
         total, " parameters");
  auto train = [&](optim::Optimizer& o, int from, int to) {
    for (int step = from; step < to; ++step) {
      o.zero_grad();
      ref_opt->zero_grad();
      const int micro = step % 2 == 0 || step < 10 ? 1 : 2;
      for (int m = 0; m < micro; ++m) {
        auto [x, y] = batch(step * 10 + m, n * B);
        (F::cross_entropy(fsdp(x.narrow(0, r * B, B)), y.narrow(0, r * B, B)) / micro).backward();
        (F::cross_entropy((*ref)(x), y) / micro).backward();
      }
      mirror_unreached(fsdp, *ref);
      const double norm = fsdp.clip_grad_norm_(0.5), want = nn::utils::clip_grad_norm_(ref->parameters(), 0.5);
      expect(std::abs(norm - want) <= 1e-6 * want, what, " step ", step, ": norm ", norm, " vs ", want);
      o.step();
      ref_opt->step();
    }
  };
  train(*opt, 0, 20);
  expect(state_dict_diff(fsdp.state_dict(), ref->state_dict()) < tol, what, ": ended ",
         state_dict_diff(fsdp.state_dict(), ref->state_dict()), " away from one process");

  // The whole state loads into a plain module; a plain module's state loads into FSDP.
  auto plain = make_net(1, c.dtype);
  plain->load_state_dict(fsdp.state_dict());
  expect(state_dict_diff(plain->state_dict(), ref->state_dict()) < tol, what, ": the state dict in a plain module");

  // A sharded checkpoint, into a fresh wrapper of a fresh model: training goes on in step.
  const std::string dir = internal::str(std::getenv("NABLA_TEST_DIR"), "/fsdp_", c.policy);
  const std::string first = fsdp.save_sharded(dir, opt.get());
  for (int again = 0; again < 2; ++again) fsdp.save_sharded(dir, opt.get());  // the last two saves stay
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".safetensors";
  expect(files == static_cast<size_t>(2 * n), what, ": ", files, " shard files after three saves");
  std::string gone;
  try {
    fsdp.load_sharded(dir, opt.get(), first);
  } catch (const IOError& e) { gone = e.what(); }
  expect(gone.find("the shards of that save are gone") != std::string::npos, what, ": ", gone);
  auto model2 = make_net(99, c.dtype, c.checkpointed);
  FullyShardedDataParallel fsdp2(model2, {.auto_wrap_policy = policy_of(c.policy)});
  auto opt2 = make_optimizer(c.kind, fsdp2.parameters());
  fsdp2.load_sharded(dir, opt2.get());
  auto train2 = [&](optim::Optimizer& o, int from, int to) {
    for (int step = from; step < to; ++step) {
      o.zero_grad();
      ref_opt->zero_grad();
      auto [x, y] = batch(step * 10, n * B);
      F::cross_entropy(fsdp2(x.narrow(0, r * B, B)), y.narrow(0, r * B, B)).backward();
      F::cross_entropy((*ref)(x), y).backward();
      mirror_unreached(fsdp2, *ref);
      o.step();
      ref_opt->step();
    }
  };
  train2(*opt2, 20, 23);
  expect(state_dict_diff(fsdp2.state_dict(), ref->state_dict()) < tol, what, ": after the sharded checkpoint, ",
         state_dict_diff(fsdp2.state_dict(), ref->state_dict()), " away from one process");
  // And the whole state dict into a third wrapper (its optimizer fresh, as the reference's now).
  auto model3 = make_net(98, c.dtype, c.checkpointed);
  FullyShardedDataParallel fsdp3(model3, {.auto_wrap_policy = policy_of(c.policy)});
  fsdp3.load_state_dict(ref->state_dict());
  expect(state_dict_diff(fsdp3.state_dict(), ref->state_dict()) == 0, what, ": load_state_dict of a plain module");
  dist::barrier();
}

// A damaged or missing shard is refused by name on its rank, and every other rank refuses too.
void check_damaged_checkpoint() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  auto model = make_net(3, kFloat64);
  FullyShardedDataParallel fsdp(model);
  auto opt = make_optimizer(Kind::adam, fsdp.parameters());
  const std::string dir = internal::str(std::getenv("NABLA_TEST_DIR"), "/fsdp_damaged");
  fsdp.save_sharded(dir, opt.get());
  std::string victim;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("shard-" + std::to_string(n - 1) + "-", 0) == 0) victim = e.path();
  expect(!victim.empty(), "no shard file of rank ", n - 1);
  dist::barrier();
  auto refused = [&]() -> std::string {
    try {
      fsdp.load_sharded(dir, opt.get());
    } catch (const IOError& e) { return e.what(); }
    return "";
  };
  if (r == n - 1) {  // one byte of the last rank's shard changed
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  dist::barrier();
  std::string m = refused();
  expect(
      m.find(r == n - 1 ? "is damaged or was replaced" : "another rank could not read its shard") != std::string::npos,
      "rank ", r, ": ", m.empty() ? "no IOError" : m);
  dist::barrier();
  if (r == n - 1) fs::remove(victim);
  dist::barrier();
  m = refused();
  expect(m.find(r == n - 1 ? "is missing" : "another rank could not read its shard") != std::string::npos, "rank ", r,
         ": ", m.empty() ? "no IOError" : m);
}

// A GPT with each block a unit: its steps match one process's.
void check_gpt() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  nn::GPT2Config cfg{.vocab_size = 11, .n_positions = 8, .n_embd = 8, .n_layer = 2, .n_head = 2};
  manual_seed(5);
  auto model = std::make_shared<nn::GPT2LMHeadModel>(cfg);
  model->to(kFloat64);
  manual_seed(5);
  auto ref = std::make_shared<nn::GPT2LMHeadModel>(cfg);
  ref->to(kFloat64);
  // Each block a unit; in each unit the matrices and the vectors are flat parameters of their own,
  // so that weight decay can be on the matrices only (as the gpt example's AdamW).
  FullyShardedDataParallel fsdp(
      model, {.auto_wrap_policy = nn::parallel::wrap_modules_named({"GPT2Block"}),
              .param_group = [](const std::string&, const Tensor& p) { return p.dim() >= 2 ? 0 : 1; }});
  expect(fsdp.units().size() == 6, "GPT: 2 block units and the root, 2 flat parameters each, got ",
         fsdp.units().size());
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : ref->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  // (SGD: Adam would turn the rounding noise of gradients that are zero in exact arithmetic, such as
  // the key biases', into steps of the learning rate's size.)
  using G = optim::SGD::ParamGroup;
  const optim::SGDOptions with{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05}, without{.lr = 0.1, .momentum = 0.9};
  optim::SGD opt({G{fsdp.parameters(0), with}, G{fsdp.parameters(1), without}});
  optim::SGD ref_opt({G{decay, with}, G{no_decay, without}});
  for (int step = 0; step < 5; ++step) {
    manual_seed(40 + step);
    Tensor x = randint(0, 11, {2 * n, 8}), y = randint(0, 11, {2 * n * 8});
    opt.zero_grad();
    ref_opt.zero_grad();
    F::cross_entropy(fsdp(x.narrow(0, 2 * r, 2)).flatten(0, 1), y.narrow(0, 16 * r, 16)).backward();
    F::cross_entropy((*ref)(x).flatten(0, 1), y).backward();
    opt.step();
    ref_opt.step();
  }
  const auto s = fsdp.comm_stats();
  expect(s.all_gathers >= 5 * 10 && s.reduce_scatters == 5 * 6, "GPT: ", s.all_gathers, " all_gathers and ",
         s.reduce_scatters, " reduce-scatters in 5 steps");
  const double d = state_dict_diff(fsdp.state_dict(), ref->state_dict());
  expect(d < 1e-12, "GPT under FSDP on ", n, " ranks ended ", d, " away from one process");
}

// Mixed precision (bfloat16 parameters, float32 reductions) against one process doing the same by
// hand on the whole batch: float32 master weights, a bfloat16 copy for forward and backward, its
// gradients in float32 for the step. Equal up to bfloat16's rounding of the ranks' gradients.
void check_mixed_precision() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 4;
  auto model = make_net(8, kFloat32), master = make_net(8, kFloat32), low = make_net(8, kFloat32);
  low->to(kBFloat16);
  FullyShardedDataParallel fsdp(model, {.auto_wrap_policy = policy_of("blocks"),
                                        .mixed_precision = {.param_dtype = kBFloat16, .reduce_dtype = kFloat32}});
  optim::SGD opt(fsdp.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(master->parameters(), {.lr = 0.1, .momentum = 0.9});
  auto mp = master->named_parameters(), lp = low->named_parameters();
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = batch(step, n * B);
    opt.zero_grad();
    Tensor out = fsdp(x.narrow(0, r * B, B));
    expect(out.dtype() == kBFloat16, "the model should compute in bfloat16, got ", out.dtype());
    expect(model->b1->a->weight.dtype() == kBFloat16, "the module's parameters should be bfloat16 views");
    F::cross_entropy(out.to(kFloat32), y.narrow(0, r * B, B)).backward();
    for (const Tensor& s : fsdp.parameters())
      expect(!s.grad().defined() || s.grad().dtype() == kFloat32, "the shards' gradients should be float32");
    opt.step();
    {  // the reference: bfloat16 forward and backward from the float32 master weights
      autograd::NoGradGuard g;
      for (const auto& [name, p] : mp) lp.find(name)->copy_(p);
    }
    low->zero_grad();
    F::cross_entropy((*low)(x).to(kFloat32), y).backward();
    for (const auto& [name, p] : mp) {
      const Tensor& g = lp.find(name)->grad();
      Tensor(p).set_grad(g.defined() ? g.to(kFloat32) : Tensor());
    }
    mirror_unreached(fsdp, *master);
    ref_opt.step();
  }
  const StateDict got = fsdp.state_dict();
  expect(got.find("b1.a.weight")->dtype() == kFloat32, "the state dict holds the float32 master weights");
  const double d = state_dict_diff(got, master->state_dict());
  // A sharded checkpoint of it (the frozen layer's float32 master included) into a fresh wrapper.
  const std::string dir = internal::str(std::getenv("NABLA_TEST_DIR"), "/fsdp_mixed");
  fsdp.save_sharded(dir, &opt);
  auto again = make_net(77, kFloat32);
  FullyShardedDataParallel fsdp2(again, {.auto_wrap_policy = policy_of("blocks"),
                                         .mixed_precision = {.param_dtype = kBFloat16, .reduce_dtype = kFloat32}});
  optim::SGD opt2(fsdp2.parameters(), {.lr = 0.1, .momentum = 0.9});
  fsdp2.load_sharded(dir, &opt2);
  expect(state_dict_diff(fsdp2.state_dict(), got) == 0,
         "the mixed-precision sharded checkpoint should restore the state");
  // One rank computes exactly what the emulation does; more round the ranks' gradients apart.
  expect(n == 1 ? d == 0 : d < 5e-3, "bfloat16 FSDP on ", n, " ranks ended ", d, " away from the emulation");
  if (std::getenv("FSDP_TEST_VERBOSE")) std::cerr << "mixed precision on " << n << " ranks: " << d << "\n";
}

}  // namespace

namespace nabla_dist_test {

int fsdp_worker(const std::string& scenario) {
  const bool nccl = scenario == "fsdp_nccl";  // one GPU per rank
  return worker_frame(scenario, nccl, [&] {
    if (nccl) {
      g_device = Device::cuda(static_cast<int16_t>(dist::get_rank()));
      check_training({"blocks", Kind::adamw, kFloat64});
      check_training({"nested", Kind::adam, kFloat32});
      check_mixed_precision();
    } else if (scenario == "fsdp") {
      check_training({"root", Kind::sgd, kFloat64});
      check_training({"blocks", Kind::adam, kFloat64});
      check_training({"nested", Kind::adamw, kFloat64});
      check_training({"blocks", Kind::adamw, kFloat32});
      check_training({"nested", Kind::adam, kFloat64, /*prefetch=*/false, /*reshard=*/false});
      check_training({"blocks", Kind::sgd, kFloat64, true, true, /*checkpointed=*/true});
      check_training({"nested", Kind::sgd, kFloat64, true, true, /*checkpointed=*/true});
      check_gpt();
      check_mixed_precision();
    } else if (scenario == "fsdp_gpt") {  // (the two-namespace test runs it across two "machines")
      check_gpt();
    } else if (scenario == "fsdp_damaged") {
      check_damaged_checkpoint();
    } else if (scenario == "fsdp_peer_dies") {
      auto model = make_net(5, kFloat64);
      FullyShardedDataParallel fsdp(model, {.auto_wrap_policy = policy_of("blocks")});
      expect_dead_last_rank_fails(dist::get_rank(), dist::get_world_size(), "all_gather",
                                  [&] { fsdp(zeros({2}, kInt64)); });
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

TEST(FullyShardedDataParallel, OneToFourRanksTrainAsOneProcessOnTheWholeBatch) {
  for (int n : {1, 2, 3, 4}) expect_all_ok(run_workers("fsdp", n, all_ranks(n), 30000, {}, 120));
  expect_all_ok(run_workers("fsdp", 2, all_ranks(2), 30000, {{"NABLA_DISTRIBUTED_DEBUG", "1"}}, 120));
}

TEST(FullyShardedDataParallel, ADamagedOrMissingShardIsRefusedOnEveryRank) {
  expect_all_ok(run_workers("fsdp_damaged", 3, all_ranks(3), 20000));
}

TEST(FullyShardedDataParallel, ADeadPeerFailsTheForwardWithinTheTimeout) {
  expect_all_ok(run_workers("fsdp_peer_dies", 3, all_ranks(3), 2000));
}

TEST(DistributedNccl, FullyShardedDataParallelOnOneAndTwoGpus) {
  if (std::string why = nabla_dist_test::nccl_unavailable(1); !why.empty()) GTEST_SKIP() << why;
  expect_all_ok(run_workers("fsdp_nccl", 1, all_ranks(1), 60000));
  if (nabla_dist_test::nccl_unavailable(2).empty()) expect_all_ok(run_workers("fsdp_nccl", 2, all_ranks(2), 60000));
}

TEST(FullyShardedDataParallel, WithoutAProcessGroupIsRefused) {
  EXPECT_THROW(FullyShardedDataParallel(make_net(1, kFloat64)), dist::DistributedError);
}

}  // namespace
