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

// True when `/usr/bin/python3 -c 'import <modules>'` succeeds (asked once per set of modules).
inline bool python_has(const std::string& modules) {
  static std::map<std::string, bool> known;
  auto it = known.find(modules);
  if (it == known.end())
    it = known.emplace(modules, std::system(("/usr/bin/python3 -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0).first;
  return it->second;
}

inline bool torch_required() {
  const char* v = std::getenv("NABLA_REQUIRE_TORCH");
  return v && std::string(v) == "1";
}

}  // namespace nabla_test

// Skips the test when /usr/bin/python3 lacks the modules, or fails it under NABLA_REQUIRE_TORCH=1.
#define NABLA_NEEDS_PYTHON_MODULES(modules)                                                               \
  do {                                                                                                    \
    if (!nabla_test::python_has(modules)) {                                                               \
      if (nabla_test::torch_required()) FAIL() << "NABLA_REQUIRE_TORCH=1 but /usr/bin/python3 cannot import " modules; \
      GTEST_SKIP() << "/usr/bin/python3 cannot import " modules " (Debian: apt-get install python3-torch python3-torchvision)"; \
    }                                                                                                     \
  } while (0)
