// Why the CUDA runtime found no usable GPU, in words a user can act on (cuda::unavailable_reason(),
// printed by `mnist train --device cuda`). Plain C++, tested on every machine
// (tests/cuda/test_plan.cpp); cuda/device.cpp passes in what the runtime reported.
#pragma once

#include <string>

#include "../core/error.h"

namespace nabla::cuda {

// CUDA versions as the runtime reports them (1000 * major + 10 * minor): "13.0".
inline std::string cuda_version_string(int v) { return internal::str(v / 1000, ".", (v % 1000) / 10); }

// cudaGetDeviceCount failed with `error_name` / `error_string`; `driver_version` is what
// cudaDriverGetVersion reported (0 when no driver is installed: the runtime then also answers
// cudaErrorInsufficientDriver), `runtime_version` the runtime nabla's backend was built with. A
// driver too old for the runtime is said with both versions and what to do.
inline std::string device_count_failure(const std::string& error_name, const std::string& error_string,
                                        int driver_version, int runtime_version) {
  const std::string call = internal::str("cudaGetDeviceCount: ", error_string, " (", error_name, ")");
  if (error_name == "cudaErrorInsufficientDriver" && driver_version <= 0)
    return internal::str("no NVIDIA driver is installed (", call, ")");
  if (error_name == "cudaErrorInsufficientDriver") {
    return internal::str("the NVIDIA driver supports CUDA up to ", cuda_version_string(driver_version),
                         ", but nabla's CUDA backend was built with the CUDA ", cuda_version_string(runtime_version),
                         " runtime", runtime_version >= 13000 ? " (CUDA 13 needs driver 580 or newer)" : "",
                         ": update the driver, or build nabla with a CUDA toolkit the driver supports (12.x works) (",
                         call, ")");
  }
  if (error_name == "cudaErrorNoDevice") return "the CUDA driver reports no GPU";
  return call;
}

}  // namespace nabla::cuda
