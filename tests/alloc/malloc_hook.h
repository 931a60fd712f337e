// Counts calls to the system allocator (malloc, calloc, realloc, aligned_alloc, posix_memalign and
// operator new, which goes through malloc) made by the current thread while a MallocCounter is
// alive. Linked only into nabla_alloc_tests, whose main program interposes these functions.
#pragma once

#include <cstdint>

namespace nabla::testing {

int64_t malloc_calls();  // calls counted so far on this thread
void set_malloc_counting(bool on);

class MallocCounter {
 public:
  MallocCounter() : start_(malloc_calls()) { set_malloc_counting(true); }
  ~MallocCounter() { set_malloc_counting(false); }
  int64_t count() const { return malloc_calls() - start_; }

 private:
  int64_t start_;
};

}  // namespace nabla::testing
