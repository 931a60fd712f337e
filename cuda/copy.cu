// Copies between the host and CUDA devices (any layout, any dtype), casts, and fill.
//
// Device-side work (strided gathers, dtype conversion, broadcasting) runs in the generic kernel;
// host<->device transfers move contiguous bytes with cudaMemcpyAsync on the current stream of the
// CUDA side. Synchronization (what "the result is never read early" means here):
//   - host -> device from pageable memory: cudaMemcpyAsync returns once the source has been staged,
//     so the source may change right after; from pinned memory the copy is asynchronous: unless
//     non_blocking, the stream is synchronized before returning. A pinned source block is not
//     reused by the allocator before the copy has completed.
//   - device -> host: unless non_blocking (and the destination is pinned and contiguous), the
//     stream is synchronized, so the host sees the values on return. A non_blocking copy into
//     pinned memory must be waited for (Stream::synchronize, an Event, cuda::synchronize()).
//   - device -> device on one device: ordered on the current stream like any kernel.
//   - between two devices: synchronous (waits for both devices' streams).
#include <cstring>

#include "core/impl.h"
#include "cuda/allocator.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {

template <class D, class S>
struct ConvertFn {
  __device__ void operator()(char** p) const { store<D>(p[0], convert<D>(load<S>(p[1]))); }
};

// Same-dtype copies move bytes: one kernel per element size.
template <class W>
struct MoveFn {
  __device__ void operator()(char** p) const { store<W>(p[0], load<W>(p[1])); }
};

template <class T>
struct FillFn {
  T value;
  __device__ void operator()(char** p) const { store<T>(p[0], value); }
};

// A view of `t` where broadcast (stride-0) dims have size 1: the data a broadcast view really holds.
Tensor compact(const Tensor& t) {
  Shape sizes = t.sizes();
  bool any = false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && sizes[d] > 1) {
      sizes[d] = 1;
      any = true;
    }
  return any ? internal::make_view(t, sizes, t.strides(), t.storage_offset()) : t;
}

// `c` (shaped like compact(t)) viewed with t's sizes: broadcast dims get stride 0 again.
Tensor expand_like(const Tensor& c, const Tensor& t) {
  if (c.sizes() == t.sizes()) return c;
  Shape strides = c.strides();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (c.sizes()[d] != t.sizes()[d]) strides[d] = 0;
  return internal::make_view(c, t.sizes(), strides, c.storage_offset());
}

Tensor empty_on(IntArrayRef shape, DType dt, Device dev) { return internal::make_empty(shape, dt, dev); }

// A contiguous host tensor with t's values (t itself when it already is one).
Tensor host_contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = empty_on(t.sizes(), t.dtype(), kCPU);
  backend_for(kCPU).copy(t, c, false);
  return c;
}

void host_to_device(const Tensor& src, const Tensor& dst, bool non_blocking) {
  DeviceScope ds(dst);
  cudaStream_t stream = stream_of(dst);
  Tensor s = compact(src);
  Tensor h = host_contiguous(s);
  bool direct = dst.is_contiguous() && h.sizes() == dst.sizes() && h.dtype() == dst.dtype();
  Tensor d = direct ? dst : empty_on(h.sizes(), h.dtype(), dst.device());
  NABLA_CUDA_CHECK(cudaMemcpyAsync(d.data_ptr(), h.data_ptr(), h.nbytes(), cudaMemcpyHostToDevice, stream));
  // Only a pinned source can be left to the copy engine: a pageable one (maybe a temporary that
  // goes back to the CPU cache on return) is waited for, as PyTorch does.
  if (h.is_pinned()) pinned_record_use(h, stream);
  if (!non_blocking || !h.is_pinned()) {
    NABLA_CUDA_CHECK(cudaStreamSynchronize(stream));
    report_deferred_checks(device_of(dst), stream);
  }
  if (!direct) device_copy(expand_like(d, src), dst);
}

void device_to_host(const Tensor& src, const Tensor& dst, bool non_blocking) {
  DeviceScope ds(src);
  cudaStream_t stream = stream_of(src);
  // Gather and convert on the device, then move contiguous bytes.
  Tensor s = compact(src);
  Tensor d = s.is_contiguous() && s.dtype() == dst.dtype() ? s : contiguous(s, dst.dtype());
  bool direct = dst.is_contiguous() && s.sizes() == dst.sizes();
  Tensor h = direct ? dst : empty_on(d.sizes(), d.dtype(), kCPU);
  NABLA_CUDA_CHECK(cudaMemcpyAsync(h.data_ptr(), d.data_ptr(), d.nbytes(), cudaMemcpyDeviceToHost, stream));
  if (direct && non_blocking && dst.is_pinned()) {
    pinned_record_use(dst, stream);
    // `d` may be a temporary: its block returns to this stream's cache, and later work on this
    // stream runs after the copy, so it is safe to let it go now.
    return;
  }
  NABLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  report_deferred_checks(device_of(src), stream);
  if (!direct) backend_for(kCPU).copy(expand_like(h, src), dst, false);
}

void device_to_device_peer(const Tensor& src, const Tensor& dst) {
  int sd = device_of(src), dd = device_of(dst);
  Tensor s;
  {
    DeviceScope ds(sd);
    s = contiguous(compact(src), dst.dtype());
  }
  DeviceScope ds(dd);
  cudaStream_t dstream = stream_of(dst);
  bool direct = dst.is_contiguous() && s.sizes() == dst.sizes();
  Tensor d = direct ? dst : empty_on(s.sizes(), s.dtype(), dst.device());
  // Wait for the work that produced `s` and for the destination's earlier readers and writers.
  {
    DeviceScope ss(sd);
    NABLA_CUDA_CHECK(cudaStreamSynchronize(stream_for(sd)));
  }
  NABLA_CUDA_CHECK(cudaStreamSynchronize(dstream));
  NABLA_CUDA_CHECK(cudaMemcpyPeerAsync(d.data_ptr(), dd, s.data_ptr(), sd, s.nbytes(), dstream));
  NABLA_CUDA_CHECK(cudaStreamSynchronize(dstream));
  if (!direct) device_copy(expand_like(d, src), dst);
}

}  // namespace

void device_copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  DeviceScope ds(dst);
  cudaStream_t stream = stream_of(dst);
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    if (src.data_ptr() == dst.data_ptr()) return;
    NABLA_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  IterPlan plan = plan_iter({&dst, &src});
  if (src.dtype() == dst.dtype()) {
    switch (dst.element_size()) {
      case 1: return launch_elementwise<2>(plan, stream, MoveFn<uint8_t>{});
      case 2: return launch_elementwise<2>(plan, stream, MoveFn<uint16_t>{});
      case 4: return launch_elementwise<2>(plan, stream, MoveFn<uint32_t>{});
      case 8: return launch_elementwise<2>(plan, stream, MoveFn<uint64_t>{});
    }
  }
  visit_cuda_dtype(dst.dtype(), [&](auto dt) {
    using D = typename decltype(dt)::type;
    visit_cuda_dtype(src.dtype(), [&](auto st) {
      using S = typename decltype(st)::type;
      if constexpr (!std::is_same_v<D, S>) launch_elementwise<2>(plan, stream, ConvertFn<D, S>{});
    });
  });
}

Tensor contiguous(const Tensor& x, DType dtype) {
  if (x.is_contiguous() && x.dtype() == dtype) return x;
  Tensor c = empty_on(x.sizes(), dtype, x.device());
  device_copy(x, c);
  return c;
}

void copy(const Tensor& src, const Tensor& dst, bool non_blocking) {
  NABLA_CHECK(ShapeError, src.sizes() == dst.sizes(), "copy: source shape ", src.sizes(),
              " differs from destination shape ", dst.sizes());
  if (dst.numel() == 0) return;
  if (src.is_cuda() && dst.is_cuda()) {
    if (device_of(src) == device_of(dst)) return device_copy(src, dst);
    return device_to_device_peer(src, dst);
  }
  if (src.is_cpu() && dst.is_cuda()) return host_to_device(src, dst, non_blocking);
  if (src.is_cuda() && dst.is_cpu()) return device_to_host(src, dst, non_blocking);
  backend_for(kCPU).copy(src, dst, false);
}

void fill(const Tensor& dst, Scalar value) {
  if (dst.numel() == 0) return;
  DeviceScope ds(dst);
  cudaStream_t stream = stream_of(dst);
  visit_cuda_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (is_half_v<T>) v = T(static_cast<float>(value.to_double()));
    else if constexpr (std::is_floating_point_v<T>) v = static_cast<T>(value.to_double());
    else v = value.to<T>();
    if (dst.is_contiguous()) {
      // All-zero bytes (and one-byte values) are a memset.
      unsigned char bytes[sizeof(T)];
      std::memcpy(bytes, &v, sizeof(T));
      bool uniform = true;
      for (size_t i = 1; i < sizeof(T); ++i) uniform = uniform && bytes[i] == bytes[0];
      if (uniform) {
        NABLA_CUDA_CHECK(cudaMemsetAsync(dst.data_ptr(), bytes[0], dst.nbytes(), stream));
        return;
      }
    }
    IterPlan plan = plan_iter({&dst});
    launch_elementwise<1>(plan, stream, FillFn<T>{v});
  });
}

}  // namespace nabla::cuda
