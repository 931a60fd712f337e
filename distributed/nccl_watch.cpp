#include "distributed/nccl_watch.h"

#include <thread>

#include "distributed/heartbeat.h"
#include "distributed/store.h"

namespace nabla::distributed::nccl_watch {

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::setup: return "setup";
    case Stage::enqueue: return "enqueue";
    case Stage::completion: return "completion";
    case Stage::teardown: return "teardown";
  }
  return "?";
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::wait: return "wait";
    case Verdict::done: return "done";
    case Verdict::nccl_error: return "nccl_error";
    case Verdict::timed_out: return "timed_out";
  }
  return "?";
}

Verdict judge(Stage stage, int state, bool event_done, std::chrono::nanoseconds elapsed,
              std::chrono::milliseconds timeout) {
  if (state != kNcclSuccess && state != kNcclInProgress) return Verdict::nccl_error;
  // setup, enqueue and teardown are NCCL's own host-side progress; completion is the stream's.
  const bool done = stage == Stage::completion ? event_done : state == kNcclSuccess;
  if (done) return Verdict::done;
  if (elapsed > timeout) return Verdict::timed_out;
  return Verdict::wait;
}

void Probe::pause(int polls) {
  if (polls < 200) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::string timeout_reason(Stage stage, std::chrono::milliseconds timeout, const std::string& call,
                           const std::string& hint) {
  const std::string within = internal::str("within the timeout (", timeout.count(), " ms)");
  const std::string extra = hint.empty() ? "" : "; " + hint;
  switch (stage) {
    case Stage::setup:
      return internal::str("NCCL's communicator setup (", call.empty() ? "ncclCommInitRankConfig" : call,
                           ") did not finish ", within, ": a peer died, hangs or never joined", extra,
                           "; the communicator was aborted");
    case Stage::enqueue:
      return internal::str(call.empty() ? "the NCCL call" : call, " answered ncclInProgress and was not queued ",
                           within, ": a peer died, hangs or did not call it (NCCL does not say which)", extra,
                           "; the communicator was aborted");
    case Stage::completion:
      return internal::str("not finished ", within, ": a peer died, hangs or did not call it (NCCL does not say which)",
                           extra, "; the communicator was aborted");
    case Stage::teardown:
      return internal::str("NCCL's communicator teardown (", call.empty() ? "ncclCommFinalize" : call,
                           ") did not finish ", within, extra, "; the communicator was aborted");
  }
  return "?";
}

std::string error_reason(Stage stage, const std::string& status_text, const std::string& call) {
  const char* during = stage == Stage::setup      ? " during the communicator's setup"
                       : stage == Stage::teardown ? " during the communicator's teardown"
                                                  : "";
  return internal::str("NCCL reported ", status_text, during, call.empty() ? "" : " (" + call + ")",
                       "; the communicator was aborted");
}

int watch(Probe& probe, Stage stage, const std::string& what, const std::string& where,
          std::chrono::milliseconds timeout, const std::string& call) {
  heartbeat::Waiting waiting;  // what nabla-run's liveness check sees
  const Probe::Clock::time_point t0 = probe.now();
  for (int polls = 0;; ++polls) {
    if (std::string b = probe.broken(); !b.empty())
      throw DistributedError(
          internal::str(what, ": process group (", where, ") is unusable after an earlier failure: ", b));
    // The event first: a state read after it also covers it (an error found then still fails).
    const bool event_done = stage == Stage::completion && probe.event_done();
    const int state = probe.state();
    const Verdict v = judge(stage, state, event_done, probe.now() - t0, timeout);
    if (v == Verdict::done) return polls + 1;
    if (v != Verdict::wait) {
      const std::string reason = v == Verdict::nccl_error ? error_reason(stage, probe.status_text(state), call)
                                                          : timeout_reason(stage, timeout, call, probe.hint(stage));
      const std::string message = internal::str(what, " failed on ", where, ": ", reason);
      probe.abort(message);
      throw DistributedError(message);
    }
    probe.pause(polls);
  }
}

}  // namespace nabla::distributed::nccl_watch
