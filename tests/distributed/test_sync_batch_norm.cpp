// nn::SyncBatchNorm and nn::parallel::differentiable_all_reduce. The multi-process checks run as the
// "sync_bn" scenario of the test program (see workers.h): 2 ranks with batches of 4 and 3 rows, 3
// ranks with 3, 5 and 2, each compared with one process running plain batch norm on the whole batch
// (float64). The single-process checks (no group, a group of one, conversion, errors) run here.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/sync_batch_norm.h"
#include "io/safetensors.h"
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/serialize.h"
#include "optim/sgd.h"
#include "vision/resnet.h"
#include "workers.h"

using namespace nabla;
namespace dist = nabla::distributed;
namespace F = nabla::nn::functional;

namespace {

using nabla_dist_test::expect;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  expect(a.sizes() == b.sizes(), "shapes differ: ", a.sizes(), " vs ", b.sizes());
  if (a.numel() == 0) return 0;
  return (a.detach().to(kFloat64) - b.detach().to(kFloat64)).abs().max().item<double>();
}

// A small CNN with a BatchNorm in each place a model keeps one: a typed member called as (*bn1)(x)
// (as ResNet does), one inside a Sequential, and a BatchNorm1d on the features (momentum None).
struct Cnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::Sequential> block;
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::BatchNorm1d> bn3;
  Cnn() {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(2, 4, 3, nn::Conv2dOptions{.padding = 1}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(4));
    block = register_module("block", std::make_shared<nn::Sequential>(
                                         std::make_shared<nn::Conv2d>(4, 4, 3),
                                         std::make_shared<nn::BatchNorm2d>(4, nn::BatchNormOptions{.momentum = 0.3}),
                                         std::make_shared<nn::ReLU>()));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
    bn3 = register_module("bn3", std::make_shared<nn::BatchNorm1d>(3, nn::BatchNormOptions{.momentum = std::nullopt}));
  }
  Tensor forward(Tensor x) override {
    x = relu((*bn1)((*conv1)(x)));  // x: (N, 4, 5, 5)
    x = (*block)(x).mean({2, 3});   // (N, 4)
    return (*bn3)((*fc)(x));        // (N, 3)
  }
};

std::shared_ptr<Cnn> make_cnn(uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_shared<Cnn>();
  m->to(kFloat64);
  return m;
}

// Rows per rank: unequal on purpose; with_empty gives rank 1 none.
std::vector<int64_t> batch_sizes(int n, bool with_empty) {
  std::vector<int64_t> s = n == 2 ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 5, 2};
  s.resize(n, 2);
  if (with_empty) s[1] = 0;
  return s;
}

// ---- the worker side ------------------------------------------------------------------------------

// y = sum over ranks (a new tensor; x unchanged); x.grad = sum over ranks of the upstream gradients.
void check_differentiable_all_reduce() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const double S = n * (n + 1) / 2.0;
  for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::avg}) {
    const double k = op == dist::ReduceOp::avg ? 1.0 / n : 1.0;
    Tensor x = tensor(std::vector<double>{double(r + 1), 2.0 * (r + 1), -1.0}, {3}, kFloat64).requires_grad_();
    Tensor y = nn::parallel::differentiable_all_reduce(x, op);
    expect(max_abs_diff(y, tensor(std::vector<double>{k * S, k * 2 * S, -k * n}, {3}, kFloat64)) < 1e-15,
           "differentiable_all_reduce forward");
    expect(max_abs_diff(x, tensor(std::vector<double>{double(r + 1), 2.0 * (r + 1), -1.0}, {3}, kFloat64)) == 0,
           "differentiable_all_reduce must not change its input");
    Tensor w = tensor(std::vector<double>{double(r + 1), 1.0, double(r)}, {3}, kFloat64);
    (y * w).sum().backward();
    // d/dx_r of sum_q <w_q, op(x)> = op over q of w_q
    std::vector<double> want{k * S, k * n, k * n * (n - 1) / 2.0};
    expect(max_abs_diff(x.grad(), tensor(want, {3}, kFloat64)) < 1e-15, "differentiable_all_reduce gradient on rank ",
           r, ": got ", x.grad(), " expected ", tensor(want, {3}, kFloat64));
  }
}

// One SyncBatchNorm layer on each rank's rows against F::batch_norm on all the rows: output, input
// gradient, the summed weight and bias gradients, running statistics; inputs of 2 to 5 dims, a rank
// with no rows, momentum and momentum None, two steps.
void check_layer(bool with_empty) {
  const int r = dist::get_rank(), n = dist::get_world_size();
  auto sizes = batch_sizes(n, with_empty);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  const int64_t off = std::accumulate(sizes.begin(), sizes.begin() + r, int64_t{0});
  const int64_t C = 3;
  for (int64_t nd = 2; nd <= 5; ++nd) {
    std::optional<double> momentum = nd % 2 ? std::optional<double>(0.3) : std::nullopt;
    // The 3-d case names the group explicitly (the default one); the others look it up.
    nn::SyncBatchNorm sbn(C, {.momentum = momentum}, nd == 3 ? &dist::default_group() : nullptr);
    sbn.to(kFloat64);
    manual_seed(40 + nd);
    {
      autograd::NoGradGuard ng;
      sbn.weight.copy_(randn({C}, kFloat64));
      sbn.bias.copy_(randn({C}, kFloat64));
    }
    Tensor ref_w = sbn.weight.detach().clone().requires_grad_(), ref_b = sbn.bias.detach().clone().requires_grad_();
    Tensor ref_rm = zeros({C}, kFloat64), ref_rv = ones({C}, kFloat64);
    Shape shape{total, C, 3, 2, 4};
    shape.resize(nd);
    for (int step = 1; step <= 2; ++step) {
      Tensor x = randn(shape, kFloat64) * 2 + 0.5, g = randn(shape, kFloat64);
      Tensor xref = x.clone().requires_grad_();
      double factor = momentum ? *momentum : 1.0 / step;
      Tensor yref = F::batch_norm(xref, ref_rm, ref_rv, ref_w, ref_b, true, factor, 1e-5);
      (yref * g).sum().backward();
      Tensor xl = x.narrow(0, off, sizes[r]).clone().requires_grad_();
      sbn.zero_grad();
      Tensor y = sbn(xl);
      (y * g.narrow(0, off, sizes[r])).sum().backward();
      std::string what = internal::str(nd, "-d input, step ", step, with_empty ? ", rank 1 empty" : "", ", rank ", r);
      expect(max_abs_diff(y, yref.narrow(0, off, sizes[r])) < 1e-12, "output differs (", what, ")");
      expect(max_abs_diff(xl.grad(), xref.grad().narrow(0, off, sizes[r])) < 1e-12, "input gradient differs (", what,
             ")");
      Tensor dw = sbn.weight.grad().clone(), db = sbn.bias.grad().clone();
      dist::all_reduce(dw);
      dist::all_reduce(db);
      expect(max_abs_diff(dw, ref_w.grad()) < 1e-12 && max_abs_diff(db, ref_b.grad()) < 1e-12,
             "weight/bias gradients summed over ranks differ (", what, ")");
      ref_w.mutable_grad() = Tensor();
      ref_b.mutable_grad() = Tensor();
      expect(max_abs_diff(sbn.running_mean, ref_rm) < 1e-13 && max_abs_diff(sbn.running_var, ref_rv) < 1e-13,
             "running statistics differ (", what, "): ", sbn.running_mean, sbn.running_var, " vs ", ref_rm, ref_rv);
      expect(sbn.num_batches_tracked.item<int64_t>() == step, "num_batches_tracked (", what, ")");
    }
    // Evaluation: the running statistics, no communication (a rank alone would not block).
    sbn.eval();
    Tensor x = randn(shape, kFloat64);
    Tensor want = F::batch_norm(x, ref_rm, ref_rv, ref_w.detach(), ref_b.detach(), false, 0.1, 1e-5);
    expect(max_abs_diff(sbn(x), want) < 1e-13, "evaluation differs from batch_norm (", nd, "-d)");
  }
  // float16 rows: statistics in float32, the output in float16.
  nn::SyncBatchNorm half(C);
  manual_seed(60);
  Tensor x = (randn({total, C, 4}) * 3 + 1).to(kFloat16).to(kFloat32);  // values a float16 holds exactly
  Tensor want = F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  Tensor y = half(x.narrow(0, off, sizes[r]).to(kFloat16));
  expect(y.dtype() == kFloat16, "a float16 input gives a float16 output, got ", y.dtype());
  expect(max_abs_diff(y, want.narrow(0, off, sizes[r])) < 5e-3, "float16 output differs from float32 batch_norm by ",
         max_abs_diff(y, want.narrow(0, off, sizes[r])));
}

// A CNN converted by convert_sync_batchnorm, under DDP, each rank on its rows, against one process
// with plain BatchNorm on all the rows: SGD with momentum, 6 steps; outputs, parameters, buffers.
void check_training() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  auto sizes = batch_sizes(n, false);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  const int64_t off = std::accumulate(sizes.begin(), sizes.begin() + r, int64_t{0});
  auto ref = make_cnn(11);
  auto model = make_cnn(11 + r);  // different on every rank: DDP broadcasts rank 0's
  auto converted = nn::SyncBatchNorm::convert_sync_batchnorm(model);
  expect(converted == model, "convert_sync_batchnorm converts a model in place and returns it");
  int synced = 0;
  for (auto& [name, m] : model->named_modules()) {
    const bool sync = std::dynamic_pointer_cast<nn::SyncBatchNorm>(m) != nullptr;
    expect(sync || !std::dynamic_pointer_cast<nn::BatchNorm>(m), "'", name,
           "' is still a plain BatchNorm after the conversion");
    synced += sync;
  }
  expect(synced == 3, "expected 3 SyncBatchNorms, got ", synced);
  // Small buckets: several gradient all-reduces start during backward, between SyncBatchNorm's.
  nn::parallel::DistributedDataParallel ddp(model, {.bucket_cap_mb = 200.0 / (1024 * 1024)});
  expect(ddp.bucket_layout().size() >= 3, "expected several buckets, got ", ddp.bucket_layout().size());
  optim::SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 6; ++step) {
    manual_seed(500 + step);
    Tensor x = randn({total, 2, 5, 5}, kFloat64), t = randn({total, 3}, kFloat64);
    opt.zero_grad();
    ref_opt.zero_grad();
    Tensor out_ref = (*ref)(x);
    F::mse_loss(out_ref, t).backward();
    Tensor out = ddp(x.narrow(0, off, sizes[r]));
    // DDP averages the ranks' gradients: n times this rank's share of the whole batch's mean loss.
    ((out - t.narrow(0, off, sizes[r])).pow(2).sum() * (double(n) / double(total * 3))).backward();
    expect(max_abs_diff(out, out_ref.narrow(0, off, sizes[r])) < 1e-10, "step ", step, ": rank ", r,
           "'s output differs from one process's on its rows by ", max_abs_diff(out, out_ref.narrow(0, off, sizes[r])));
    opt.step();
    ref_opt.step();
  }
  auto mine = model->state_dict(), theirs = ref->state_dict();
  expect(mine.keys() == theirs.keys(), "the converted model's state dict names differ from the plain model's");
  for (const auto& [k, v] : theirs) {
    double d = max_abs_diff(*mine.find(k), v);
    expect(d < 1e-10, "'", k, "' after 6 steps on ", n, " ranks is ", d, " away from one process on the whole batch");
  }
  expect(model->bn3->num_batches_tracked.item<int64_t>() == 6, "num_batches_tracked");
  ddp.eval();
  ref->eval();
  manual_seed(900);
  Tensor x = randn({total, 2, 5, 5}, kFloat64);
  Tensor want = (*ref)(x).narrow(0, off, sizes[r]);
  expect(max_abs_diff(ddp(x.narrow(0, off, sizes[r])), want) < 1e-10, "evaluation mode differs from BatchNorm");
}

// ---- the single-process checks --------------------------------------------------------------------

// SyncBatchNorm without a group of more than one rank is BatchNorm: outputs, gradients and running
// statistics bit for bit, over two training steps and in evaluation.
void expect_same_as_batch_norm(int64_t nd, std::optional<double> momentum) {
  const int64_t C = 3;
  std::shared_ptr<nn::BatchNorm> bn;
  if (nd == 4) bn = std::make_shared<nn::BatchNorm2d>(C, nn::BatchNormOptions{.momentum = momentum});
  else bn = std::make_shared<nn::BatchNorm1d>(C, nn::BatchNormOptions{.momentum = momentum});
  nn::SyncBatchNorm sbn(C, {.momentum = momentum});
  Shape shape{5, C, 4, 3};
  shape.resize(nd);
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn(shape);
    Tensor a = x.clone().requires_grad_(), b = x.clone().requires_grad_();
    (*bn)(a).pow(2).sum().backward();
    sbn(b).pow(2).sum().backward();
    EXPECT_TRUE(equal(a.grad(), b.grad()));
    EXPECT_TRUE(equal(bn->weight.grad(), sbn.weight.grad()));
    EXPECT_TRUE(equal(bn->running_mean, sbn.running_mean));
    EXPECT_TRUE(equal(bn->running_var, sbn.running_var));
    EXPECT_EQ(sbn.num_batches_tracked.item<int64_t>(), step + 1);
  }
  bn->eval();
  sbn.eval();
  Tensor x = randn(shape);
  EXPECT_TRUE(equal((*bn)(x), sbn(x)));
}

}  // namespace

namespace nabla_dist_test {

int sync_batch_norm_worker(const std::string& scenario) {
  try {
    auto timeout = std::chrono::milliseconds(std::atoi(std::getenv("NABLA_TEST_TIMEOUT_MS")));
    expect(scenario == "sync_bn", "unknown scenario ", scenario);
    dist::init_process_group({.timeout = timeout});
    check_differentiable_all_reduce();
    check_layer(false);
    check_layer(true);
    check_training();
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cerr << "rank " << std::getenv("RANK") << " (" << scenario << "): " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace nabla_dist_test

namespace {

using nabla_dist_test::all_ranks;
using nabla_dist_test::expect_all_ok;
using nabla_dist_test::run_workers;

TEST(SyncBatchNorm, TwoAndThreeRanksMatchOneProcessOnTheWholeBatch) {
  expect_all_ok(run_workers("sync_bn", 2, all_ranks(2), 20000));
  expect_all_ok(run_workers("sync_bn", 3, all_ranks(3), 20000));
  // With the signature checks: every rank issues the same collectives in the same order (forward,
  // backward and DDP's buckets interleaved), sizes and dtypes included.
  expect_all_ok(run_workers("sync_bn", 3, all_ranks(3), 20000, {{"NABLA_DISTRIBUTED_DEBUG", "1"}}));
}

TEST(SyncBatchNorm, WithoutAProcessGroupIsBatchNorm) {
  ASSERT_FALSE(dist::is_initialized());
  manual_seed(1);
  expect_same_as_batch_norm(2, 0.1);
  expect_same_as_batch_norm(3, std::nullopt);
  expect_same_as_batch_norm(4, 0.2);
}

TEST(SyncBatchNorm, WorldOfOneIsBatchNorm) {
  dist::init_process_group({.init_method = "tcp://127.0.0.1:" + std::to_string(nabla_dist_test::free_port()),
                            .rank = 0,
                            .world_size = 1,
                            .timeout = std::chrono::seconds(10)});
  manual_seed(2);
  expect_same_as_batch_norm(4, 0.1);
  expect_same_as_batch_norm(2, std::nullopt);
  // The differentiable all_reduce of one rank: the identity, gradient included.
  Tensor x = tensor(std::vector<double>{1, -2, 3}, {3}, kFloat64).requires_grad_();
  Tensor y = nn::parallel::differentiable_all_reduce(x);
  EXPECT_TRUE(equal(y, x.detach()));
  EXPECT_FALSE(y.is_same(x));
  (y * tensor(std::vector<double>{4, 5, 6}, {3}, kFloat64)).sum().backward();
  EXPECT_TRUE(equal(x.grad(), tensor(std::vector<double>{4, 5, 6}, {3}, kFloat64)));
  dist::destroy_process_group();
}

TEST(SyncBatchNorm, ConvertReplacesNestedBatchNormsAndKeepsTheStateDict) {
  auto plain = make_cnn(3);
  auto model = make_cnn(3);
  auto before = model->state_dict();
  auto old_bn1 = model->bn1;
  auto converted = nn::SyncBatchNorm::convert_sync_batchnorm(model);
  EXPECT_EQ(converted, model);
  auto mods = model->named_modules();
  for (const char* name : {"bn1", "block.1", "bn3"}) {
    auto s = std::dynamic_pointer_cast<nn::SyncBatchNorm>(*mods.find(name));
    ASSERT_NE(s, nullptr) << name << " should be a SyncBatchNorm";
  }
  auto b1 = std::dynamic_pointer_cast<nn::SyncBatchNorm>(*mods.find("block.1"));
  EXPECT_EQ(*b1->options.momentum, 0.3);
  EXPECT_FALSE(std::dynamic_pointer_cast<nn::SyncBatchNorm>(*mods.find("bn3"))->options.momentum.has_value());
  // The same names, the very same tensors.
  auto after = model->state_dict();
  ASSERT_EQ(after.keys(), before.keys());
  for (const auto& [k, v] : before) EXPECT_EQ(after.find(k)->data_ptr(), v.data_ptr()) << k;
  EXPECT_EQ(model->parameters().size(), plain->parameters().size());
  EXPECT_NE(
      model->repr().find("(bn1): SyncBatchNorm(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"),
      std::string::npos)
      << model->repr();
  // Checkpoints load either way (strict names).
  auto dir = std::filesystem::temp_directory_path();
  std::string p1 = (dir / ("nabla_sbn_plain_" + std::to_string(getpid()) + ".safetensors")).string();
  std::string p2 = (dir / ("nabla_sbn_sync_" + std::to_string(getpid()) + ".safetensors")).string();
  {
    autograd::NoGradGuard ng;
    plain->bn1->running_mean.fill_(0.25);
    plain->block->at<nn::BatchNorm2d>(1)->weight.fill_(2.0);
  }
  nn::save_weights(*plain, p1);
  nn::load_weights(*model, p1);
  EXPECT_TRUE(
      equal(std::dynamic_pointer_cast<nn::SyncBatchNorm>(*mods.find("bn1"))->running_mean, full({4}, 0.25, kFloat64)));
  EXPECT_TRUE(equal(b1->weight, full({4}, 2.0, kFloat64)));
  nn::save_weights(*model, p2);
  auto fresh = make_cnn(4);
  nn::load_weights(*fresh, p2);
  EXPECT_TRUE(equal(fresh->block->at<nn::BatchNorm2d>(1)->weight, full({4}, 2.0, kFloat64)));
  std::filesystem::remove(p1);
  std::filesystem::remove(p2);
  // The typed member still points at the old BatchNorm2d; calling it runs the SyncBatchNorm once
  // (the running statistics move once, as for one BatchNorm step).
  EXPECT_EQ(model->bn1, old_bn1);
  manual_seed(5);
  Tensor x = randn({6, 4, 3, 3}, kFloat64);
  auto sync_bn1 = std::dynamic_pointer_cast<nn::SyncBatchNorm>(*mods.find("bn1"));
  Tensor rm0 = sync_bn1->running_mean.clone();
  Tensor y = (*old_bn1)(x);
  EXPECT_TRUE(old_bn1->is_training());
  EXPECT_EQ(sync_bn1->num_batches_tracked.item<int64_t>(), 1);
  auto ref = std::make_shared<nn::BatchNorm2d>(4);
  ref->to(kFloat64);
  {
    autograd::NoGradGuard ng;
    ref->running_mean.copy_(rm0);
  }
  EXPECT_LT(max_abs_diff(y, (*ref)(x)), 1e-12);
  EXPECT_LT(max_abs_diff(sync_bn1->running_mean, ref->running_mean), 1e-15);
  // A direct forward call (no module call operator) forwards too.
  Tensor y2 = old_bn1->forward(x);
  EXPECT_EQ(sync_bn1->num_batches_tracked.item<int64_t>(), 2);
  EXPECT_LT(max_abs_diff(y2, (*ref)(x)), 1e-12);
  EXPECT_LT(max_abs_diff(sync_bn1->running_mean, ref->running_mean), 1e-15);
  // The whole model in evaluation mode matches the plain model with the same state.
  plain->load_state_dict(model->state_dict());
  model->eval();
  plain->eval();
  Tensor xin = randn({3, 2, 5, 5}, kFloat64);
  EXPECT_LT(max_abs_diff((*model)(xin), (*plain)(xin)), 1e-14);
  // Converting again changes nothing; a BatchNorm itself becomes a new SyncBatchNorm sharing its
  // tensors, and stays a plain BatchNorm.
  EXPECT_EQ(nn::SyncBatchNorm::convert_sync_batchnorm(model), model);
  EXPECT_EQ(std::dynamic_pointer_cast<nn::SyncBatchNorm>(*model->named_modules().find("bn1")), sync_bn1);
  auto lone = std::make_shared<nn::BatchNorm1d>(5, nn::BatchNormOptions{.eps = 1e-3, .affine = false});
  auto lone_sync = std::dynamic_pointer_cast<nn::SyncBatchNorm>(nn::SyncBatchNorm::convert_sync_batchnorm(lone));
  ASSERT_NE(lone_sync, nullptr);
  EXPECT_EQ(lone_sync->options.eps, 1e-3);
  EXPECT_FALSE(lone_sync->weight.defined());
  EXPECT_TRUE(lone_sync->running_var.is_same(lone->running_var));
  Tensor z = randn({4, 5});
  EXPECT_TRUE(equal((*lone)(z), (*lone)(z)));  // the root itself does not forward
  EXPECT_EQ(lone->num_batches_tracked.item<int64_t>(), 2);
}

// ResNet calls its BatchNorms through typed members (bn1, bn2) and Sequentials (downsample): the
// converted model, with no group, trains exactly as the plain one, each statistic updated once.
TEST(SyncBatchNorm, ConvertedResNetTrainsAsThePlainOne) {
  manual_seed(8);
  auto plain = vision::resnet18({.num_classes = 5});
  manual_seed(8);
  auto model = vision::resnet18({.num_classes = 5});
  nn::SyncBatchNorm::convert_sync_batchnorm(model);
  int synced = 0;
  for (auto& [name, m] : model->named_modules()) {
    const bool sync = std::dynamic_pointer_cast<nn::SyncBatchNorm>(m) != nullptr;
    EXPECT_TRUE(sync || !std::dynamic_pointer_cast<nn::BatchNorm>(m)) << name << " is still a plain BatchNorm";
    synced += sync;
  }
  EXPECT_EQ(synced, 20);  // bn1, 2 per block x 8 blocks, 3 downsample
  Tensor x = randn({2, 3, 32, 32});
  (*plain)(x).pow(2).sum().backward();
  (*model)(x).pow(2).sum().backward();
  auto pa = plain->named_parameters(), pb = model->named_parameters();
  ASSERT_EQ(pa.keys(), pb.keys());
  for (const auto& [k, v] : pa) EXPECT_TRUE(equal(v.grad(), pb.find(k)->grad())) << k;
  auto ba = plain->named_buffers(), bb = model->named_buffers();
  ASSERT_EQ(ba.keys(), bb.keys());
  for (const auto& [k, v] : ba) EXPECT_TRUE(equal(v, *bb.find(k))) << k;
  EXPECT_EQ(model->layer2->at<vision::BasicBlock>(0)->bn2->num_batches_tracked.item<int64_t>(), 1);
  plain->eval();
  model->eval();
  EXPECT_TRUE(equal((*plain)(x), (*model)(x)));
}

TEST(SyncBatchNorm, MistakesAreNamed) {
  nn::SyncBatchNorm sbn(3);
  auto message = [&](const Tensor& x) -> std::string {
    try {
      sbn(x);
    } catch (const ShapeError& e) { return e.what(); }
    return "no ShapeError";
  };
  EXPECT_NE(message(randn({3})).find("SyncBatchNorm: expected input (N, C, *) with 2 to 5 dims, got [3]"),
            std::string::npos)
      << message(randn({3}));
  EXPECT_NE(message(randn({2, 3, 1, 1, 1, 1})).find("2 to 5 dims"), std::string::npos);
  EXPECT_NE(message(randn({2, 4, 5})).find("expected 3 channels (dim 1), got input of shape [2, 4, 5]"),
            std::string::npos)
      << message(randn({2, 4, 5}));
  EXPECT_THROW(nn::SyncBatchNorm(0), ValueError);
  EXPECT_THROW(nn::SyncBatchNorm::convert_sync_batchnorm(nullptr), ValueError);
  EXPECT_THROW(nn::parallel::differentiable_all_reduce(randn({2})), dist::DistributedError);  // no group
  try {
    nn::parallel::differentiable_all_reduce(randn({2}), dist::ReduceOp::max);
    ADD_FAILURE() << "max should be refused";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("op must be sum or avg"), std::string::npos) << e.what();
  }
}

}  // namespace
