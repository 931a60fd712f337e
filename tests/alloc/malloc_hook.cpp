// Interposes the C allocation functions for the whole process (the library included): each call
// is forwarded to glibc's implementation and counted when counting is on for the calling thread.
#include "malloc_hook.h"

#include <cerrno>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
thread_local bool tl_counting = false;
thread_local int64_t tl_calls = 0;
inline void note() {
  if (tl_counting) ++tl_calls;
}
}  // namespace

namespace nabla::testing {
int64_t malloc_calls() { return tl_calls; }
void set_malloc_counting(bool on) { tl_counting = on; }
}  // namespace nabla::testing

extern "C" {
void* malloc(size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  note();
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  note();
  return __libc_realloc(p, n);
}
void* aligned_alloc(size_t align, size_t n) {
  note();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  note();
  void* p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}
