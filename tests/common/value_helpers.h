// Helpers shared by the value tests: read a tensor back as float64, compare against expected
// values or a float64 reference, and check that a call throws a given error with given words.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "nabla.h"

namespace nabla::testing {

// The tensor's values in row-major order, as doubles (any dtype, any layout).
inline std::vector<double> values(const Tensor& t) {
  autograd::NoGradGuard ng;
  Tensor c = t.detach().to(kCPU).to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

inline std::vector<int64_t> int_values(const Tensor& t) {
  autograd::NoGradGuard ng;
  Tensor c = t.detach().to(kCPU).to(kInt64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

inline std::vector<int64_t> shape_of(const Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end());
}

// |got - want| <= atol + rtol * |want| elementwise; NaN matches NaN, infinities must match exactly.
inline ::testing::AssertionResult values_near(const std::vector<double>& got, const std::vector<double>& want,
                                              double atol, double rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "got " << got.size() << " values, want " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok)
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", want " << w << " (diff " << std::fabs(g - w) << ")";
  }
  return ::testing::AssertionSuccess();
}

// Shape and values of `t`.
inline ::testing::AssertionResult tensor_is(const Tensor& t, const std::vector<int64_t>& shape,
                                            const std::vector<double>& want, double atol = 1e-6, double rtol = 1e-6) {
  if (!t.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  if (shape_of(t) != shape) {
    auto f = ::testing::AssertionFailure() << "shape " << t.sizes() << ", want " << IntArrayRef(shape);
    return f;
  }
  return values_near(values(t), want, atol, rtol);
}

// Same shape and values as `ref` (typically a float64 reference).
inline ::testing::AssertionResult tensor_near(const Tensor& t, const Tensor& ref, double atol = 1e-6,
                                              double rtol = 1e-6) {
  return tensor_is(t, shape_of(ref), values(ref), atol, rtol);
}

// A float64 tensor of `shape` filled from `v` (row-major).
inline Tensor f64(std::vector<double> v, std::vector<int64_t> shape) { return tensor(v, IntArrayRef(shape)); }

// Runs f, expects it to throw E, and checks that the message contains every fragment.
template <class E, class F>
::testing::AssertionResult throws_with(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
  } catch (const E& e) {
    std::string msg = e.what();
    for (const std::string& frag : fragments)
      if (msg.find(frag) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << frag << "\": " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a different exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Deterministic pseudo-random doubles in [lo, hi) (a small LCG: tests must not depend on nabla's RNG).
inline std::vector<double> lcg_values(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) * 0x1.0p-53;
  }
  return v;
}
inline Tensor lcg_tensor(std::vector<int64_t> shape, uint64_t seed, DType dt = kFloat64, double lo = -1,
                         double hi = 1) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return f64(lcg_values(static_cast<size_t>(n), seed, lo, hi), shape).to(dt);
}

// Parameters and inputs from a formula, as the libtorch reference programs behind the attention and
// Transformer value tests set them: t.flatten()[n] = 0.5 * sin(0.37 n + c(name)), with
// c(name) = 0.1 * (sum of the name's chars % 97).
inline double name_const(const std::string& s) {
  int sum = 0;
  for (char ch : s) sum += static_cast<unsigned char>(ch);
  return 0.1 * (sum % 97);
}
inline Tensor filled(std::vector<int64_t> shape, const std::string& name) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.5 * std::sin(0.37 * double(i) + name_const(name));
  return tensor(v, IntArrayRef(shape), dtype(kFloat64));
}
// Converts m to float64 and fills every parameter with filled(its shape, its dotted name).
inline void fill_params(nn::Module& m) {
  autograd::NoGradGuard ng;
  m.to(kFloat64);
  for (auto& [name, p] : m.named_parameters()) {
    std::vector<int64_t> shape(p.sizes().begin(), p.sizes().end());
    p.copy_(filled(shape, name));
  }
}

}  // namespace nabla::testing
