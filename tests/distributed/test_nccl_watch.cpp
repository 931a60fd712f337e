// The nccl backend's watchdog logic (distributed/nccl_watch.h), checked on every machine: no NCCL, no
// GPU. A fake Probe plays the communicator (its state per poll), the event and a clock that moves
// 1 ms per pause, so a 1000 ms timeout is tested in microseconds and exactly.
// The GPU side (a real peer that never arrives) is in test_distributed.cpp's DistributedNccl tests.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "distributed/nccl_watch.h"
#include "distributed/store.h"

namespace dist = nabla::distributed;
namespace w = nabla::distributed::nccl_watch;
using std::chrono::milliseconds;
using w::Stage;
using w::Verdict;

namespace {

constexpr int kRemoteError = 6;  // ncclRemoteError
constexpr int kSystemError = 2;  // ncclSystemError

// A communicator whose state at poll k is state_at(k), an event that completes at poll event_at, and
// a clock that advances `tick` per pause.
struct FakeProbe : w::Probe {
  std::function<int(int)> state_at = [](int) { return w::kNcclInProgress; };
  int event_at = -1;  // never
  milliseconds tick{1};
  std::string broken_reason;
  std::string hint_text;

  int polls = 0;  // state() calls
  int aborts = 0;
  std::string aborted_with;
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(1);

  std::string broken() override { return broken_reason; }
  int state() override { return state_at(polls++); }
  bool event_done() override { return event_at >= 0 && polls >= event_at; }
  std::string status_text(int s) override { return s == kRemoteError ? "remote process exited" : "some error"; }
  std::string hint(Stage) override { return hint_text; }
  void abort(const std::string& m) override {
    ++aborts;
    aborted_with = m;
    broken_reason = m;
  }
  Clock::time_point now() override { return t; }
  void pause(int) override { t += tick; }
};

std::string watch_error(FakeProbe& p, Stage stage, milliseconds timeout, const std::string& call = "") {
  try {
    w::watch(p, stage, "all_reduce(sum, float32 [4])", "rank 0 of 2 (nccl, cuda:0, timeout 1000 ms)", timeout, call);
  } catch (const dist::DistributedError& e) { return e.what(); }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(NcclWatch, JudgeDecidesEachPoll) {
  const milliseconds T{1000};
  const auto ms = [](int n) { return std::chrono::nanoseconds(milliseconds(n)); };
  // setup, enqueue and teardown follow NCCL's state: in progress waits until the timeout.
  for (Stage s : {Stage::setup, Stage::enqueue, Stage::teardown}) {
    EXPECT_EQ(w::judge(s, w::kNcclInProgress, false, ms(0), T), Verdict::wait) << w::stage_name(s);
    EXPECT_EQ(w::judge(s, w::kNcclInProgress, false, ms(1000), T), Verdict::wait) << w::stage_name(s);  // not yet past
    EXPECT_EQ(w::judge(s, w::kNcclInProgress, false, ms(1000) + std::chrono::nanoseconds(1), T), Verdict::timed_out);
    EXPECT_EQ(w::judge(s, w::kNcclSuccess, false, ms(0), T), Verdict::done);
    EXPECT_EQ(w::judge(s, w::kNcclSuccess, false, ms(5000), T), Verdict::done);  // done wins over a late look
    EXPECT_EQ(w::judge(s, kRemoteError, false, ms(0), T), Verdict::nccl_error);
    EXPECT_EQ(w::judge(s, w::kNcclSuccess, true, ms(0), T), Verdict::done);  // the event is not its business
  }
  // completion follows the event; the state only for errors.
  EXPECT_EQ(w::judge(Stage::completion, w::kNcclSuccess, false, ms(10), T), Verdict::wait);
  EXPECT_EQ(w::judge(Stage::completion, w::kNcclSuccess, true, ms(10), T), Verdict::done);
  EXPECT_EQ(w::judge(Stage::completion, w::kNcclSuccess, true, ms(5000), T), Verdict::done);
  EXPECT_EQ(w::judge(Stage::completion, w::kNcclSuccess, false, ms(1001), T), Verdict::timed_out);
  EXPECT_EQ(w::judge(Stage::completion, w::kNcclInProgress, false, ms(10), T), Verdict::wait);
  // An error wins even over a completed event: the communicator is unusable.
  EXPECT_EQ(w::judge(Stage::completion, kSystemError, true, ms(0), T), Verdict::nccl_error);
  EXPECT_EQ(w::judge(Stage::completion, kRemoteError, false, ms(5000), T), Verdict::nccl_error);
  EXPECT_STREQ(w::verdict_name(Verdict::timed_out), "timed_out");
}

TEST(NcclWatch, SetupThatFinishesReturnsWithoutAbort) {
  FakeProbe p;
  p.state_at = [](int k) { return k < 4 ? w::kNcclInProgress : w::kNcclSuccess; };
  EXPECT_EQ(w::watch(p, Stage::setup, "init_process_group", "rank 1 of 2", milliseconds(1000)), 5);
  EXPECT_EQ(p.aborts, 0);
  EXPECT_EQ(p.polls, 5);
}

TEST(NcclWatch, SetupWhosePeerNeverArrivesIsAbortedAfterTheTimeoutNamingTheMissingRank) {
  FakeProbe p;  // in progress forever
  p.hint_text = "ranks that never reached the setup: 1";
  const auto t0 = p.t;
  std::string m;
  try {
    w::watch(p, Stage::setup, "init_process_group", "rank 0 of 2 (nccl, cuda:0, timeout 1000 ms)", milliseconds(1000),
             "ncclCommInitRankConfig");
    ADD_FAILURE() << "a setup that never finishes returned";
  } catch (const dist::DistributedError& e) { m = e.what(); }
  EXPECT_TRUE(has(m, "init_process_group failed on rank 0 of 2 (nccl, cuda:0, timeout 1000 ms)")) << m;
  EXPECT_TRUE(has(m, "NCCL's communicator setup (ncclCommInitRankConfig) did not finish within the timeout (1000 ms)"))
      << m;
  EXPECT_TRUE(has(m, "ranks that never reached the setup: 1")) << m;
  EXPECT_TRUE(has(m, "the communicator was aborted")) << m;
  // Aborted once, with the very message thrown (the group's broken reason); not before the timeout,
  // and not much after it (1 ms per poll).
  EXPECT_EQ(p.aborts, 1);
  EXPECT_EQ(p.aborted_with, m);
  EXPECT_EQ(p.t - t0, milliseconds(1001));
  EXPECT_EQ(p.polls, 1002);
}

TEST(NcclWatch, CollectiveThatNeverCompletesTimesOutNamingIt) {
  FakeProbe p;
  p.state_at = [](int) { return w::kNcclSuccess; };  // queued fine, kernels never end
  p.tick = milliseconds(7);
  const auto t0 = p.t;
  std::string m = watch_error(p, Stage::completion, milliseconds(50));
  EXPECT_TRUE(has(m, "all_reduce(sum, float32 [4]) failed on rank 0 of 2")) << m;
  EXPECT_TRUE(has(m, "not finished within the timeout (50 ms): a peer died, hangs or did not call it")) << m;
  EXPECT_EQ(p.aborts, 1);
  EXPECT_EQ(p.t - t0, milliseconds(56));  // the first look past 50 ms
}

TEST(NcclWatch, CollectiveThatCompletesReturns) {
  FakeProbe p;
  p.state_at = [](int) { return w::kNcclSuccess; };
  p.event_at = 3;  // event_done() is asked before state(): true on the 4th poll
  EXPECT_EQ(w::watch(p, Stage::completion, "broadcast", "rank 1 of 2", milliseconds(1000)), 4);
  EXPECT_EQ(p.aborts, 0);
}

TEST(NcclWatch, AsynchronousErrorAbortsAtOnceWithNcclsWords) {
  FakeProbe p;
  p.state_at = [](int k) { return k < 2 ? w::kNcclSuccess : kRemoteError; };
  const auto t0 = p.t;
  std::string m = watch_error(p, Stage::completion, milliseconds(1000));
  EXPECT_TRUE(has(m, "all_reduce(sum, float32 [4]) failed on rank 0 of 2")) << m;
  EXPECT_TRUE(has(m, "NCCL reported remote process exited; the communicator was aborted")) << m;
  EXPECT_EQ(p.aborts, 1);
  EXPECT_EQ(p.polls, 3);
  EXPECT_EQ(p.t - t0, milliseconds(2));  // no waiting for the timeout
  // An error during setup says so.
  FakeProbe s;
  s.state_at = [](int) { return kSystemError; };
  m = watch_error(s, Stage::setup, milliseconds(1000), "ncclCommInitRankConfig");
  EXPECT_TRUE(has(m, "NCCL reported some error during the communicator's setup (ncclCommInitRankConfig)")) << m;
}

TEST(NcclWatch, EnqueueInProgressIsWatchedAndNamesTheCall) {
  FakeProbe ok;
  ok.state_at = [](int k) { return k < 10 ? w::kNcclInProgress : w::kNcclSuccess; };
  EXPECT_EQ(w::watch(ok, Stage::enqueue, "gather", "rank 0 of 3", milliseconds(1000), "ncclGroupEnd"), 11);
  FakeProbe stuck;
  std::string m = watch_error(stuck, Stage::enqueue, milliseconds(20), "ncclGroupEnd");
  EXPECT_TRUE(has(m, "ncclGroupEnd answered ncclInProgress and was not queued within the timeout (20 ms)")) << m;
  EXPECT_EQ(stuck.aborts, 1);
}

TEST(NcclWatch, TeardownThatHangsIsAborted) {
  FakeProbe p;
  std::string m = watch_error(p, Stage::teardown, milliseconds(5), "ncclCommFinalize");
  EXPECT_TRUE(has(m, "NCCL's communicator teardown (ncclCommFinalize) did not finish within the timeout (5 ms)")) << m;
  EXPECT_EQ(p.aborts, 1);
}

TEST(NcclWatch, ABrokenGroupFailsAtOnceWithoutAbortingAgain) {
  FakeProbe p;
  p.broken_reason = "broadcast(root 0, float32 [3]) failed on rank 1 of 2: not finished within the timeout";
  std::string m = watch_error(p, Stage::completion, milliseconds(1000));
  EXPECT_TRUE(has(m,
                  "all_reduce(sum, float32 [4]): process group (rank 0 of 2 (nccl, cuda:0, timeout 1000 ms)) is "
                  "unusable after an earlier failure: broadcast(root 0"))
      << m;
  EXPECT_EQ(p.aborts, 0);
  EXPECT_EQ(p.polls, 0);
  // A failure seen by one wait breaks the group for the next (the fake's abort records it).
  FakeProbe q;
  q.state_at = [](int) { return kRemoteError; };
  std::string first = watch_error(q, Stage::completion, milliseconds(1000));
  std::string second = watch_error(q, Stage::completion, milliseconds(1000));
  EXPECT_TRUE(has(second, "unusable after an earlier failure: " + first)) << second;
  EXPECT_EQ(q.aborts, 1);
}

TEST(NcclWatch, AFailingStateQueryPropagates) {
  struct Throwing : FakeProbe {
    int state() override { throw dist::DistributedError("ncclCommGetAsyncError: invalid argument"); }
  } p;
  EXPECT_THROW(w::watch(p, Stage::completion, "barrier()", "rank 0 of 2", milliseconds(10)), dist::DistributedError);
}

}  // namespace
