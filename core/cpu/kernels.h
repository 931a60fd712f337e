// CPU kernels. Every file in core/cpu/ except register.cpp is compiled twice: once for CPUs with
// AVX2/FMA (namespace nabla::cpu::avx2, built with -mavx2 -mfma) and once for any x86-64 or other
// CPU (namespace nabla::cpu::base). register.cpp picks one at start-up from what the CPU reports.
#pragma once

#include "../backend.h"
#include "../impl.h"
#include "../ops.h"
#include "lowp.h"

#ifndef NABLA_CPU_ISA
#define NABLA_CPU_ISA base
#endif

namespace nabla::cpu::NABLA_CPU_ISA {

Backend* make_backend();

// Every kernel of core/backend.h's list, as a function of this ISA's build (copy, unary, conv2d, ...).
#define NABLA_DECLARE_KERNEL(name, ret, params, missing) ret name params;
NABLA_KERNELS(NABLA_DECLARE_KERNEL)
#undef NABLA_DECLARE_KERNEL
inline void copy(const Tensor& src, const Tensor& dst) { copy(src, dst, false); }

// Scratch memory for kernels running inside parallel_for chunks: every thread keeps one buffer per
// slot and grows it when a call needs more. Which thread runs which chunk varies from call to call,
// so pooled per-call allocations could find the pool one block short when both threads happen to
// need one at once; per-thread buffers reach their size in the first calls and then never
// allocate again, on any thread. 64-byte aligned; valid until the same thread asks for the slot
// again. A kernel that calls another (gemm inside conv) uses a different slot.
enum class Scratch {
  gemm_a,
  gemm_b,
  gemm_panel_b,
  conv_image,
  conv_col,
  conv_panel_a,
  conv_panel_b,
  conv_rows,
  lowp_a,
  lowp_b,
  lowp_c,
  lowp_t,     // the low-precision GEMM (gemm_lowp.cpp)
  attention,  // fused attention's tiles (attention.cpp)
  count
};
void* thread_scratch_bytes(Scratch slot, size_t bytes);
template <class T>
T* thread_scratch(Scratch slot, int64_t n) {
  return static_cast<T*>(thread_scratch_bytes(slot, static_cast<size_t>(n) * sizeof(T)));
}

// x itself when contiguous, else a contiguous copy (no autograd): what kernels that want dense
// inputs call first.
inline Tensor contig(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor c = internal::make_empty(x.sizes(), x.dtype(), x.device());
  copy(x, c);
  return c;
}
// Convolutions over any number of spatial dims (1-3) by unfolding and GEMM (core/cpu/conv_nd.cpp);
// conv, conv_input_grad and conv_weight_grad send what their 2-D kernels do not take here.
void conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p, const Tensor& out);
void conv_nd_input_grad(const Tensor& grad_out, const Tensor& w, const ConvParams& p, const Tensor& grad_in);
void conv_nd_weight_grad(const Tensor& x, const Tensor& grad_out, const ConvParams& p, const Tensor& grad_weight);

// C (m x n, row stride ldc) = alpha * A @ B + beta * C, where A(i, p) = a[i*rsa + p*csa] and
// B(p, j) = b[p*rsb + j*csb]: any strides, so transposed operands need no copy.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rsa, int64_t csa, const float* b,
           int64_t rsb, int64_t csb, float beta, float* c, int64_t ldc);
void dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t rsa, int64_t csa, const double* b,
           int64_t rsb, int64_t csb, double beta, double* c, int64_t ldc);
// sgemm or dgemm by element type.
template <class T>
void gemm_t(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb,
            int64_t csb, T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) sgemm(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
  else dgemm(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}

// The kernels that take float16/bfloat16 through their float32 form (reductions, sorts, softmax,
// pooling, index_add): a float32 copy of each 16-bit input, the float32 kernel into a float32
// result, rounded once into the 16-bit output.
inline Tensor as_f32(const Tensor& t) {
  if (!t.defined() || !lowp::is_lowp(t.dtype())) return t;
  Tensor c = internal::make_empty(t.sizes(), DType::f32, t.device());
  copy(t, c);
  return c;
}
// A float32 tensor to receive what `out` (16-bit) will hold; other outputs are used as they are.
inline Tensor f32_out(const Tensor& out) {
  return lowp::is_lowp(out.dtype()) ? internal::make_empty(out.sizes(), DType::f32, out.device()) : out;
}
inline void store_out(const Tensor& o32, const Tensor& out) {
  if (!o32.is_same(out)) copy(o32, out);
}

// f(type_tag<float>) or f(type_tag<double>): the dtypes the convolution and pooling kernels take.
template <class F>
void visit_float(DType dt, const char* op, F&& f) {
  if (dt == DType::f32) return f(type_tag<float>{});
  if (dt == DType::f64) return f(type_tag<double>{});
  throw DTypeError(internal::str(op, ": expected float32 or float64 on the CPU, got ", dt));
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
