// Whether this test program is built with AddressSanitizer (scripts/test.sh's sanitizer build), for
// the few tests that do less there: its shadow memory and slow copies make some checks minutes long.
#pragma once

namespace nabla::testing {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif
}  // namespace nabla::testing
