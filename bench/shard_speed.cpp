// shard_speed: what sharding the optimizer's state saves, and what it costs, on one machine.
//
//   build/bench/shard_speed [--rounds 5] [--steps 20] [--procs 2] [--memory-procs 2,4]
//
// A GPT of 4 blocks, width 256, 4 heads, vocabulary 8192, context 64 (5.3M parameters, 21 MB in
// float32) trained with AdamW (2 state tensors per parameter: 42 MB), batch 4 per process, under
// nabla-run, four ways:
//   ddp             DistributedDataParallel and the plain AdamW: every process holds all of the state
//   zero1           the same with optim::ZeroRedundancyOptimizer around AdamW: each process holds its
//                   shard of the state and broadcasts its updated parameters after its step
//   fsdp            nn::parallel::FullyShardedDataParallel, each block a unit: parameters, gradients
//                   and state sharded; a unit gathered while it computes, the next one's all_gather
//                   under way meanwhile (prefetch)
//   fsdp-noprefetch the same without prefetch: each all_gather waited for when its unit starts
// Per process: the optimizer state it holds (bytes of its state tensors), the CPU allocator's live
// bytes after a step (parameters + gradients + state + DDP's and ZeRO's buckets; activations are
// freed by then), the step time, the optimizer step's time (for zero1: its shard's update plus the
// parameter broadcasts) and the share of the step spent waiting on collectives (DDP: the gradient
// all-reduces backward did not hide; FSDP: all_gathers and reduce-scatters). Speed on --procs
// processes, interleaved --rounds times, best of each; memory also on each of --memory-procs (one
// round: more processes than cores only slows them).
// Each contender is a fresh nabla-run job of this program re-executed as the worker.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/distributed.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/fully_sharded_data_parallel.h"
#include "distributed/zero_redundancy_optimizer.h"
#include "nabla.h"
#include "timing.h"

#ifndef NABLA_RUN_BIN
#error "NABLA_RUN_BIN must name nabla-run"
#endif

using namespace nabla;
namespace dist = nabla::distributed;

namespace {

std::string arg(int argc, char** argv, const char* name, const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], name)) return argv[i + 1];
  return def;
}

size_t state_bytes(const StateDict& sd) {
  size_t n = 0;
  for (const auto& [key, t] : sd)
    if (key.rfind("state.", 0) == 0 && t.dim() > 0) n += t.nbytes();
  return n;
}

// One rank of a job: prints "RANK <rank> <state bytes> <allocated bytes> <s/step> <optimizer s/step>
// <waiting share>".
int worker(const std::string& mode, int steps, int warmup) {
  dist::init_process_group({.backend = "gloo"});
  const int rank = dist::get_rank();
  manual_seed(1);
  nn::GPT2Config c{.vocab_size = 8192, .n_positions = 64, .n_embd = 256, .n_layer = 4, .n_head = 4};
  auto model = std::make_shared<nn::GPT2LMHeadModel>(c);
  const bool sharded = mode.rfind("fsdp", 0) == 0;
  std::unique_ptr<nn::parallel::DistributedDataParallel> ddp;
  std::unique_ptr<nn::parallel::FullyShardedDataParallel> fsdp;
  if (sharded)
    fsdp = std::make_unique<nn::parallel::FullyShardedDataParallel>(
        model, nn::parallel::FSDPOptions{.auto_wrap_policy = nn::parallel::wrap_modules_named({"GPT2Block"}),
                                         .forward_prefetch = mode == "fsdp",
                                         .backward_prefetch = mode == "fsdp"});
  else ddp = std::make_unique<nn::parallel::DistributedDataParallel>(model);
  std::unique_ptr<optim::Optimizer> opt =
      std::make_unique<optim::AdamW>(sharded ? fsdp->parameters() : model->parameters(), optim::AdamWOptions{});
  optim::ZeroRedundancyOptimizer* zero = nullptr;
  if (mode == "zero1") {
    auto z = std::make_unique<optim::ZeroRedundancyOptimizer>(std::move(opt));
    zero = z.get();
    opt = std::move(z);
  }
  manual_seed(50 + static_cast<uint64_t>(rank));
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(randint(0, c.vocab_size, {4, c.n_positions}));
    ys.push_back(randint(0, c.vocab_size, {4 * c.n_positions}));
  }
  double opt_seconds = 0;
  auto step = [&](int i) {
    opt->zero_grad(false);
    const Tensor& x = xs[static_cast<size_t>(i) % 4];
    nn::functional::cross_entropy((fsdp ? (*fsdp)(x) : (*ddp)(x)).flatten(0, 1), ys[static_cast<size_t>(i) % 4])
        .backward();
    const double t = bench::now();
    opt->step();
    opt_seconds += bench::now() - t;
  };
  for (int i = 0; i < warmup; ++i) step(i);
  dist::barrier();
  opt_seconds = 0;
  if (ddp) ddp->reset_comm_wait();
  if (fsdp) fsdp->reset_comm_stats();
  const double t0 = bench::now();
  for (int i = 0; i < steps; ++i) step(i);
  double seconds = bench::now() - t0;
  const double waited = fsdp ? fsdp->comm_stats().wait_seconds : ddp->comm_wait_seconds();
  const size_t held = state_bytes(zero ? zero->local_state_dict() : opt->state_dict());
  const size_t live = cpu_memory_stats().allocated_bytes;
  Tensor t = tensor(std::vector<double>{seconds});
  dist::all_reduce(t, dist::ReduceOp::max);  // the slower rank's time is the job's
  seconds = t.item<double>();
  std::printf("RANK %d %zu %zu %.6f %.6f %.4f\n", rank, held, live, seconds / steps, opt_seconds / steps,
              waited / seconds);
  std::fflush(stdout);
  dist::destroy_process_group();
  return 0;
}

constexpr const char* kModes[] = {"ddp", "zero1", "fsdp", "fsdp-noprefetch"};

struct Job {
  std::vector<double> state_mb, live_mb;
  double step_ms = 0, opt_ms = 0, wait = 0;  // rank 0's optimizer time; the slowest rank's step
};

Job run_job(const char* self, const std::string& mode, int procs, int steps) {
  static int port = 29000 + static_cast<int>(getpid() % 1000);
  ++port;
  const std::string cmd = std::string(NABLA_RUN_BIN) + " --nproc-per-node " + std::to_string(procs) +
                          " --master-port " + std::to_string(port) + " " + self + " worker --mode " + mode +
                          " --steps " + std::to_string(steps);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  Job job;
  job.state_mb.assign(static_cast<size_t>(procs), 0);
  job.live_mb.assign(static_cast<size_t>(procs), 0);
  char line[512];
  int seen = 0;
  while (std::fgets(line, sizeof line, p)) {
    int rank = 0;
    size_t held = 0, live = 0;
    double s = 0, o = 0, w = 0;
    if (std::sscanf(line, "RANK %d %zu %zu %lf %lf %lf", &rank, &held, &live, &s, &o, &w) != 6) continue;
    if (rank < 0 || rank >= procs) continue;
    job.state_mb[static_cast<size_t>(rank)] = static_cast<double>(held) / 1e6;
    job.live_mb[static_cast<size_t>(rank)] = static_cast<double>(live) / 1e6;
    job.step_ms = s * 1e3;
    if (rank == 0) job.opt_ms = o * 1e3, job.wait = w;
    ++seen;
  }
  if (pclose(p) != 0 || seen != procs) throw std::runtime_error("the job failed: " + cmd);
  return job;
}

std::string mbs(const std::vector<double>& v) {
  std::ostringstream o;
  for (size_t i = 0; i < v.size(); ++i) o << (i ? " / " : "") << static_cast<int>(v[i] + 0.5);
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && !std::strcmp(argv[1], "worker"))
      return worker(arg(argc, argv, "--mode", "ddp"), std::stoi(arg(argc, argv, "--steps", "20")), 3);
    const int rounds = std::stoi(arg(argc, argv, "--rounds", "5")), steps = std::stoi(arg(argc, argv, "--steps", "20"));
    const int procs = std::stoi(arg(argc, argv, "--procs", "2"));
    std::vector<int> memory_procs;
    std::stringstream mp(arg(argc, argv, "--memory-procs", "2,4"));
    for (std::string item; std::getline(mp, item, ',');) memory_procs.push_back(std::stoi(item));
    std::printf("shard_speed on %s, %u cores: GPT 4x256, vocabulary 8192, context 64, AdamW, batch 4 per process\n",
                bench::cpu_model().c_str(), std::thread::hardware_concurrency());
    std::map<std::string, Job> best;
    for (int r = 0; r < rounds; ++r) {
      std::printf("  round %d:", r + 1);
      for (const char* mode : kModes) {
        Job j = run_job(argv[0], mode, procs, steps);
        std::printf("  %s %.1f ms/step (optimizer %.2f ms, waiting %.0f%%)", mode, j.step_ms, j.opt_ms, j.wait * 100);
        auto it = best.find(mode);
        if (it == best.end() || j.step_ms < it->second.step_ms) best[mode] = j;
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    const Job& d = best["ddp"];
    std::printf("best of %d, %d processes:", rounds, procs);
    for (const char* mode : kModes)
      std::printf(" %s %.1f ms/step (%.3fx ddp, waiting %.0f%%);", mode, best[mode].step_ms,
                  best[mode].step_ms / d.step_ms, best[mode].wait * 100);
    std::printf("\n");
    for (int n : memory_procs)
      for (const char* mode : {"ddp", "zero1", "fsdp"}) {
        Job m = run_job(argv[0], mode, n, 2);
        std::printf(
            "%d processes, %s: optimizer state per process (MB) %s; allocator live bytes after a step (MB) %s\n", n,
            mode, mbs(m.state_mb).c_str(), mbs(m.live_mb).c_str());
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shard_speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
