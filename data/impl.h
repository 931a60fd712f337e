// Small helpers shared by the data/ sources (not part of the public API).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "../core/error.h"
#include "../core/tensor.h"

namespace nabla::data::impl {

inline void check_index(const char* what, int64_t index, int64_t size) {
  check<IndexError>(index >= 0 && index < size, what, ": index ", index, " is out of range for ", size, " examples");
}

// An int64 tensor (n) that views `indices` without copying; valid while `indices` lives. Read only.
Tensor index_tensor(std::span<const int64_t> indices);

}  // namespace nabla::data::impl
