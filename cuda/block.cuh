// Warp- and block-level building blocks for the CUDA kernels (reductions and scans), and atomics
// for every dtype. Internal to cuda/.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "../core/dtype.h"

namespace nabla::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// The 16-bit atomics below treat nabla's Half/BFloat16 as CUDA's own types: the same bits.
static_assert(sizeof(Half) == sizeof(__half) && alignof(Half) == alignof(__half));
static_assert(sizeof(BFloat16) == sizeof(__nv_bfloat16) && alignof(BFloat16) == alignof(__nv_bfloat16));

// Applies a warp shuffle to v. Values narrower than 4 bytes (bool, u8, Half, BFloat16) travel as
// their bits in an unsigned int: a value conversion would truncate a Half (1.75 -> 1).
template <class T, class Shfl>
__device__ __forceinline__ T shuffle_value(T v, Shfl shfl) {
  if constexpr (sizeof(T) < 4) {
    unsigned bits = 0;
    memcpy(&bits, &v, sizeof(T));
    bits = shfl(bits);
    T r;
    memcpy(&r, &bits, sizeof(T));
    return r;
  } else {
    return shfl(v);
  }
}

template <class T>
__device__ __forceinline__ T warp_shfl_down(T v, int delta) {
  return shuffle_value(v, [delta](auto x) { return __shfl_down_sync(kFullMask, x, delta); });
}

template <class T>
__device__ __forceinline__ T warp_shfl_up(T v, int delta) {
  return shuffle_value(v, [delta](auto x) { return __shfl_up_sync(kFullMask, x, delta); });
}

template <class T>
__device__ __forceinline__ T warp_shfl(T v, int lane) {
  return shuffle_value(v, [lane](auto x) { return __shfl_sync(kFullMask, x, lane); });
}

// Reduces v over the 32 lanes of a warp (every lane must call it); lane 0 gets the result.
// The combination order is fixed, so results are reproducible.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = op(v, warp_shfl_down(v, d));
  return v;
}

// Reduces v over a block of blockDim.x * blockDim.y threads along x (each row y separately) when
// `rows` is true, or over the whole block otherwise. `shared` holds 32 values per row; thread
// (0, y) gets the result. blockDim.x must be a multiple of 32: a narrower row would share a warp
// with the next row, and the full shuffle mask would name lanes that do not exist.
template <class T, class Op>
__device__ T block_reduce_x(T v, Op op, T identity, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int nwarps = (blockDim.x + 31) / 32;
  v = warp_reduce(v, op);
  if (nwarps == 1) return v;
  T* row = shared + threadIdx.y * 32;
  __syncthreads();  // `shared` may still be read by an earlier call
  if (lane == 0) row[warp] = v;
  __syncthreads();
  v = threadIdx.x < nwarps ? row[threadIdx.x] : identity;
  if (warp == 0) v = warp_reduce(v, op);
  return v;
}

// Inclusive prefix sum over a warp.
template <class T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    T u = warp_shfl_up(v, d);
    if (lane >= d) v += u;
  }
  return v;
}

// Inclusive prefix sum over a 1-D block (blockDim.x a multiple of 32, at most 1024); also returns
// the block total. `shared` holds 33 values.
template <class T>
__device__ T block_inclusive_scan(T v, T* shared, T* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_inclusive_scan(v);
  __syncthreads();
  if (lane == 31) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < nwarps ? shared[lane] : T(0);
    w = warp_inclusive_scan(w);
    if (lane < nwarps) shared[lane] = w;
    if (lane == nwarps - 1) shared[32] = w;
  }
  __syncthreads();
  if (warp > 0) v += shared[warp - 1];
  *total = shared[32];
  return v;
}

// ---- atomics ------------------------------------------------------------------------------------
// *addr = op(*addr) atomically for a 1- or 2-byte type, with compare-and-swap on the aligned
// 32-bit word that holds it.
template <class T, class Op>
__device__ void atomic_update_small(T* addr, Op op) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2);
  auto a = reinterpret_cast<uintptr_t>(addr);
  auto* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
  const unsigned shift = static_cast<unsigned>(a & 3) * 8;
  const unsigned mask = sizeof(T) == 1 ? 0xffu : 0xffffu;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    unsigned bits = (assumed >> shift) & mask;
    T cur;
    if constexpr (sizeof(T) == 1) {
      uint8_t b = static_cast<uint8_t>(bits);
      memcpy(&cur, &b, 1);
    } else {
      uint16_t b = static_cast<uint16_t>(bits);
      memcpy(&cur, &b, 2);
    }
    T nv = op(cur);
    unsigned nbits;
    if constexpr (sizeof(T) == 1) {
      uint8_t b;
      memcpy(&b, &nv, 1);
      nbits = b;
    } else {
      uint16_t b;
      memcpy(&b, &nv, 2);
      nbits = b;
    }
    unsigned replacement = (assumed & ~(mask << shift)) | (nbits << shift);
    old = atomicCAS(word, assumed, replacement);
  } while (assumed != old);
}

// *addr += v atomically (logical or for bool), for every dtype.
template <class T>
__device__ __forceinline__ void atomic_add(T* addr, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int>) {
    atomicAdd(addr, v);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(addr), static_cast<unsigned long long>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v) atomic_update_small(addr, [](bool) { return true; });
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    atomic_update_small(addr, [v](uint8_t c) { return static_cast<uint8_t>(c + v); });
  } else if constexpr (std::is_same_v<T, Half>) {  // the native 16-bit atomic (sm_70 on)
    __half_raw r;
    r.x = v.bits;
    atomicAdd(reinterpret_cast<__half*>(addr), __half(r));
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __nv_bfloat16_raw r;  // the native bfloat16 atomic (sm_80 on)
    r.x = v.bits;
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(addr), __nv_bfloat16(r));
#else  // add in float, round once
    atomic_update_small(addr, [v](T c) { return T(static_cast<float>(c) + static_cast<float>(v)); });
#endif
  }
}

}  // namespace nabla::cuda
