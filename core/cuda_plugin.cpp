// Loading the CUDA backend where it is a plugin (see internal::load_cuda_backend in core/backend.h).
// The plugin's static initializer (cuda/backend.cpp) registers the backend, the device hooks and the
// fused optimizer steps, as it does when the backend is linked into a static libnabla.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "core/backend.h"
#include "core/cuda_api.h"
#include "core/cuda_env.h"

#ifdef NABLA_CUDA_STATIC
namespace nabla::cuda {
void register_cuda_backend();  // cuda/backend.cpp, part of a static libnabla built with CUDA
}
#endif

namespace nabla::internal {

namespace {

std::mutex g_mu;
bool g_tried = false;  // (a load is tried once; without the driver check it may be tried again)
std::string g_reason = "the CUDA backend has not been looked for yet";

bool registered() { return cuda::hooks() != nullptr; }

#ifdef NABLA_CUDA_PLUGIN_FILE
// NABLA_CUDA_PLUGIN, else the plugin next to the libnabla this code is in.
std::string plugin_path() {
  if (const char* e = std::getenv("NABLA_CUDA_PLUGIN"); e && *e) return e;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_cuda_backend), &info) && info.dli_fname)
    return (std::filesystem::path(info.dli_fname).parent_path() / NABLA_CUDA_PLUGIN_FILE).string();
  return NABLA_CUDA_PLUGIN_FILE;  // the loader's search path
}
#endif

}  // namespace

bool load_cuda_backend(bool skip_driver_check) {
  if (registered()) return true;
  if (cuda_disabled_by_env()) return false;
#ifdef NABLA_CUDA_STATIC
  // A static libnabla: the backend is linked in. Its registration is called, not left to a static
  // initializer, which a static link would drop (nothing else refers to that file).
  cuda::register_cuda_backend();
  return registered();
#else
  std::lock_guard lk(g_mu);
  if (registered()) return true;
  if (g_tried && !skip_driver_check) return false;
  g_tried = true;
#ifndef NABLA_CUDA_PLUGIN_FILE
  g_reason =
      "this build of nabla has no CUDA backend (configure with -DNABLA_CUDA=ON on a machine with the CUDA "
      "toolkit)";
  return false;
#else
  const std::string path = plugin_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    g_reason = "this build of nabla has no CUDA backend: its plugin " + path +
               " is missing (build the target nabla_cuda, or set NABLA_CUDA_PLUGIN to its path)";
    return false;
  }
  if (!skip_driver_check) {
    // The NVIDIA driver's library: without it no GPU can be used, and the plugin (with cuBLAS and
    // cuDNN behind it) is not worth loading. Kept loaded: the CUDA runtime opens it next.
    if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
      const char* why = dlerror();
      g_reason = std::string("no NVIDIA driver is installed (") + (why ? why : "libcuda.so.1 not found") + ")";
      return false;
    }
  }
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    const char* why = dlerror();
    g_reason = "the CUDA backend " + path + " could not be loaded: " + (why ? why : "unknown error") +
               " (the CUDA toolkit's and cuDNN's libraries must be on the library path, e.g. LD_LIBRARY_PATH)";
    return false;
  }
  if (!registered()) {
    g_reason = "the CUDA backend " + path + " was loaded but did not register itself";
    return false;
  }
  return true;
#endif
#endif  // NABLA_CUDA_STATIC
}

std::string cuda_backend_missing_reason() {
  if (registered()) return "";
  if (cuda_disabled_by_env()) return "NABLA_DISABLE_CUDA=1 is set";
  load_cuda_backend();
  std::lock_guard lk(g_mu);
  return g_reason;
}

}  // namespace nabla::internal
