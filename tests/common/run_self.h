// Runs this test program again, in a fresh process, for tests whose subject is process-wide state
// read once (the environment, thread limits, the pool's workers: a forked child has none).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace nabla::testing {

// Runs the test program with `env` (e.g. "NABLA_NUM_THREADS=3") and a gtest filter, disabled tests
// included, and returns its output. The child leaves GoogleTest's sharding (the sanitizer build
// runs the suite in shards) to run its one test whatever shard it would fall in.
inline std::string run_self(const std::string& env, const std::string& test) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();  // (in the shell it is sh)
  std::string cmd = "env -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX " + env + " timeout 120 " + exe +
                    " --gtest_also_run_disabled_tests --gtest_filter=" + test + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = ::pclose(p);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 124) out += "\n(timed out: hung)";
  return out;
}

}  // namespace nabla::testing
