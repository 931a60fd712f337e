// ddp_speed: data-parallel training speed on one machine, in one run.
//
//   build/bench/ddp_speed [--rounds 5] [--steps 60] [--global-batch 128] [--mb 100] [--bucket-mb 25]
//
// (a) The mnist CNN (examples/mnist "cnn": two conv-batch-norm blocks, Adam) for --steps steps of
//     the same global batch, two ways, interleaved --rounds times (best of each reported):
//       single  one process, 2 threads, batch = global batch
//       ddp     nabla-run --nproc-per-node 2: 2 processes x 1 thread, DistributedDataParallel,
//               batch = global batch / 2 per process, gradient buckets of --bucket-mb MB (DDP's
//               default 25: the CNN's 1.7 MB of gradients in one bucket; 1 puts the 1.6 MB fc1
//               weight in a bucket of its own, whose all-reduce then overlaps the convolutions'
//               backward, which on 2 shared cores measured slower: the Gloo thread takes a core
//               from the other rank's backward, and there is one more synchronization per step)
//     and, for the ddp rounds, the fraction of step time each rank spent blocked on communication
//     (DistributedDataParallel::comm_wait_seconds: the wait for the gradient all-reduces that
//     backward did not hide, plus the batch-norm buffer broadcasts of forward, shown apart). A
//     wait is the transfer plus the time the slower rank takes to get there: on a busy machine
//     most of it is the ranks' imbalance, which one all_reduce of the gradients' size on its own
//     (ddp_speed allreduce --mb 2 under nabla-run) separates. The best rounds' steps are also
//     split into forward (with the loss and zero_grad), backward and optimizer time; under
//     DDP_SPEED_PER_RANK=1 each rank prints its own split and waits (stderr). Last, how much the
//     per-step compute (a step's time less its waits) varies from step to step, in the single
//     process and on DDP rank 0: with one synchronization per step, ranks that vary independently
//     by sigma wait for each other about sigma / sqrt(pi) per step however fast the network is.
// (b) all_reduce (sum) of a --mb MB float32 tensor between 2 processes on loopback (Gloo: its ring
//     above 32 MiB, bcube up to it, as distributed/process_group_gloo.cpp chooses),
//     best of 5, next to a plain memcpy of the same bytes in the same process.
//
// The batches are random images and labels made in memory (the same compute as MNIST's, no file
// reading). Each contender is a fresh process (this program, re-executed with a mode), so neither
// warms the other's caches. The machine may be shared: best-of-N is the figure to read.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "examples/mnist/models.h"
#include "nabla.h"

#ifndef NABLA_RUN_BIN
#error "NABLA_RUN_BIN must name nabla-run"
#endif

using namespace nabla;
namespace dist = nabla::distributed;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Opts {
  int rounds = 5, steps = 60, warmup = 5;
  int64_t global_batch = 128;
  double mb = 100, bucket_mb = 25;
};

int64_t arg_int(int argc, char** argv, const char* name, int64_t def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return std::atoll(argv[i + 1]);
  return def;
}
double arg_double(int argc, char** argv, const char* name, double def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return std::atof(argv[i + 1]);
  return def;
}

// Trains `steps` steps (after `warmup`) of the mnist CNN on batches of `batch`; under WORLD_SIZE > 1
// through DDP. Rank 0 prints one line: RESULT <seconds per step> <comm wait fraction> <grad bytes>.
int train_worker(int64_t batch, int steps, int warmup, double bucket_mb) {
  const bool distributed = std::getenv("WORLD_SIZE") && std::atoi(std::getenv("WORLD_SIZE")) > 1;
  if (distributed) dist::init_process_group({.backend = "gloo"});
  const int rank = distributed ? dist::get_rank() : 0;
  manual_seed(1);
  auto model = mnist::make_model("cnn").module;
  std::unique_ptr<nn::parallel::DistributedDataParallel> ddp;
  if (distributed)
    ddp = std::make_unique<nn::parallel::DistributedDataParallel>(model,
                                                                  nn::parallel::DDPOptions{.bucket_cap_mb = bucket_mb});
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  int64_t grad_bytes = 0;
  for (const Tensor& p : model->parameters()) grad_bytes += p.numel() * 4;
  manual_seed(100 + static_cast<uint64_t>(rank));
  std::vector<Tensor> xs, ys;  // a pool of batches, made before timing
  for (int i = 0; i < 8; ++i) {
    xs.push_back((rand({batch, 1, 28, 28}) - 0.1307) / 0.3081);
    ys.push_back(randint(0, 10, {batch}));
  }
  double phase[3] = {0, 0, 0};  // forward (with the loss), backward, optimizer: seconds over the timed steps
  std::vector<double> compute;  // each timed step's seconds less what it waited on communication
  compute.reserve(static_cast<size_t>(steps));  // no allocation inside the timed steps
  bool timing = false;
  auto step = [&](int i) {
    const Tensor& x = xs[static_cast<size_t>(i) % xs.size()];
    const double w0 = ddp ? ddp->comm_wait_seconds() : 0;
    const double t0 = now();
    Tensor out = ddp ? (*ddp)(x) : (*model)(x);
    Tensor loss = nn::functional::cross_entropy(out, ys[static_cast<size_t>(i) % ys.size()]);
    opt.zero_grad();
    const double t1 = now();
    loss.backward();
    const double t2 = now();
    opt.step();
    const double t3 = now();
    phase[0] += t1 - t0, phase[1] += t2 - t1, phase[2] += t3 - t2;
    if (timing) compute.push_back(t3 - t0 - ((ddp ? ddp->comm_wait_seconds() : 0) - w0));
  };
  for (int i = 0; i < warmup; ++i) step(i);
  if (distributed) dist::barrier();
  if (ddp) ddp->reset_comm_wait();
  phase[0] = phase[1] = phase[2] = 0;
  timing = true;
  const double t0 = now();
  for (int i = 0; i < steps; ++i) step(i);
  double seconds = now() - t0, wait = ddp ? ddp->comm_wait_seconds() : 0, bwait = ddp ? ddp->buffer_wait_seconds() : 0;
  double mean = 0, spread = 0;  // of the per-step compute: mean and standard deviation
  for (double c : compute) mean += c / static_cast<double>(compute.size());
  for (double c : compute) spread += (c - mean) * (c - mean) / static_cast<double>(compute.size());
  spread = std::sqrt(spread);
  if (std::getenv("DDP_SPEED_PER_RANK"))
    std::fprintf(stderr,
                 "rank %d: %.2f ms/step, grad wait %.2f ms, buffer wait %.2f ms, fwd %.2f bwd %.2f opt %.2f ms\n", rank,
                 seconds / steps * 1e3, (wait - bwait) / steps * 1e3, bwait / steps * 1e3, phase[0] / steps * 1e3,
                 phase[1] / steps * 1e3, phase[2] / steps * 1e3);
  if (distributed) {  // the slower rank's time, and the ranks' mean waiting fractions
    Tensor t = tensor(std::vector<double>{seconds}), w = tensor(std::vector<double>{wait / seconds, bwait / seconds});
    dist::all_reduce(t, dist::ReduceOp::max);
    dist::all_reduce(w, dist::ReduceOp::avg);
    seconds = t.item<double>();
    wait = w.data_ptr<double>()[0] * seconds;
    bwait = w.data_ptr<double>()[1] * seconds;
  }
  if (rank == 0)
    std::printf("RESULT %.9f %.6f %lld %.6f %.9f %.9f %.9f %.9f\n", seconds / steps, wait / seconds,
                static_cast<long long>(grad_bytes), bwait / seconds, phase[0] / steps, phase[1] / steps,
                phase[2] / steps, spread);
  if (distributed) dist::destroy_process_group();
  return 0;
}

// all_reduce of `mb` MB float32 between the ranks, best of 5, and memcpy of it. Rank 0 prints
// RESULT <all_reduce seconds> <memcpy seconds> <bytes>.
int allreduce_worker(double mb) {
  dist::init_process_group({.backend = "gloo"});
  const int64_t n = static_cast<int64_t>(mb * 1e6 / 4);
  Tensor t = ones({n});
  dist::all_reduce(t);  // warm: connections, pages
  double best = 1e30, best_copy = 1e30;
  std::vector<float> a(static_cast<size_t>(n), 1.f), b(static_cast<size_t>(n), 0.f);
  for (int r = 0; r < 5; ++r) {
    dist::barrier();
    double t0 = now();
    dist::all_reduce(t);
    best = std::min(best, now() - t0);
    t0 = now();
    std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
    best_copy = std::min(best_copy, now() - t0);
  }
  if (b[static_cast<size_t>(n) - 1] != 1.f) std::fprintf(stderr, "memcpy did not copy\n");
  Tensor worst = tensor(std::vector<double>{best});
  dist::all_reduce(worst, dist::ReduceOp::max);
  if (dist::get_rank() == 0)
    std::printf("RESULT %.9f %.9f %lld\n", worst.item<double>(), best_copy, static_cast<long long>(n * 4));
  dist::destroy_process_group();
  return 0;
}

// Runs a command, returns the numbers of its RESULT line (empty when it failed).
std::vector<double> result_of(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::vector<double> v;
  char line[4096];
  std::string all;
  while (p && std::fgets(line, sizeof line, p)) {
    all += line;
    if (!std::strncmp(line, "RESULT ", 7)) {
      char* s = line + 7;
      for (char* end;; s = end) {
        double d = std::strtod(s, &end);
        if (end == s) break;
        v.push_back(d);
      }
    }
  }
  int status = p ? pclose(p) : -1;
  if (status != 0 || v.empty()) {
    std::fprintf(stderr, "ddp_speed: '%s' failed:\n%s", cmd.c_str(), all.c_str());
    return {};
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  o.rounds = static_cast<int>(arg_int(argc, argv, "--rounds", o.rounds));
  o.steps = static_cast<int>(arg_int(argc, argv, "--steps", o.steps));
  o.global_batch = arg_int(argc, argv, "--global-batch", o.global_batch);
  o.mb = static_cast<double>(arg_int(argc, argv, "--mb", 100));
  o.bucket_mb = arg_double(argc, argv, "--bucket-mb", o.bucket_mb);
  if (argc >= 2 && !std::strcmp(argv[1], "train"))
    return train_worker(arg_int(argc, argv, "--batch", 64), o.steps, o.warmup, o.bucket_mb);
  if (argc >= 2 && !std::strcmp(argv[1], "allreduce")) return allreduce_worker(o.mb);
  if (o.global_batch % 2 || o.rounds < 1 || o.steps < 1 || !(o.bucket_mb > 0)) {
    std::fprintf(stderr, "ddp_speed: --global-batch must be even, --rounds, --steps and --bucket-mb positive\n");
    return 2;
  }

  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  const std::string steps = " --steps " + std::to_string(o.steps);
  const std::string single =
      "NABLA_NUM_THREADS=2 " + std::string(self) + " train --batch " + std::to_string(o.global_batch) + steps;
  const std::string ddp = "NABLA_NUM_THREADS=1 " + std::string(NABLA_RUN_BIN) +
                          " --nproc-per-node 2 --master-port 29731 " + self + " train --batch " +
                          std::to_string(o.global_batch / 2) + steps + " --bucket-mb " + std::to_string(o.bucket_mb);
  std::printf(
      "mnist CNN, global batch %lld, %d timed steps (after %d warm-up), %d interleaved rounds, DDP buckets of "
      "%g MB\n",
      static_cast<long long>(o.global_batch), o.steps, o.warmup, o.rounds, o.bucket_mb);
  double best_single = 1e30, best_ddp = 1e30, wait_at_best = 0, bwait_at_best = 0, grad_bytes = 0;
  double phases_single[3] = {0, 0, 0}, phases_ddp[3] = {0, 0, 0};
  double spread_single = 0, spread_ddp = 0;  // per-step compute standard deviations, mean over the rounds
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<double> s = result_of(single), d = result_of(ddp);
    if (s.size() < 8 || d.size() < 8) return 1;
    spread_single += s[7] / o.rounds, spread_ddp += d[7] / o.rounds;
    std::printf(
        "  round %d: 1 process x 2 threads %.2f ms/step   2 processes x 1 thread (DDP) %.2f ms/step, %.1f%% waiting on "
        "communication (buffer broadcasts %.1f%% of the step)\n",
        r + 1, s[0] * 1e3, d[0] * 1e3, d[1] * 100, d[3] * 100);
    std::fflush(stdout);
    if (s[0] < best_single) best_single = s[0], std::copy(s.begin() + 4, s.begin() + 7, phases_single);
    if (d[0] < best_ddp) {
      best_ddp = d[0], wait_at_best = d[1], bwait_at_best = d[3];
      std::copy(d.begin() + 4, d.begin() + 7, phases_ddp);
    }
    grad_bytes = d[2];
  }
  std::printf(
      "best: 1 process x 2 threads %.2f ms/step (%.0f img/s); 2 processes x 1 thread (DDP) %.2f ms/step (%.0f img/s)\n",
      best_single * 1e3, static_cast<double>(o.global_batch) / best_single, best_ddp * 1e3,
      static_cast<double>(o.global_batch) / best_ddp);
  std::printf(
      "  best rounds' steps: 1 process forward %.2f, backward %.2f, optimizer %.2f ms; DDP rank 0 forward %.2f "
      "(buffer broadcasts included), backward %.2f (gradient all-reduce wait included), optimizer %.2f ms\n",
      phases_single[0] * 1e3, phases_single[1] * 1e3, phases_single[2] * 1e3, phases_ddp[0] * 1e3, phases_ddp[1] * 1e3,
      phases_ddp[2] * 1e3);
  std::printf(
      "DDP throughput / single-process throughput: %.3f; DDP step time waiting on communication: %.1f%% "
      "(gradient all-reduce %.1f%%, batch-norm buffer broadcasts %.1f%%); gradients %.3f MB (float32)\n",
      best_single / best_ddp, wait_at_best * 100, (wait_at_best - bwait_at_best) * 100, bwait_at_best * 100,
      grad_bytes / 1e6);

  // Two ranks whose step times vary independently by sigma (normally) meet at the gradient all-reduce
  // sigma / sqrt(pi) after the mean arrival, on average: E[max(X, Y)] - E[X].
  const double meet = spread_ddp / std::sqrt(std::acos(-1.0));
  std::printf(
      "per-step compute (step time less its waits) varies by %.2f ms (standard deviation, mean over the rounds) "
      "in the single process and %.2f ms on DDP rank 0: ranks varying that much apart meet at the gradient "
      "all-reduce %.2f ms (sigma / sqrt(pi)) after their mean arrival, %.1f%% of the best DDP step\n",
      spread_single * 1e3, spread_ddp * 1e3, meet * 1e3, meet / best_ddp * 100);
  std::vector<double> a =
      result_of("NABLA_NUM_THREADS=1 " + std::string(NABLA_RUN_BIN) + " --nproc-per-node 2 --master-port 29732 " +
                self + " allreduce --mb " + std::to_string(static_cast<int64_t>(o.mb)));
  if (a.empty()) return 1;
  const double bytes = a[2];
  // Bus bandwidth as nccl-tests define it: a ring all-reduce moves 2 (n-1)/n of the buffer per rank.
  std::printf(
      "all_reduce of %.0f MB float32, 2 processes on loopback (best of 5): %.1f ms = %.2f GB/s algorithm "
      "bandwidth (%.2f GB/s bus bandwidth); memcpy of it: %.1f ms = %.2f GB/s; all_reduce / memcpy time: %.1fx\n",
      bytes / 1e6, a[0] * 1e3, bytes / a[0] / 1e9, bytes / a[0] / 1e9 * 2 * (2 - 1) / 2, a[1] * 1e3, bytes / a[1] / 1e9,
      a[0] / a[1]);
  return 0;
}
