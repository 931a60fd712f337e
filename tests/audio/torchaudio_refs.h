// torchaudio's values written as .npy files by a reference script (tests/audio/*_reference.py),
// read back and compared with nabla's, each comparison printed with its figure.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "nabla.h"
#include "tests/data/data_util.h"

namespace nabla_test {

class TorchaudioRefs {
 public:
  explicit TorchaudioRefs(const TempDir& dir) : dir_(dir) {}
  // Runs `script` (relative to tests/) with the directory as its argument; false (and a test
  // failure) if it fails.
  bool run(const std::string& script) const {
    const std::string cmd =
        "/usr/bin/python3 " + std::string(NABLA_TESTS_DIR) + "/" + script + " " + dir_.str() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << cmd;
    return rc == 0;
  }
  nabla::Tensor operator[](const std::string& name) const { return nabla::load_npy(dir_ / (name + ".npy")); }
  // Compares got with torchaudio's `name` (same shape, max |diff| <= tol) and prints the figure.
  // relative: got is already nabla / torchaudio - 1, compared with 0. Complex tensors are compared
  // as their view_as_real, which is how the scripts save them.
  void expect(const std::string& name, const nabla::Tensor& got, double tol, bool relative = false) const {
    compare(name, got, tol, relative ? "|nabla / torchaudio - 1|" : "|nabla - torchaudio|", relative, false);
  }
  // max |nabla - torchaudio| / max |torchaudio| <= tol: for values of large or varied magnitude.
  void expect_scaled(const std::string& name, const nabla::Tensor& got, double tol) const {
    compare(name, got, tol, "|diff| / max |torchaudio|", false, true);
  }

 private:
  void compare(const std::string& name, nabla::Tensor got, double tol, const char* what, bool relative,
               bool scaled) const {
    got = got.detach();
    if (got.is_complex()) got = nabla::view_as_real(got);
    const nabla::Tensor want = relative ? nabla::zeros_like(got) : (*this)[name];
    ASSERT_EQ(got.sizes(), want.sizes()) << name;
    const nabla::Tensor w = want.to(nabla::kFloat64);
    double diff = (got.to(nabla::kFloat64) - w).abs().max().item<double>();
    if (scaled) diff /= std::max(w.abs().max().item<double>(), 1e-300);
    std::printf("  %-44s max %s = %.3g\n", name.c_str(), what, diff);
    EXPECT_LE(diff, tol) << name;
  }
  const TempDir& dir_;
};

}  // namespace nabla_test
