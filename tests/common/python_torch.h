// Whether the tests can call Debian's PyTorch (/usr/bin/python3 with torch), and whether they must:
// tests that need it skip without it, unless NABLA_REQUIRE_TORCH=1 (scripts/test.sh sets it).
//
//   NABLA_NEEDS_PYTHON_MODULES("torch, torchvision");   // at the start of a test
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

namespace nabla_test {

// True when `<python> -c 'import <modules>'` succeeds (asked once per interpreter and modules).
inline bool python_has(const std::string& modules, const std::string& python = "/usr/bin/python3") {
  static std::map<std::string, bool> known;
  const std::string cmd = python + " -c 'import " + modules + "' >/dev/null 2>&1";
  auto it = known.find(cmd);
  if (it == known.end()) it = known.emplace(cmd, std::system(cmd.c_str()) == 0).first;
  return it->second;
}

// The Python a cross-check runs: NABLA_TEST_PYTHON when set (scripts/gpu-verify.sh points it at the
// GPU machine's Python with PyTorch 2.x), else Debian's /usr/bin/python3 (PyTorch 1.13).
inline std::string test_python() {
  const char* py = std::getenv("NABLA_TEST_PYTHON");
  return py && *py ? py : "/usr/bin/python3";
}

inline bool torch_required() {
  const char* v = std::getenv("NABLA_REQUIRE_TORCH");
  return v && std::string(v) == "1";
}

}  // namespace nabla_test

// Skips the test when the Python lacks the modules, or fails it under NABLA_REQUIRE_TORCH=1.
#define NABLA_NEEDS_PYTHON_MODULES_IN(python, modules)                                                          \
  do {                                                                                                          \
    if (!nabla_test::python_has(modules, python)) {                                                             \
      if (nabla_test::torch_required())                                                                         \
        FAIL() << "NABLA_REQUIRE_TORCH=1 but " << (python) << " cannot import " modules;                        \
      GTEST_SKIP() << (python)                                                                                  \
                   << " cannot import " modules " (Debian: apt-get install python3-torch python3-torchvision)"; \
    }                                                                                                           \
  } while (0)
#define NABLA_NEEDS_PYTHON_MODULES(modules) NABLA_NEEDS_PYTHON_MODULES_IN(std::string("/usr/bin/python3"), modules)
