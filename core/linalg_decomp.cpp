// torch.linalg's decompositions, solvers, determinants and norms (core/linalg.h), and trace, diag,
// cross, tensordot, baddbmm.
//
// The forward of a decomposition runs LAPACK (core/lapack.h) on a host copy of each matrix of the
// batch, in LAPACK's column-major layout (a row-major (*, n, m) buffer is a column-major (*, m, n)
// matrix; where the transpose does not matter, as for inv(A^T) = inv(A)^T, the row-major copy is
// used as is). On a device with a registered solver (core/linalg_device.h: CUDA's cuSOLVER, in
// cuda/solver.cpp) the same trick runs on a device copy instead: inv, solve, det, slogdet (getrf,
// getrs), cholesky (potrf), qr (geqrf, orgqr), eigh, eigvalsh (syevd or batched syevj), svd,
// svdvals (gesvdj or batched gesvdj), and what is built on them (matrix_norm's "nuc" and 2-norms);
// the per-matrix info codes are read back once per op, and raise the CPU's errors. lstsq still
// copies CUDA inputs to the host and back (LAPACK's gelsd/gels), as do empty inputs.
// Each op records one autograd node whose backward is written with differentiable ops (matmul,
// solve, inv, ...), with PyTorch's formulas (FunctionsManual.cpp), so gradgradcheck passes.
//
// Threads: LAPACK runs on the calling thread and OpenBLAS's own threads, never inside nabla's
// parallel_for, and the copies around each call are made serially (copy_serial), so nabla's pool
// (whose workers spin for a while after each parallel op) does not take the cores OpenBLAS needs.
// OPENBLAS_NUM_THREADS limits OpenBLAS's threads.
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/impl.h"
#include "core/lapack.h"
#include "core/linalg.h"
#include "core/linalg_device.h"

#ifdef NABLA_CUDA_STATIC
namespace nabla::cuda {
void register_cuda_solver();  // cuda/solver.cpp, part of a static libnabla built with CUDA
}
#endif

namespace nabla {

namespace linalg_device {
namespace {
std::atomic<const Solver*> g_solvers[kNumDeviceTypes];
}
void register_solver(DeviceType type, const Solver* solver) { g_solvers[static_cast<int>(type)].store(solver); }
const Solver* solver_for(DeviceType type) {
#ifdef NABLA_CUDA_STATIC
  // A static libnabla: the solver is linked in, its static initializer is not (see core/cuda_plugin.cpp).
  if (type == DeviceType::cuda) cuda::register_cuda_solver();
#endif
  return g_solvers[static_cast<int>(type)].load();
}
}  // namespace linalg_device

using autograd::GradList;
using autograd::Node;
using autograd::save;
using autograd::save_output;

namespace {

TensorOptions like(const Tensor& t) { return dtype(t.dtype()).device(t.device()); }

int64_t rows(const Tensor& A) { return A.sizes()[A.dim() - 2]; }
int64_t cols(const Tensor& A) { return A.sizes()[A.dim() - 1]; }
Shape batch_shape(const Tensor& A) { return Shape(A.sizes().begin(), A.sizes().end() - 2); }
Shape with(Shape s, std::initializer_list<int64_t> tail) {
  for (int64_t v : tail) s.push_back(v);
  return s;
}

void check_float(const char* op, const Tensor& A, const char* name = "A") {
  check<ValueError>(A.defined(), op, ": ", name, " is undefined");
  check<DTypeError>(A.dtype() == kFloat32 || A.dtype() == kFloat64, op, ": expected ", name,
                    " to be a float32 or float64 tensor, got ", detail::describe(A));
}
void check_matrix(const char* op, const Tensor& A, const char* name = "A") {
  check_float(op, A, name);
  check<ShapeError>(A.dim() >= 2, op, ": ", name, " must have at least 2 dimensions, got ", detail::describe(A));
  check<ShapeError>(rows(A) <= INT_MAX && cols(A) <= INT_MAX, op, ": matrices of ", detail::describe(A),
                    " are too large for LAPACK");
}
void check_square(const char* op, const Tensor& A) {
  check_matrix(op, A);
  check<ShapeError>(rows(A) == cols(A), op, ": A must be batches of square matrices, got ", detail::describe(A));
}
void check_pair(const char* op, const Tensor& A, const Tensor& B) {
  check_float(op, B, "B");
  check<DTypeError>(A.dtype() == B.dtype(), op, ": A and B must have the same dtype, got ", detail::describe(A),
                    " and ", detail::describe(B));
  detail::check_same_device(op, {&A, &B});
}

// "(Batch element 3): " for batched inputs.
std::string batch_prefix(const Tensor& A, int64_t b) {
  return A.dim() > 2 ? detail::str("(Batch element ", b, "): ") : std::string();
}

// A contiguous copy of a host tensor made on the calling thread. The copies around the LAPACK calls
// stay off nabla's thread pool on purpose: its workers spin for up to a millisecond after each
// parallel op, and on a machine with as many cores as OpenBLAS threads they would take the cores
// of the LAPACK call that follows (measured: inv of 256 x 256 float32 took 3x libtorch's time with
// pooled copies). Blocked over the last two dims so transposed reads stay in cache.
template <class T>
void copy_serial(const Tensor& src, T* dst) {
  const int64_t nd = src.dim();
  const T* s = static_cast<const T*>(src.data_ptr());
  if (nd == 0) {
    *dst = *s;
    return;
  }
  const int64_t R = nd >= 2 ? src.sizes()[nd - 2] : 1, C = src.sizes()[nd - 1];
  const int64_t sr = nd >= 2 ? src.strides()[nd - 2] : 0, sc = src.strides()[nd - 1];
  const int64_t outer = R * C == 0 ? 0 : src.numel() / (R * C);
  const int64_t lead = std::max<int64_t>(nd - 2, 0);
  std::vector<int64_t> idx(lead, 0);
  constexpr int64_t B = 32;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off = 0;
    for (int64_t d = 0; d < lead; ++d) off += idx[d] * src.strides()[d];
    const T* sp = s + off;
    T* dp = dst + o * R * C;
    if (sc == 1) {
      for (int64_t r = 0; r < R; ++r) std::memcpy(dp + r * C, sp + r * sr, sizeof(T) * C);
    } else {
      for (int64_t rb = 0; rb < R; rb += B)
        for (int64_t cb = 0; cb < C; cb += B)
          for (int64_t r = rb; r < std::min(R, rb + B); ++r)
            for (int64_t c = cb; c < std::min(C, cb + B); ++c) dp[r * C + c] = sp[r * sr + c * sc];
    }
    for (int64_t d = lead - 1; d >= 0; --d) {
      if (++idx[d] < src.sizes()[d]) break;
      idx[d] = 0;
    }
  }
}

// A fresh contiguous host copy of t (any layout), made on the calling thread.
Tensor serial_copy(const Tensor& t) {
  Tensor h = t.detach().to(kCPU);
  Tensor out = detail::make_empty(h.sizes(), h.dtype(), kCPU);
  if (h.numel() == 0) return out;
  switch (h.dtype()) {
    case DType::f64: copy_serial(h, out.data_ptr<double>()); break;
    case DType::f32: copy_serial(h, out.data_ptr<float>()); break;
    case DType::i64: copy_serial(h, out.data_ptr<int64_t>()); break;
    default: return h.clone();
  }
  return out;
}

// A fresh host copy of A (detached) in row-major layout, which LAPACK reads as A^T: (*, m, n).
Tensor rowmajor_copy(const Tensor& A) { return serial_copy(A); }
// A fresh host copy in column-major layout: a contiguous (*, n, m) tensor (A^T row-major).
Tensor colmajor_copy(const Tensor& A) { return serial_copy(A.detach().mT()); }
// A host result back on `device`, contiguous.
Tensor on_device(const Tensor& t, Device device) {
  Tensor c = t.is_contiguous() ? t : serial_copy(t);
  return device.is_cpu() ? c : c.to(device);
}

// Zeroes each (rows, cols) matrix of contiguous t above (upper) or below the diagonal, serially.
template <class T>
void zero_triangle(Tensor& t, bool upper) {
  const int64_t R = rows(t), C = cols(t);
  const int64_t n = R * C == 0 ? 0 : t.numel() / (R * C);
  T* p = t.data_ptr<T>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t r = 0; r < R; ++r) {
      T* row = p + (b * R + r) * C;
      if (upper) {
        for (int64_t c = r + 1; c < C; ++c) row[c] = 0;
      } else {
        for (int64_t c = 0; c < std::min(r, C); ++c) row[c] = 0;
      }
    }
}

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
SavedOutput save_output_nr(const Tensor& t, uint32_t nr) { return {save_output(t), nr}; }

int ld(int64_t n) { return static_cast<int>(std::max<int64_t>(n, 1)); }

// Whether every element of g is zero: an output whose gradient the engine filled with zeros.
bool all_zero(const Tensor& g) {
  autograd::NoGradGuard ng;
  return g.numel() == 0 || !any(ne(g, 0)).item<bool>();
}

Tensor eye_like(int64_t n, const Tensor& t) { return eye(n, std::nullopt, like(t)); }

// ---- errors of the forwards (the same from LAPACK on the host and from a device solver) -----------

[[noreturn]] void raise_inv_singular(const Tensor& A, int64_t b, int info) {
  throw ValueError(detail::str("linalg.inv: ", batch_prefix(A, b), "The diagonal element ", info,
                               " is zero, the inversion could not be completed because the input matrix is singular (A: ",
                               detail::describe(A), ")"));
}
[[noreturn]] void raise_solve_singular(const Tensor& A, int64_t b, int) {
  throw ValueError(detail::str("linalg.solve: ", batch_prefix(A, b),
                               "The solver failed because the input matrix is singular (A: ", detail::describe(A), ")"));
}
[[noreturn]] void raise_not_positive_definite(const Tensor& A, int64_t b, int info) {
  throw ValueError(detail::str("linalg.cholesky: ", batch_prefix(A, b),
                               "The factorization could not be completed because the input is not positive-definite (the "
                               "leading minor of order ",
                               info, " is not positive-definite; A: ", detail::describe(A), ")"));
}
[[noreturn]] void raise_svd_failed(const Tensor& A, int64_t b, int info) {
  throw ValueError(detail::str("linalg.svd: ", batch_prefix(A, b),
                               "The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                               "many repeated singular values (error code: ",
                               info, "; A: ", detail::describe(A), ")"));
}
[[noreturn]] void raise_eigh_failed(const Tensor& A, int64_t b, int info) {
  throw ValueError(detail::str("linalg.eigh: ", batch_prefix(A, b),
                               "The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                               "many repeated eigenvalues (error code: ",
                               info, "; A: ", detail::describe(A), ")"));
}

// ---- device forwards: the layout trick of the host forwards below, on a device solver ---------------
//
// Each takes fresh contiguous device copies (the solver overwrites them), queues the factorization,
// then reads the per-matrix info codes back once and raises the first failure as the host does.

// The solver registered for A's device type, or nullptr: LAPACK on the host, for devices without
// one and for empty inputs (nothing to compute). The CPU registers none (LAPACK is called directly
// below); tests/test_cuda_solver.cpp registers LAPACK itself through the interface for CPU tensors,
// which runs these device forwards, layouts and info handling on any machine.
const linalg_device::Solver* device_solver(const Tensor& A) {
  if (A.numel() == 0) return nullptr;
  return linalg_device::solver_for(A.device().type);
}

// A fresh contiguous copy of t on its own device.
Tensor device_fresh(const Tensor& t) {
  Tensor c = detail::make_empty(t.sizes(), t.dtype(), t.device());
  if (c.numel() > 0) c.copy_(t.detach());
  return c;
}
Tensor int_buffer(const Shape& s, Device d) { return detail::make_empty(s, kInt32, d); }

// Reads the info codes (one synchronization) and calls raise(b, code) for the first failed matrix.
template <class F>
void check_infos(const char* op, const Tensor& info, F&& raise) {
  if (info.numel() == 0) return;
  Tensor h = info.to(kCPU).contiguous();
  const int* p = h.data_ptr<int>();
  for (int64_t b = 0; b < h.numel(); ++b) {
    check<ValueError>(p[b] >= 0, op, ": internal error: the device solver rejected its argument ", -p[b]);
    if (p[b] > 0) raise(b, p[b]);
  }
}

// inv: as inv_forward, getrf + getrs on the identity, A's row-major copy read as A^T.
Tensor inv_device(const linalg_device::Solver& s, const Tensor& A) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A);
  Tensor y = device_fresh(eye_like(n, A).expand(A.sizes()));
  Tensor ipiv = int_buffer(with(bs, {n}), A.device()), info = int_buffer(bs, A.device());
  s.getrf(a, ipiv, info);
  s.getrs(false, a, ipiv, y);
  check_infos("linalg.inv", info, [&](int64_t b, int code) { raise_inv_singular(A, b, code); });
  return y;
}

// solve (same batch): A^T's LU from the row-major copy, B column-major, getrs 'T'.
Tensor solve_device(const linalg_device::Solver& s, const Tensor& A, const Tensor& B) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A), x = device_fresh(B.mT());  // x: (*, k, n), column-major B, overwritten by X
  Tensor ipiv = int_buffer(with(bs, {n}), A.device()), info = int_buffer(bs, A.device());
  s.getrf(a, ipiv, info);
  s.getrs(true, a, ipiv, x);
  check_infos("linalg.solve", info, [&](int64_t b, int code) { raise_solve_singular(A, b, code); });
  return x.mT().contiguous();
}

// det, sign, log|det| from the LU of A^T (no error: a singular matrix has det 0): the product of U's
// diagonal, its sign flipped per row swap (ipiv[i] != i + 1), as lu_det on the host.
std::tuple<Tensor, Tensor, Tensor> lu_det_device(const linalg_device::Solver& s, const Tensor& A) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A);
  Tensor ipiv = int_buffer(with(bs, {n}), A.device()), info = int_buffer(bs, A.device());
  s.getrf(a, ipiv, info);
  autograd::NoGradGuard ng;
  Tensor u = a.diagonal(0, -2, -1);  // (*, n)
  Tensor swaps = ne(ipiv, arange(1, n + 1, 1, dtype(kInt32).device(A.device()))).sum({-1});
  Tensor perm_sign = (1 - 2 * remainder(swaps, 2)).to(A.dtype());
  Tensor det = perm_sign * prod(u, -1);
  Tensor sign = perm_sign * prod(nabla::sign(u), -1);
  Tensor logabs = where(eq(sign, 0), -std::numeric_limits<double>::infinity(), log(abs(u)).sum({-1}));
  return {det, sign, logabs};
}

// cholesky: potrf('U') on the row-major copy (A^T column-major) leaves L in its lower triangle.
Tensor cholesky_device(const linalg_device::Solver& s, const Tensor& A) {
  Tensor a = device_fresh(A);
  Tensor info = int_buffer(batch_shape(A), A.device());
  s.potrf(/*upper=*/true, a, info);
  check_infos("linalg.cholesky", info, [&](int64_t b, int code) { raise_not_positive_definite(A, b, code); });
  autograd::NoGradGuard ng;
  return a.tril();
}

// qr (m, n > 0): geqrf on the column-major copy; Q from orgqr on a zero-padded copy of its reflectors.
std::tuple<Tensor, Tensor> qr_device(const linalg_device::Solver& s, const Tensor& A, bool complete, bool compute_q) {
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const int64_t qcols = complete ? m : k, rrows = complete ? m : k;
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A.mT());  // (*, n, m)
  Tensor tau = detail::make_empty(with(bs, {k}), A.dtype(), A.device());
  s.geqrf(a, tau);
  autograd::NoGradGuard ng;
  Tensor Q;
  if (compute_q) {
    Tensor q = zeros(with(bs, {qcols, m}), like(A));  // column-major Q
    const int64_t c = std::min(n, qcols);
    q.narrow(-2, 0, c).copy_(a.narrow(-2, 0, c));
    s.orgqr(q, tau);
    Q = q.mT().contiguous();
  }
  Tensor R = a.mT().narrow(-2, 0, rrows).triu();
  return {Q, R};
}

// svd (m, n > 0): gesvdj on the column-major copy; V column-major read row-major is Vh.
std::tuple<Tensor, Tensor, Tensor> svd_device(const linalg_device::Solver& s, const Tensor& A, char jobz) {
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const bool full = jobz == 'A', vectors = jobz != 'N';
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A.mT());  // (*, n, m)
  Tensor sv = detail::make_empty(with(bs, {k}), A.dtype(), A.device());
  Tensor u = vectors ? detail::make_empty(with(bs, {full ? m : k, m}), A.dtype(), A.device()) : Tensor();
  Tensor v = vectors ? detail::make_empty(with(bs, {full ? n : k, n}), A.dtype(), A.device()) : Tensor();
  Tensor info = int_buffer(bs, A.device());
  s.gesvd(a, sv, u, v, info);
  check_infos("linalg.svd", info, [&](int64_t b, int code) { raise_svd_failed(A, b, code); });
  autograd::NoGradGuard ng;
  return {vectors ? u.mT().contiguous() : Tensor(), sv, v};
}

// eigh: syevd on the row-major copy (A^T column-major: its upper triangle is A's lower one).
std::tuple<Tensor, Tensor> eigh_device(const linalg_device::Solver& s, const Tensor& A, char uplo, bool vectors) {
  const int64_t n = cols(A);
  const Shape bs = batch_shape(A);
  Tensor a = device_fresh(A);
  Tensor w = detail::make_empty(with(bs, {n}), A.dtype(), A.device());
  Tensor info = int_buffer(bs, A.device());
  s.syevd(vectors, /*upper=*/uplo == 'L', a, w, info);
  check_infos("linalg.eigh", info, [&](int64_t b, int code) { raise_eigh_failed(A, b, code); });
  autograd::NoGradGuard ng;
  return {w, vectors ? a.mT().contiguous() : Tensor()};
}

// ---- forward kernels (no autograd) ----------------------------------------------------------------

// inv of each matrix: the row-major buffer holds A^T column-major; its LU solves A^T Y = I, and
// Y = inv(A^T) = inv(A)^T column-major is inv(A) row-major. (getrf + getrs on the identity, as
// PyTorch: OpenBLAS's blocked triangular solves beat getri's reference code.)
Tensor inv_forward(const Tensor& A) {
  if (const auto* s = device_solver(A)) return inv_device(*s, A);
  const int64_t n = cols(A);
  Tensor a = rowmajor_copy(A);
  const int64_t batch = shape_numel(batch_shape(A));
  Tensor y = detail::make_empty(A.sizes(), A.dtype(), kCPU);  // the identity, filled below (serially)
  if (y.numel() > 0) std::memset(y.data_ptr(), 0, y.nbytes());
  if (n > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T *p = a.data_ptr<T>(), *py = y.data_ptr<T>();
      std::vector<int> ipiv(n);
      int info = 0;
      for (int64_t b = 0; b < batch; ++b) {
        T* m = p + b * n * n;
        for (int64_t i = 0; i < n; ++i) py[b * n * n + i * n + i] = 1;
        lapack::getrf(n, n, m, ld(n), ipiv.data(), &info);
        if (info > 0) raise_inv_singular(A, b, info);
        lapack::getrs('N', n, n, m, ld(n), ipiv.data(), py + b * n * n, ld(n), &info);
      }
    });
  }
  return on_device(y, A.device());
}

// X with A X = B for same-batch A (*, n, n), B (*, n, k): the LU of the row-major buffer (A^T
// column-major, no transposing copy) solves A X = B as (A^T)^T X = B (getrs 'T').
Tensor solve_forward(const Tensor& A, const Tensor& B) {
  if (const auto* s = device_solver(A); s && B.numel() > 0) return solve_device(*s, A, B);
  const int64_t n = cols(A), k = cols(B);
  Tensor a = rowmajor_copy(A), x = colmajor_copy(B);  // x: (*, k, n), column-major B, overwritten by X
  const int64_t batch = shape_numel(batch_shape(A));
  if (n > 0 && k > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T *pa = a.data_ptr<T>(), *px = x.data_ptr<T>();
      std::vector<int> ipiv(n);
      int info = 0;
      for (int64_t b = 0; b < batch; ++b) {
        lapack::getrf(n, n, pa + b * n * n, ld(n), ipiv.data(), &info);
        if (info > 0) raise_solve_singular(A, b, info);
        lapack::getrs('T', n, k, pa + b * n * n, ld(n), ipiv.data(), px + b * n * k, ld(n), &info);
      }
    });
  }
  return on_device(x.mT(), A.device());
}

// LU of each matrix: (determinant sign times product of |U_ii|'s signs, log|det|) per matrix.
std::tuple<Tensor, Tensor, Tensor> lu_det(const Tensor& A) {
  if (const auto* s = device_solver(A)) return lu_det_device(*s, A);
  const int64_t n = cols(A);
  Tensor a = rowmajor_copy(A);  // det(A^T) = det(A)
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor det = empty(bs, dtype(A.dtype())), sign = empty(bs, dtype(A.dtype())), logabs = empty(bs, dtype(A.dtype()));
  by_dtype(A.dtype(), [&](auto z) {
    using T = decltype(z);
    T* p = a.data_ptr<T>();
    T *pd = det.data_ptr<T>(), *ps = sign.data_ptr<T>(), *pl = logabs.data_ptr<T>();
    std::vector<int> ipiv(std::max<int64_t>(n, 1));
    for (int64_t b = 0; b < batch; ++b) {
      T* m = p + b * n * n;
      int info = 0;
      if (n > 0) lapack::getrf(n, n, m, ld(n), ipiv.data(), &info);
      T d = 1, s = 1, l = 0;
      for (int64_t i = 0; i < n; ++i) {
        T u = m[i * n + i];
        d *= u;
        if (ipiv[i] != i + 1) {
          d = -d;
          s = -s;
        }
        s = u < 0 ? -s : (u == 0 ? 0 : s);
        l += std::log(std::abs(u));
      }
      pd[b] = d;
      ps[b] = s;
      pl[b] = s == 0 ? -std::numeric_limits<T>::infinity() : l;
    }
  });
  return {on_device(det, A.device()), on_device(sign, A.device()), on_device(logabs, A.device())};
}

// Lower Cholesky factor of A's lower triangle: potrf('U') on the row-major buffer (A^T column-major)
// reads A^T's upper triangle (A's lower) and leaves U with A^T = U^T U there, that is L = U^T row-major.
Tensor cholesky_forward(const Tensor& A) {
  if (const auto* s = device_solver(A)) return cholesky_device(*s, A);
  const int64_t n = cols(A);
  Tensor a = rowmajor_copy(A);
  const int64_t batch = shape_numel(batch_shape(A));
  if (n > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = a.data_ptr<T>();
      for (int64_t b = 0; b < batch; ++b) {
        int info = 0;
        lapack::potrf('U', n, p + b * n * n, ld(n), &info);
        if (info > 0) raise_not_positive_definite(A, b, info);
      }
    });
  }
  by_dtype(A.dtype(), [&](auto z) { zero_triangle<decltype(z)>(a, /*upper=*/true); });
  return on_device(a, A.device());
}

// Q (*, m, qcols) and R (*, rrows, n) of A (*, m, n).
std::tuple<Tensor, Tensor> qr_forward(const Tensor& A, bool complete, bool compute_q) {
  if (const auto* s = device_solver(A)) return qr_device(*s, A, complete, compute_q);
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const int64_t qcols = complete ? m : k, rrows = complete ? m : k;
  Tensor a = colmajor_copy(A);  // (*, n, m)
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor q;  // column-major Q
  if (compute_q) {
    q = detail::make_empty(with(bs, {qcols, m}), A.dtype(), kCPU);
    if (q.numel() > 0) std::memset(q.data_ptr(), 0, q.nbytes());
  }
  by_dtype(A.dtype(), [&](auto z) {
    using T = decltype(z);
    if (m == 0 || n == 0) {
      if (compute_q && qcols > 0) q.copy_(eye(m, std::nullopt, dtype(A.dtype())).narrow(0, 0, qcols));
      return;
    }
    T* p = a.data_ptr<T>();
    std::vector<T> tau(k);
    int info = 0;
    T wq{}, wq2{};
    lapack::geqrf(m, n, p, ld(m), tau.data(), &wq, -1, &info);
    if (compute_q) lapack::orgqr(m, qcols, k, q.data_ptr<T>(), ld(m), tau.data(), &wq2, -1, &info);
    std::vector<T> work(std::max<int64_t>({static_cast<int64_t>(wq), static_cast<int64_t>(wq2), n, m, 1}));
    const int lwork = static_cast<int>(work.size());
    for (int64_t b = 0; b < batch; ++b) {
      T* mat = p + b * m * n;
      lapack::geqrf(m, n, mat, ld(m), tau.data(), work.data(), lwork, &info);
      if (!compute_q) continue;
      T* qm = q.data_ptr<T>() + b * m * qcols;
      std::memcpy(qm, mat, sizeof(T) * m * std::min(n, qcols));
      lapack::orgqr(m, qcols, k, qm, ld(m), tau.data(), work.data(), lwork, &info);
    }
  });
  Tensor R = serial_copy(a.mT().narrow(-2, 0, rrows));
  by_dtype(A.dtype(), [&](auto z) { zero_triangle<decltype(z)>(R, /*upper=*/false); });
  return {compute_q ? on_device(q.mT(), A.device()) : Tensor(), on_device(R, A.device())};
}

// U (*, m, ucols), S (*, k), Vh (*, vrows, n); jobz 'A' (full), 'S' (reduced) or 'N' (S only).
std::tuple<Tensor, Tensor, Tensor> svd_forward(const Tensor& A, char jobz) {
  if (const auto* s = device_solver(A)) return svd_device(*s, A, jobz);
  const int64_t m = rows(A), n = cols(A), k = std::min(m, n);
  const bool full = jobz == 'A', vectors = jobz != 'N';
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor s = empty(with(bs, {k}), dtype(A.dtype()));
  Tensor u = vectors ? empty(with(bs, {ucols, m}), dtype(A.dtype())) : Tensor();  // column-major
  Tensor vt = vectors ? empty(with(bs, {n, vrows}), dtype(A.dtype())) : Tensor();
  if (k == 0) {
    if (vectors) {
      u = eye(m, std::nullopt, dtype(A.dtype())).narrow(1, 0, ucols).expand(with(bs, {m, ucols})).mT();
      vt = eye(n, std::nullopt, dtype(A.dtype())).narrow(0, 0, vrows).expand(with(bs, {vrows, n})).mT();
    }
  } else {
    Tensor a = colmajor_copy(A);
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      T* p = a.data_ptr<T>();
      T dummy[1];
      T* pu = vectors ? u.data_ptr<T>() : dummy;
      T* pv = vectors ? vt.data_ptr<T>() : dummy;
      const int ldu = vectors ? ld(m) : 1, ldvt = vectors ? ld(vrows) : 1;
      std::vector<int> iwork(8 * k);
      int info = 0;
      T wq{};
      lapack::gesdd(jobz, m, n, p, ld(m), s.data_ptr<T>(), pu, ldu, pv, ldvt, &wq, -1, iwork.data(), &info);
      std::vector<T> work(std::max<int64_t>(static_cast<int64_t>(wq), 1));
      for (int64_t b = 0; b < batch; ++b) {
        lapack::gesdd(jobz, m, n, p + b * m * n, ld(m), s.data_ptr<T>() + b * k, vectors ? pu + b * m * ucols : pu,
                      ldu, vectors ? pv + b * n * vrows : pv, ldvt, work.data(), static_cast<int>(work.size()),
                      iwork.data(), &info);
        if (info > 0) raise_svd_failed(A, b, info);
      }
    });
  }
  return {vectors ? on_device(u.mT(), A.device()) : Tensor(), on_device(s, A.device()),
          vectors ? on_device(vt.mT(), A.device()) : Tensor()};
}

// Eigenvalues (*, n) ascending and eigenvectors (*, n, n) as columns of symmetric A's `uplo` triangle.
std::tuple<Tensor, Tensor> eigh_forward(const Tensor& A, char uplo, bool vectors) {
  if (const auto* s = device_solver(A)) return eigh_device(*s, A, uplo, vectors);
  const int64_t n = cols(A);
  Shape bs = batch_shape(A);
  const int64_t batch = shape_numel(bs);
  Tensor a = rowmajor_copy(A);  // A^T column-major: its upper triangle is A's lower one
  Tensor w = empty(with(bs, {n}), dtype(A.dtype()));
  if (n > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      const char lapack_uplo = uplo == 'L' ? 'U' : 'L';
      const char jobz = vectors ? 'V' : 'N';
      T* p = a.data_ptr<T>();
      int info = 0, iwq = 0;
      T wq{};
      lapack::syevd(jobz, lapack_uplo, n, p, ld(n), w.data_ptr<T>(), &wq, -1, &iwq, -1, &info);
      std::vector<T> work(std::max<int64_t>(static_cast<int64_t>(wq), 1));
      std::vector<int> iwork(std::max(iwq, 1));
      for (int64_t b = 0; b < batch; ++b) {
        lapack::syevd(jobz, lapack_uplo, n, p + b * n * n, ld(n), w.data_ptr<T>() + b * n, work.data(),
                      static_cast<int>(work.size()), iwork.data(), static_cast<int>(iwork.size()), &info);
        if (info > 0) raise_eigh_failed(A, b, info);
      }
    });
  }
  // The column-major eigenvector matrix read row-major is its transpose.
  return {on_device(w, A.device()), vectors ? on_device(a.mT(), A.device()) : Tensor()};
}

// ---- backward formulas (differentiable) -----------------------------------------------------------

// gQ, gR -> gA for A = QR with A square or tall (R square, invertible).
Tensor qr_backward_tall(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  // gA = [gQ + Q copyutl(gR R^T - Q^T gQ)] R^{-T}
  Tensor M = (matmul(gR, R.mT()) - matmul(Q.mT(), gQ)).triu();
  M = M + M.triu(1).mT();
  Tensor gA = gQ + matmul(Q, M);
  return linalg::solve(R.mT(), gA, /*left=*/false);
}

Tensor qr_backward(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R, bool complete) {
  const int64_t m = rows(Q), n = cols(R);
  check<ValueError>(!(complete && m > n), "linalg.qr: The QR decomposition is not differentiable when mode='complete' "
                                          "and nrows > ncols.");
  if (m >= n) return qr_backward_tall(gQ, gR, Q, R);
  // Wide A = [X | Y] with X = Q U (U = R[:, :m]) and Y = Q V (V = R[:, m:] = Q^T Y): V's gradient
  // reaches Q through V = Q^T Y.
  Tensor U = R.narrow(-1, 0, m), V = R.narrow(-1, m, n - m);
  Tensor gU = gR.narrow(-1, 0, m), gV = gR.narrow(-1, m, n - m);
  Tensor Y = matmul(Q, V);
  Tensor gX = qr_backward_tall(gQ + matmul(Y, gV.mT()), gU, Q, U);
  return cat({gX, matmul(Q, gV)}, -1);
}

// PyTorch's svd_backward for real inputs with U (*, m, k), S (*, k), Vh (*, k, n).
Tensor svd_backward(const Tensor& gU_in, const Tensor& gS, const Tensor& gVh_in, const Tensor& U, const Tensor& S,
                    const Tensor& Vh) {
  const int64_t m = rows(U), n = cols(Vh), k = S.sizes().back();
  const bool has_gU = !all_zero(gU_in), has_gVh = !all_zero(gVh_in);
  if (!has_gU && !has_gVh) return m >= n ? matmul(U, gS.unsqueeze(-1) * Vh) : matmul(U * gS.unsqueeze(-2), Vh);
  const Tensor& gU = gU_in;
  const Tensor& gVh = gVh_in;
  auto skew = [](const Tensor& X) { return X - X.mT(); };
  Tensor S2 = S * S;
  Tensor E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_like(k, S);  // E_jk = S_k^2 - S_j^2, 1 on the diagonal
  Tensor gA;
  if (has_gU && has_gVh) {
    gA = (skew(matmul(U.mT(), gU)) * S.unsqueeze(-2) + S.unsqueeze(-1) * skew(matmul(Vh, gVh.mT()))) / E;
  } else if (has_gU) {
    gA = skew(matmul(U.mT(), gU)) * (S.unsqueeze(-2) / E);
  } else {
    gA = S.unsqueeze(-1) * (skew(matmul(Vh, gVh.mT())) / E);
  }
  gA = gA + gS.unsqueeze(-1) * eye_like(k, S);
  if (m > n && has_gU) {
    gA = matmul(U, gA);
    Tensor gUSinv = gU / S.unsqueeze(-2);
    gA = gA + gUSinv - matmul(U, matmul(U.mT(), gUSinv));
    return matmul(gA, Vh);
  }
  if (m < n && has_gVh) {
    gA = matmul(gA, Vh);
    Tensor SinvgVh = gVh / S.unsqueeze(-1);
    gA = gA + SinvgVh - matmul(matmul(SinvgVh, Vh.mT()), Vh);
    return matmul(U, gA);
  }
  return m >= n ? matmul(U, matmul(gA, Vh)) : matmul(matmul(U, gA), Vh);
}

// PyTorch's linalg_eig_backward for a symmetric input: gA = V (diag(gL) + skew(V^T gV)/2 / E) V^T.
Tensor eigh_backward(const Tensor& gL, const Tensor& gV, const Tensor& L, const Tensor& V) {
  const int64_t n = L.sizes().back();
  Tensor inner;
  if (all_zero(gV)) {
    inner = gL.unsqueeze(-1) * eye_like(n, L);
  } else {
    Tensor VhgV = matmul(V.mT(), gV);
    VhgV = (VhgV - VhgV.mT()) * 0.5;
    Tensor E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye_like(n, L);  // E_ij = L_j - L_i, 1 on the diagonal
    inner = VhgV / E + gL.unsqueeze(-1) * eye_like(n, L);
  }
  return matmul(V, matmul(inner, V.mT()));
}

// The pseudo-inverse of a full-rank A (*, m, n), differentiable.
Tensor pinv_full_rank(const Tensor& A) {
  if (rows(A) >= cols(A)) return linalg::solve(matmul(A.mT(), A), A.mT());  // (A^T A)^-1 A^T
  return linalg::solve(matmul(A, A.mT()), A).mT();                          // A^T (A A^T)^-1
}

// PyTorch's pinv_backward: the gradient of pinv(A) with respect to A.
Tensor pinv_backward(const Tensor& grad, const Tensor& pinvA, const Tensor& A) {
  const int64_t m = rows(A), n = cols(A);
  Tensor pinvAh = pinvA.mT(), gradh = grad.mT();
  if (m <= n) {
    Tensor K = matmul(gradh, pinvA);
    Tensor KpinvAh = matmul(K, pinvAh);
    return -matmul(pinvA, K).mT() + KpinvAh - matmul(matmul(A, pinvA), KpinvAh) +
           matmul(matmul(pinvAh, pinvA), gradh - matmul(K, A));
  }
  Tensor K = matmul(pinvA, gradh);
  Tensor pinvAhK = matmul(pinvAh, K);
  return -matmul(K, pinvA).mT() + matmul(matmul(gradh - matmul(A, K), pinvA), pinvAh) + pinvAhK -
         matmul(matmul(pinvAhK, pinvA), A);
}

// Puts back the two reduced dims (sorted d0 < d1) of a matrix reduction when keepdim.
Tensor keep_dims(Tensor r, int64_t d0, int64_t d1, bool keepdim) {
  if (!keepdim) return r;
  return r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
}

// A with dims d0, d1 moved to the end (in that order).
Tensor to_last_two(const Tensor& A, int64_t d0, int64_t d1) {
  Shape perm;
  for (int64_t i = 0; i < A.dim(); ++i)
    if (i != d0 && i != d1) perm.push_back(i);
  perm.push_back(d0);
  perm.push_back(d1);
  return A.permute(perm);
}

std::pair<int64_t, int64_t> matrix_dims(const char* op, const Tensor& A, IntArrayRef dims) {
  check<ShapeError>(dims.size() == 2, op, ": dim must be a 2-tuple, got ", dims.size(), " dims");
  check<ShapeError>(A.dim() >= 2, op, ": the input must have at least 2 dimensions, got ", detail::describe(A));
  int64_t d0 = wrap_dim(dims[0], A.dim(), op), d1 = wrap_dim(dims[1], A.dim(), op);
  check<ShapeError>(d0 != d1, op, ": dims must be different, got (", dims[0], ", ", dims[1], ")");
  return {d0, d1};
}

}  // namespace

// ---- simple ops ---------------------------------------------------------------------------------

Tensor diag(const Tensor& x, int64_t d) {
  check<ValueError>(x.defined(), "diag: input tensor is undefined");
  check<ShapeError>(x.dim() == 1 || x.dim() == 2, "diag: expected a 1-D or 2-D tensor, got ", detail::describe(x));
  if (x.dim() == 2) return x.diagonal(d, 0, 1).clone();
  const int64_t n = x.sizes()[0], a = std::abs(d);
  // x on the main diagonal of an (n, n) matrix, padded by |d| to put it on diagonal d.
  Tensor m = is_floating(x.dtype()) ? x.unsqueeze(1) * eye(n, std::nullopt, like(x))
                                    : where(eye(n, std::nullopt, like(x)) != 0, x.unsqueeze(1), zeros({1}, like(x)));
  if (a == 0) return m;
  return d > 0 ? pad(m, {a, 0, 0, a}) : pad(m, {0, a, a, 0});
}

Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta, Scalar alpha) {
  check<ValueError>(input.defined(), "baddbmm: input tensor is undefined");
  check<ShapeError>(b1.defined() && b2.defined() && b1.dim() == 3 && b2.dim() == 3,
                    "baddbmm: batch1 and batch2 must be 3-D tensors, got ", detail::describe(b1), " and ",
                    detail::describe(b2));
  check<DTypeError>(input.dtype() == b1.dtype(), "baddbmm: input dtype ", input.dtype(), " differs from batch1 dtype ",
                    b1.dtype());
  Tensor p = bmm(b1, b2);
  Shape bs = broadcast_shapes(input.sizes(), p.sizes(), "baddbmm");
  check<ShapeError>(bs == p.sizes(), "baddbmm: input of shape ", input.sizes(),
                    " cannot be broadcast to the product's shape ", p.sizes());
  if (alpha.to_double() != 1) p = p * alpha;
  if (beta.to_double() == 0) return p;
  return beta.to_double() == 1 ? p + input : p + input * beta;
}

Tensor tensordot(const Tensor& a, const Tensor& b, IntArrayRef dims_a, IntArrayRef dims_b) {
  check<ValueError>(a.defined() && b.defined(), "tensordot: input tensor is undefined");
  check<ShapeError>(dims_a.size() == dims_b.size(), "tensordot: both dim lists must have the same length, got ",
                    dims_a.size(), " and ", dims_b.size());
  std::vector<bool> ca(a.dim(), false), cb(b.dim(), false);
  Shape pa, pb, out_shape;
  int64_t contracted = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    int64_t da = wrap_dim(dims_a[i], a.dim(), "tensordot"), db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    check<ShapeError>(!ca[da] && !cb[db], "tensordot: a dim appears twice in the dim lists");
    check<ShapeError>(a.sizes()[da] == b.sizes()[db], "tensordot: contracted dimensions differ: a ", a.sizes(),
                      " dim ", da, " vs b ", b.sizes(), " dim ", db);
    ca[da] = cb[db] = true;
    contracted *= a.sizes()[da];
  }
  Shape perm_a, perm_b;
  int64_t free_a = 1, free_b = 1;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (!ca[i]) {
      perm_a.push_back(i);
      out_shape.push_back(a.sizes()[i]);
      free_a *= a.sizes()[i];
    }
  for (int64_t d : dims_a) perm_a.push_back(wrap_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) perm_b.push_back(wrap_dim(d, b.dim(), "tensordot"));
  for (int64_t i = 0; i < b.dim(); ++i)
    if (!cb[i]) {
      perm_b.push_back(i);
      out_shape.push_back(b.sizes()[i]);
      free_b *= b.sizes()[i];
    }
  Tensor r = matmul(a.permute(perm_a).reshape({free_a, contracted}), b.permute(perm_b).reshape({contracted, free_b}));
  return r.reshape(out_shape);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  check<ValueError>(a.defined() && b.defined(), "tensordot: input tensor is undefined");
  check<ShapeError>(dims >= 0 && dims <= a.dim() && dims <= b.dim(), "tensordot: cannot contract ", dims,
                    " dims of tensors of shapes ", a.sizes(), " and ", b.sizes());
  Shape da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

namespace linalg {

Tensor trace(const Tensor& x) {
  check<ValueError>(x.defined(), "trace: input tensor is undefined");
  check<ShapeError>(x.dim() == 2, "trace: expected a matrix, got ", detail::describe(x));
  return x.diagonal(0, 0, 1).sum();
}

Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  check<ValueError>(a.defined() && b.defined(), "linalg.cross: input tensor is undefined");
  check<DTypeError>(a.dtype() == b.dtype(), "linalg.cross: both inputs must have the same dtype, got ", a.dtype(),
                    " and ", b.dtype());
  check<ShapeError>(a.dim() == b.dim(), "linalg.cross: inputs must have the same number of dimensions, got ",
                    a.sizes(), " and ", b.sizes());
  Shape s = broadcast_shapes(a.sizes(), b.sizes(), "linalg.cross");
  int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()), "linalg.cross");
  check<ShapeError>(a.dim() > 0 && b.dim() > 0 && a.sizes()[wrap_dim(dim, a.dim(), "linalg.cross")] == 3 &&
                        b.sizes()[wrap_dim(dim, b.dim(), "linalg.cross")] == 3,
                    "linalg.cross: inputs dimension ", dim, " must have length 3. Got ", a.sizes(), " and ", b.sizes());
  Tensor x = a.expand(s), y = b.expand(s);
  Tensor x0 = x.select(d, 0), x1 = x.select(d, 1), x2 = x.select(d, 2);
  Tensor y0 = y.select(d, 0), y1 = y.select(d, 1), y2 = y.select(d, 2);
  return stack({x1 * y2 - x2 * y1, x2 * y0 - x0 * y2, x0 * y1 - x1 * y0}, d);
}

Tensor inv(const Tensor& A) {
  check_square("linalg.inv", A);
  Tensor out = inv_forward(A);
  if (autograd::needs_grad(A))
    autograd::record("LinalgInvBackward", {&A}, {&out}, [sy = save_output(out)](Node& n, GradList& g) {
      Tensor Yt = sy.unpack(n).mT();
      return GradList{-matmul(Yt, matmul(g[0], Yt))};  // -A^{-T} gY A^{-T}
    });
  return out;
}

namespace {
// X with A X = B for A (*, n, n) and B (*, n, k), batch dims broadcast.
Tensor solve_matrix(const Tensor& A, const Tensor& B) {
  const int64_t n = cols(A), k = cols(B);
  Shape bs = broadcast_shapes(batch_shape(A), batch_shape(B), "linalg.solve");
  Tensor Ae = A.expand(with(bs, {n, n})), Be = B.expand(with(bs, {n, k}));
  Tensor X = solve_forward(Ae, Be);
  if (autograd::needs_grad(Ae, Be))
    autograd::record("LinalgSolveBackward", {&Ae, &Be}, {&X},
                     [sa = save(Ae), sx = save_output(X)](Node& nd, GradList& g) {
                       Tensor Av = sa.unpack(nd), Xv = sx.unpack(nd);
                       Tensor gB = solve_matrix(Av.mT(), g[0]);  // A^{-T} gX
                       GradList r(2);
                       if (nd.needs_input_grad(0)) r[0] = -matmul(gB, Xv.mT());
                       if (nd.needs_input_grad(1)) r[1] = gB;
                       return r;
                     });
  return X;
}
}  // namespace

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  check_square("linalg.solve", A);
  check_pair("linalg.solve", A, B);
  const int64_t n = cols(A);
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.sizes() == Shape(A.sizes().begin(), A.sizes().end() - 1));
  if (vector) {
    check<ShapeError>(left, "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. In "
                            "this case linalg.solve is equivalent to B / A.squeeze(-1)");
    check<ShapeError>(B.sizes().back() == n, "linalg.solve: incompatible shapes of A and B for the equation AX = B (",
                      A.sizes(), " and ", B.sizes(), ")");
    return solve_matrix(A, B.unsqueeze(-1)).squeeze(-1);
  }
  check<ShapeError>(B.dim() >= 2, "linalg.solve: B must have at least 2 dimensions, got ", detail::describe(B));
  if (!left) {
    // X A = B  <=>  A^T X^T = B^T
    check<ShapeError>(cols(B) == n, "linalg.solve: incompatible shapes of A and B for the equation XA = B (",
                      A.sizes(), " and ", B.sizes(), ")");
    return solve_matrix(A.mT(), B.mT()).mT();
  }
  check<ShapeError>(rows(B) == n, "linalg.solve: incompatible shapes of A and B for the equation AX = B (",
                    A.sizes(), " and ", B.sizes(), ")");
  return solve_matrix(A, B);
}

Tensor det(const Tensor& A) {
  check_square("linalg.det", A);
  Tensor d = std::get<0>(lu_det(A));
  if (autograd::needs_grad(A))
    autograd::record("LinalgDetBackward", {&A}, {&d}, [sa = save(A), sd = save_output(d)](Node& n, GradList& g) {
      // g det A^{-T}
      Tensor s = (g[0] * sd.unpack(n)).unsqueeze(-1).unsqueeze(-1);
      return GradList{s * inv(sa.unpack(n)).mT()};
    });
  return d;
}

std::tuple<Tensor, Tensor> slogdet(const Tensor& A) {
  check_square("linalg.slogdet", A);
  auto [d, sign, logabs] = lu_det(A);
  if (autograd::needs_grad(A)) {
    // The sign takes part in autograd as PyTorch's does, with no gradient (it is piecewise constant):
    // a node of its own, so a backward through the sign alone computes nothing, even at a singular A.
    autograd::record("LinalgSlogdetBackward", {&A}, {&sign}, [](Node&, GradList&) { return GradList{Tensor()}; });
    autograd::record("LinalgSlogdetBackward", {&A}, {&logabs}, [sa = save(A)](Node& n, GradList& g) {
      return GradList{g[0].unsqueeze(-1).unsqueeze(-1) * inv(sa.unpack(n)).mT()};  // g A^{-T}
    });
  }
  return {sign, logabs};
}

Tensor cholesky(const Tensor& A, bool upper) {
  check_square("linalg.cholesky", A);
  Tensor L = cholesky_forward(A);
  if (autograd::needs_grad(A))
    autograd::record("LinalgCholeskyBackward", {&A}, {&L}, [sl = save_output(L)](Node& n, GradList& g) {
      // Murray (2016): gA = L^{-T} Phi(L^T gL) L^{-1}, Phi symmetrizing the lower triangle.
      Tensor Lv = sl.unpack(n);
      Tensor gA = matmul(Lv.mT(), g[0]).tril();
      gA = (gA + gA.tril(-1).mT()) * 0.5;
      gA = solve(Lv.mT(), gA);
      return GradList{solve(Lv, gA, /*left=*/false)};
    });
  return upper ? L.mT() : L;
}

std::tuple<Tensor, Tensor> qr(const Tensor& A, std::string_view mode) {
  check_matrix("linalg.qr", A);
  check<ValueError>(mode == "reduced" || mode == "complete" || mode == "r",
                    "linalg.qr: qr received unrecognized mode '", mode,
                    "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const bool complete = mode == "complete", compute_q = mode != "r";
  auto [Q, R] = qr_forward(A, complete, compute_q);
  if (!compute_q) {
    Q = empty({0}, like(A));
    if (autograd::needs_grad(A))
      autograd::record("LinalgQrBackward", {&A}, {&R}, [](Node&, GradList&) -> GradList {
        throw ValueError(
            "linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
            "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
      });
    return {Q, R};
  }
  if (autograd::needs_grad(A))
    autograd::record("LinalgQrBackward", {&A}, {&Q, &R},
                     [sq = save_output_nr(Q, 0), sr = save_output_nr(R, 1), complete](Node& n, GradList& g) {
                       return GradList{qr_backward(g[0], g[1], sq.unpack(n), sr.unpack(n), complete)};
                     });
  return {Q, R};
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices) {
  check_matrix("linalg.svd", A);
  auto [U, S, Vh] = svd_forward(A, full_matrices ? 'A' : 'S');
  if (autograd::needs_grad(A))
    autograd::record("LinalgSvdBackward", {&A}, {&U, &S, &Vh},
                     [su = save_output_nr(U, 0), ss = save_output_nr(S, 1), sv = save_output_nr(Vh, 2), full_matrices](Node& n,
                                                                                                    GradList& g) {
                       Tensor Uv = su.unpack(n), Sv = ss.unpack(n), Vv = sv.unpack(n);
                       Tensor gU = g[0], gVh = g[2];
                       if (full_matrices) {
                         const int64_t k = Sv.sizes().back();
                         Uv = Uv.narrow(-1, 0, k);
                         Vv = Vv.narrow(-2, 0, k);
                         gU = gU.narrow(-1, 0, k);
                         gVh = gVh.narrow(-2, 0, k);
                       }
                       return GradList{svd_backward(gU, g[1], gVh, Uv, Sv, Vv)};
                     });
  return {U, S, Vh};
}

Tensor svdvals(const Tensor& A) {
  check_matrix("linalg.svdvals", A);
  if (!autograd::needs_grad(A)) return std::get<1>(svd_forward(A, 'N'));
  // The gradient U diag(gS) Vh reads U and Vh from an svd whose own node carries the second order.
  auto [U, S, Vh] = svd(A, false);
  Tensor out = S.detach().clone();
  autograd::record("LinalgSvdvalsBackward", {&A}, {&out}, [su = save(U), sv = save(Vh)](Node& n, GradList& g) {
    Tensor Uv = su.unpack(n), Vv = sv.unpack(n);
    return GradList{rows(Uv) >= cols(Vv) ? matmul(Uv, g[0].unsqueeze(-1) * Vv) : matmul(Uv * g[0].unsqueeze(-2), Vv)};
  });
  return out;
}

namespace {
char check_uplo(const char* op, std::string_view UPLO) {
  check<ValueError>(UPLO == "L" || UPLO == "U" || UPLO == "l" || UPLO == "u", op,
                    ": Expected UPLO argument to be 'L' or 'U', but got ", UPLO);
  return UPLO == "L" || UPLO == "l" ? 'L' : 'U';
}
}  // namespace

std::tuple<Tensor, Tensor> eigh(const Tensor& A, std::string_view UPLO) {
  check_square("linalg.eigh", A);
  auto [L, V] = eigh_forward(A, check_uplo("linalg.eigh", UPLO), true);
  if (autograd::needs_grad(A))
    autograd::record("LinalgEighBackward", {&A}, {&L, &V}, [sl = save_output_nr(L, 0), sv = save_output_nr(V, 1)](Node& n, GradList& g) {
      return GradList{eigh_backward(g[0], g[1], sl.unpack(n), sv.unpack(n))};
    });
  return {L, V};
}

Tensor eigvalsh(const Tensor& A, std::string_view UPLO) {
  check_square("linalg.eigvalsh", A);
  char uplo = check_uplo("linalg.eigvalsh", UPLO);
  if (!autograd::needs_grad(A)) return std::get<0>(eigh_forward(A, uplo, false));
  auto [L, V] = eigh(A, UPLO);
  Tensor out = L.detach().clone();
  autograd::record("LinalgEigvalshBackward", {&A}, {&out}, [sv = save(V)](Node& n, GradList& g) {
    Tensor Vv = sv.unpack(n);
    return GradList{matmul(Vv * g[0].unsqueeze(-2), Vv.mT())};  // V diag(gL) V^T
  });
  return out;
}

LstsqResult lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond, std::string_view driver) {
  check_matrix("linalg.lstsq", A);
  check_pair("linalg.lstsq", A, B);
  check<ValueError>(driver == "gelsd" || driver == "gels", "linalg.lstsq: parameter `driver` should be one of "
                                                           "(gels, gelsd) here (gelsy and gelss are not built), got '",
                    driver, "'");
  // As PyTorch: B of A's dims is a batch of matrices (*, m, k); B of one dim fewer a batch of
  // vectors (*, m), solved as (*, m, 1): the solution is (*, n), the residuals keep their (*, 1).
  check<ShapeError>(A.dim() == B.dim() || A.dim() == B.dim() + 1, "linalg.lstsq: B must have A's number of dims "
                    "(a batch of matrices) or one fewer (a batch of vectors), got ", detail::describe(A), " and ",
                    detail::describe(B));
  if (B.dim() == A.dim() - 1) {
    check<ShapeError>(B.sizes().back() == rows(A), "linalg.lstsq: input.size(-2) should match other.size(-1) for B "
                      "of vectors, got ", detail::describe(A), " and ", detail::describe(B));
    LstsqResult r = lstsq(A, B.unsqueeze(-1), rcond, driver);
    r.solution = r.solution.squeeze(-1);
    return r;
  }
  const int64_t m = rows(A), n = cols(A), k = cols(B), mx = std::max(m, n), kmin = std::min(m, n);
  check<ShapeError>(rows(B) == m, "linalg.lstsq: input.size(-2) should match other.size(-2), got ", detail::describe(A),
                    " and ", detail::describe(B));
  Shape bs = broadcast_shapes(batch_shape(A), batch_shape(B), "linalg.lstsq");
  Tensor Ae = A.expand(with(bs, {m, n})), Be = B.expand(with(bs, {m, k}));
  const int64_t batch = shape_numel(bs);
  const bool gelsd = driver == "gelsd";
  Tensor a = colmajor_copy(Ae);
  Tensor bpad = Be.detach().to(kCPU);
  if (n > m) bpad = cat({bpad, zeros(with(bs, {n - m, k}), dtype(A.dtype()))}, -2);
  Tensor x = colmajor_copy(bpad);  // (*, k, mx)
  Tensor sv = empty(with(bs, {gelsd ? kmin : 0}), dtype(A.dtype()));
  Tensor rank = empty(gelsd ? bs : Shape{0}, dtype(kInt64));
  bool full_rank = true;
  if (kmin > 0 && k > 0) {
    by_dtype(A.dtype(), [&](auto z) {
      using T = decltype(z);
      const T rc = rcond ? static_cast<T>(*rcond) : std::numeric_limits<T>::epsilon() * static_cast<T>(mx);
      T *pa = a.data_ptr<T>(), *px = x.data_ptr<T>();
      int info = 0, iwq = 0;
      T wq{};
      if (gelsd) {
        int rk = 0;
        lapack::gelsd(m, n, k, pa, ld(m), px, ld(mx), sv.data_ptr<T>(), rc, &rk, &wq, -1, &iwq, &info);
      } else {
        lapack::gels('N', m, n, k, pa, ld(m), px, ld(mx), &wq, -1, &info);
      }
      std::vector<T> work(std::max<int64_t>(static_cast<int64_t>(wq), 1));
      std::vector<int> iwork(std::max(iwq, 1));
      for (int64_t b = 0; b < batch; ++b) {
        if (gelsd) {
          int rk = 0;
          lapack::gelsd(m, n, k, pa + b * m * n, ld(m), px + b * k * mx, ld(mx), sv.data_ptr<T>() + b * kmin, rc, &rk,
                        work.data(), static_cast<int>(work.size()), iwork.data(), &info);
          rank.data_ptr<int64_t>()[b] = rk;
          full_rank = full_rank && rk == n;
          check<ValueError>(info <= 0, "linalg.lstsq: ", batch_prefix(A, b),
                            "The algorithm failed to converge (error code: ", info, "; A: ", detail::describe(A), ")");
        } else {
          lapack::gels('N', m, n, k, pa + b * m * n, ld(m), px + b * k * mx, ld(mx), work.data(),
                       static_cast<int>(work.size()), &info);
          check<ValueError>(info <= 0, "linalg.lstsq: ", batch_prefix(A, b),
                            "The least squares solution could not be computed because the input matrix does not have "
                            "full rank (error code: ",
                            info, "; A: ", detail::describe(A), ")");
        }
      }
    });
  } else if (gelsd) {
    rank.fill_(0);
    if (kmin > 0 && k == 0) full_rank = false;
  }
  Tensor xr = x.mT();  // (*, mx, k)
  LstsqResult r;
  r.solution = on_device(xr.narrow(-2, 0, n), A.device());
  if (m > n && full_rank) {
    Tensor tail = xr.narrow(-2, n, m - n);
    r.residuals = on_device((tail * tail).sum({-2}), A.device());
  } else {
    r.residuals = empty({0}, like(A));
  }
  r.rank = on_device(rank, A.device());
  r.singular_values = on_device(sv, A.device());
  if (autograd::needs_grad(Ae, Be))
    autograd::record("LinalgLstsqBackward", {&Ae, &Be}, {&r.solution},
                     [sa = save(Ae), sb = save(Be)](Node& nd, GradList& g) {
                       // X = pinv(A) B: PyTorch's formula through the pseudo-inverse (A of full rank).
                       Tensor Av = sa.unpack(nd), Bv = sb.unpack(nd);
                       Tensor pinvA = pinv_full_rank(Av);
                       GradList out(2);
                       if (nd.needs_input_grad(0)) out[0] = pinv_backward(matmul(g[0], Bv.mT()), pinvA, Av);
                       if (nd.needs_input_grad(1)) out[1] = matmul(pinvA.mT(), g[0]);
                       return out;
                     });
  return r;
}

Tensor vector_norm(const Tensor& x, double ord, IntArrayRef dims, bool keepdim) {
  check<ValueError>(x.defined(), "linalg.vector_norm: input tensor is undefined");
  check<DTypeError>(is_floating(x.dtype()), "linalg.vector_norm: expected a floating point input, got ",
                    detail::describe(x));
  return nabla::norm(x, ord, dims, keepdim);
}

Tensor matrix_norm(const Tensor& A, std::string_view ord, IntArrayRef dims, bool keepdim) {
  check_float("linalg.matrix_norm", A);
  auto [d0, d1] = matrix_dims("linalg.matrix_norm", A, dims);
  if (ord == "fro") return nabla::norm(A, 2, {d0, d1}, keepdim);
  check<ValueError>(ord == "nuc", "linalg.matrix_norm: Order ", ord, " not supported.");
  return keep_dims(svdvals(to_last_two(A, d0, d1)).sum({-1}), d0, d1, keepdim);
}

Tensor matrix_norm(const Tensor& A, double ord, IntArrayRef dims, bool keepdim) {
  check_float("linalg.matrix_norm", A);
  auto [d0, d1] = matrix_dims("linalg.matrix_norm", A, dims);
  const double a = std::abs(ord);
  check<ValueError>(a == 1 || a == 2 || std::isinf(a), "linalg.matrix_norm: Order ", ord, " not supported.");
  if (a == 2) {
    Tensor s = svdvals(to_last_two(A, d0, d1));
    return keep_dims(ord > 0 ? amax(s, {-1}) : amin(s, {-1}), d0, d1, keepdim);
  }
  // 1: max over columns (d1) of the sums over rows (d0); inf: the other way round.
  int64_t sum_dim = a == 1 ? d0 : d1, max_dim = a == 1 ? d1 : d0;
  Tensor s = abs(A).sum({sum_dim}, true);
  Tensor r = ord > 0 ? amax(s, {max_dim}, true) : amin(s, {max_dim}, true);
  if (keepdim) return r;
  return r.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
}

Tensor norm(const Tensor& x, std::optional<double> ord, IntArrayRef dims, bool keepdim) {
  check_float("linalg.norm", x, "input");
  if (!ord) {
    check<ShapeError>(dims.size() <= 2, "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ", dims.size());
    return nabla::norm(x, 2, dims, keepdim);
  }
  if (dims.empty()) {
    check<ShapeError>(x.dim() == 1 || x.dim() == 2, "linalg.norm: If dim is not specified but ord is, the input must be "
                                                    "1D or 2D. Got ", x.dim(), "D.");
    if (x.dim() == 1) return vector_norm(x, *ord, {}, keepdim);
    return matrix_norm(x, *ord, {0, 1}, keepdim);
  }
  check<ShapeError>(dims.size() <= 2, "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ", dims.size());
  if (dims.size() == 1) return vector_norm(x, *ord, dims, keepdim);
  return matrix_norm(x, *ord, dims, keepdim);
}

Tensor norm(const Tensor& x, std::string_view ord, IntArrayRef dims, bool keepdim) {
  check_float("linalg.norm", x, "input");
  if (dims.empty()) {
    check<ShapeError>(x.dim() == 2, "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ",
                      x.dim(), "D.");
    return matrix_norm(x, ord, {0, 1}, keepdim);
  }
  return matrix_norm(x, ord, dims, keepdim);
}

}  // namespace linalg
}  // namespace nabla
