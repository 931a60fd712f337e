// CUDA random kernels: uniform, normal, bernoulli and randint with the CPU's exact mapping from
// (seed, offset, element) to Philox counters (core/cpu/random.cpp), so that after manual_seed the
// CPU and the GPU draw the same numbers (normal values agree to the last bit or two of float64
// math: the GPU's log/sin/cos may differ from glibc's by an ulp).
//
// One thread computes one Philox block and writes the elements that block feeds: four float32
// elements, two float64 (or int64-range) elements.
#include <cmath>

#include "core/generator.h"
#include "core/impl.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace nabla::cuda {
namespace {

__device__ __forceinline__ double box_muller(double u1, double u2, int which) {
  double r = ::sqrt(-2.0 * ::log1p(-u1));
  double t = 6.283185307179586 * u2;
  return which ? r * ::sin(t) : r * ::cos(t);
}

template <class T>
__device__ __forceinline__ void put(T* out, int64_t i, double v) {
  if constexpr (is_half_v<T>) out[i] = T(static_cast<float>(v));
  else out[i] = static_cast<T>(v);
}

// The next 16-bit float below v (Half and BFloat16 are sign-magnitude: step the bits).
template <class T>
__device__ __forceinline__ T next_below(T v) {
  uint16_t b = v.bits;
  if ((b & 0x7fff) == 0) b = 0x8001;  // +-0 -> the smallest negative value
  else if (b & 0x8000) ++b;
  else --b;
  T r;
  r.bits = b;
  return r;
}

// T: the output type. Float64 outputs use two words per element; everything else one (float32 math,
// as the CPU's float32 kernel; float16/bfloat16 round its result).
template <class T>
__global__ void random_kernel(T* out, int64_t n, uint64_t key, uint64_t first, int op, double p0, double p1) {
  constexpr bool dbl = std::is_same_v<T, double>;
  constexpr int per_block = dbl ? 2 : 4;
  int64_t nblocks = (n + per_block - 1) / per_block;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < nblocks; b += int64_t(gridDim.x) * blockDim.x) {
    uint32_t w[4];
    Philox::block(key, first + static_cast<uint64_t>(b), w);
#pragma unroll
    for (int e = 0; e < per_block; ++e) {
      int64_t i = b * per_block + e;
      if (i >= n) break;
      if (op == static_cast<int>(RandomOp::normal)) {
        if constexpr (dbl) {
          double u1 = Philox::to_double(w[0], w[1]), u2 = Philox::to_double(w[2], w[3]);
          put(out, i, p0 + p1 * box_muller(u1, u2, e));
        } else {
          int pair = e / 2;
          double u1 = Philox::to_float(w[2 * pair]), u2 = Philox::to_float(w[2 * pair + 1]);
          put(out, i, static_cast<double>(static_cast<float>(p0 + p1 * box_muller(u1, u2, e % 2))));
        }
      } else {
        double u = dbl ? (e ? Philox::to_double(w[2], w[3]) : Philox::to_double(w[0], w[1])) : Philox::to_float(w[e]);
        if (op == static_cast<int>(RandomOp::uniform)) {
          if constexpr (dbl) {
            put(out, i, p0 + (p1 - p0) * u);
          } else {
            float v = static_cast<float>(p0 + (p1 - p0) * u);
            // Rounding can land on the excluded upper bound; keep [from, to).
            if (v >= static_cast<float>(p1) && p1 > p0) v = ::nextafterf(static_cast<float>(p1), -INFINITY);
            if constexpr (is_half_v<T>) {
              T t(v);  // rounding to 16 bits can land on it again
              if (static_cast<float>(t) >= static_cast<float>(p1) && p1 > p0) t = next_below(t);
              out[i] = t;
            } else {
              put(out, i, static_cast<double>(v));
            }
          }
        } else {  // bernoulli(p0)
          out[i] = static_cast<T>(static_cast<float>(u < p0));
        }
      }
    }
  }
}

template <class T>
__global__ void random_int_kernel(T* out, int64_t n, uint64_t key, uint64_t first, int64_t low, uint64_t range) {
  int64_t nblocks = (n + 1) / 2;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < nblocks; b += int64_t(gridDim.x) * blockDim.x) {
    uint32_t w[4];
    Philox::block(key, first + static_cast<uint64_t>(b), w);
    for (int e = 0; e < 2; ++e) {
      int64_t i = b * 2 + e;
      if (i >= n) break;
      uint64_t r = e ? (static_cast<uint64_t>(w[2]) << 32 | w[3]) : (static_cast<uint64_t>(w[0]) << 32 | w[1]);
      int64_t v = low + static_cast<int64_t>(r % range);
      if constexpr (is_half_v<T>) out[i] = T(static_cast<float>(v));
      else out[i] = static_cast<T>(v);
    }
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((n + 255) / 256, 1), 65536));
}

}  // namespace

void random(RandomOp op, const Tensor& out_in, double p0, double p1, Generator& gen) {
  int64_t n = out_in.numel();
  if (n == 0) return;
  DeviceScope ds(out_in);
  Tensor out = out_in.is_contiguous() ? out_in : internal::make_empty(out_in.sizes(), out_in.dtype(), out_in.device());
  DType dt = out.dtype();
  if (op != RandomOp::bernoulli)
    NABLA_CHECK(DTypeError, is_floating(dt), op == RandomOp::normal ? "normal_" : "uniform_",
                ": expected a floating dtype, got ", dt);
  int64_t per_block = dt == DType::f64 ? 2 : 4;
  auto [key, first] = gen.reserve(static_cast<uint64_t>((n + per_block - 1) / per_block));
  cudaStream_t stream = stream_of(out);
  visit_cuda_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<T><<<grid_for((n + per_block - 1) / per_block), 256, 0, stream>>>(
        static_cast<T*>(out.data_ptr()), n, key, first, static_cast<int>(op), p0, p1);
    NABLA_KERNEL_CHECK("random_kernel");
  });
  if (!out.is_same(out_in)) device_copy(out, out_in);
}

void random_int(const Tensor& out_in, int64_t low, int64_t high, Generator& gen) {
  int64_t n = out_in.numel();
  if (n == 0) return;
  DeviceScope ds(out_in);
  Tensor out = out_in.is_contiguous() ? out_in : internal::make_empty(out_in.sizes(), out_in.dtype(), out_in.device());
  auto [key, first] = gen.reserve(static_cast<uint64_t>((n + 1) / 2));
  uint64_t range = static_cast<uint64_t>(high - low);
  cudaStream_t stream = stream_of(out);
  visit_cuda_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_int_kernel<T>
        <<<grid_for((n + 1) / 2), 256, 0, stream>>>(static_cast<T*>(out.data_ptr()), n, key, first, low, range);
    NABLA_KERNEL_CHECK("random_int_kernel");
  });
  if (!out.is_same(out_in)) device_copy(out, out_in);
}

}  // namespace nabla::cuda
