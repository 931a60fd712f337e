// nccl_watch.h: how the nccl backend waits on NCCL without hanging when a peer dies, hangs or never
// arrives (what PyTorch's NCCL watchdog does). Plain C++ without NCCL's header: the decision of each
// poll (`judge`) and the polling loop (`watch`) work through `Probe`, which process_group_nccl.cpp
// implements with the communicator and a CUDA event, and tests/distributed/test_nccl_watch.cpp with a
// fake (no NCCL, no GPU, a fake clock).
//
// Four things are waited for, each within the group's timeout:
//   setup:      ncclCommInitRankConfig on a non-blocking communicator (blocking = 0) returns at once;
//               it is done when NCCL's state (ncclCommGetAsyncError) leaves ncclInProgress;
//   enqueue:    an NCCL call that answered ncclInProgress (a non-blocking communicator's ncclGroupEnd
//               or collective may, while it connects to peers): the same;
//   completion: the collective's kernels: done when the event recorded after them has completed;
//   teardown:   ncclCommFinalize (the destructor's orderly end): as setup.
// An error state fails at once; still not done after the timeout fails too. A failure calls
// Probe::abort (ncclCommAbort: the kernels return, nothing waits forever; the group is marked broken)
// and throws DistributedError "<what> failed on <where>: <reason>", e.g.
//   init_process_group failed on rank 0 of 2 (nccl, cuda:0, timeout 2000 ms): NCCL's communicator
//   setup (ncclCommInitRankConfig) did not finish within the timeout (2000 ms): a peer died, hangs
//   or never joined; ranks that never reached the setup: 1; the communicator was aborted
#pragma once

#include <chrono>
#include <string>

namespace nabla::distributed::nccl_watch {

// The ncclResult_t values the watch tells apart (nccl.h; process_group_nccl.cpp static_asserts them).
inline constexpr int kNcclSuccess = 0;
inline constexpr int kNcclInProgress = 7;

enum class Stage { setup, enqueue, completion, teardown };
const char* stage_name(Stage s);  // "setup", ...

enum class Verdict { wait, done, nccl_error, timed_out };
const char* verdict_name(Verdict v);

// One poll's decision. `state`: what ncclCommGetAsyncError answered (kNcclSuccess, kNcclInProgress or
// an error); `event_done`: whether the event after the collective has completed (completion only;
// ignored otherwise); `elapsed`: since the wait began. An error wins over everything (the
// communicator is unusable); then done; then the timeout (elapsed > timeout); else wait.
Verdict judge(Stage stage, int state, bool event_done, std::chrono::nanoseconds elapsed,
              std::chrono::milliseconds timeout);

// What a watch looks at and does; one per wait.
class Probe {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Probe() = default;
  // "" while the group works; the first failure's message once another wait aborted it.
  virtual std::string broken() = 0;
  // ncclCommGetAsyncError's state; throws DistributedError when that call itself fails.
  virtual int state() = 0;
  // Whether the event recorded after the collective has completed (asked in completion only).
  virtual bool event_done() { return false; }
  // NCCL's words for a status ("remote process exited or there was a network error (...)").
  virtual std::string status_text(int status) = 0;
  // What else the reason can say on a timeout (setup: which ranks never reached it); "" if nothing.
  virtual std::string hint(Stage) { return ""; }
  // Aborts the communicator and marks the group broken with `message`, the text about to be thrown.
  virtual void abort(const std::string& message) = 0;
  virtual Clock::time_point now() { return Clock::now(); }
  // Between two polls (`polls` so far): yields for the first 200, then sleeps 50 us each.
  virtual void pause(int polls);
};

// Why a stage failed (what follows "failed on <where>: "). `call`: the NCCL function waited for.
std::string timeout_reason(Stage stage, std::chrono::milliseconds timeout, const std::string& call,
                           const std::string& hint);
std::string error_reason(Stage stage, const std::string& status_text, const std::string& call);

// Polls `probe` until `stage` is done; returns the number of polls. On an NCCL error or the timeout:
// probe.abort(message), then throws DistributedError(message). On a group already broken: throws
// "<what>: process group (<where>) is unusable after an earlier failure: <reason>" (no abort).
int watch(Probe& probe, Stage stage, const std::string& what, const std::string& where,
          std::chrono::milliseconds timeout, const std::string& call = "");

}  // namespace nabla::distributed::nccl_watch
