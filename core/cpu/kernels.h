// CPU kernels. Every file in core/cpu/ except register.cpp is compiled twice: once for CPUs with
// AVX2/FMA (namespace nabla::cpu::avx2, built with -mavx2 -mfma) and once for any x86-64 or other
// CPU (namespace nabla::cpu::base). register.cpp picks one at start-up from what the CPU reports.
#pragma once

#include "core/backend.h"
#include "core/impl.h"
#include "core/ops.h"

#ifndef NABLA_CPU_ISA
#define NABLA_CPU_ISA base
#endif

namespace nabla::cpu::NABLA_CPU_ISA {

Backend* make_backend();

void copy(const Tensor& src, const Tensor& dst);

// Scratch memory for kernels running inside parallel_for chunks: every thread keeps one buffer per
// slot and grows it when a call needs more. Which thread runs which chunk varies from call to call,
// so pooled per-call allocations could find the pool one block short when both threads happen to
// need one at once; per-thread buffers reach their size in the first calls and then never
// allocate again, on any thread. 64-byte aligned; valid until the same thread asks for the slot
// again. A kernel that calls another (gemm inside conv) uses a different slot.
enum class Scratch { gemm_a, gemm_b, gemm_panel_b, conv_image, conv_col, conv_panel_a, conv_panel_b, conv_rows, count };
void* thread_scratch_bytes(Scratch slot, size_t bytes);
template <class T>
T* thread_scratch(Scratch slot, int64_t n) {
  return static_cast<T*>(thread_scratch_bytes(slot, static_cast<size_t>(n) * sizeof(T)));
}

// x itself when contiguous, else a contiguous copy (no autograd): what kernels that want dense
// inputs call first.
inline Tensor contig(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor c = detail::make_empty(x.sizes(), x.dtype(), x.device());
  copy(x, c);
  return c;
}
void fill(const Tensor& dst, Scalar value);
void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out);
void arg_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices);
void scan(ScanOp op, const Tensor& x, int64_t dim, const Tensor& out);
void sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices);
void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& values, const Tensor& indices);
void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& out);
void softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log, const Tensor& out);

void index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate);
Tensor nonzero(const Tensor& x);

void random(RandomOp op, const Tensor& out, double p0, double p1, Generator& gen);
void random_int(const Tensor& out, int64_t low, int64_t high, Generator& gen);

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta);
// C (m x n, row stride ldc) = alpha * A @ B + beta * C, where A(i, p) = a[i*rsa + p*csa] and
// B(p, j) = b[p*rsb + j*csb]: any strides, so transposed operands need no copy.
void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rsa, int64_t csa,
           const float* b, int64_t rsb, int64_t csb, float beta, float* c, int64_t ldc);
void dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t rsa, int64_t csa,
           const double* b, int64_t rsb, int64_t csb, double beta, double* c, int64_t ldc);

void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& out);
void conv2d_input_grad(const Tensor& gy, const Tensor& w, const Conv2dParams& p, const Tensor& gx);
void conv2d_weight_grad(const Tensor& x, const Tensor& gy, const Conv2dParams& p, const Tensor& gw);
bool has_fused_batch_norm(const Tensor& x);
void batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, const Tensor& out,
                const Tensor& save_mean, const Tensor& save_invstd);
void batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, double eps, const Tensor& gx, const Tensor& gw, const Tensor& gb);
bool sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const Backend::SgdStep& s);
bool adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const Backend::AdamStep& a);
bool rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                  const Tensor& momentum_buffer, const Backend::RmspropStep& r);
bool adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& sum, const Backend::AdagradStep& a);
bool adadelta_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& acc_delta,
                   const Backend::AdadeltaStep& a);
void max_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& indices);
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx);
void avg_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out);
void avg_pool2d_backward(const Tensor& gy, const Pool2dParams& p, const Tensor& gx);

}  // namespace nabla::cpu::NABLA_CPU_ISA
