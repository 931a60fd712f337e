// NABLA_DISABLE_CUDA=1 in the environment makes nabla act as if no GPU were present. Read once, at
// the first CUDA query: no op reads the environment (getenv would race with a setenv in another
// thread), and changing the variable later in the process has no effect.
#pragma once

#include <cstdlib>
#include <cstring>

namespace nabla::internal {

inline bool cuda_disabled_by_env() {
  static const bool disabled = [] {
    const char* e = std::getenv("NABLA_DISABLE_CUDA");
    return e && std::strcmp(e, "1") == 0;
  }();
  return disabled;
}

}  // namespace nabla::internal
