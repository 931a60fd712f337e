// Library handles (cuBLAS, cuDNN) pooled per (device, stream), internal to cuda/.
//
// A handle is bound to one stream when created and only ever used with it, so its workspace and
// its work stay ordered with the stream's other kernels. Threads take a handle from the pool for
// the duration of a call (Lease), so concurrent callers never share one. Handles live as long as
// the process: destroying them during exit, after the driver has unloaded, would fail.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace nabla::cuda {

template <class H>
class HandlePool {
 public:
  using Create = H (*)(int device, cudaStream_t stream);

  explicit HandlePool(Create create) : create_(create) {}

  H acquire(int device, cudaStream_t stream) {
    {
      std::lock_guard lock(mu_);
      auto& v = free_[{device, stream}];
      if (!v.empty()) {
        H h = v.back();
        v.pop_back();
        return h;
      }
    }
    return create_(device, stream);
  }
  void release(int device, cudaStream_t stream, H h) {
    std::lock_guard lock(mu_);
    free_[{device, stream}].push_back(h);
  }

 private:
  Create create_;
  std::mutex mu_;
  std::map<std::pair<int, cudaStream_t>, std::vector<H>> free_;
};

template <class H>
class Lease {
 public:
  Lease(HandlePool<H>& pool, int device, cudaStream_t stream)
      : pool_(pool), device_(device), stream_(stream), h_(pool.acquire(device, stream)) {}
  ~Lease() { pool_.release(device_, stream_, h_); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  H get() const { return h_; }

 private:
  HandlePool<H>& pool_;
  int device_;
  cudaStream_t stream_;
  H h_;
};

}  // namespace nabla::cuda
