// float32 exp, tanh and sigmoid for the CPU kernels' loops, written without branches or library
// calls so that the compiler vectorizes a contiguous loop over them (libm's expf/tanhf are one call
// per element: in an LSTM step tanh alone cost more than the matrix product).
//
// exp: Cephes' expf scheme. x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two parts so n ln2 is
// exact), exp(r) by a degree-7 polynomial, times 2^n applied as two factors 2^(n/2) so that
// results near FLT_MAX and the subnormal range come out right without special cases. tanh: an odd
// polynomial below |x| = 0.625 (where 1 - 2 / (exp(2|x|) + 1) would lose digits to cancellation),
// that formula above. Both are within a few ulp of the correctly rounded result (checked against
// float64 in test_cpu_kernels.cpp); inf, -inf and NaN behave as libm's.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nabla::cpu::vmath {

[[gnu::always_inline]] inline float exp_f32(float x) {
  const bool nan = x != x;
  // Beyond these bounds the result is 0 or inf anyway; clamping keeps n in int range (no UB).
  const float xc = std::min(std::max(nan ? 0.0f : x, -104.0f), 89.0f);
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest (2^23 + 2^22 trick)
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);  // in [-150, 128]
  const int32_t n1 = ni >> 1, n2 = ni - n1;    // each in [-75, 64]: normal powers of two
  const float s1 = std::bit_cast<float>((n1 + 127) << 23), s2 = std::bit_cast<float>((n2 + 127) << 23);
  const float y = p * s1 * s2;
  return nan ? x : y;
}

[[gnu::always_inline]] inline float tanh_f32(float x) {
  const float a = std::abs(x);
  // |x| < 0.625: |x| + |x|^3 P(x^2) (Cephes tanhf).
  const float z = a * a;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = a + a * z * p;
  // |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1) (exp overflows to inf for large |x|: 1).
  const float big = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
  return std::copysign(a < 0.625f ? small : big, x);  // x's sign, -0 and NaN included
}

[[gnu::always_inline]] inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

}  // namespace nabla::cpu::vmath
