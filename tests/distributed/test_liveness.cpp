// nabla-run's liveness check and the job's secret, and the start-up of two ranks while a
// stranger dribbles bytes at the store: the workers are this test
// program again ("live_*" scenarios) or small shell and Python programs, with grace periods of a
// few seconds so that each test is short.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "core/ops.h"
#include "distributed/distributed.h"
#include "distributed/heartbeat.h"
#include "distributed/sha256.h"
#include "distributed/store.h"
#include "tests/common/python_torch.h"
#include "workers.h"

using namespace nabla;
namespace dist = nabla::distributed;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using nabla_dist_test::launch;
using nabla_dist_test::read_file;
using nabla_dist_test::wait_launcher;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
int env_int(const char* name) { return std::atoi(std::getenv(name)); }
std::string test_dir() { return std::getenv("NABLA_TEST_DIR"); }
void write_pid(int rank) { std::ofstream(test_dir() + "/pid." + std::to_string(rank)) << getpid(); }

[[noreturn]] void fail(const std::string& why) {
  std::cerr << "rank " << std::getenv("RANK") << ": " << why << "\n";
  _exit(1);
}

}  // namespace

namespace nabla_dist_test {

std::string write_secret_file(const std::string& path) {
  uint8_t raw[32];
  dist::crypto::random_bytes(raw, sizeof raw);
  std::ofstream(path) << dist::crypto::hex(raw, sizeof raw) << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

int liveness_worker(const std::string& scenario) {
  const auto timeout = std::chrono::milliseconds(env_int("NABLA_TEST_TIMEOUT_MS"));
  const int rank = env_int("RANK");
  try {
    if (scenario == "live_init_only") {  // join, one all_reduce, leave
      dist::init_process_group({.timeout = timeout});
      Tensor x = ones({4});
      dist::all_reduce(x);
      if (x.sum().item<double>() != 4.0 * dist::get_world_size()) fail("all_reduce gave the wrong sum");
      dist::destroy_process_group();
    } else if (scenario == "live_stop") {  // rank 1 stops itself after the first all_reduce
      dist::init_process_group({.timeout = timeout});
      Tensor x = ones({4});
      dist::all_reduce(x);
      write_pid(rank);
      if (rank == 1) {
        raise(SIGSTOP);
        _exit(0);
      }
      dist::all_reduce(x);  // waits for rank 1 until nabla-run ends the job (or the timeout)
      fail("the second all_reduce returned although rank 1 was stopped");
    } else if (scenario == "live_exit_early") {  // rank 1 exits 0 at once; rank 0 waits to join
      write_pid(rank);
      if (rank == 1) return 0;
      dist::init_process_group({.timeout = timeout});
      fail("init_process_group returned without rank 1");
    } else if (scenario == "live_secret") {
      // nabla-run gave a secret in a file only this user can read; the store demands it.
      const char* path = std::getenv("NABLA_STORE_SECRET_FILE");
      if (!path) fail("NABLA_STORE_SECRET_FILE is not set");
      struct stat st {};
      if (stat(path, &st) != 0 || (st.st_mode & 0777) != 0600)
        fail(std::string("the secret file's mode is not 600: ") + path);
      std::string secret = read_file(path);
      while (!secret.empty() && secret.back() == '\n') secret.pop_back();
      if (secret.size() != 64) fail("the secret has " + std::to_string(secret.size()) + " characters, not 64");
      std::ofstream(test_dir() + "/secret_path." + std::to_string(rank)) << path;
      std::ofstream(test_dir() + "/secret." + std::to_string(rank)) << secret;
      dist::init_process_group({.timeout = timeout});
      if (rank == 0) {
        const uint16_t port = static_cast<uint16_t>(env_int("MASTER_PORT"));
        try {
          dist::TCPStore stranger("127.0.0.1", port, false, 2s);
          fail("a client without the secret was served");
        } catch (const dist::DistributedError& e) {
          if (std::string(e.what()).find("requires the job's secret") == std::string::npos) fail(e.what());
        }
        dist::TCPStoreOptions o;
        o.secret = secret;
        dist::TCPStore insider("127.0.0.1", port, false, 2s, o);
        if (!insider.authenticated() || !insider.check({"nabla.join.0", "nabla.join.1"}))
          fail("a client with the secret does not see the ranks' keys");
      }
      dist::barrier();
      dist::destroy_process_group();
    } else {
      std::cerr << "unknown scenario " << scenario << "\n";
      return 2;
    }
  } catch (const std::exception& e) { fail(e.what()); }
  return 0;
}

}  // namespace nabla_dist_test

namespace {

// The ranks' processes left pid files; none of them may still run.
void expect_gone(const std::string& dir, std::vector<int> ranks) {
  for (int r : ranks) {
    std::string text = read_file(dir + "/pid." + std::to_string(r));
    ASSERT_FALSE(text.empty()) << "rank " << r << " left no pid file";
    pid_t pid = std::stoi(text);
    EXPECT_TRUE(kill(pid, 0) == -1 && errno == ESRCH) << "rank " << r << " (pid " << pid << ") is still running";
  }
}

TEST(NablaRunLiveness, AStoppedRankIsNamedAndTheJobEndsAfterTheGrace) {
  // kill -STOP of one rank once left rank 0 waiting silently for the collective timeout.
  auto l = launch("live_stop", 2, 120000, {"--liveness-grace", "2"});
  double took = 0;
  int code = wait_launcher(l, 40, &took);
  std::string log = read_file(l.dir + "/launcher2.log");
  EXPECT_EQ(code, 124) << log;
  EXPECT_NE(log.find("rank 1 (pid"), std::string::npos) << log;
  EXPECT_NE(log.find("it is stopped (state T"), std::string::npos) << log;
  EXPECT_NE(log.find("--liveness-grace 2"), std::string::npos) << log;
  EXPECT_LT(took, 15.0) << log;
  expect_gone(l.dir, {0, 1});
  std::cerr << "a stopped rank: nabla-run ended the job " << took << " s after it started (grace 2 s)\n" << log;
  std::filesystem::remove_all(l.dir);
}

TEST(NablaRunLiveness, ARankLeftWaitingByOneThatExitedIsEnded) {
  auto l = launch("live_exit_early", 2, 120000, {"--liveness-grace", "2"});
  double took = 0;
  int code = wait_launcher(l, 40, &took);
  std::string log = read_file(l.dir + "/launcher2.log");
  EXPECT_EQ(code, 124) << log;
  EXPECT_NE(log.find("rank 0 (pid"), std::string::npos) << log;
  EXPECT_NE(log.find("has been waiting for its peers"), std::string::npos) << log;
  EXPECT_NE(log.find("since rank 1 exited (status 0)"), std::string::npos) << log;
  EXPECT_LT(took, 15.0) << log;
  expect_gone(l.dir, {0, 1});
  std::filesystem::remove_all(l.dir);
}

TEST(NablaRunLiveness, HealthyJobsWithAShortGraceFinish) {
  auto l = launch("collectives", 2, 20000, {"--liveness-grace", "1"});
  EXPECT_EQ(wait_launcher(l, 60), 0) << read_file(l.dir + "/launcher1.log");
  std::filesystem::remove_all(l.dir);
}

// nabla-run on a shell program (no heartbeat: /proc's state and CPU time are all it has).
struct ShellRun {
  int code;
  double took;
  std::string log;
};
ShellRun run_shell(const std::string& script, const std::string& options) {
  std::string dir = nabla_dist_test::fresh_dir();
  std::ofstream(dir + "/w.sh") << script;
  std::string cmd = std::string("timeout -s KILL 60 ") + NABLA_RUN_BIN + " --nproc-per-node 2 --master-port " +
                    std::to_string(nabla_dist_test::free_port()) + " " + options + " /bin/sh " + dir + "/w.sh > " +
                    dir + "/log 2>&1";
  auto t0 = Clock::now();
  int st = std::system(cmd.c_str());
  ShellRun r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, seconds_since(t0), read_file(dir + "/log")};
  std::filesystem::remove_all(dir);
  return r;
}

TEST(NablaRunLiveness, ProgramsWithoutHeartbeatsAreJudgedByStateAndCpu) {
  // Stopped (a program that is not nabla's: no heartbeat, /proc says T).
  ShellRun stopped = run_shell("if [ \"$RANK\" = 1 ]; then kill -STOP $$; fi; exec sleep 30\n", "--liveness-grace 2");
  EXPECT_EQ(stopped.code, 124) << stopped.log;
  EXPECT_NE(stopped.log.find("rank 1 (pid"), std::string::npos) << stopped.log;
  EXPECT_NE(stopped.log.find("it is stopped"), std::string::npos) << stopped.log;
  EXPECT_LT(stopped.took, 15.0);
  // Rank 1 done, rank 0 asleep (no CPU) for the grace period: what the PyTorch benchmark's hang looked like.
  ShellRun asleep = run_shell("if [ \"$RANK\" = 1 ]; then exit 0; fi; exec sleep 30\n", "--liveness-grace 2");
  EXPECT_EQ(asleep.code, 124) << asleep.log;
  EXPECT_NE(asleep.log.find("rank 0 (pid"), std::string::npos) << asleep.log;
  EXPECT_NE(asleep.log.find("has used no CPU for"), std::string::npos) << asleep.log;
  EXPECT_LT(asleep.took, 15.0);
  // Rank 1 done, rank 0 still computing for 3 s (more than the grace): not a hang.
  ShellRun busy = run_shell(
      "if [ \"$RANK\" = 1 ]; then exit 0; fi\n"
      "read up rest < /proc/uptime; end=$(( ${up%.*} + 3 ))\n"
      "while :; do read up rest < /proc/uptime; [ ${up%.*} -ge $end ] && break; done\n",
      "--liveness-grace 1");
  EXPECT_EQ(busy.code, 0) << busy.log;
  // The check off: the sleeper is left alone (here until it exits by itself).
  ShellRun off = run_shell("if [ \"$RANK\" = 1 ]; then exit 0; fi; exec sleep 3\n", "--liveness-grace 0");
  EXPECT_EQ(off.code, 0) << off.log;
  std::cerr << "without heartbeats: stopped rank found in " << stopped.took << " s, idle one in " << asleep.took
            << " s (grace 2 s)\n";
}

// The shape of the benchmark's hang in PyTorch: one rank finished and exited 0, the other waits in
// the store (here: for a key the finished rank never sets) for PyTorch's 30 minutes.
TEST(NablaRunLiveness, APyTorchRankLeftWaitingIsEnded) {
  NABLA_NEEDS_PYTHON_MODULES_IN(nabla_test::test_python(), "torch");
  ShellRun r = run_shell("exec " + nabla_test::test_python() +
                             " -c '\n"
                             "import datetime, torch, torch.distributed as dist\n"
                             "dist.init_process_group(\"gloo\")\n"
                             "t = torch.ones(3); dist.all_reduce(t)\n"
                             "if dist.get_rank() == 0:\n"
                             "    dist.distributed_c10d._get_default_store().wait([\"never\"])\n"
                             "dist.destroy_process_group()\n"
                             "'\n",
                         "--liveness-grace 3");
  EXPECT_EQ(r.code, 124) << r.log;
  EXPECT_NE(r.log.find("rank 0 (pid"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("since rank 1 exited (status 0)"), std::string::npos) << r.log;
  EXPECT_LT(r.took, 30.0) << r.log;
  std::cerr << "PyTorch rank left waiting: ended after " << r.took << " s (grace 3 s)\n";
}

TEST(NablaRunSecret, WorkersGetAFreshSecretInAFileOnlyTheUserCanRead) {
  std::vector<std::string> secrets;
  for (int job = 0; job < 2; ++job) {
    auto l = launch("live_secret", 2, 20000);
    EXPECT_EQ(wait_launcher(l, 60), 0) << read_file(l.dir + "/launcher.log");
    std::string path = read_file(l.dir + "/secret_path.0");
    EXPECT_EQ(path, read_file(l.dir + "/secret_path.1"));
    EXPECT_EQ(read_file(l.dir + "/secret.0"), read_file(l.dir + "/secret.1"));
    EXPECT_FALSE(path.empty());
    EXPECT_FALSE(std::filesystem::exists(path)) << "nabla-run left the secret behind: " << path;
    secrets.push_back(read_file(l.dir + "/secret.0"));
    std::filesystem::remove_all(l.dir);
  }
  EXPECT_NE(secrets[0], secrets[1]) << "two jobs got the same secret";
}

// One connection sending a byte every few seconds once held the 2-rank start-up as long as it
// was kept up. Now the ranks start beside it (and it is dropped at its deadline).
TEST(DistributedStoreServer, TwoRanksStartWhileAStrangerDribblesBytesAtTheStore) {
  const int port = nabla_dist_test::free_port();
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::thread dribbler([&] {
    while (!stop) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        std::this_thread::sleep_for(2ms);
        continue;
      }
      // The start of a set (command 1, a 16-byte body), a byte a second, for as long as the
      // connection lasts: the old server read it to the end and served nobody meanwhile.
      const char frame[] = {1, 16, 0, 0, 0, 4, 0, 0, 0, 'k', 'e', 'y', 's', 'v', 'a', 'l', 'u', 'e', 's', '!', '!'};
      for (size_t i = 0; !stop; i = (i + 1) % sizeof frame) {
        if (send(fd, &frame[i], 1, MSG_NOSIGNAL) != 1) break;
        ++sent;
        for (int i = 0; i < 100 && !stop; ++i) std::this_thread::sleep_for(10ms);
      }
      close(fd);
    }
  });
  auto t0 = Clock::now();
  auto results = nabla_dist_test::run_workers("live_init_only", 2, nabla_dist_test::all_ranks(2), 20000,
                                              {{"MASTER_PORT", std::to_string(port)}, {"NABLA_STORE_INSECURE", "1"}});
  double took = seconds_since(t0);
  stop = true;
  dribbler.join();
  nabla_dist_test::expect_all_ok(results);
  EXPECT_GT(sent.load(), 0) << "the stranger never reached the store";
  EXPECT_LT(took, 10.0) << "the start-up waited for the stranger";
  std::cerr << "2 ranks joined, all-reduced and left in " << took << " s beside a stranger sending a byte a second\n";
}

TEST(Heartbeat, TheRecordSaysWhenAThreadWaitsForPeers) {
  dist::TCPStore server("127.0.0.1", 0, true, 5s);
  const auto before = dist::heartbeat::current();
  EXPECT_EQ(before.magic, dist::heartbeat::kMagic);
  EXPECT_EQ(before.waiting, 0u);
  std::thread waiter([&] {
    try {
      server.wait({"never"}, 600ms);
    } catch (const dist::DistributedError&) {}
  });
  std::this_thread::sleep_for(300ms);
  const auto during = dist::heartbeat::current();
  waiter.join();
  const auto after = dist::heartbeat::current();
  EXPECT_EQ(during.waiting, 1u);
  EXPECT_GE(during.waiting_ms, 250u);
  EXPECT_LT(during.waiting_ms, 600u);
  EXPECT_EQ(after.waiting, 0u);
  EXPECT_EQ(after.waits_done, before.waits_done + 1);
  // Without nabla-run's socket there is nothing to beat to.
  unsetenv("NABLA_HEARTBEAT_FD");
  EXPECT_FALSE(dist::heartbeat::start_from_env());
}

}  // namespace
