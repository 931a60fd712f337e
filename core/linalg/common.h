// What the linear algebra families of core/linalg/ share (internal): shape helpers and argument
// checks, the host copies around LAPACK calls, the device solver's lookup and info codes, and the
// saved outputs of multi-output nodes. Each family's file (lu, cholesky, qr, svd, eigh, lstsq,
// norms, products) holds its device forward, host forward, backward and front-end.
//
// The forward of a decomposition runs LAPACK (core/linalg/lapack.h) on a host copy of each matrix of
// the batch, in LAPACK's column-major layout (a row-major (*, n, m) buffer is a column-major (*, m, n)
// matrix; where the transpose does not matter, as for inv(A^T) = inv(A)^T, the row-major copy is
// used as is). On a device with a registered solver (core/linalg/solver.h: CUDA's cuSOLVER, in
// cuda/solver.cpp) the same trick runs on a device copy instead; the per-matrix info codes are read
// back once per op, and raise the CPU's errors. Empty inputs stay on the host (nothing to compute).
// Each op records one autograd node whose backward is written with differentiable ops (matmul,
// solve, inv, ...), with PyTorch's formulas (FunctionsManual.cpp), so gradgradcheck passes.
//
// Threads: LAPACK runs on the calling thread and OpenBLAS's own threads, never inside nabla's
// parallel_for, and the copies around each call are made serially (serial_copy), so nabla's pool
// (whose workers spin for a while after each parallel op) does not take the cores OpenBLAS needs.
// OPENBLAS_NUM_THREADS limits OpenBLAS's threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "../autocast.h"
#include "../impl.h"
#include "../linalg.h"
#include "solver.h"

namespace nabla::linalg_internal {

using autograd::GradList;
using autograd::Node;
using autograd::save;
using autograd::save_output;

inline TensorOptions like(const Tensor& t) { return dtype(t.dtype()).device(t.device()); }

inline int64_t rows(const Tensor& A) { return A.sizes()[A.dim() - 2]; }
inline int64_t cols(const Tensor& A) { return A.sizes()[A.dim() - 1]; }
inline Shape batch_shape(const Tensor& A) { return Shape(A.sizes().begin(), A.sizes().end() - 2); }
// s with `tail` appended: with(batch_shape(A), {n, k}) is (*, n, k).
inline Shape with(Shape s, std::initializer_list<int64_t> tail) {
  for (int64_t v : tail) s.push_back(v);
  return s;
}
// A leading dimension for LAPACK (at least 1).
inline int ld(int64_t n) { return static_cast<int>(std::max<int64_t>(n, 1)); }

// Argument checks, with the op's name in the message: a float32/float64 tensor (any floating one with
// allow_16bit); batches of matrices whose dims fit LAPACK's int; of square matrices; B of A's dtype
// and device.
void check_float(const char* op, const Tensor& A, const char* name = "A", bool allow_16bit = false);
void check_matrix(const char* op, const Tensor& A, const char* name = "A");
void check_square(const char* op, const Tensor& A);
void check_pair(const char* op, const Tensor& A, const Tensor& B);

// "(Batch element 3): " for batched inputs.
std::string batch_prefix(const Tensor& A, int64_t b);

// A fresh contiguous host copy of t (any layout, detached), made on the calling thread.
Tensor serial_copy(const Tensor& t);
// A fresh host copy of A (detached) in row-major layout, which LAPACK reads as A^T: (*, m, n).
inline Tensor rowmajor_copy(const Tensor& A) { return serial_copy(A); }
// A fresh host copy in column-major layout: a contiguous (*, n, m) tensor (A^T row-major).
inline Tensor colmajor_copy(const Tensor& A) { return serial_copy(A.detach().mT()); }
// A host result back on `device`, contiguous.
Tensor on_device(const Tensor& t, Device device);
// Zeroes each (rows, cols) matrix of contiguous host t above (upper) or below the diagonal, serially.
void zero_triangle(Tensor& t, bool upper);

// f(T{}) with T the C++ type of float32/float64 dt.
template <class F>
void by_dtype(DType dt, F&& f) {
  if (dt == kFloat64) f(double{});
  else f(float{});
}

// An output of a multi-output node saved for its backward. SavedTensor reattaches a saved output to
// its node as output 0 (autograd/graph.cpp's unpack does not know which output it was), which is
// right for single-output nodes only; this restores the output's number so double backward sends
// gradients to the right output.
struct SavedOutput {
  autograd::SavedTensor saved;
  uint32_t nr;
  Tensor unpack(const Node& n) const {
    Tensor t = saved.unpack(n);
    t.impl()->output_nr = nr;
    return t;
  }
};
inline SavedOutput save_output_nr(const Tensor& t, uint32_t nr) { return {save_output(t), nr}; }

// Whether every element of g is zero: an output whose gradient the engine filled with zeros.
bool all_zero(const Tensor& g);
inline Tensor eye_like(int64_t n, const Tensor& t) { return eye(n, std::nullopt, like(t)); }

// ---- device forwards: the layout trick of the host forwards, on a device solver ----------------
//
// Each takes fresh contiguous device copies (the solver overwrites them), queues the factorization,
// then reads the per-matrix info codes back once and raises the first failure as the host does.

// The solver registered for A's device type, or nullptr: LAPACK on the host, for devices without
// one and for empty inputs (nothing to compute). The CPU registers none (LAPACK is called directly);
// tests/cuda/test_solver.cpp registers LAPACK itself through the interface for CPU tensors, which
// runs the device forwards, layouts and info handling on any machine.
const linalg_device::Solver* device_solver(const Tensor& A);
// A fresh contiguous copy of t on its own device.
Tensor device_fresh(const Tensor& t);
inline Tensor int_buffer(const Shape& s, Device d) { return internal::make_empty(s, kInt32, d); }

// Reads the info codes (one synchronization) and calls raise(b, code) for the first failed matrix.
template <class F>
void check_infos(const char* op, const Tensor& info, F&& raise) {
  if (info.numel() == 0) return;
  Tensor h = info.to(kCPU).contiguous();
  const int* p = h.data_ptr<int>();
  for (int64_t b = 0; b < h.numel(); ++b) {
    NABLA_CHECK(ValueError, p[b] >= 0, op, ": internal error: the device solver rejected its argument ", -p[b]);
    if (p[b] > 0) raise(b, p[b]);
  }
}

// float16 / bfloat16 addmm (2-D) and baddbmm (3-D) as one GEMM call with its own backward
// (products.cpp); `op` names the caller in errors.
Tensor add_product_lowp(const char* op, const Tensor& input, const Tensor& a, const Tensor& b, double beta,
                        double alpha);

}  // namespace nabla::linalg_internal
