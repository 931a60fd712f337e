// NABLA_ASAN is defined when compiling under AddressSanitizer (g++ and clang spell it differently):
// code that interposes the allocator, and tests that measure memory or limit address space, need
// to know.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NABLA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NABLA_ASAN 1
#endif
#endif
