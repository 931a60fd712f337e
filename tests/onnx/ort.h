// What the ONNX tests share (tests/onnx/test_export.cpp, the mnist program's export test): finding ONNX
// Runtime (onnxruntime-node, which scripts/test.sh installs into .deps/onnxruntime) and Debian's
// python3-onnx, skipping without them unless NABLA_REQUIRE_ORT=1, and raw tensor files for
// tests/onnx/run_ort.js. Needs NABLA_TESTS_DIR (the tests/ folder) defined by the test target.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "nabla.h"

namespace nabla::testing {

inline bool ort_required() {
  const char* v = std::getenv("NABLA_REQUIRE_ORT");
  return v && std::string(v) == "1";
}
inline std::string ort_dir() {
  const char* v = std::getenv("NABLA_ORT_DIR");
  return v && *v ? v : std::string(NABLA_TESTS_DIR) + "/../.deps/onnxruntime";
}
inline bool have_ort() {
  return std::system("node --version >/dev/null 2>&1") == 0 &&
         std::filesystem::exists(ort_dir() + "/node_modules/onnxruntime-node/package.json");
}
// Debian's Python in isolated mode (-I): the tests run in the repository root, whose onnx/ folder
// would otherwise import as an empty namespace package where the real onnx is not installed.
inline constexpr const char* kOnnxPython = "/usr/bin/python3 -I";
inline bool have_onnx_checker() {
  static const bool ok =
      std::system((std::string(kOnnxPython) + " -c 'import onnx.checker; onnx.load' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}
// The command that runs tests/onnx/run_ort.js on a jobs file (see its header for the format).
inline std::string run_ort_command(const std::string& jobs_file) {
  return "NABLA_ORT_DIR='" + ort_dir() + "' node '" + std::string(NABLA_TESTS_DIR) + "/onnx/run_ort.js' '" + jobs_file +
         "'";
}

// A tensor's bytes, contiguous, little-endian as in memory: run_ort.js's input format (its dtype
// named by dtype_name: float32, float64, int64, int32, uint8, bool).
inline void write_raw(const Tensor& t, const std::string& path) {
  Tensor c = t.detach().to(kCPU).contiguous();
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

// One input of a run_ort.js job: x written to `file`, and its JSON entry {"name", "file", "dtype", "dims"}.
inline std::string ort_input(const std::string& name, const Tensor& x, const std::string& file) {
  write_raw(x, file);
  std::string json =
      "{\"name\":\"" + name + "\",\"file\":\"" + file + "\",\"dtype\":\"" + dtype_name(x.dtype()) + "\",\"dims\":[";
  for (int64_t d = 0; d < x.dim(); ++d) json += (d ? "," : "") + std::to_string(x.sizes()[d]);
  return json + "]}";
}

}  // namespace nabla::testing

// Skips the test (fails it under NABLA_REQUIRE_ORT=1) without ONNX Runtime or python3-onnx.
#define NABLA_NEEDS_ORT()                                                                                        \
  do {                                                                                                           \
    if (!::nabla::testing::have_ort() || !::nabla::testing::have_onnx_checker()) {                               \
      std::string why = !::nabla::testing::have_ort()                                                            \
                            ? "node or onnxruntime-node (" + ::nabla::testing::ort_dir() +                       \
                                  ") is missing; scripts/test.sh installs it with npm install "                  \
                                  "--ignore-scripts onnxruntime-node"                                            \
                            : std::string("/usr/bin/python3 cannot import onnx (apt-get install python3-onnx)"); \
      if (::nabla::testing::ort_required()) FAIL() << "NABLA_REQUIRE_ORT=1 but " << why;                         \
      GTEST_SKIP() << why;                                                                                       \
    }                                                                                                            \
  } while (0)
