// Multi-process tests of nabla::distributed on loopback. The test program is also its own worker:
// a test forks and execs it with NABLA_DIST_WORKER=<scenario> and torchrun's variables (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT); a worker checks its results itself and exits 0 when
// they are right, printing what went wrong otherwise. The parent asserts every worker's exit.
// Timeouts are short (seconds) so that failures show within the test's time.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_api.h"
#include "core/graph.h"
#include "core/ops.h"
#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/process_group_nccl.h"
#include "io/safetensors.h"
#include "nn/conv.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/serialize.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"
#include "tests/common/python_torch.h"
#include "workers.h"

using namespace nabla;
namespace dist = nabla::distributed;
using Clock = std::chrono::steady_clock;
using nabla_dist_test::all_ranks;
using nabla_dist_test::expect_all_ok;
using nabla_dist_test::free_port;
using nabla_dist_test::Result;
using nabla_dist_test::run_workers;

namespace {

// ---- the worker side ------------------------------------------------------------------------------

using nabla_dist_test::expect;

int env_int(const char* name) { return std::atoi(std::getenv(name)); }
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Where the worker's tensors live: the CPU for gloo, the rank's GPU for nccl.
Device g_device = Device::cpu();
bool on_gpu() { return g_device.is_cuda(); }
Tensor zeros_on(IntArrayRef shape, DType d) { return zeros(shape, TensorOptions(d).device(g_device)); }

// The values of t as doubles, in logical (row-major) order.
std::vector<double> values(const Tensor& t) {
  Tensor d = t.cpu().to(kFloat64).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

Tensor make(const std::vector<double>& v, DType d, IntArrayRef shape) {
  return tensor(v, shape, kFloat64).to(d).to(g_device);
}

void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  auto got = values(t);
  expect(got.size() == want.size(), what, ": ", got.size(), " values, expected ", want.size());
  for (size_t i = 0; i < got.size(); ++i)
    expect(got[i] == want[i], what, ": element ", i, " is ", got[i], ", expected ", want[i]);
}

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kInt32, kInt64, kUInt8, kBool, kFloat16, kBFloat16};
constexpr int64_t N = 5;

// Rank r's input: (r + 1) + i, or for bool (i + r) % 3 == 0.
std::vector<double> input_of(int r, DType d) {
  std::vector<double> v(N);
  for (int64_t i = 0; i < N; ++i) v[i] = d == kBool ? double((i + r) % 3 == 0) : double(r + 1 + i);
  return v;
}

std::vector<double> reduced(int n, DType d, dist::ReduceOp op) {
  std::vector<double> out(N);
  for (int64_t i = 0; i < N; ++i) {
    double acc = input_of(0, d)[i];
    for (int r = 1; r < n; ++r) {
      double x = input_of(r, d)[i];
      switch (op) {
        case dist::ReduceOp::sum:
        case dist::ReduceOp::avg: acc = d == kBool ? double(acc || x) : acc + x; break;
        case dist::ReduceOp::product: acc = d == kBool ? double(acc && x) : acc * x; break;
        case dist::ReduceOp::min: acc = std::min(acc, x); break;
        case dist::ReduceOp::max: acc = std::max(acc, x); break;
      }
    }
    if (d == kUInt8) acc = std::fmod(acc, 256.0);  // uint8 sums and products wrap, as in PyTorch
    out[i] = op == dist::ReduceOp::avg ? acc / n : acc;
  }
  return out;
}

void check_collectives() {
  int r = dist::get_rank(), n = dist::get_world_size();
  for (DType d : kAllDTypes) {
    std::string dn = dtype_name(d);
    for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::avg, dist::ReduceOp::min, dist::ReduceOp::max,
                    dist::ReduceOp::product}) {
      Tensor x = make(input_of(r, d), d, {N});
      if (op == dist::ReduceOp::avg && !is_floating(d)) {
        bool threw = false;
        try {
          dist::all_reduce(x, op);
        } catch (const DTypeError& e) { threw = std::string(e.what()).find("avg") != std::string::npos; }
        expect(threw, "all_reduce avg on ", dn, " should throw DTypeError");
        continue;
      }
      dist::all_reduce(x, op);
      expect(x.dtype() == d, "all_reduce changed the dtype");
      expect_values(x, reduced(n, d, op), "all_reduce(" + std::string(dist::reduce_op_name(op)) + ", " + dn + ")");
    }
    // broadcast from the last rank
    Tensor b = make(input_of(r, d), d, {N});
    dist::broadcast(b, n - 1);
    expect_values(b, input_of(n - 1, d), "broadcast " + dn);
    // all_gather
    std::vector<Tensor> outs;
    for (int q = 0; q < n; ++q) outs.push_back(zeros_on({N}, d));
    dist::all_gather(outs, make(input_of(r, d), d, {N}));
    for (int q = 0; q < n; ++q)
      expect_values(outs[q], input_of(q, d), "all_gather " + dn + " from rank " + std::to_string(q));
    // gather to rank 0
    std::vector<Tensor> g;
    if (r == 0)
      for (int q = 0; q < n; ++q) g.push_back(zeros_on({N}, d));
    dist::gather(make(input_of(r, d), d, {N}), g, 0);
    if (r == 0)
      for (int q = 0; q < n; ++q)
        expect_values(g[q], input_of(q, d), "gather " + dn + " from rank " + std::to_string(q));
    // scatter from rank 1 % n: rank q receives input_of(q + 2)
    int root = 1 % n;
    std::vector<Tensor> ins;
    if (r == root)
      for (int q = 0; q < n; ++q) ins.push_back(make(input_of(q + 2, d), d, {N}));
    Tensor s = zeros_on({N}, d);
    dist::scatter(s, ins, root);
    expect_values(s, input_of(r + 2, d), "scatter " + dn);
    // reduce_scatter: rank r contributes input_of(r + q) for chunk q; chunk q is reduced on rank q
    for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::max}) {
      std::vector<Tensor> chunks;
      for (int q = 0; q < n; ++q) chunks.push_back(make(input_of(r + q, d), d, {N}));
      Tensor out = zeros_on({N}, d);
      dist::reduce_scatter(out, chunks, op);
      std::vector<double> want = input_of(r, d);  // r + 0 on rank 0, ...
      for (int64_t i = 0; i < N; ++i) {
        double acc = input_of(0 + r, d)[i];
        for (int q = 1; q < n; ++q) {
          double v = input_of(q + r, d)[i];
          acc = op == dist::ReduceOp::max ? std::max(acc, v) : (d == kBool ? double(acc || v) : acc + v);
        }
        want[i] = acc;
      }
      expect_values(out, want, "reduce_scatter(" + std::string(dist::reduce_op_name(op)) + ", " + dn + ")");
    }
    // send/recv around the ring (nccl: a send waits for the peer's recv in order, so even ranks send
    // first and odd ranks receive first)
    if (n > 1) {
      Tensor mine = make(input_of(r, d), d, {N});
      Tensor got = zeros_on({N}, d);
      dist::Work ws, wr;
      if (on_gpu() && r % 2 == 1) {
        wr = dist::irecv(got, (r + n - 1) % n, 7);
        ws = dist::isend(mine, (r + 1) % n, 7);
      } else {
        ws = dist::isend(mine, (r + 1) % n, 7);
        wr = dist::irecv(got, (r + n - 1) % n, 7);
      }
      wr.wait();
      ws.wait();
      expect_values(got, input_of((r + n - 1) % n, d), "send/recv " + dn);
    }
  }
  // Large sums through both of Gloo's all-reduce algorithms (bcube up to 32 MiB, ring above; see
  // process_group_gloo.cpp): 1,000,003 float32 (chunks of unequal sizes) and 8.5M (34 MB).
  for (int64_t len : {int64_t{1000003}, int64_t{8500000}}) {
    Tensor base = remainder(arange(len, TensorOptions(kFloat32)), 1000);
    Tensor x = (base * static_cast<double>(r + 1)).to(g_device);
    dist::all_reduce(x, dist::ReduceOp::sum);
    const double times = n * (n + 1) / 2.0;  // exact in float32: at most 999 * 6
    expect(equal(x.cpu(), base * times), "all_reduce(sum) of ", len, " float32 on ", n, " ranks");
  }
  // Non-contiguous tensors: results land in the tensor's own layout.
  for (DType d : {kFloat32, kInt64, kFloat16}) {
    std::vector<double> v(10);
    for (int i = 0; i < 10; ++i) v[i] = (r + 1) * 10 + i;
    Tensor base = make(v, d, {5, 2});
    Tensor x = base.t();  // (2, 5), strides (1, 2)
    expect(!x.is_contiguous(), "the test's tensor should be non-contiguous");
    dist::all_reduce(x, dist::ReduceOp::sum);
    std::vector<double> want(10);
    for (int i = 0; i < 10; ++i) {
      want[i] = 0;
      for (int q = 0; q < n; ++q) want[i] += (q + 1) * 10 + i;
    }
    expect_values(base, want, std::string("all_reduce into a non-contiguous ") + dtype_name(d));
    Tensor y = make(v, d, {5, 2}).t();
    dist::broadcast(y, 0);
    std::vector<double> want0(10);
    for (int i = 0; i < 10; ++i) want0[i] = 10 + i;
    expect_values(y.t(), want0, "broadcast into a non-contiguous tensor");
    // a non-contiguous send into a non-contiguous recv
    if (n > 1) {
      Tensor out = zeros_on({5, 2}, d).t();
      dist::Work ws;
      if (on_gpu() && r % 2 == 1) {
        dist::recv(out, (r + n - 1) % n, 9);
        ws = dist::isend(make(v, d, {5, 2}).t(), (r + 1) % n, 9);
      } else {
        ws = dist::isend(make(v, d, {5, 2}).t(), (r + 1) % n, 9);
        dist::recv(out, (r + n - 1) % n, 9);
      }
      ws.wait();
      std::vector<double> wprev(10);
      for (int i = 0; i < 10; ++i) wprev[i] = ((r + n - 1) % n + 1) * 10 + i;
      expect_values(out.t(), wprev, "send/recv of non-contiguous tensors");
    }
  }
  // Async: several in flight, completed in order.
  std::vector<Tensor> xs;
  std::vector<dist::Work> works;
  for (int k = 0; k < 4; ++k) {
    xs.push_back(full({1000}, double(r + k), TensorOptions(kFloat64).device(g_device)));
    works.push_back(dist::all_reduce(xs.back(), dist::ReduceOp::sum, /*async_op=*/true));
  }
  for (int k = 0; k < 4; ++k) {
    works[k].wait();
    expect(works[k].is_completed(), "a waited Work is completed");
    double want = 0;
    for (int q = 0; q < n; ++q) want += q + k;
    expect_values(xs[k].narrow(0, 999, 1), {want}, "async all_reduce " + std::to_string(k));
  }
  dist::barrier();
  // Mistakes are caught before anything is sent.
  bool threw = false;
  try {
    dist::broadcast(zeros_on({2}, kFloat32), n);
  } catch (const ValueError& e) { threw = std::string(e.what()).find("not a rank") != std::string::npos; }
  expect(threw, "broadcast from a rank outside the group should throw ValueError");
}

// ---- DDP ------------------------------------------------------------------------------------------

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, spare;
  explicit Mlp(int64_t hidden = 8, bool with_spare = false) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, hidden));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, 3));
    if (with_spare) spare = register_module("spare", std::make_shared<nn::Linear>(3, 3));  // never used
  }
  Tensor forward(Tensor x) override { return fc2->forward(tanh(fc1->forward(x))); }
};

std::shared_ptr<Mlp> make_mlp(uint64_t seed, bool with_spare, int64_t hidden = 8, DType dtype = kFloat64) {
  manual_seed(seed);
  auto m = std::make_shared<Mlp>(hidden, with_spare);
  m->to(dtype);
  if (on_gpu()) m->to(g_device);
  return m;
}

double max_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double d = 0;
  for (size_t i = 0; i < pa.size(); ++i) d = std::max(d, (pa[i] - pb[i]).abs().max().item<double>());
  return d;
}

// 2 or 3 ranks with batch B each train as one process on the n * B rows: 10 plain steps, then 10
// steps of two micro-batches with the first under no_sync. SGD with momentum; the parameters end
// within 1e-12 of one process's in float64, 1e-6 in float32 (where the average of the ranks'
// gradients and the gradient of the whole batch round differently).
void check_ddp(bool with_spare, DType dtype = kFloat64) {
  int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 4;
  auto model = make_mlp(100 + r, with_spare, 8, dtype);  // different on every rank: DDP broadcasts rank 0's
  auto ref = make_mlp(100, with_spare, 8, dtype);
  nn::parallel::DistributedDataParallel ddp(
      model, {.bucket_cap_mb = 200.0 / (1024 * 1024), .find_unused_parameters = with_spare});
  expect(ddp.bucket_layout().size() >= 2, "a 200-byte cap should make several buckets, got ",
         ddp.bucket_layout().size());
  expect(max_diff(*model, *ref) == 0, "after construction every rank holds rank 0's parameters");
  auto keys = ddp.state_dict(), ref_keys = ref->state_dict();
  expect(keys.size() == ref_keys.size() && keys.begin()->first == ref_keys.begin()->first,
         "the state dict has the module's own names, e.g. ", ref_keys.begin()->first);
  optim::SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    ref_opt.zero_grad();
    int micro = step < 10 ? 1 : 2;
    for (int m = 0; m < micro; ++m) {
      manual_seed(1000 + step * 10 + m);
      Tensor x = randn({n * B, 4}, dtype).to(g_device), y = randn({n * B, 3}, dtype).to(g_device);
      Tensor xr = x.narrow(0, r * B, B), yr = y.narrow(0, r * B, B);
      if (m + 1 < micro) {
        auto guard = ddp.no_sync();
        nn::functional::mse_loss(ddp(xr), yr).backward();
      } else {
        nn::functional::mse_loss(ddp(xr), yr).backward();
      }
      nn::functional::mse_loss((*ref)(x), y).backward();
    }
    opt.step();
    ref_opt.step();
  }
  double d = max_diff(*model, *ref);
  const double tolerance = dtype == kFloat64 ? 1e-12 : 1e-6;
  expect(d < tolerance, "DDP on ", n, " ranks (", dtype, ") ended ", d, " away from one process on the whole batch");
  if (on_gpu() || dtype != kFloat64) return;  // the checkpoint's path is the same on both backends and dtypes
  // A checkpoint: rank 0 writes the DDP model's weights, every rank loads them (strict names) into
  // a plain model.
  std::string path =
      std::string(std::getenv("NABLA_TEST_DIR")) + "/ddp" + (with_spare ? "_spare" : "") + ".safetensors";
  if (r == 0) nn::save_weights(ddp.module(), path);
  dist::barrier();
  auto fresh = make_mlp(777 + r, with_spare);
  nn::load_weights(*fresh, path);
  expect(max_diff(*fresh, *model) == 0, "the checkpoint rank 0 wrote loads into a plain model on rank ", r);
  dist::barrier();  // everyone has read it before the test's directory goes
}

// An MLP with a batch norm: float64 running statistics and an int64 step counter, which DDP's
// forward broadcasts together, as the bytes of one flat tensor.
struct BnMlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::BatchNorm1d> bn;
  BnMlp() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3));
  }
  Tensor forward(Tensor x) override { return fc2->forward(tanh(bn->forward(fc1->forward(x)))); }
};

// A small CNN with plain batch norms.
struct BnCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Linear> fc;
  BnCnn() {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(2, 4, 3, nn::Conv2dOptions{.padding = 1}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(4));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(4, 4, 3));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(4, nn::BatchNormOptions{.momentum = 0.3}));
    fc = register_module("fc", std::make_shared<nn::Linear>(4 * 3 * 3, 3));
  }
  Tensor forward(Tensor x) override {
    x = bn1->forward(conv1->forward(x)).relu();
    return fc->forward(bn2->forward(conv2->forward(x)).relu().flatten(1));
  }
};

// The CNN with plain batch norms under DDP (broadcast_buffers): each rank normalizes its own rows,
// and rank 0's running statistics reach the others at the next broadcasting forward. One process
// reproduces it by running each rank's rows through the model apart (the sum of the ranks' mean
// losses over n has DDP's averaged gradient), with the batch norms' momentum 0 for the rows of
// ranks other than 0, so that only rank 0's rows move the running statistics. 20 steps, the last
// 10 of two micro-batches with the first under no_sync (whose next forward does not broadcast:
// rank 1's statistics drift there, rank 0's do not). float64: parameters and rank 0's statistics
// within 1e-12; after an evaluation forward (which broadcasts) every rank holds them.
void check_ddp_batch_norm_cnn() {
  const int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 3;
  manual_seed(21 + r);  // different on every rank: DDP broadcasts rank 0's
  auto model = std::make_shared<BnCnn>();
  model->to(kFloat64);
  manual_seed(21);
  auto ref = std::make_shared<BnCnn>();
  ref->to(kFloat64);
  nn::parallel::DistributedDataParallel ddp(model);
  optim::SGD opt(ddp.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.05, .momentum = 0.9});
  const double m1 = *ref->bn1->options.momentum, m2 = *ref->bn2->options.momentum;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    ref_opt.zero_grad();
    const int micro = step < 10 ? 1 : 2;
    for (int mb = 0; mb < micro; ++mb) {
      manual_seed(3000 + step * 10 + mb);
      Tensor x = randn({n * B, 2, 5, 5}, kFloat64), y = randn({n * B, 3}, kFloat64);
      auto loss = [&] { return nn::functional::mse_loss(ddp(x.narrow(0, r * B, B)), y.narrow(0, r * B, B)); };
      if (mb + 1 < micro) {
        auto guard = ddp.no_sync();
        loss().backward();
      } else {
        loss().backward();
      }
      for (int q = 0; q < n; ++q) {
        ref->bn1->options.momentum = q == 0 ? m1 : 0.0;
        ref->bn2->options.momentum = q == 0 ? m2 : 0.0;
        (nn::functional::mse_loss((*ref)(x.narrow(0, q * B, B)), y.narrow(0, q * B, B)) / static_cast<double>(n))
            .backward();
      }
    }
    opt.step();
    ref_opt.step();
  }
  const double d = max_diff(*model, *ref);
  expect(d < 1e-12, "DDP of a batch-norm CNN on ", n, " ranks ended ", d, " away from one process");
  auto stats_diff = [&] {
    return std::max({(model->bn1->running_mean - ref->bn1->running_mean).abs().max().item<double>(),
                     (model->bn1->running_var - ref->bn1->running_var).abs().max().item<double>(),
                     (model->bn2->running_mean - ref->bn2->running_mean).abs().max().item<double>(),
                     (model->bn2->running_var - ref->bn2->running_var).abs().max().item<double>()});
  };
  if (r == 0)
    expect(stats_diff() < 1e-12, "rank 0's running statistics are ", stats_diff(), " away from one process's");
  if (r == 1)
    expect(stats_diff() > 1e-6,
           "rank 1's statistics should have drifted in the last step (no broadcast after no_sync)");
  ddp.eval();
  {
    NoGradGuard no_grad;
    ddp(randn({B, 2, 5, 5}, kFloat64));  // broadcasts rank 0's buffers (the forward before was synchronized)
  }
  expect(stats_diff() < 1e-12, "after an evaluation forward rank ", r, "'s running statistics are ", stats_diff(),
         " away from one process's");
}

// DDP's communication counters (what bench/ddp_speed reports as the step's waiting fraction): the
// collectives counted per step, the waits within the step's time, a slow peer seen in the right
// wait, no_sync and reset.
void check_ddp_counters() {
  const int r = dist::get_rank();
  using Stats = nn::parallel::DistributedDataParallel::CommStats;
  manual_seed(7);
  auto model = std::make_shared<BnMlp>();
  model->to(kFloat64);
  nn::parallel::DistributedDataParallel ddp(model, {.bucket_cap_mb = 200.0 / (1024 * 1024)});
  const auto nb = static_cast<int64_t>(ddp.bucket_layout().size());
  expect(nb >= 3, "a 200-byte cap should make at least 3 buckets of this MLP, got ", nb);
  ddp.reset_comm_wait();
  const Stats& s = ddp.comm_stats();
  expect(s.synced_backwards == 0 && s.bucket_all_reduces == 0 && s.buffer_broadcasts == 0 && s.grad_wait_seconds == 0 &&
             s.buffer_wait_seconds == 0,
         "reset_comm_wait leaves every counter at 0");
  Tensor x = randn({6, 4}, kFloat64), y = randn({6, 3}, kFloat64);
  // Rank `late` arrives 300 ms late at "forward" or "backward" (`late_for`). Returns the step's seconds.
  auto step = [&](const std::string& late_for, int late = -1) {
    auto t0 = Clock::now();
    if (r == late && late_for == "forward") std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Tensor loss = nn::functional::mse_loss(ddp(x), y);
    if (r == late && late_for == "backward") std::this_thread::sleep_for(std::chrono::milliseconds(300));
    loss.backward();
    return seconds_since(t0);
  };
  // Three synchronized steps: one all-reduce per bucket and one broadcast (f64 and i64 buffers) each.
  double steps_time = 0;
  for (int i = 0; i < 3; ++i) steps_time += step("");
  expect(s.synced_backwards == 3, "3 synchronized backwards, counted ", s.synced_backwards);
  expect(s.bucket_all_reduces == 3 * nb, "3 steps x ", nb, " buckets of all-reduces, counted ", s.bucket_all_reduces);
  expect(s.buffer_broadcasts == 3, "3 forwards, one broadcast of every buffer each, counted ", s.buffer_broadcasts);
  expect(s.grad_wait_seconds >= 0 && s.buffer_wait_seconds >= 0, "waits are not negative");
  expect(s.grad_wait_seconds + s.buffer_wait_seconds <= steps_time, "the waits (", s.grad_wait_seconds, " + ",
         s.buffer_wait_seconds, " s) fit in the steps' ", steps_time, " s");
  expect(ddp.comm_wait_seconds() == s.grad_wait_seconds + s.buffer_wait_seconds &&
             ddp.buffer_wait_seconds() == s.buffer_wait_seconds,
         "comm_wait_seconds is the two waits' sum");
  // no_sync: backward launches no all-reduce and waits for none. Its forward broadcasts (the one
  // before it was synchronized); the forward after it does not (PyTorch's require_forward_param_sync).
  const Stats before = s;
  {
    auto guard = ddp.no_sync();
    step("");
  }
  expect(s.synced_backwards == before.synced_backwards && s.bucket_all_reduces == before.bucket_all_reduces &&
             s.grad_wait_seconds == before.grad_wait_seconds,
         "a no_sync step launched ", s.bucket_all_reduces - before.bucket_all_reduces, " all-reduces");
  expect(s.buffer_broadcasts == before.buffer_broadcasts + 1,
         "a no_sync forward after a synchronized one broadcasts the buffers, counted ",
         s.buffer_broadcasts - before.buffer_broadcasts);
  // A forward without backward (no grad) after the no_sync one: neither broadcast nor all-reduce.
  {
    NoGradGuard no_grad;
    ddp(x);
  }
  expect(s.bucket_all_reduces == before.bucket_all_reduces && s.buffer_broadcasts == before.buffer_broadcasts + 1,
         "a no-grad forward after a no_sync forward: no broadcast, counted ",
         s.buffer_broadcasts - before.buffer_broadcasts);
  // Rank 1 late for the backward: rank 0 waits for it at the end of its backward (the gradient wait).
  // Rank 0 (the broadcasts' root) late for the forward: rank 1 waits in the buffer broadcast.
  Stats a = s;
  double t = step("backward", 1);
  if (r == 0) {
    double w = s.grad_wait_seconds - a.grad_wait_seconds;
    expect(w >= 0.2 && w <= t, "rank 1 came 300 ms late to backward: rank 0's gradient wait grew by ", w,
           " s in a step of ", t, " s");
  }
  expect(s.bucket_all_reduces == a.bucket_all_reduces + nb && s.synced_backwards == a.synced_backwards + 1,
         "the gradient accumulated over no_sync was averaged in one more round of all-reduces");
  expect(s.buffer_broadcasts == a.buffer_broadcasts, "the forward after a no-grad forward does not broadcast");
  // After that synchronized step: a no-grad forward broadcasts, a second one does not.
  {
    NoGradGuard no_grad;
    const int64_t b0 = s.buffer_broadcasts;
    ddp(x);
    expect(s.buffer_broadcasts == b0 + 1, "a no-grad forward after a synchronized one broadcasts");
    ddp(x);
    expect(s.buffer_broadcasts == b0 + 1, "a no-grad forward after a no-grad one does not broadcast");
  }
  const int64_t b1 = s.buffer_broadcasts;
  step("");
  expect(s.buffer_broadcasts == b1, "a synchronized forward after no-grad forwards does not broadcast");
  // The next forward broadcasts again: rank 0 (the root) late for it keeps rank 1 waiting there.
  a = s;
  t = step("forward", 0);
  if (r == 1) {
    double w = s.buffer_wait_seconds - a.buffer_wait_seconds;
    expect(w >= 0.2 && w <= t, "rank 0 came 300 ms late to forward: rank 1's buffer wait grew by ", w,
           " s in a step of ", t, " s");
  }
  ddp.reset_comm_wait();
  expect(s.synced_backwards == 0 && s.bucket_all_reduces == 0 && s.buffer_broadcasts == 0 && s.grad_wait_seconds == 0 &&
             s.buffer_wait_seconds == 0 && ddp.comm_wait_seconds() == 0,
         "reset_comm_wait sets every counter back to 0");
  step("");
  expect(s.bucket_all_reduces == nb && s.buffer_broadcasts == 1, "counting resumes after a reset");
  // broadcast_buffers off: no broadcast at all.
  nn::parallel::DistributedDataParallel quiet(model, {.broadcast_buffers = false});
  quiet.reset_comm_wait();
  nn::functional::mse_loss(quiet(x), y).backward();
  expect(quiet.comm_stats().buffer_broadcasts == 0 && quiet.comm_stats().buffer_wait_seconds == 0 &&
             quiet.comm_stats().bucket_all_reduces == static_cast<int64_t>(quiet.bucket_layout().size()),
         "broadcast_buffers = false: no broadcasts, one all-reduce per bucket");
}

// Runs a schedule of DDP calls on BnMlp: S a synchronized step (forward, backward), N a step under
// no_sync, G a forward under NoGradGuard; rank 0 writes the count of buffer broadcasts after each
// call to `out`, space-separated (the PyTorch side: kTorchBufferSchedule below).
void run_buffer_schedule(const std::string& schedule, const std::string& out) {
  manual_seed(7);
  auto model = std::make_shared<BnMlp>();
  model->to(kFloat64);
  nn::parallel::DistributedDataParallel ddp(model);
  ddp.reset_comm_wait();
  Tensor x = randn({6, 4}, kFloat64), y = randn({6, 3}, kFloat64);
  std::string counts;
  for (char c : schedule) {
    if (c == 'G') {
      NoGradGuard no_grad;
      ddp(x);
    } else if (c == 'N') {
      auto guard = ddp.no_sync();
      nn::functional::mse_loss(ddp(x), y).backward();
    } else {
      nn::functional::mse_loss(ddp(x), y).backward();
    }
    counts += (counts.empty() ? "" : " ") + std::to_string(ddp.comm_stats().buffer_broadcasts);
  }
  if (dist::get_rank() == 0) std::ofstream(out) << counts;
}

// amp::GradScaler under DDP: rank 1 alone feeds an inf at step 2, which the all-reduce spreads to
// every rank's gradients, so every rank skips that step and backs off: the same scales on every
// rank, and the weights of one process on the whole batch that skips the same step.
void check_ddp_grad_scaler() {
  int r = dist::get_rank(), n = dist::get_world_size();
  const int64_t B = 3;
  auto model = make_mlp(7, false, 8, kFloat32);
  auto ref = make_mlp(7, false, 8, kFloat32);
  nn::parallel::DistributedDataParallel ddp(model);
  optim::SGD opt(ddp.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 2});
  const std::vector<double> want_scales = {1024, 2048, 1024, 1024, 2048, 2048};
  for (int step = 0; step < 6; ++step) {
    opt.zero_grad();
    ref_opt.zero_grad();
    manual_seed(500 + step);
    Tensor x = randn({n * B, 4}).to(g_device), y = randn({n * B, 3}).to(g_device);
    Tensor xr = x.narrow(0, r * B, B).clone(), yr = y.narrow(0, r * B, B);
    if (step == 2 && r == 1) xr.fill_(std::numeric_limits<float>::infinity());
    scaler.scale(nn::functional::mse_loss(ddp(xr), yr)).backward();
    bool stepped = scaler.step(opt);
    scaler.update();
    expect(stepped == (step != 2), "rank ", r, " step ", step, ": stepped ", stepped);
    expect(scaler.get_scale() == want_scales[step], "rank ", r, " step ", step, ": scale ", scaler.get_scale());
    if (step != 2) {
      nn::functional::mse_loss((*ref)(x), y).backward();
      ref_opt.step();
    }
  }
  double d = max_diff(*model, *ref);
  expect(d < 1e-6, "DDP with GradScaler on ", n, " ranks ended ", d, " away from one process");
}

int worker_main(const std::string& scenario) {
  auto timeout = std::chrono::milliseconds(env_int("NABLA_TEST_TIMEOUT_MS"));
  try {
    if (scenario == "collectives") {
      dist::init_process_group({.backend = "gloo", .init_method = "env://", .timeout = timeout});
      expect(dist::is_initialized(), "is_initialized after init");
      expect(dist::get_rank() == env_int("RANK") && dist::get_world_size() == env_int("WORLD_SIZE"), "rank/world size");
      check_collectives();
      dist::destroy_process_group();
      expect(!dist::is_initialized(), "is_initialized after destroy");
    } else if (scenario == "ddp") {
      dist::init_process_group({.timeout = timeout});
      check_ddp(false);
      check_ddp(true);
      check_ddp(false, kFloat32);
      check_ddp_batch_norm_cnn();
      // A parameter without a gradient, find_unused_parameters off: the next forward says which.
      auto model = make_mlp(5, /*with_spare=*/true);
      nn::parallel::DistributedDataParallel ddp(model);
      nn::functional::mse_loss(ddp(ones({2, 4}, kFloat64)), zeros({2, 3}, kFloat64)).backward();
      try {
        ddp(ones({2, 4}, kFloat64));
        expect(false, "forward after a backward that missed a parameter should throw");
      } catch (const dist::DistributedError& e) {
        expect(std::string(e.what()).find("'spare.weight'") != std::string::npos,
               "should name spare.weight: ", e.what());
      }
      // broadcast_buffers: each forward starts from rank 0's buffers (here: eval mode, so the
      // forward does not update them; rank 1's are scribbled over first).
      {
        auto bn = std::make_shared<nn::BatchNorm1d>(3);
        bn->to(kFloat64);
        nn::parallel::DistributedDataParallel bddp(bn);
        bddp.eval();
        if (dist::get_rank() == 0) bn->running_mean.fill_(2.5);
        else bn->running_mean.fill_(-7.0);
        Tensor y = bddp(zeros({2, 3}, kFloat64));
        expect(bn->running_mean.eq(2.5).all().item<bool>(), "rank ", dist::get_rank(),
               " should hold rank 0's running_mean after forward");
        // (x - 2.5) / sqrt(1 + eps) with x = 0 and the default weight 1, bias 0
        expect(std::abs(y[0][0].item<double>() + 2.5 / std::sqrt(1 + 1e-5)) < 1e-12, "forward used rank 0's buffers");
      }
      // Ranks that build different models are told which parameter differs.
      auto odd = make_mlp(5, false, dist::get_rank() == 1 ? 9 : 8);
      try {
        nn::parallel::DistributedDataParallel bad(odd);
        expect(false, "DDP over different models should throw");
      } catch (const dist::DistributedError& e) {
        expect(std::string(e.what()).find("fc1.weight") != std::string::npos, "should name fc1.weight: ", e.what());
      }
      dist::destroy_process_group();
    } else if (scenario == "ddp_grad_scaler") {
      dist::init_process_group({.timeout = timeout});
      check_ddp_grad_scaler();
      dist::destroy_process_group();
    } else if (scenario == "ddp_counters") {
      dist::init_process_group({.timeout = timeout});
      check_ddp_counters();
      dist::destroy_process_group();
    } else if (scenario == "ddp_buffer_schedule") {
      dist::init_process_group({.timeout = timeout});
      run_buffer_schedule(std::getenv("NABLA_DDP_SCHEDULE"), std::getenv("NABLA_DDP_SCHEDULE_OUT"));
      dist::destroy_process_group();
    } else if (scenario == "nccl_collectives" || scenario == "nccl_ddp") {
      // One GPU per rank (NCCL refuses two ranks on one device).
      cuda::set_device(env_int("RANK"));
      g_device = Device::cuda(static_cast<int16_t>(env_int("RANK")));
      dist::init_process_group({.backend = "nccl", .init_method = "env://", .timeout = timeout});
      expect(dist::default_group().backend() == "nccl", "the default group should be nccl");
      if (scenario == "nccl_collectives") {
        check_collectives();
      } else {
        check_ddp(false);
        check_ddp(true);
        check_ddp(false, kFloat32);
      }
      dist::destroy_process_group();
    } else if (scenario == "nccl_peer_hangs") {
      // The last rank stops taking part (alive) for longer than the timeout: the others' wait must
      // give up after the timeout, abort the communicator and name the collective.
      cuda::set_device(env_int("RANK"));
      g_device = Device::cuda(static_cast<int16_t>(env_int("RANK")));
      dist::init_process_group({.backend = "nccl", .init_method = "env://", .timeout = timeout});
      int r = dist::get_rank(), n = dist::get_world_size();
      Tensor x = ones({1000}, TensorOptions(kFloat32).device(g_device));
      dist::all_reduce(x);
      expect_values(x.narrow(0, 0, 1), {double(n)}, "the first all_reduce");
      if (r == n - 1) {
        std::this_thread::sleep_for(timeout + std::chrono::milliseconds(2000));
        _exit(0);
      }
      auto t0 = Clock::now();
      try {
        dist::all_reduce(x);
        expect(false, "all_reduce succeeded although rank ", n - 1, " never called it");
      } catch (const dist::DistributedError& e) {
        double s = seconds_since(t0);
        std::cerr << "rank " << r << " after " << s << " s: " << e.what() << "\n";
        std::string m = e.what();
        expect(m.find("all_reduce") != std::string::npos && m.find("within the timeout") != std::string::npos &&
                   m.find("aborted") != std::string::npos,
               "the error should name all_reduce and the timeout: ", m);
        expect(s >= timeout.count() / 1000.0 * 0.9 && s < timeout.count() / 1000.0 + 5.0, "the error took ", s,
               " s, the timeout is ", timeout.count(), " ms");
      }
      try {
        dist::barrier();
        expect(false, "barrier succeeded on a broken group");
      } catch (const dist::DistributedError& e) {
        expect(std::string(e.what()).find("earlier failure") != std::string::npos, "broken group: ", e.what());
      }
      _exit(0);  // the stuck peer's communicator is gone: no orderly destroy
    } else if (scenario == "tcp_and_file") {
      // tcp:// with explicit rank and world size, then file:// in a fresh directory: init again after destroy.
      int rank = env_int("RANK"), ws = env_int("WORLD_SIZE");
      std::string tcp = std::string("tcp://127.0.0.1:") + std::getenv("MASTER_PORT");
      dist::init_process_group({.init_method = tcp, .rank = rank, .world_size = ws, .timeout = timeout});
      Tensor x = full({3}, double(rank + 1), kFloat64);
      dist::all_reduce(x);
      expect_values(x, std::vector<double>(3, ws * (ws + 1) / 2.0), "all_reduce over tcp://");
      dist::destroy_process_group();
      setenv("NABLA_SOCKET_IFNAME", "lo", 1);
      dist::init_process_group({.init_method = std::string("file://") + std::getenv("NABLA_TEST_DIR"),
                                .rank = rank,
                                .world_size = ws,
                                .timeout = timeout});
      Tensor y = full({3}, double(rank + 1), kInt32);
      dist::all_reduce(y, dist::ReduceOp::max);
      expect_values(y, std::vector<double>(3, ws), "all_reduce over file://");
      dist::destroy_process_group();
    } else if (scenario == "peer_dies") {
      // The last rank dies (SIGKILL) between two collectives; the others must fail the second one
      // within the timeout, naming the collective.
      dist::init_process_group({.timeout = timeout});
      int r = dist::get_rank(), n = dist::get_world_size();
      Tensor x = ones({1 << 16});
      dist::all_reduce(x);
      if (r == n - 1) raise(SIGKILL);
      auto t0 = Clock::now();
      try {
        dist::all_reduce(x);
        expect(false, "all_reduce succeeded although rank ", n - 1, " was killed");
      } catch (const dist::DistributedError& e) {
        double s = seconds_since(t0);
        std::cerr << "rank " << r << " after " << s << " s: " << e.what() << "\n";
        expect(std::string(e.what()).find("all_reduce") != std::string::npos,
               "the error should name all_reduce: ", e.what());
        expect(s < timeout.count() / 1000.0 + 3.0, "the error took ", s, " s, the timeout is ", timeout.count(), " ms");
      }
      // The group is broken now, and says so.
      try {
        dist::barrier();
        expect(false, "barrier succeeded on a broken group");
      } catch (const dist::DistributedError& e) {
        expect(std::string(e.what()).find("earlier failure") != std::string::npos, "broken group: ", e.what());
      }
      dist::destroy_process_group();
    } else if (scenario == "peer_hangs") {
      // The last rank stops taking part (alive, sockets open) for longer than the timeout: the
      // others must give up after the timeout, not wait for it.
      dist::init_process_group({.timeout = timeout});
      int r = dist::get_rank(), n = dist::get_world_size();
      Tensor x = ones({1000});
      dist::all_reduce(x);
      if (r == n - 1) {
        std::this_thread::sleep_for(timeout + std::chrono::milliseconds(1000));
        _exit(0);
      }
      auto t0 = Clock::now();
      try {
        dist::all_reduce(x);
        expect(false, "all_reduce succeeded although rank ", n - 1, " never called it");
      } catch (const dist::DistributedError& e) {
        double s = seconds_since(t0);
        std::cerr << "rank " << r << " after " << s << " s: " << e.what() << "\n";
        std::string m = e.what();
        expect(m.find("all_reduce") != std::string::npos && m.find("timeout 1000 ms") != std::string::npos,
               "the error should name all_reduce and the timeout: ", m);
        expect(s >= 0.9 && s < timeout.count() / 1000.0 + 2.0, "the error took ", s, " s, the timeout is ",
               timeout.count(), " ms");
      }
      _exit(0);  // the stuck peer still holds its sockets: no orderly destroy
    } else if (scenario == "mismatched_sizes") {
      // Ranks that pass tensors of different sizes to one all_reduce get an error, not a hang.
      dist::init_process_group({.timeout = timeout});
      Tensor x = ones({dist::get_rank() == 0 ? 1000 : 1001});
      auto t0 = Clock::now();
      try {
        dist::all_reduce(x);
        expect(false, "all_reduce of different sizes succeeded");
      } catch (const dist::DistributedError& e) {
        double s = seconds_since(t0);
        std::cerr << "rank " << dist::get_rank() << " after " << s << " s: " << e.what() << "\n";
        expect(s < timeout.count() / 1000.0 + 3.0, "the error took ", s, " s");
        expect(std::string(e.what()).find("rank 1 called all_reduce with 1001 elements") != std::string::npos ||
                   dist::get_rank() == 1,
               "rank 0 should name rank 1's size: ", e.what());
      }
      dist::destroy_process_group();
    } else if (scenario == "expect_init_error") {
      // init must throw DistributedError containing NABLA_TEST_EXPECT within the timeout (+1 s).
      auto t0 = Clock::now();
      try {
        dist::init_process_group({.timeout = timeout});
        expect(false, "init_process_group succeeded");
      } catch (const dist::DistributedError& e) {
        double s = seconds_since(t0);
        std::cerr << "rank " << getenv("RANK") << " after " << s << " s: " << e.what() << "\n";
        std::string want = std::getenv("NABLA_TEST_EXPECT");
        expect(std::string(e.what()).find(want) != std::string::npos, "the error should contain '", want,
               "': ", e.what());
        expect(s < timeout.count() / 1000.0 + 3.0, "the error took ", s, " s, the timeout is ", timeout.count(), " ms");
      }
    } else if (scenario == "launcher_fail" || scenario == "launcher_sleep") {
      // Under nabla-run: check its variables, leave a pid file, then rank 1 fails (launcher_fail)
      // while the others would sleep for 30 s unless stopped.
      int rank = env_int("RANK");
      std::ofstream(std::string(std::getenv("NABLA_TEST_DIR")) + "/pid." + std::to_string(rank)) << getpid();
      expect(env_int("WORLD_SIZE") == 3 && env_int("LOCAL_WORLD_SIZE") == 3 && env_int("LOCAL_RANK") == rank &&
                 env_int("GROUP_RANK") == 0 && std::string(std::getenv("NABLA_NUM_THREADS")) == "1" &&
                 std::string(std::getenv("MASTER_ADDR")) == "127.0.0.1",
             "nabla-run's variables are wrong");
      if (scenario == "launcher_fail" && rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return 7;
      }
      std::this_thread::sleep_for(std::chrono::seconds(30));
      return 0;
    } else if (scenario.rfind("sync_bn", 0) == 0) {
      return nabla_dist_test::sync_batch_norm_worker(scenario);
    } else if (scenario.rfind("live_", 0) == 0) {
      return nabla_dist_test::liveness_worker(scenario);
    } else if (scenario.rfind("zero", 0) == 0) {
      return nabla_dist_test::zero_worker(scenario);
    } else if (scenario.rfind("fsdp", 0) == 0) {
      return nabla_dist_test::fsdp_worker(scenario);
    } else {
      std::cerr << "unknown scenario " << scenario << "\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "rank " << std::getenv("RANK") << " (" << scenario << "): " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

// ---- the parent side ------------------------------------------------------------------------------

namespace nabla_dist_test {

// The kernel's choice for port 0.
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool Result::exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string fresh_dir() {
  char tmpl[] = "/tmp/nabla_dist_XXXXXX";
  return mkdtemp(tmpl);
}

std::vector<Result> run_workers(const std::string& scenario, int world_size, std::vector<int> ranks, int timeout_ms,
                                std::map<std::string, std::string> env, double limit_s) {
  std::string dir = fresh_dir();
  int port = free_port();
  std::vector<pid_t> pids;
  for (int r : ranks) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string out = dir + "/rank" + std::to_string(r) + ".log";
      FILE* f = freopen(out.c_str(), "w", stderr);
      (void)f;
      setenv("NABLA_DIST_WORKER", scenario.c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("NABLA_TEST_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
      setenv("NABLA_TEST_DIR", (dir + "/rdzv").c_str(), 0);
      mkdir((dir + "/rdzv").c_str(), 0700);
      for (auto& [k, v] : env) {  // "NAME@r": for rank r only
        auto at = k.find('@');
        if (at == std::string::npos) setenv(k.c_str(), v.c_str(), 1);
        else if (std::stoi(k.substr(at + 1)) == r) setenv(k.substr(0, at).c_str(), v.c_str(), 1);
      }
      char self[] = "test_distributed";
      char* argv[] = {self, nullptr};
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<Result> results(ranks.size());
  std::vector<bool> done(ranks.size(), false);
  auto t0 = Clock::now();
  size_t left = ranks.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      if (waitpid(pids[i], &results[i].status, WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
      }
    }
    if (left > 0 && seconds_since(t0) > limit_s) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) kill(pids[i], SIGKILL);
      ADD_FAILURE() << scenario << ": workers still running after " << limit_s << " s (a hang): killed";
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::ifstream f(dir + "/rank" + std::to_string(ranks[i]) + ".log");
    std::stringstream ss;
    ss << f.rdbuf();
    results[i].output = ss.str();
  }
  std::filesystem::remove_all(dir);
  return results;
}

std::vector<int> all_ranks(int n) {
  std::vector<int> v;
  for (int r = 0; r < n; ++r) v.push_back(r);
  return v;
}

void expect_all_ok(const std::vector<Result>& results) {
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_TRUE(results[i].exited_ok()) << "worker " << i << " status " << results[i].status << ":\n"
                                        << results[i].output;
}

}  // namespace nabla_dist_test

using nabla_dist_test::fresh_dir;

namespace {

TEST(DistributedCollectives, EveryOpAndDTypeOnTwoProcesses) {
  expect_all_ok(run_workers("collectives", 2, all_ranks(2), 20000));
}
TEST(DistributedCollectives, EveryOpAndDTypeOnThreeProcesses) {
  expect_all_ok(run_workers("collectives", 3, all_ranks(3), 20000));
}
TEST(DistributedCollectives, EveryOpOnThreeProcessesWithSignatureChecks) {
  expect_all_ok(run_workers("collectives", 3, all_ranks(3), 20000, {{"NABLA_DISTRIBUTED_DEBUG", "1"}}));
}

TEST(DistributedDataParallel, TwoAndThreeRanksTrainAsOneProcessOnTheWholeBatch) {
  expect_all_ok(run_workers("ddp", 2, all_ranks(2), 20000));
  expect_all_ok(run_workers("ddp", 3, all_ranks(3), 20000));
}

TEST(GradScalerDDP, EveryRankSkipsTheSameStepsAndKeepsTheSameScale) {
  expect_all_ok(run_workers("ddp_grad_scaler", 2, all_ranks(2), 20000));
}

TEST(DistributedDataParallel, CommunicationCountersCountEachStepsCollectivesAndWaits) {
  expect_all_ok(run_workers("ddp_counters", 2, all_ranks(2), 20000));
}

TEST(DistributedRendezvous, TcpAndFileInitMethodsAndInitAgain) {
  expect_all_ok(run_workers("tcp_and_file", 2, all_ranks(2), 20000));
}

TEST(DistributedFailures, PeerKilledMidCollectiveFailsTheOthersWithinTheTimeout) {
  auto t0 = Clock::now();
  auto results = run_workers("peer_dies", 3, all_ranks(3), 3000);
  double s = seconds_since(t0);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(WIFSIGNALED(results[2].status) && WTERMSIG(results[2].status) == SIGKILL) << results[2].output;
  expect_all_ok({results[0], results[1]});
  // At least one survivor learns from Gloo which peer went away.
  EXPECT_TRUE(results[0].output.find("peer rank 2") != std::string::npos ||
              results[1].output.find("peer rank 2") != std::string::npos)
      << results[0].output << results[1].output;
  EXPECT_LT(s, 15.0);
  std::cout << "peer killed: survivors errored, whole test " << s << " s\n" << results[0].output << results[1].output;
}

TEST(DistributedFailures, StuckPeerFailsTheOthersAfterTheTimeout) {
  auto results = run_workers("peer_hangs", 3, all_ranks(3), 1000);
  expect_all_ok(results);
  std::cout << results[0].output << results[1].output;
}

TEST(DistributedFailures, MismatchedSizesFailWithinTheTimeout) {
  // Gloo itself aborts the process on this mistake (a check on its event-loop thread); the debug
  // mode compares every call's signature first and throws, naming the ranks and sizes.
  auto results = run_workers("mismatched_sizes", 2, all_ranks(2), 2000, {{"NABLA_DISTRIBUTED_DEBUG", "1"}});
  expect_all_ok(results);
  std::cout << results[0].output << results[1].output;
}

TEST(DistributedFailures, WrongWorldSizeNamesTheMissingRankWithinTheTimeout) {
  // Two processes started, both told WORLD_SIZE=3: rank 2 never comes.
  // Rank 0 names the missing rank; rank 1 may see rank 0's store go away first (rank 0 gave up).
  auto results = run_workers("expect_init_error", 3, {0, 1}, 1500,
                             {{"NABLA_TEST_EXPECT@0", "ranks [2] to join"}, {"NABLA_TEST_EXPECT@1", "to join"}});
  expect_all_ok(results);
  std::cout << results[0].output;
}

TEST(DistributedFailures, DisagreeingWorldSizesAreNamed) {
  // Rank 0 thinks the world has 2 ranks, ranks 1 and 2 think 3.
  auto results = run_workers("expect_init_error", 3, all_ranks(3), 1500,
                             {{"WORLD_SIZE@0", "2"}, {"NABLA_TEST_EXPECT", "says world_size"}});
  expect_all_ok(results);
  std::cout << results[0].output;
}

TEST(DistributedFailures, NoMasterListeningFailsWithinTheTimeout) {
  // Rank 1 alone: nobody listens on MASTER_PORT.
  auto results = run_workers("expect_init_error", 2, {1}, 1500, {{"NABLA_TEST_EXPECT", "could not reach the store"}});
  expect_all_ok(results);
  std::cout << results[0].output;
}

TEST(DistributedFailures, UnreachableMasterAddressFailsWithinTheTimeout) {
  // 192.0.2.1 (TEST-NET-1) is never routed back: the connection attempt itself must time out.
  auto results = run_workers("expect_init_error", 2, {1}, 1500,
                             {{"MASTER_ADDR", "192.0.2.1"}, {"NABLA_TEST_EXPECT", "192.0.2.1"}});
  expect_all_ok(results);
  std::cout << results[0].output;
}

}  // namespace

namespace nabla_dist_test {

std::string nccl_unavailable(int gpus) {
  if (!dist::nccl_built()) return "this build has no nccl backend (it comes with the CUDA backend and NCCL)";
  if (!cuda::is_available()) return "no CUDA device: " + cuda::unavailable_reason();
  if (cuda::device_count() < gpus)
    return nabla::internal::str("needs ", gpus,
                                " CUDA devices (one per rank: NCCL refuses two ranks on one GPU), found ",
                                cuda::device_count());
  return "";
}

// ---- nabla-run (the helpers workers.h declares) ------------------------------------------------------------------------------------

// nabla-run --nproc-per-node n --master-port <free> <this program>, workers running `scenario`.
// With `netns`, the launcher runs in that network namespace (`ip netns exec`).
Launched launch(const std::string& scenario, int n, int timeout_ms, std::vector<std::string> extra, std::string dir,
                int port_number, const std::string& netns) {
  if (dir.empty()) dir = fresh_dir();
  std::string port = std::to_string(port_number ? port_number : free_port());
  pid_t pid = fork();
  if (pid == 0) {
    std::string out = dir + "/launcher" + (extra.empty() ? std::string() : extra.back()) + ".log";
    FILE* f = freopen(out.c_str(), "w", stderr);
    (void)f;
    setenv("NABLA_DIST_WORKER", scenario.c_str(), 1);
    setenv("NABLA_TEST_DIR", dir.c_str(), 1);
    setenv("NABLA_TEST_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
    unsetenv("NABLA_NUM_THREADS");
    std::string np = std::to_string(n);
    std::string self = std::filesystem::read_symlink("/proc/self/exe");
    std::vector<const char*> argv;
    if (!netns.empty()) argv = {"ip", "netns", "exec", netns.c_str()};
    for (const char* a :
         {NABLA_RUN_BIN, "--nproc-per-node", np.c_str(), "--master-port", port.c_str(), "--stop-timeout", "3"})
      argv.push_back(a);
    for (auto& e : extra) argv.push_back(e.c_str());
    argv.push_back(self.c_str());
    argv.push_back(nullptr);
    if (!netns.empty()) execvp("ip", const_cast<char* const*>(argv.data()));
    execv(NABLA_RUN_BIN, const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  return {pid, dir};
}

// Waits for the launcher; -1 when it is still running after limit_s (then killed).
int wait_launcher(const Launched& l, double limit_s, double* took) {
  auto t0 = Clock::now();
  int status = 0;
  while (waitpid(l.pid, &status, WNOHANG) != l.pid) {
    if (seconds_since(t0) > limit_s) {
      kill(l.pid, SIGKILL);
      waitpid(l.pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (took) *took = seconds_since(t0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace nabla_dist_test

using nabla_dist_test::launch;
using nabla_dist_test::Launched;
using nabla_dist_test::read_file;
using nabla_dist_test::wait_launcher;

namespace {

// PyTorch's DDP running run_buffer_schedule's schedule (started by nabla-run: RANK, WORLD_SIZE, ...);
// it counts the calls of dist._broadcast_coalesced, through which its forward broadcasts buffers.
const char* const kTorchBufferSchedule = R"(import sys, torch, torch.nn as nn, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(7)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 3)).double()
ddp = nn.parallel.DistributedDataParallel(model)
count = 0
original = dist._broadcast_coalesced
def counting(*args, **kwargs):
    global count
    count += 1
    return original(*args, **kwargs)
dist._broadcast_coalesced = counting
x, y = torch.randn(6, 4, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
counts = []
for c in sys.argv[1]:
    if c == "G":
        with torch.no_grad():
            ddp(x)
    elif c == "N":
        with ddp.no_sync():
            nn.functional.mse_loss(ddp(x), y).backward()
    else:
        nn.functional.mse_loss(ddp(x), y).backward()
    counts.append(str(count))
if dist.get_rank() == 0:
    open(sys.argv[2], "w").write(" ".join(counts))
dist.destroy_process_group()
)";

// When forward broadcasts the buffers (after a synchronized forward, not after a no_sync or no-grad
// one): nabla's DDP and PyTorch's run the same schedule on 2 processes and count the same broadcasts.
TEST(DistributedDataParallel, BroadcastsBuffersWhenPyTorchDoes) {
  NABLA_NEEDS_PYTHON_MODULES_IN(nabla_test::test_python(), "torch");
  const std::string schedule = "SSNGSGGSSNNSGNS";
  const std::string dir = fresh_dir(), ours = dir + "/nabla.txt", theirs = dir + "/torch.txt";
  expect_all_ok(run_workers("ddp_buffer_schedule", 2, all_ranks(2), 20000,
                            {{"NABLA_DDP_SCHEDULE", schedule}, {"NABLA_DDP_SCHEDULE_OUT", ours}}));
  std::ofstream(dir + "/schedule.py") << kTorchBufferSchedule;
  const std::string log = dir + "/torch.log";
  const std::string cmd = std::string(NABLA_RUN_BIN) + " --nproc-per-node 2 --master-port " +
                          std::to_string(free_port()) + " " + nabla_test::test_python() + " " + dir + "/schedule.py " +
                          schedule + " " + theirs + " >" + log + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(log);
  const std::string got = read_file(ours), want = read_file(theirs);
  EXPECT_EQ(got, want) << "broadcast counts after each of " << schedule
                       << " (S synchronized step, N no_sync step, G no-grad forward)";
  EXPECT_EQ(std::count(want.begin(), want.end(), ' '), static_cast<std::ptrdiff_t>(schedule.size() - 1)) << want;
}

// The workers nabla-run started are gone (it reaped them: their pids no longer exist).
void expect_workers_gone(const std::string& dir, std::vector<int> ranks) {
  for (int r : ranks) {
    std::string text = read_file(dir + "/pid." + std::to_string(r));
    ASSERT_FALSE(text.empty()) << "rank " << r << " left no pid file";
    pid_t pid = std::stoi(text);
    EXPECT_TRUE(kill(pid, 0) == -1 && errno == ESRCH) << "rank " << r << " (pid " << pid << ") is still running";
  }
}

TEST(NablaRun, WorkersRunTheCollectivesWithItsVariables) {
  auto l = launch("collectives", 3, 20000);
  int code = wait_launcher(l, 60);
  EXPECT_EQ(code, 0) << read_file(l.dir + "/launcher.log");
  std::filesystem::remove_all(l.dir);
}

TEST(NablaRun, TwoNodesOnLoopbackMakeOneJob) {
  // Two launchers, one per "node", 2 workers each: a world of 4 meeting at node 0's port.
  // (TwoNodesInNetworkNamespacesJoinedByVethMakeOneJob is the variant across a real link, where
  // root and ip(8) allow it; here, on loopback, the variables and the rendezvous across launchers.)
  // Two machines share the job's secret through a file each nabla-run is given.
  std::string dir = fresh_dir();
  int port = free_port();
  const std::string secret = nabla_dist_test::write_secret_file(dir + "/job.secret");
  auto node0 =
      launch("collectives", 2, 20000, {"--nnodes", "2", "--store-secret-file", secret, "--node-rank", "0"}, dir, port);
  auto node1 =
      launch("collectives", 2, 20000, {"--nnodes", "2", "--store-secret-file", secret, "--node-rank", "1"}, dir, port);
  int c0 = wait_launcher(node0, 60), c1 = wait_launcher(node1, 60);
  EXPECT_EQ(c0, 0) << read_file(dir + "/launcher0.log");
  EXPECT_EQ(c1, 0) << read_file(dir + "/launcher1.log");
  std::filesystem::remove_all(dir);
}

// Two network namespaces joined by a veth pair (10.213.K.1 and .2), each a "machine" with its own
// nabla-run; torn down by the destructor. ok() is false (with why()) where the environment does
// not allow it: not root, no ip(8), or no permission to create namespaces (a container).
class TwoNamespaces {
 public:
  TwoNamespaces() {
    const std::string id = std::to_string(getpid() % 100000);
    a_ = "nabla_a_" + id, b_ = "nabla_b_" + id;
    addr_a_ = "10.213." + std::to_string(getpid() % 250 + 1) + ".1";
    addr_b_ = addr_a_.substr(0, addr_a_.size() - 1) + "2";
    if (geteuid() != 0) {
      why_ = "needs root to create network namespaces (ip netns); not root here";
      return;
    }
    const std::string va = "nva" + id, vb = "nvb" + id, net = addr_a_.substr(0, addr_a_.size() - 2);
    for (const std::string& cmd :
         {"ip netns add " + a_, "ip netns add " + b_, "ip link add " + va + " type veth peer name " + vb,
          "ip link set " + va + " netns " + a_, "ip link set " + vb + " netns " + b_,
          "ip -n " + a_ + " addr add " + addr_a_ + "/24 dev " + va,
          "ip -n " + b_ + " addr add " + addr_b_ + "/24 dev " + vb, "ip -n " + a_ + " link set " + va + " up",
          "ip -n " + b_ + " link set " + vb + " up", "ip -n " + a_ + " link set lo up",
          "ip -n " + b_ + " link set lo up"}) {
      std::string out;
      FILE* p = popen((cmd + " 2>&1").c_str(), "r");
      char buf[512];
      while (p && fgets(buf, sizeof buf, p)) out += buf;
      if (!p || pclose(p) != 0) {
        why_ = "'" + cmd + "' failed (the environment does not allow network namespaces): " + out;
        return;
      }
    }
    ok_ = true;
  }
  ~TwoNamespaces() {
    for (const auto& ns : {a_, b_}) {
      std::string cmd = "ip netns del " + ns + " >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) { /* not created */
      }
    }
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  const std::string& addr_a() const { return addr_a_; }

 private:
  std::string a_, b_, addr_a_, addr_b_, why_;
  bool ok_ = false;
};

TEST(NablaRun, TwoNodesInNetworkNamespacesJoinedByVethMakeOneJob) {
  // The multi-node check: node 0 in one namespace, node 1 in the other, 2 workers each; the
  // only route between them is the veth pair, so the rendezvous and Gloo's connections cross it
  // (loopback is private to each namespace).
  TwoNamespaces ns;
  if (!ns.ok()) GTEST_SKIP() << ns.why();
  std::string dir = fresh_dir();
  int port = free_port();
  const std::string secret = nabla_dist_test::write_secret_file(dir + "/job.secret");
  std::vector<std::string> common{"--nnodes", "2",          "--master-addr", ns.addr_a(), "--store-secret-file",
                                  secret,     "--node-rank"};
  auto with = [&](const char* rank) {
    auto v = common;
    v.push_back(rank);
    return v;
  };
  // The collectives, then a GPT under FSDP (its all_gathers and reduce-scatters across the "machines").
  for (const char* scenario : {"collectives", "fsdp_gpt"}) {
    auto node0 = launch(scenario, 2, 20000, with("0"), dir, port, ns.a());
    auto node1 = launch(scenario, 2, 20000, with("1"), dir, port, ns.b());
    int c0 = wait_launcher(node0, 90), c1 = wait_launcher(node1, 90);
    EXPECT_EQ(c0, 0) << scenario << ": " << read_file(dir + "/launcher0.log");
    EXPECT_EQ(c1, 0) << scenario << ": " << read_file(dir + "/launcher1.log");
    port = free_port();
  }
  std::filesystem::remove_all(dir);
}

TEST(NablaRun, AFailingWorkerStopsTheOthersAndGivesItsStatus) {
  auto l = launch("launcher_fail", 3, 20000);
  double took = 0;
  int code = wait_launcher(l, 20, &took);
  std::string log = read_file(l.dir + "/launcher.log");
  EXPECT_EQ(code, 7) << log;
  EXPECT_LT(took, 10.0) << "the sleeping workers were not stopped";
  EXPECT_NE(log.find("rank 1"), std::string::npos) << log;
  expect_workers_gone(l.dir, {0, 1, 2});
  std::filesystem::remove_all(l.dir);
}

TEST(NablaRun, ForwardsSigtermToTheWorkers) {
  auto l = launch("launcher_sleep", 3, 20000);
  auto t0 = Clock::now();
  while (!(std::filesystem::exists(l.dir + "/pid.0") && std::filesystem::exists(l.dir + "/pid.1") &&
           std::filesystem::exists(l.dir + "/pid.2")) &&
         seconds_since(t0) < 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the pid files are written whole
  EXPECT_TRUE(std::filesystem::exists(l.dir + "/pid.2") && std::filesystem::exists(l.dir + "/pid.1") &&
              std::filesystem::exists(l.dir + "/pid.0"))
      << "the workers did not all start within 20 s; launcher output:\n"
      << read_file(l.dir + "/launcher.log");
  kill(l.pid, SIGTERM);  // also the clean-up when they did not start
  double took = 0;
  int code = wait_launcher(l, 20, &took);
  EXPECT_EQ(code, 128 + SIGTERM) << read_file(l.dir + "/launcher.log");
  EXPECT_LT(took, 5.0) << read_file(l.dir + "/launcher.log");
  expect_workers_gone(l.dir, {0, 1, 2});
  std::filesystem::remove_all(l.dir);
}

TEST(NablaRun, HelpAndMistakes) {
  auto run = [](const std::string& args) {
    std::string cmd = std::string(NABLA_RUN_BIN) + " " + args + " >/dev/null 2>&1";
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  EXPECT_EQ(run("--help"), 0);
  EXPECT_EQ(run("--nproc-per-node 0 true"), 2);
  EXPECT_EQ(run("--nnodes 2 --node-rank 2 true"), 2);
  EXPECT_EQ(run("--bogus 1 true"), 2);
  EXPECT_EQ(run("--nproc-per-node 2"), 2);
  EXPECT_EQ(run("--nproc-per-node 2 /nonexistent/program"), 127);
  EXPECT_EQ(run("--nproc-per-node 2 true"), 0);
  // Several machines need a secret they share (or an explicit --no-store-secret).
  EXPECT_EQ(run("--nnodes 2 true"), 2);
  EXPECT_EQ(run("--nnodes 2 --no-store-secret true"), 0);
  EXPECT_EQ(run("--no-store-secret --store-secret-file /etc/hostname true"), 2);
  EXPECT_EQ(run("--store-secret-file /etc/hostname true"), 2);  // readable by others
  EXPECT_EQ(run("--liveness-grace -1 true"), 2);
}

// ---- in-process checks (no peers needed) ----------------------------------------------------------

TEST(DistributedInit, BadOptionsAreValueErrors) {
  EXPECT_THROW(dist::init_process_group({.init_method = "tcp://127.0.0.1:1", .rank = 2, .world_size = 2}), ValueError);
  EXPECT_THROW(dist::init_process_group({.backend = "mpi", .rank = 0, .world_size = 1}), ValueError);
  EXPECT_THROW(dist::init_process_group({.init_method = "udp://x", .rank = 0, .world_size = 1}), ValueError);
  EXPECT_THROW(dist::init_process_group({.init_method = "tcp://nohost", .rank = 0, .world_size = 1}), ValueError);
  EXPECT_FALSE(dist::is_initialized());
  EXPECT_THROW(dist::get_rank(), dist::DistributedError);
}

// ---- nccl ----------------------------------------------------------------------------------------

// Why the NCCL tests cannot run here ("" when they can): they need this build's nccl backend and
// `gpus` CUDA devices.
using nabla_dist_test::nccl_unavailable;

TEST(DistributedNccl, WithoutNcclOrAGpuInitSaysWhy) {
  if (dist::nccl_built() && cuda::is_available()) GTEST_SKIP() << "this machine can run the nccl backend";
  auto t0 = Clock::now();
  try {
    dist::init_process_group({.backend = "nccl",
                              .init_method = "tcp://127.0.0.1:" + std::to_string(free_port()),
                              .rank = 0,
                              .world_size = 1,
                              .timeout = std::chrono::seconds(2)});
    ADD_FAILURE() << "init_process_group(nccl) succeeded without " << (dist::nccl_built() ? "a GPU" : "NCCL");
  } catch (const ValueError& e) {  // a build without NCCL
    EXPECT_FALSE(dist::nccl_built());
    EXPECT_NE(std::string(e.what()).find("'nccl' is not in this build"), std::string::npos) << e.what();
  } catch (const DeviceError& e) {  // NCCL built, no GPU
    EXPECT_TRUE(dist::nccl_built());
    std::string m = e.what();
    EXPECT_NE(m.find("needs a CUDA device"), std::string::npos) << m;
    EXPECT_NE(m.find(cuda::unavailable_reason()), std::string::npos) << m;
  }
  EXPECT_LT(seconds_since(t0), 15.0);
  EXPECT_FALSE(dist::is_initialized());
}

// Loading libnccl.so.2 and finding every function the backend calls needs no GPU.
TEST(DistributedNccl, TheBuildsNcclLibraryLoads) {
  if (!dist::nccl_built()) {
    EXPECT_THROW(dist::nccl_version(), ValueError);
    GTEST_SKIP() << "this build has no nccl backend";
  }
  std::string v = dist::nccl_version();
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(v.c_str(), "%d.%d", &major, &minor), 2) << v;
  EXPECT_TRUE(major > 2 || (major == 2 && minor >= 10)) << v;
  std::cerr << "NCCL " << v << "\n";
}

TEST(DistributedNccl, WorldOfOneRunsEveryCollectiveOnTheGpu) {
  if (std::string why = nccl_unavailable(1); !why.empty()) GTEST_SKIP() << why;
  dist::init_process_group({.backend = "nccl",
                            .init_method = "tcp://127.0.0.1:" + std::to_string(free_port()),
                            .rank = 0,
                            .world_size = 1,
                            .timeout = std::chrono::seconds(20),
                            .device = 0});
  const Device gpu = Device::cuda(0);
  for (DType d : kAllDTypes) {
    Tensor x = arange(6, kFloat64).to(d).to(gpu).view({2, 3}).t();  // non-contiguous
    Tensor want = x.cpu().clone();
    for (auto op : {dist::ReduceOp::sum, dist::ReduceOp::min, dist::ReduceOp::max, dist::ReduceOp::product}) {
      dist::all_reduce(x, op);
      EXPECT_TRUE(equal(x.cpu(), want)) << dtype_name(d) << " " << dist::reduce_op_name(op);
    }
    if (is_floating(d)) {
      dist::all_reduce(x, dist::ReduceOp::avg);
      EXPECT_TRUE(equal(x.cpu(), want)) << dtype_name(d) << " avg";
    } else {
      EXPECT_THROW(dist::all_reduce(x, dist::ReduceOp::avg), DTypeError);
    }
    dist::broadcast(x, 0);
    EXPECT_TRUE(equal(x.cpu(), want)) << dtype_name(d);
    std::vector<Tensor> outs{zeros(x.sizes(), TensorOptions(d).device(gpu))};
    dist::all_gather(outs, x);
    EXPECT_TRUE(equal(outs[0].cpu(), want)) << dtype_name(d);
    Tensor rs = zeros(x.sizes(), TensorOptions(d).device(gpu));
    dist::reduce_scatter(rs, {x}, dist::ReduceOp::sum);
    EXPECT_TRUE(equal(rs.cpu(), want)) << dtype_name(d);
    std::vector<Tensor> g{zeros(x.sizes(), TensorOptions(d).device(gpu))};
    dist::gather(x, g, 0);
    EXPECT_TRUE(equal(g[0].cpu(), want)) << dtype_name(d);
    Tensor sc = zeros(x.sizes(), TensorOptions(d).device(gpu));
    dist::scatter(sc, {x}, 0);
    EXPECT_TRUE(equal(sc.cpu(), want)) << dtype_name(d);
  }
  // Work on the caller's stream before the collective is seen by it; the result by the caller's
  // later work (a chain of async all_reduces of tensors just written).
  std::vector<Tensor> xs;
  std::vector<dist::Work> works;
  for (int k = 0; k < 4; ++k) {
    xs.push_back(full({1 << 20}, double(k), TensorOptions(kFloat32).device(gpu)) * 2.0);
    works.push_back(dist::all_reduce(xs.back(), dist::ReduceOp::sum, /*async_op=*/true));
  }
  for (int k = 0; k < 4; ++k) {
    works[k].wait();
    EXPECT_EQ((xs[k] + 1.0).sum().item<double>(), (2.0 * k + 1.0) * (1 << 20));
  }
  dist::barrier();
  // Mistakes: CPU tensors, another GPU, a root outside the group.
  try {
    dist::all_reduce(ones({2}));
    ADD_FAILURE() << "all_reduce of a CPU tensor on nccl should throw";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA tensors"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dist::broadcast(ones({2}, TensorOptions(kFloat32).device(gpu)), 1), ValueError);
  // DDP over CUDA parameters and buffers (a world of one: the averages are the gradients).
  {
    manual_seed(3);
    auto bn = std::make_shared<nn::BatchNorm1d>(3);
    bn->to(gpu);
    nn::parallel::DistributedDataParallel ddp(bn);
    Tensor y = ddp(randn({4, 3}).to(gpu));
    (y * y).sum().backward();
    EXPECT_TRUE(bn->weight.grad().defined());
    EXPECT_TRUE(bn->weight.grad().is_cuda());
  }
  dist::destroy_process_group();
}

// NCCL's communicator setup waits for every rank; a rank that never arrives must not hang the others
// (the setup is non-blocking and watched): rank 0 of 2 alone, on one GPU, fails within the timeout,
// naming the setup and the missing rank.
TEST(DistributedNccl, SetupWhosePeerNeverArrivesFailsWithinTheTimeout) {
#ifndef NABLA_HAVE_NCCL
  GTEST_SKIP() << "this build has no nccl backend (it comes with the CUDA backend and NCCL)";
#else
  if (std::string why = nccl_unavailable(1); !why.empty()) GTEST_SKIP() << why;
  dist::TCPStore store("127.0.0.1", 0, /*is_server=*/true, std::chrono::seconds(10));
  auto t0 = Clock::now();
  try {
    dist::ProcessGroupNccl pg(store, 0, 2, {.timeout = std::chrono::milliseconds(2000), .device = 0});
    ADD_FAILURE() << "a communicator of 2 ranks was made with only rank 0";
  } catch (const dist::DistributedError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("init_process_group failed on rank 0 of 2"), std::string::npos) << m;
    EXPECT_NE(m.find("setup"), std::string::npos) << m;
    EXPECT_NE(m.find("2000 ms"), std::string::npos) << m;
    EXPECT_NE(m.find("ranks that never reached the setup: 1"), std::string::npos) << m;
    std::cerr << m << "\n";
  }
  double s = seconds_since(t0);
  EXPECT_GE(s, 1.8);
  EXPECT_LT(s, 12.0);
#endif
}

TEST(DistributedNccl, StuckPeerFailsTheOthersAfterTheTimeout) {
  if (std::string why = nccl_unavailable(2); !why.empty()) GTEST_SKIP() << why;
  auto results = run_workers("nccl_peer_hangs", 2, all_ranks(2), 3000);
  expect_all_ok(results);
  std::cout << results[0].output << results[1].output;
}

TEST(DistributedNccl, EveryOpAndDTypeOnTwoGpus) {
  if (std::string why = nccl_unavailable(2); !why.empty()) GTEST_SKIP() << why;
  expect_all_ok(run_workers("nccl_collectives", 2, all_ranks(2), 60000));
}

TEST(DistributedNccl, EveryOpAndDTypeOnThreeGpus) {
  if (std::string why = nccl_unavailable(3); !why.empty()) GTEST_SKIP() << why;
  expect_all_ok(run_workers("nccl_collectives", 3, all_ranks(3), 60000));
}

TEST(DistributedNccl, DdpOnTwoGpusTrainsAsOneProcessOnTheWholeBatch) {
  if (std::string why = nccl_unavailable(2); !why.empty()) GTEST_SKIP() << why;
  expect_all_ok(run_workers("nccl_ddp", 2, all_ranks(2), 60000));
}

TEST(DistributedInit, WorldOfOneRunsEveryCollective) {
  dist::init_process_group({.init_method = "tcp://127.0.0.1:" + std::to_string(free_port()),
                            .rank = 0,
                            .world_size = 1,
                            .timeout = std::chrono::seconds(10)});
  Tensor x = arange(4, kFloat32);
  dist::all_reduce(x, dist::ReduceOp::avg);
  EXPECT_TRUE(equal(x, arange(4, kFloat32)));
  std::vector<Tensor> outs{zeros({4})};
  dist::all_gather(outs, x);
  EXPECT_TRUE(equal(outs[0], x));
  dist::barrier();
  dist::destroy_process_group();
}

TEST(DistributedStore, SetGetAddWaitAndTimeout) {
  dist::TCPStore server("127.0.0.1", 0, /*is_server=*/true, std::chrono::seconds(5));
  dist::TCPStore client("127.0.0.1", server.port(), false, std::chrono::milliseconds(300));
  client.set("k", {'a', 'b'});
  EXPECT_EQ(server.get("k"), (std::vector<char>{'a', 'b'}));
  EXPECT_EQ(server.add("n", 2), 2);
  EXPECT_EQ(client.add("n", 3), 5);
  EXPECT_TRUE(client.check({"k", "n"}));
  EXPECT_FALSE(client.check({"k", "missing"}));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.set("late", {'x'});
  });
  EXPECT_EQ(client.get("late"), std::vector<char>{'x'});
  later.join();
  auto t0 = Clock::now();
  try {
    client.wait({"k", "never"}, std::chrono::milliseconds(200));
    ADD_FAILURE() << "wait returned for a key never set";
  } catch (const dist::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 2.0);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("NABLA_DIST_WORKER")) return worker_main(scenario);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
