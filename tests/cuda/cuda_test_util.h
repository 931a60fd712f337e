// Helpers for the CUDA test suites (tests/test_cuda*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "nabla.h"

// Skips the current test, with the reason, unless a CUDA GPU can be used.
#define NABLA_REQUIRE_CUDA()                                                                   \
  do {                                                                                         \
    if (!::nabla::cuda::is_available())                                                        \
      GTEST_SKIP() << "no CUDA GPU available (" << ::nabla::cuda::unavailable_reason() << ")"; \
  } while (0)

namespace nabla::testing {

// a and b (on any devices) have the same shape and values within atol + rtol * |b|, NaN matching NaN.
inline ::testing::AssertionResult close_on_host(const Tensor& a, const Tensor& b, double tol) {
  if (!a.defined() || !b.defined())
    return ::testing::AssertionFailure() << (a.defined() ? "the second" : "the first") << " tensor is undefined";
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  if (a.numel() == 0) return ::testing::AssertionSuccess();
  autograd::NoGradGuard ng;
  Tensor x = a.detach().to(kCPU, kFloat64), y = b.detach().to(kCPU, kFloat64);
  if (!is_floating(a.dtype()) || !is_floating(b.dtype())) {
    if (equal(x, y)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "values differ:\n" << x << "\nvs\n" << y;
  }
  if (allclose(x, y, tol, tol, /*equal_nan=*/true)) return ::testing::AssertionSuccess();
  Tensor diff = (x - y).abs();
  return ::testing::AssertionFailure() << "max abs difference " << diff.max().item<double>() << " > tol " << tol << "\n"
                                       << x << "\nvs\n"
                                       << y;
}

}  // namespace nabla::testing
