#include "core/determinism.h"

#include <atomic>

namespace nabla {
namespace {
std::atomic<bool> g_deterministic{false};
}  // namespace

void use_deterministic_algorithms(bool on) { g_deterministic.store(on, std::memory_order_relaxed); }
bool are_deterministic_algorithms_enabled() { return g_deterministic.load(std::memory_order_relaxed); }

}  // namespace nabla
