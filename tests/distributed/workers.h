// What the multi-process test files share (defined in test_distributed.cpp, which holds main): the
// parent side that forks and execs the test program as the workers of a scenario, and the worker
// entry points of the other files.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cuda_api.h"
#include "core/error.h"
#include "distributed/distributed.h"

namespace nabla_dist_test {

// A worker's failed check: its message goes to stderr and the worker exits 1.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <class... A>
void expect(bool ok, const A&... a) {
  if (!ok) throw Failure(nabla::internal::str(a...));
}

// A worker of `scenario`: joins the job (gloo; or nccl, on the GPU numbered by its rank), runs
// body(), leaves it; returns 0, or 1 with the error, naming the rank, on stderr.
template <class Fn>
int worker_frame(const std::string& scenario, bool nccl, Fn&& body) {
  try {
    auto timeout = std::chrono::milliseconds(std::atoi(std::getenv("NABLA_TEST_TIMEOUT_MS")));
    if (nccl) nabla::cuda::set_device(std::atoi(std::getenv("RANK")));
    nabla::distributed::init_process_group({.backend = nccl ? "nccl" : "gloo", .timeout = timeout});
    body();
    nabla::distributed::destroy_process_group();
  } catch (const std::exception& e) {
    std::cerr << "rank " << std::getenv("RANK") << " (" << scenario << "): " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// The last rank of the job leaves at once (after what came before, e.g. a wrapper's construction);
// on the others fn() must fail with an error naming `collective` (within the group's timeout).
// Every rank then exits: the group is broken, so its orderly teardown is skipped.
template <class Fn>
[[noreturn]] void expect_dead_last_rank_fails(int rank, int world, const char* collective, Fn&& fn) {
  if (rank == world - 1) std::_Exit(0);
  try {
    fn();
  } catch (const std::exception& e) {
    if (std::string(e.what()).find(collective) == std::string::npos) {
      std::cerr << "rank " << rank << ": the error should name the " << collective << ": " << e.what() << "\n";
      std::_Exit(1);
    }
    std::_Exit(0);
  }
  std::cerr << "rank " << rank << ": no error although rank " << world - 1 << " is gone\n";
  std::_Exit(1);
}

struct Result {
  int status = -1;  // waitpid status
  std::string output;
  bool exited_ok() const;
};

// Runs `ranks` of a world of `world_size` processes of this program as workers of `scenario`
// (NABLA_DIST_WORKER=<scenario>, torchrun's variables, NABLA_TEST_TIMEOUT_MS, NABLA_TEST_DIR); kills
// them all when they take longer than `limit_s` (a hang) and fails the test. env: "NAME" for every
// rank, "NAME@r" for rank r only.
std::vector<Result> run_workers(const std::string& scenario, int world_size, std::vector<int> ranks, int timeout_ms,
                                std::map<std::string, std::string> env = {}, double limit_s = 60);
std::vector<int> all_ranks(int n);
void expect_all_ok(const std::vector<Result>& results);
int free_port();  // a port nobody listens on now
// Why the nccl backend cannot run `gpus` ranks here ("" when it can).
std::string nccl_unavailable(int gpus);

std::string fresh_dir();  // a new folder under /tmp
std::string read_file(const std::string& path);
// Writes a fresh random secret (64 hex digits) to path with mode 0600 and returns the path.
std::string write_secret_file(const std::string& path);

// nabla-run --nproc-per-node n --master-port <free> --stop-timeout 3 [extra...] <this program>, the
// workers running `scenario` (NABLA_TEST_DIR: dir, NABLA_TEST_TIMEOUT_MS); its stderr goes to
// dir/launcher<last extra>.log. With `netns`, the launcher runs in that network namespace.
struct Launched {
  pid_t pid;
  std::string dir;
};
Launched launch(const std::string& scenario, int n, int timeout_ms, std::vector<std::string> extra = {},
                std::string dir = "", int port_number = 0, const std::string& netns = "");
// Waits for the launcher and gives its exit code (128 + signal); -1 when it still runs after
// limit_s (then it is killed). took: the seconds it ran.
int wait_launcher(const Launched& l, double limit_s, double* took = nullptr);

// test_sync_batch_norm.cpp: scenarios whose names start with "sync_bn".
int sync_batch_norm_worker(const std::string& scenario);
// test_liveness.cpp: scenarios whose names start with "live_".
int liveness_worker(const std::string& scenario);
// test_zero.cpp: scenarios whose names start with "zero".
int zero_worker(const std::string& scenario);
// test_fsdp.cpp: scenarios whose names start with "fsdp".
int fsdp_worker(const std::string& scenario);

}  // namespace nabla_dist_test
