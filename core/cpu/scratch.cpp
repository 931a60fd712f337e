// Per-thread scratch buffers for kernels (see thread_scratch in kernels.h).
#include <array>
#include <cstdlib>

#include "core/cpu/kernels.h"
#include "core/error.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

struct ThreadScratch {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
  };
  std::array<Buffer, static_cast<size_t>(Scratch::count)> slots;
  ~ThreadScratch() {
    for (Buffer& b : slots) std::free(b.data);
  }
};

thread_local ThreadScratch tl_scratch;

}  // namespace

void* thread_scratch_bytes(Scratch slot, size_t bytes) {
  ThreadScratch::Buffer& b = tl_scratch.slots[static_cast<size_t>(slot)];
  if (bytes > b.size) {
    // Grow by at least half again, so a size creeping up call by call settles quickly.
    size_t want = std::max(bytes, b.size + b.size / 2);
    want = (want + 63) & ~size_t(63);
    void* p = std::aligned_alloc(64, want);
    if (!p) throw Error(internal::str("CPU kernels: out of memory allocating ", want, " bytes of scratch"));
    std::free(b.data);
    b.data = p;
    b.size = want;
  }
  return b.data;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
