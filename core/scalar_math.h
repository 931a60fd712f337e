// Per-element math shared by the CPU and CUDA kernels. Kernels open `namespace nabla::scalar`
// so the formulas in core/elementwise_ops.h resolve exp(x), erf(x), ... to std's overloads for
// every element type. The functions defined here give PyTorch's semantics where std's differ or do
// not exist (relu, sign of NaN, integer pow and floor division, NaN-propagating min/max, ...); the
// formulas call them qualified, `scalar::relu(x)`, so that a reader sees which is which. (A trailing
// underscore is reserved for Tensor's in-place methods, `relu_()`.)
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dtype.h"

namespace nabla::scalar {

using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::cos;
using std::cosh;
using std::erf;
using std::erfc;
using std::exp;
using std::exp2;
using std::expm1;
using std::hypot;
using std::log;
using std::log10;
using std::log1p;
using std::log2;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;

template <class T>
NABLA_HOST_DEVICE inline T abs(T x) {
  if constexpr (std::is_unsigned_v<T> || std::is_same_v<T, bool>) return x;
  else return x < T(0) ? -x : x;
}
template <class T>
NABLA_HOST_DEVICE inline T sign(T x) {
  if constexpr (std::is_same_v<T, bool>) return x;
  else if constexpr (std::is_floating_point_v<T>) return T((T(0) < x) - (x < T(0)));  // sign(NaN) = 0, as PyTorch
  else return T((T(0) < x) - (x < T(0)));
}
template <class T>
NABLA_HOST_DEVICE inline T floor(T x) {
  if constexpr (std::is_integral_v<T>) return x;
  else return std::floor(x);
}
template <class T>
NABLA_HOST_DEVICE inline T ceil(T x) {
  if constexpr (std::is_integral_v<T>) return x;
  else return std::ceil(x);
}
template <class T>
NABLA_HOST_DEVICE inline T round(T x) {  // half to even, as PyTorch
  if constexpr (std::is_integral_v<T>) return x;
  else return std::nearbyint(x);
}
template <class T>
NABLA_HOST_DEVICE inline T trunc(T x) {
  if constexpr (std::is_integral_v<T>) return x;
  else return std::trunc(x);
}
template <class T>
NABLA_HOST_DEVICE inline T max(T a, T b) {  // NaN-propagating, as torch.maximum
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <class T>
NABLA_HOST_DEVICE inline T min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}
template <class T>
NABLA_HOST_DEVICE inline T relu(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x ? x : (x > T(0) ? x : T(0));
  else return x > T(0) ? x : T(0);
}
template <class T>
NABLA_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
// log(1 + exp(x)) without overflow
template <class T>
NABLA_HOST_DEVICE inline T softplus(T x) {
  return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-(x < T(0) ? -x : x)));
}
template <class T>
NABLA_HOST_DEVICE inline T pow(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      if (b < T(0)) return a == T(1) ? T(1) : (a == T(-1) ? (b % 2 ? T(-1) : T(1)) : T(0));
      // Multiply in the unsigned type of the same width: overflow wraps as in PyTorch instead of
      // being undefined behaviour.
      using U = std::make_unsigned_t<decltype(a * a)>;
      U r = 1, base = static_cast<U>(a);
      while (b) {
        if (b & 1) r = static_cast<U>(r * base);
        base = static_cast<U>(base * base);
        b = static_cast<T>(b >> 1);
      }
      return static_cast<T>(r);
    }
  } else {
    return std::pow(a, b);
  }
}
// Python-style modulo: the result has the sign of the divisor.
template <class T>
NABLA_HOST_DEVICE inline T remainder(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
  } else if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);  // INT_MIN % -1 is undefined in C++
    }
    T r = static_cast<T>(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
  }
}
// floor(a / b) as Python and PyTorch compute it: from fmod, so that a == b * (a // b) + a % b holds
// where floor(a / b) would round the quotient first (1.0 // 0.1 is 9, not 10), inf // 1 is NaN and
// -1 // inf is -1.
template <class T>
NABLA_HOST_DEVICE inline T floor_divide(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == T(0)) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    T q = std::floor(div);
    return div - q > T(0.5) ? q + T(1) : q;
  } else if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {  // INT_MIN / -1 overflows: wrap as PyTorch does
      using U = std::make_unsigned_t<decltype(a / b)>;
      if (b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));
    }
    T q = static_cast<T>(a / b);
    return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
  }
}
// C's remainder of the truncated division, as torch.fmod: the sign of the dividend (an integer
// division by zero is refused by the front-end; here it gives 0).
template <class T>
NABLA_HOST_DEVICE inline T fmod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);  // INT_MIN % -1 is undefined in C++
    }
    return static_cast<T>(a % b);
  }
}
// a * log(b), 0 where a is 0 (unless b is NaN), as torch.xlogy.
template <class T>
NABLA_HOST_DEVICE inline T xlogy(T a, T b) {
  if (b != b) return b;
  if (a == T(0)) return T(0);
  return a * std::log(b);
}
// log(exp(a) + exp(b)) without overflow, as torch.logaddexp (equal infinities give themselves).
template <class T>
NABLA_HOST_DEVICE inline T logaddexp(T a, T b) {
  if (a != a || b != b) return a + b;                    // NaN
  if (a == b && !(a - a == T(0))) return a;              // equal infinities (inf - inf is NaN)
  const T m = a > b ? a : b, d = a > b ? b - a : a - b;  // d = -|a - b|
  return m + std::log1p(std::exp(d));
}
// The inverse of erf: a rational first guess (M. Giles, "Approximating the erfinv function") and
// two Newton steps on erf(y) = x in double precision; +-inf at +-1, NaN outside [-1, 1].
template <class T>
NABLA_HOST_DEVICE inline T erfinv(T xt) {
#if defined(__CUDA_ARCH__)
  return static_cast<T>(::erfinv(static_cast<double>(xt)));
#else
  const double x = static_cast<double>(xt);
  if (!(x >= -1 && x <= 1)) return static_cast<T>(std::numeric_limits<double>::quiet_NaN());
  if (x == 1 || x == -1) return static_cast<T>(x * std::numeric_limits<double>::infinity());
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * x;
  for (int i = 0; i < 2; ++i) y -= (std::erf(y) - x) / (1.1283791670955126 * std::exp(-y * y));
  return static_cast<T>(y);
#endif
}
template <class T>
NABLA_HOST_DEVICE inline bool isnan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}
template <class T>
NABLA_HOST_DEVICE inline bool isinf(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x == std::numeric_limits<T>::infinity() || x == -std::numeric_limits<T>::infinity();
  else return false;
}
template <class T>
NABLA_HOST_DEVICE inline bool isfinite(T x) {
  if constexpr (std::is_floating_point_v<T>) return x - x == x - x;
  else return true;
}
// min(max(x, lo), hi) as PyTorch: with lo > hi every element becomes hi. NaN stays NaN.
template <class T>
NABLA_HOST_DEVICE inline T clamp(T x, T lo, T hi) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) return x;
  }
  T y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

// log|Gamma(x)|, as torch.lgamma (+inf at 0 and the negative integers). On the host std::lgamma
// (glibc's, which also writes the global signgam that nothing here reads), on the device CUDA's.
template <class T>
NABLA_HOST_DEVICE inline T lgamma(T x) {
#ifdef __CUDA_ARCH__
  return ::lgamma(x);
#else
  return std::lgamma(x);
#endif
}
// digamma and trigamma compute in the element type with PyTorch's algorithms and constants (ATen's
// Math.h: float32 in float, as its kernels), so their results are PyTorch's to the rounding.
// digamma: reflection for x < 0, the recurrence up to x >= 10, then the asymptotic series.
// digamma(+-0) is -+inf (copysign(inf, -x)), NaN at the negative integers, as PyTorch.
template <class T>
NABLA_HOST_DEVICE inline T digamma_nonnegative(T x) {
  T result = 0;
  while (x < T(10)) {
    result -= T(1) / x;
    x += T(1);
  }
  if (x == T(10)) return result + T(2.25175258906672110764);
  const T A[] = {T(8.33333333333333333333E-2),  T(-2.10927960927960927961E-2), T(7.57575757575757575758E-3),
                 T(-4.16666666666666666667E-3), T(3.96825396825396825397E-3),  T(-8.33333333333333333333E-3),
                 T(8.33333333333333333333E-2)};
  T y = 0;
  if (x < T(1.0e17)) {
    const T z = T(1) / (x * x);
    T p = A[0];
    for (int i = 1; i < 7; ++i) p = p * z + A[i];
    y = z * p;
  }
  return result + std::log(x) - (T(0.5) / x) - y;
}
template <class T>
NABLA_HOST_DEVICE inline T digamma(T x) {
  const double pi = 3.14159265358979323846;
  if (x == T(0)) return T(1) / x > T(0) ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  if (x < T(0)) {
    if (x == std::trunc(x)) return std::numeric_limits<T>::quiet_NaN();
    const double r = static_cast<double>(x) - std::trunc(static_cast<double>(x));  // modf's fractional part
    return digamma_nonnegative<T>(T(1) - x) - static_cast<T>(pi / std::tan(pi * r));
  }
  return digamma_nonnegative<T>(x);
}
// polygamma(1, x): reflection for x < 1/2, six steps of the recurrence, the asymptotic series.
template <class T>
NABLA_HOST_DEVICE inline T trigamma(T x) {
  const T pi = T(3.14159265358979323846);
  T sign = 1, result = 0;
  if (x < T(0.5)) {
    sign = -1;
    const T s = std::sin(pi * x);
    result -= (pi * pi) / (s * s);
    x = T(1) - x;
  }
  for (int i = 0; i < 6; ++i) {
    result += T(1) / (x * x);
    x += T(1);
  }
  const T ixx = T(1) / (x * x);
  result += (T(1) + T(1) / (T(2) * x) + ixx * (T(1) / T(6) - ixx * (T(1) / T(30) - ixx * (T(1) / T(42))))) / x;
  return sign * result;
}
// The Hurwitz zeta function sum_k (k + q)^-x (Cephes' zeta, as torch.special.zeta).
NABLA_HOST_DEVICE inline double zeta_f64(double x, double q) {
  const double machep = 1.11022302462515654042E-16;
  const double A[] = {12.0,
                      -720.0,
                      30240.0,
                      -1209600.0,
                      47900160.0,
                      -1.8924375803183791606e9,
                      7.47242496e10,
                      -2.950130727918164224e12,
                      1.1646782814350067249e14,
                      -4.5979787224074726105e15,
                      1.8152105401943546773e17,
                      -7.1661652561756670113e18};
  if (x == 1) return std::numeric_limits<double>::infinity();
  if (x < 1) return std::numeric_limits<double>::quiet_NaN();
  if (q <= 0) {
    if (q == std::floor(q)) return std::numeric_limits<double>::infinity();
    if (x != std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
  }
  double s = std::pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    i += 1;
    a += 1;
    b = std::pow(a, -x);
    s += b;
    if (-machep * s < b && b < machep * s) return s;
  }
  const double w = a;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  a = 1;
  double k = 0;
  for (int j = 0; j < 12; ++j) {
    a *= x + k;
    b /= w;
    double t = a * b / A[j];
    s = s + t;
    t = std::fabs(t / s);
    if (t < machep) return s;
    k += 1;
    a *= x + k;
    b /= w;
    k += 1;
  }
  return s;
}
// polygamma(n, x), the n-th derivative of digamma (n >= 0; the front-end checks n):
// (-1)^(n+1) n! zeta(n + 1, x) for n >= 2, zeta in double (as PyTorch's CPU kernel).
template <class T>
NABLA_HOST_DEVICE inline T polygamma(int n, T x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  double fact = 1;
  for (int i = 2; i <= n; ++i) fact *= i;
  return static_cast<T>(((n % 2) ? 1.0 : -1.0) * fact * zeta_f64(static_cast<double>(n + 1), static_cast<double>(x)));
}

// dtype conversion as every kernel does it, CPU and CUDA: floats to integers saturate and NaN becomes
// 0 (out-of-range conversions are undefined in C++); anything nonzero is true, compared in the
// source type (a double like 1e-50 is nonzero even though it rounds to 0.0f); 16-bit floats go
// through float.
template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
// Complex to real keeps the real part (PyTorch also warns that the imaginary part is discarded);
// real to complex has a zero imaginary part. Only the CPU kernels convert complex values.
template <class To, class From>
NABLA_HOST_DEVICE inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_std_complex_v<To> && is_std_complex_v<From>) {
    using P = typename To::value_type;
    return To(static_cast<P>(v.real()), static_cast<P>(v.imag()));
  } else if constexpr (is_std_complex_v<From>) {
    if constexpr (std::is_same_v<To, bool>) return v.real() != 0 || v.imag() != 0;
    else return convert<To>(v.real());
  } else if constexpr (is_std_complex_v<To>) {
    return To(convert<typename To::value_type>(v), 0);
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_16bit_float_v<From>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (is_16bit_float_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_16bit_float_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (!(v == v)) return To(0);
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

// A bound given as a double (clamp's min and max) in the element type, saturating for integers.
template <class T>
NABLA_HOST_DEVICE inline T saturate(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

}  // namespace nabla::scalar
