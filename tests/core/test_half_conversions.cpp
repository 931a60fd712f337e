// float16 and bfloat16 conversions (core/dtype.h), exhaustively: every 16-bit pattern to float and
// back, and every one of the 2^32 float bit patterns to both, against references that share no code
// with nabla's: a formula in double for float16 -> float, the x86 F16C instruction (where the CPU
// has it) and a nearest-even rounding in double for float -> float16, and a nearest-even choice in
// double between the two bfloat16 neighbours for float -> bfloat16. (The device's conversions, the
// cvt instructions, are compared with these on a GPU in tests/cuda/test_half.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/sanitizer.h"
#include "nabla.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace nabla {
namespace {

// The 2^32 sweeps take every 257th pattern (257 is odd, so every low-bit pattern is met) unless
// NABLA_COMPLETE_SWEEPS=1 asks for all of them (tests/labels.cmake: they are labelled slow, and
// `NABLA_COMPLETE_SWEEPS=1 ctest -L slow` runs them in full: 80 s on 2 cores). Under
// AddressSanitizer always the sample.
uint64_t sweep_stride() {
#if defined(NABLA_ASAN)
  return 257;
#else
  const char* v = std::getenv("NABLA_COMPLETE_SWEEPS");
  return v && std::string(v) == "1" ? 1 : 257;
#endif
}
const uint64_t kStride = sweep_stride();

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// float16 -> double by its definition.
double half_value(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 31 && m == 0) return sign ? -HUGE_VAL : HUGE_VAL;
  double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  return sign ? -v : v;
}

// float -> float16, round to nearest even, in double (finite, non-NaN x).
uint16_t half_reference(float x) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(double(x));
  if (std::isinf(a) || a >= 65520.0) return sign | 0x7c00;  // 65504 + half an ulp rounds to inf
  if (a < std::ldexp(1.0, -14)) return sign | uint16_t(std::nearbyint(a * std::ldexp(1.0, 24)));  // may reach 0x400
  int e = std::ilogb(a);
  double r = std::nearbyint(std::ldexp(a, 10 - e));  // in [1024, 2048]
  if (r == 2048) {
    r = 1024;
    ++e;
  }
  if (e + 15 >= 31) return sign | 0x7c00;
  return sign | uint16_t(((e + 15) << 10) | (int(r) - 1024));
}

// float -> bfloat16: the nearer of the two bfloat16 values around x, the even one on a tie.
uint16_t bfloat16_reference(float x) {
  uint32_t b = bits_of(x);
  uint32_t lo = b & 0xffff0000u, hi = lo + 0x10000u;
  double lo_v = std::fabs(double(from_bits(lo)));
  double hi_v = (hi & 0x7fffffffu) == 0x7f800000u ? std::ldexp(1.0, 128) : std::fabs(double(from_bits(hi)));
  double a = std::fabs(double(x));
  double dl = a - lo_v, dh = hi_v - a;
  bool up = dh < dl || (dh == dl && ((lo >> 16) & 1u));
  return uint16_t((up ? hi : lo) >> 16);
}

bool is_half_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

TEST(HalfConversions, EveryFloat16ToFloatAndBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = Half::to_float(uint16_t(h));
    if (is_half_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(bits_of(f), ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)) << std::hex << h;
      ASSERT_EQ(Half::from_float(f), (h & 0x8000u) | 0x7e00u) << std::hex << h;  // PyTorch's NaN
      continue;
    }
    ASSERT_EQ(double(f), half_value(uint16_t(h))) << std::hex << h;
    ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;
    ASSERT_EQ(Half::from_float(f), h) << std::hex << h;
  }
}

TEST(HalfConversions, EveryBfloat16ToFloatAndBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    BFloat16 b;
    b.bits = uint16_t(h);
    float f = b;
    ASSERT_EQ(bits_of(f), h << 16) << std::hex << h;
    BFloat16 back(f);
    if (is_bf16_nan(uint16_t(h))) {
      ASSERT_TRUE(is_bf16_nan(back.bits) && (back.bits & 0x8000) == (h & 0x8000)) << std::hex << h;
    } else {
      ASSERT_EQ(back.bits, h) << std::hex << h;
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx,f16c"))) void f16c_convert(const float* in, uint16_t* out) {
  __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
}
bool have_f16c() {  // CPUID: OSXSAVE, AVX, F16C; XGETBV: the OS saves the YMM registers
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  if ((c & (7u << 27)) != (7u << 27)) return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u;
}
#else
void f16c_convert(const float*, uint16_t*) {}
bool have_f16c() { return false; }
#endif

// Every float bit pattern (2^32) to float16: equal to the F16C instruction where the CPU has it;
// every 4,099th against the double-precision rounding (which alone is too slow for all of them).
TEST(HalfConversions, EveryFloatToFloat16) {
  const bool f16c = have_f16c();
  uint64_t checked = 0;
  float in[8];
  uint16_t want[8];
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += 8 * kStride) {
    for (int i = 0; i < 8; ++i) in[i] = from_bits(uint32_t(base + uint64_t(i) * kStride));
    if (f16c) f16c_convert(in, want);
    for (int i = 0; i < 8; ++i) {
      float x = in[i];
      uint16_t got = Half::from_float(x);
      if (std::isnan(x)) {
        if (!is_half_nan(got) || (got & 0x8000) != (bits_of(x) >> 16 & 0x8000))
          FAIL() << "NaN " << std::hex << bits_of(x);
        continue;
      }
      if (f16c && got != want[i]) FAIL() << std::hex << bits_of(x) << ": nabla " << got << ", F16C " << want[i];
      if ((!f16c || (base >> 3) % 4099 == 0) && got != half_reference(x))
        FAIL() << std::hex << bits_of(x) << ": nabla " << got << ", reference " << half_reference(x);
      ++checked;
    }
  }
  EXPECT_GT(checked, (uint64_t(1) << 32) / kStride - (uint64_t(1) << 24) / kStride - 8);  // all but the NaNs
  if (!f16c) std::printf("[ half ] no F16C on this CPU: checked against the double-precision rounding only\n");
}

// Every float bit pattern (2^32) to bfloat16 against the nearest-even choice in double.
TEST(HalfConversions, EveryFloatToBfloat16) {
  for (uint64_t i = 0; i < (uint64_t(1) << 32); i += kStride) {
    float x = from_bits(uint32_t(i));
    uint16_t got = BFloat16(x).bits;
    if (std::isnan(x)) {
      if (!is_bf16_nan(got) || (got & 0x8000) != (uint32_t(i) >> 16 & 0x8000)) FAIL() << "NaN " << std::hex << i;
      continue;
    }
    if (got != bfloat16_reference(x))
      FAIL() << std::hex << i << ": nabla " << got << ", reference " << bfloat16_reference(x);
  }
}

}  // namespace
}  // namespace nabla
