// Linear algebra on CUDA through cuSOLVER (and cuBLAS's batched LU): the device solver of
// core/linalg/solver.h, registered for DeviceType::cuda, which the device forwards of core/linalg/'s
// family files call for CUDA tensors (their layout trick, error messages and backward formulas stay
// there).
//
// Which call takes a batch (one per matrix, a pointer-array batched call, a strided batched call)
// and how the matrices are addressed is planned in cuda/solver_plan.h, plain C++ tested on the host.
// Work is queued on the current stream of the tensors' device through a cuSOLVER (or cuBLAS) handle
// bound to that stream (cuda/handles.h; handles live as long as the process, like cuBLAS's);
// workspaces (sized by the *_bufferSize calls), pointer arrays and parameter-check infos come from
// the caching allocator and are freed right after queuing, which is safe on the same stream, so
// empty_cache() returns them to the driver. Nothing here waits for the GPU: the per-matrix info
// codes stay on the device for the op to read back once.
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <type_traits>
#include <vector>

#include "core/impl.h"
#include "core/linalg/solver.h"
#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/cublas_check.h"
#include "cuda/handles.h"
#include "cuda/solver_plan.h"

namespace nabla::cuda {

namespace {

using solver::Call;
using solver::MatrixBatch;

const char* status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_MAPPING_ERROR: return "CUSOLVER_STATUS_MAPPING_ERROR";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_INVALID_WORKSPACE: return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default: return "unknown cuSOLVER status";
  }
}

[[noreturn]] void throw_cusolver(cusolverStatus_t s, const char* what, const char* file, int line) {
  throw CudaError(internal::str("cuSOLVER error: ", status_name(s), " (", static_cast<int>(s), ") in ", what, " at ",
                                file, ":", line));
}

#define NABLA_CUSOLVER_CHECK(expr)                          \
  do {                                                      \
    cusolverStatus_t nabla_st_ = (expr);                    \
    if (nabla_st_ != CUSOLVER_STATUS_SUCCESS) [[unlikely]]  \
      throw_cusolver(nabla_st_, #expr, __FILE__, __LINE__); \
  } while (0)

cusolverDnHandle_t create_solver_handle(int device, cudaStream_t stream) {
  DeviceScope ds(device);
  cusolverDnHandle_t h;
  NABLA_CUSOLVER_CHECK(cusolverDnCreate(&h));
  NABLA_CUSOLVER_CHECK(cusolverDnSetStream(h, stream));
  return h;
}

HandlePool<cusolverDnHandle_t>& solver_pool() {
  static auto* p = new HandlePool<cusolverDnHandle_t>(&create_solver_handle);
  return *p;
}

// cuBLAS handles for the batched LU (a pool of their own: blas.cpp's set a GEMM workspace per call).
cublasHandle_t create_blas_handle(int device, cudaStream_t stream) {
  DeviceScope ds(device);
  cublasHandle_t h;
  NABLA_CUBLAS_CHECK(cublasCreate(&h));
  NABLA_CUBLAS_CHECK(cublasSetStream(h, stream));
  return h;
}

HandlePool<cublasHandle_t>& blas_pool() {
  static auto* p = new HandlePool<cublasHandle_t>(&create_blas_handle);
  return *p;
}

// The S (float) and D (double) variants of each call.
template <class T>
struct Api;
template <>
struct Api<float> {
  static constexpr auto getrf_bufferSize = &cusolverDnSgetrf_bufferSize;
  static constexpr auto getrf = &cusolverDnSgetrf;
  static constexpr auto getrs = &cusolverDnSgetrs;
  static constexpr auto getrfBatched = &cublasSgetrfBatched;
  static constexpr auto getrsBatched = &cublasSgetrsBatched;
  static constexpr auto potrf_bufferSize = &cusolverDnSpotrf_bufferSize;
  static constexpr auto potrf = &cusolverDnSpotrf;
  static constexpr auto potrfBatched = &cusolverDnSpotrfBatched;
  static constexpr auto geqrf_bufferSize = &cusolverDnSgeqrf_bufferSize;
  static constexpr auto geqrf = &cusolverDnSgeqrf;
  static constexpr auto orgqr_bufferSize = &cusolverDnSorgqr_bufferSize;
  static constexpr auto orgqr = &cusolverDnSorgqr;
  static constexpr auto syevd_bufferSize = &cusolverDnSsyevd_bufferSize;
  static constexpr auto syevd = &cusolverDnSsyevd;
  static constexpr auto syevjBatched_bufferSize = &cusolverDnSsyevjBatched_bufferSize;
  static constexpr auto syevjBatched = &cusolverDnSsyevjBatched;
  static constexpr auto gesvdj_bufferSize = &cusolverDnSgesvdj_bufferSize;
  static constexpr auto gesvdj = &cusolverDnSgesvdj;
  static constexpr auto gesvdjBatched_bufferSize = &cusolverDnSgesvdjBatched_bufferSize;
  static constexpr auto gesvdjBatched = &cusolverDnSgesvdjBatched;
};
template <>
struct Api<double> {
  static constexpr auto getrf_bufferSize = &cusolverDnDgetrf_bufferSize;
  static constexpr auto getrf = &cusolverDnDgetrf;
  static constexpr auto getrs = &cusolverDnDgetrs;
  static constexpr auto getrfBatched = &cublasDgetrfBatched;
  static constexpr auto getrsBatched = &cublasDgetrsBatched;
  static constexpr auto potrf_bufferSize = &cusolverDnDpotrf_bufferSize;
  static constexpr auto potrf = &cusolverDnDpotrf;
  static constexpr auto potrfBatched = &cusolverDnDpotrfBatched;
  static constexpr auto geqrf_bufferSize = &cusolverDnDgeqrf_bufferSize;
  static constexpr auto geqrf = &cusolverDnDgeqrf;
  static constexpr auto orgqr_bufferSize = &cusolverDnDorgqr_bufferSize;
  static constexpr auto orgqr = &cusolverDnDorgqr;
  static constexpr auto syevd_bufferSize = &cusolverDnDsyevd_bufferSize;
  static constexpr auto syevd = &cusolverDnDsyevd;
  static constexpr auto syevjBatched_bufferSize = &cusolverDnDsyevjBatched_bufferSize;
  static constexpr auto syevjBatched = &cusolverDnDsyevjBatched;
  static constexpr auto gesvdj_bufferSize = &cusolverDnDgesvdj_bufferSize;
  static constexpr auto gesvdj = &cusolverDnDgesvdj;
  static constexpr auto gesvdjBatched_bufferSize = &cusolverDnDgesvdjBatched_bufferSize;
  static constexpr auto gesvdjBatched = &cusolverDnDgesvdjBatched;
};

// Calls f(float{}) or f(double{}) for t's dtype.
template <class F>
void by_scalar(const Tensor& t, const char* op, F&& f) {
  switch (solver::scalar_of(t.dtype())) {
    case solver::Scalar::f32: f(float{}); return;
    case solver::Scalar::f64: f(double{}); return;
    default:
      throw DTypeError(internal::str(op, ": cuSOLVER takes float32 or float64 tensors, got ", internal::describe(t)));
  }
}

// t (*, c, r) as a batch of r x c column-major matrices; anything else is a caller's bug.
MatrixBatch batch_of(const Tensor& t, const char* op) {
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  MatrixBatch b = solver::column_major_batch(sizes, strides);
  NABLA_CHECK(ValueError, b.ok, op, ": internal error: ", b.why, " (", internal::describe(t), ")");
  NABLA_CHECK(DeviceError, t.device().is_cuda(), op, ": expected a CUDA tensor, got ", internal::describe(t));
  return b;
}

// A contiguous int32 (pivots, infos) or scalar (tau, w, s) tensor, as the caller must pass it.
void check_dense(const Tensor& t, const char* op, const char* name) {
  NABLA_CHECK(ValueError, t.is_contiguous() && t.device().is_cuda(), op, ": internal error: ", name,
              " must be a contiguous CUDA tensor, got ", internal::describe(t));
}

template <class T>
T* matrix(const Tensor& t, const MatrixBatch& b, int64_t i) {
  return static_cast<T*>(t.data_ptr()) + b.offsets[static_cast<size_t>(i)];
}

// The device array of pointers to matrices [first, first + count) of the batch, for the pointer-array
// batched calls (copied from the host on the current stream; freed after queuing, like a workspace).
template <class T>
Tensor pointer_array(const Tensor& t, const MatrixBatch& b, int64_t first, int count) {
  Tensor host = internal::make_empty({count}, kInt64, kCPU);
  int64_t* p = host.data_ptr<int64_t>();
  for (int i = 0; i < count; ++i) p[i] = reinterpret_cast<int64_t>(matrix<T>(t, b, first + i));
  return host.to(t.device());
}
template <class T>
T** pointers(const Tensor& array) {
  return static_cast<T**>(array.data_ptr());
}

template <class T>
T* workspace(Tensor& holder, int64_t lwork, int device) {
  holder = scratch(
      solver::workspace_bytes(lwork, std::is_same_v<T, double> ? solver::Scalar::f64 : solver::Scalar::f32), device);
  return static_cast<T*>(holder.data_ptr());
}

// The info of calls whose info only reports a bad parameter (getrs, geqrf, orgqr): not read back.
int* scratch_info(Tensor& holder, int device) {
  holder = scratch(sizeof(int), device);
  return static_cast<int*>(holder.data_ptr());
}

cublasFillMode_t fill_mode(bool upper) { return upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER; }

// The Jacobi solvers' parameters (tolerance: machine precision; sorted results), destroyed on exit.
struct SyevjParams {
  syevjInfo_t p = nullptr;
  SyevjParams() {
    NABLA_CUSOLVER_CHECK(cusolverDnCreateSyevjInfo(&p));
    NABLA_CUSOLVER_CHECK(cusolverDnXsyevjSetSortEig(p, 1));
  }
  ~SyevjParams() { (void)cusolverDnDestroySyevjInfo(p); }
  SyevjParams(const SyevjParams&) = delete;
  SyevjParams& operator=(const SyevjParams&) = delete;
};
struct GesvdjParams {
  gesvdjInfo_t p = nullptr;
  GesvdjParams() {
    NABLA_CUSOLVER_CHECK(cusolverDnCreateGesvdjInfo(&p));
    NABLA_CUSOLVER_CHECK(cusolverDnXgesvdjSetSortEig(p, 1));
  }
  ~GesvdjParams() { (void)cusolverDnDestroyGesvdjInfo(p); }
  GesvdjParams(const GesvdjParams&) = delete;
  GesvdjParams& operator=(const GesvdjParams&) = delete;
};

// ---- the entries of linalg_device::Solver ------------------------------------------------------

void getrf(const Tensor& a, const Tensor& ipiv, const Tensor& info) {
  DeviceScope ds(a);
  const MatrixBatch b = batch_of(a, "linalg (getrf)");
  check_dense(ipiv, "linalg (getrf)", "ipiv");
  check_dense(info, "linalg (getrf)", "info");
  const int n = b.rows;
  NABLA_CHECK(ValueError, b.cols == n, "linalg (getrf): internal error: square matrices expected, got ",
              internal::describe(a));
  if (b.count == 0 || n == 0) return;
  const int device = device_of(a);
  cudaStream_t stream = stream_for(device);
  int* piv = ipiv.data_ptr<int>();
  int* inf = info.data_ptr<int>();
  by_scalar(a, "linalg (getrf)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    if (solver::lu_call(b.count, n) == Call::pointers) {
      Lease<cublasHandle_t> h(blas_pool(), device, stream);
      for (const solver::Chunk& c : solver::batch_chunks(b.count)) {
        Tensor ptrs = pointer_array<T>(a, b, c.first, c.count);
        NABLA_CUBLAS_CHECK(
            L::getrfBatched(h.get(), n, pointers<T>(ptrs), b.ld, piv + c.first * n, inf + c.first, c.count));
      }
      return;
    }
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    int lwork = 0;
    NABLA_CUSOLVER_CHECK(L::getrf_bufferSize(h.get(), n, n, matrix<T>(a, b, 0), b.ld, &lwork));
    Tensor ws_holder;
    T* ws = workspace<T>(ws_holder, lwork, device);
    for (int64_t i = 0; i < b.count; ++i)
      NABLA_CUSOLVER_CHECK(L::getrf(h.get(), n, n, matrix<T>(a, b, i), b.ld, ws, piv + i * n, inf + i));
  });
}

void getrs(bool transpose, const Tensor& lu, const Tensor& ipiv, const Tensor& rhs) {
  DeviceScope ds(lu);
  const MatrixBatch a = batch_of(lu, "linalg (getrs)"), x = batch_of(rhs, "linalg (getrs)");
  check_dense(ipiv, "linalg (getrs)", "ipiv");
  const int n = a.rows, k = x.cols;
  NABLA_CHECK(ValueError, a.cols == n && x.rows == n && x.count == a.count,
              "linalg (getrs): internal error: mismatched factors and right sides ", internal::describe(lu), " and ",
              internal::describe(rhs));
  if (a.count == 0 || n == 0 || k == 0) return;
  const int device = device_of(lu);
  cudaStream_t stream = stream_for(device);
  const int* piv = ipiv.data_ptr<int>();
  const cublasOperation_t op = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  by_scalar(lu, "linalg (getrs)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    if (solver::lu_solve_call(a.count, n) == Call::pointers) {
      Lease<cublasHandle_t> h(blas_pool(), device, stream);
      for (const solver::Chunk& c : solver::batch_chunks(a.count)) {
        Tensor pa = pointer_array<T>(lu, a, c.first, c.count), pb = pointer_array<T>(rhs, x, c.first, c.count);
        int param_info = 0;  // a bad argument only (written on the host)
        NABLA_CUBLAS_CHECK(L::getrsBatched(h.get(), op, n, k, pointers<T>(pa), a.ld, piv + c.first * n, pointers<T>(pb),
                                           x.ld, &param_info, c.count));
        NABLA_CHECK(ValueError, param_info == 0, "linalg (getrs): internal error: argument ", -param_info,
                    " of cublasXgetrsBatched is invalid");
      }
      return;
    }
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    Tensor info_holder;
    int* param_info = scratch_info(info_holder, device);
    for (int64_t i = 0; i < a.count; ++i)
      NABLA_CUSOLVER_CHECK(
          L::getrs(h.get(), op, n, k, matrix<T>(lu, a, i), a.ld, piv + i * n, matrix<T>(rhs, x, i), x.ld, param_info));
  });
}

void potrf(bool upper, const Tensor& a, const Tensor& info) {
  DeviceScope ds(a);
  const MatrixBatch b = batch_of(a, "linalg (potrf)");
  check_dense(info, "linalg (potrf)", "info");
  const int n = b.rows;
  NABLA_CHECK(ValueError, b.cols == n, "linalg (potrf): internal error: square matrices expected, got ",
              internal::describe(a));
  if (b.count == 0 || n == 0) return;
  const int device = device_of(a);
  cudaStream_t stream = stream_for(device);
  int* inf = info.data_ptr<int>();
  const cublasFillMode_t uplo = fill_mode(upper);
  by_scalar(a, "linalg (potrf)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    if (solver::cholesky_call(b.count) == Call::pointers) {
      for (const solver::Chunk& c : solver::batch_chunks(b.count)) {
        Tensor ptrs = pointer_array<T>(a, b, c.first, c.count);
        NABLA_CUSOLVER_CHECK(L::potrfBatched(h.get(), uplo, n, pointers<T>(ptrs), b.ld, inf + c.first, c.count));
      }
      return;
    }
    int lwork = 0;
    NABLA_CUSOLVER_CHECK(L::potrf_bufferSize(h.get(), uplo, n, matrix<T>(a, b, 0), b.ld, &lwork));
    Tensor ws_holder;
    T* ws = workspace<T>(ws_holder, lwork, device);
    for (int64_t i = 0; i < b.count; ++i)
      NABLA_CUSOLVER_CHECK(L::potrf(h.get(), uplo, n, matrix<T>(a, b, i), b.ld, ws, lwork, inf + i));
  });
}

void geqrf(const Tensor& a, const Tensor& tau) {
  DeviceScope ds(a);
  const MatrixBatch b = batch_of(a, "linalg (geqrf)");
  check_dense(tau, "linalg (geqrf)", "tau");
  const int m = b.rows, n = b.cols, k = std::min(m, n);
  NABLA_CHECK(ValueError, tau.dim() >= 1 && tau.sizes().back() == k && tau.numel() == b.count * k,
              "linalg (geqrf): internal error: tau ", internal::describe(tau), " for ", internal::describe(a));
  if (b.count == 0 || k == 0) return;
  const int device = device_of(a);
  cudaStream_t stream = stream_for(device);
  by_scalar(a, "linalg (geqrf)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    T* pt = tau.data_ptr<T>();
    int lwork = 0;
    NABLA_CUSOLVER_CHECK(L::geqrf_bufferSize(h.get(), m, n, matrix<T>(a, b, 0), b.ld, &lwork));
    Tensor ws_holder, info_holder;
    T* ws = workspace<T>(ws_holder, lwork, device);
    int* param_info = scratch_info(info_holder, device);
    for (int64_t i = 0; i < b.count; ++i)
      NABLA_CUSOLVER_CHECK(L::geqrf(h.get(), m, n, matrix<T>(a, b, i), b.ld, pt + i * k, ws, lwork, param_info));
  });
}

void orgqr(const Tensor& q, const Tensor& tau) {
  DeviceScope ds(q);
  const MatrixBatch b = batch_of(q, "linalg (orgqr)");
  check_dense(tau, "linalg (orgqr)", "tau");
  const int m = b.rows, c = b.cols;
  const int64_t k64 = tau.dim() >= 1 ? tau.sizes().back() : -1;
  NABLA_CHECK(ValueError, k64 >= 0 && k64 <= c && c <= m && tau.numel() == b.count * k64,
              "linalg (orgqr): internal error: tau ", internal::describe(tau), " for ", internal::describe(q));
  const int k = static_cast<int>(k64);
  if (b.count == 0 || c == 0) return;
  const int device = device_of(q);
  cudaStream_t stream = stream_for(device);
  by_scalar(q, "linalg (orgqr)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    const T* pt = tau.data_ptr<T>();
    int lwork = 0;
    NABLA_CUSOLVER_CHECK(L::orgqr_bufferSize(h.get(), m, c, k, matrix<T>(q, b, 0), b.ld, pt, &lwork));
    Tensor ws_holder, info_holder;
    T* ws = workspace<T>(ws_holder, lwork, device);
    int* param_info = scratch_info(info_holder, device);
    for (int64_t i = 0; i < b.count; ++i)
      NABLA_CUSOLVER_CHECK(L::orgqr(h.get(), m, c, k, matrix<T>(q, b, i), b.ld, pt + i * k, ws, lwork, param_info));
  });
}

void syevd(bool vectors, bool upper, const Tensor& a, const Tensor& w, const Tensor& info) {
  DeviceScope ds(a);
  const MatrixBatch b = batch_of(a, "linalg (syevd)");
  check_dense(w, "linalg (syevd)", "w");
  check_dense(info, "linalg (syevd)", "info");
  const int n = b.rows;
  NABLA_CHECK(ValueError, b.cols == n && w.numel() == b.count * n, "linalg (syevd): internal error: w ",
              internal::describe(w), " for ", internal::describe(a));
  if (b.count == 0 || n == 0) return;
  const int device = device_of(a);
  cudaStream_t stream = stream_for(device);
  int* inf = info.data_ptr<int>();
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const cublasFillMode_t uplo = fill_mode(upper);
  by_scalar(a, "linalg (syevd)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    T* pw = w.data_ptr<T>();
    if (solver::eigh_call(b.count, n, b.packed) == Call::strided) {
      SyevjParams params;
      for (const solver::Chunk& c : solver::batch_chunks(b.count)) {
        T* pa = matrix<T>(a, b, c.first);
        int lwork = 0;
        NABLA_CUSOLVER_CHECK(
            L::syevjBatched_bufferSize(h.get(), jobz, uplo, n, pa, b.ld, pw + c.first * n, &lwork, params.p, c.count));
        Tensor ws_holder;
        T* ws = workspace<T>(ws_holder, lwork, device);
        NABLA_CUSOLVER_CHECK(L::syevjBatched(h.get(), jobz, uplo, n, pa, b.ld, pw + c.first * n, ws, lwork,
                                             inf + c.first, params.p, c.count));
      }
      return;
    }
    int lwork = 0;
    NABLA_CUSOLVER_CHECK(L::syevd_bufferSize(h.get(), jobz, uplo, n, matrix<T>(a, b, 0), b.ld, pw, &lwork));
    Tensor ws_holder;
    T* ws = workspace<T>(ws_holder, lwork, device);
    for (int64_t i = 0; i < b.count; ++i)
      NABLA_CUSOLVER_CHECK(L::syevd(h.get(), jobz, uplo, n, matrix<T>(a, b, i), b.ld, pw + i * n, ws, lwork, inf + i));
  });
}

void gesvd(const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& v, const Tensor& info) {
  DeviceScope ds(a);
  const MatrixBatch b = batch_of(a, "linalg (gesvd)");
  check_dense(s, "linalg (gesvd)", "s");
  check_dense(info, "linalg (gesvd)", "info");
  const int m = b.rows, n = b.cols, k = std::min(m, n);
  const bool vectors = u.defined();
  NABLA_CHECK(ValueError, s.numel() == b.count * k && vectors == v.defined(), "linalg (gesvd): internal error: s ",
              internal::describe(s), " for ", internal::describe(a));
  if (b.count == 0 || k == 0) return;
  MatrixBatch bu, bv;
  if (vectors) {
    bu = batch_of(u, "linalg (gesvd)");
    bv = batch_of(v, "linalg (gesvd)");
    NABLA_CHECK(ValueError,
                bu.rows == m && bv.rows == n && bu.count == b.count && bv.count == b.count &&
                    (bu.cols == m || bu.cols == k) && (bv.cols == n || bv.cols == k),
                "linalg (gesvd): internal error: u ", internal::describe(u), " and v ", internal::describe(v), " for ",
                internal::describe(a));
  }
  const bool full = vectors && (bu.cols > k || bv.cols > k);
  const int device = device_of(a);
  cudaStream_t stream = stream_for(device);
  int* inf = info.data_ptr<int>();
  const cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  const Shape batch_dims(a.sizes().begin(), a.sizes().end() - 2);
  auto with_tail = [&](int64_t r, int64_t c) {
    Shape sh = batch_dims;
    sh.push_back(r);
    sh.push_back(c);
    return sh;
  };
  by_scalar(a, "linalg (gesvd)", [&](auto z) {
    using T = decltype(z);
    using L = Api<T>;
    Lease<cusolverDnHandle_t> h(solver_pool(), device, stream);
    T* ps = s.data_ptr<T>();
    GesvdjParams params;
    if (solver::svd_call(b.count, m, n, b.packed) == Call::strided) {
      // gesvdjBatched computes the full U (m x m) and V (n x n), packed; the reduced ones are their
      // first k columns. Without vectors they are not referenced but still passed.
      Tensor uf = internal::make_empty(with_tail(m, m), a.dtype(), a.device());
      Tensor vf = internal::make_empty(with_tail(n, n), a.dtype(), a.device());
      for (const solver::Chunk& c : solver::batch_chunks(b.count)) {
        T* pa = matrix<T>(a, b, c.first);
        T* pu = uf.data_ptr<T>() + c.first * m * m;
        T* pv = vf.data_ptr<T>() + c.first * n * n;
        int lwork = 0;
        NABLA_CUSOLVER_CHECK(L::gesvdjBatched_bufferSize(h.get(), jobz, m, n, pa, b.ld, ps + c.first * k, pu, m, pv, n,
                                                         &lwork, params.p, c.count));
        Tensor ws_holder;
        T* ws = workspace<T>(ws_holder, lwork, device);
        NABLA_CUSOLVER_CHECK(L::gesvdjBatched(h.get(), jobz, m, n, pa, b.ld, ps + c.first * k, pu, m, pv, n, ws, lwork,
                                              inf + c.first, params.p, c.count));
      }
      if (vectors) {
        Tensor(u).copy_(uf.narrow(-2, 0, bu.cols));  // a handle to the same tensor
        Tensor(v).copy_(vf.narrow(-2, 0, bv.cols));
      }
      return;
    }
    // gesvdj per matrix, economy-size unless the full U and V are asked for. Without vectors U and V
    // are not referenced; one matrix's worth is passed for every call.
    const int econ = full ? 0 : 1;
    Tensor u1, v1;
    if (!vectors) {
      u1 = internal::make_empty({k, m}, a.dtype(), a.device());
      v1 = internal::make_empty({k, n}, a.dtype(), a.device());
    }
    auto u_at = [&](int64_t i) { return vectors ? matrix<T>(u, bu, i) : u1.data_ptr<T>(); };
    auto v_at = [&](int64_t i) { return vectors ? matrix<T>(v, bv, i) : v1.data_ptr<T>(); };
    const int ldu = vectors ? bu.ld : std::max(m, 1), ldv = vectors ? bv.ld : std::max(n, 1);
    int lwork = 0;
    NABLA_CUSOLVER_CHECK(L::gesvdj_bufferSize(h.get(), jobz, econ, m, n, matrix<T>(a, b, 0), b.ld, ps, u_at(0), ldu,
                                              v_at(0), ldv, &lwork, params.p));
    Tensor ws_holder;
    T* ws = workspace<T>(ws_holder, lwork, device);
    for (int64_t i = 0; i < b.count; ++i)
      NABLA_CUSOLVER_CHECK(L::gesvdj(h.get(), jobz, econ, m, n, matrix<T>(a, b, i), b.ld, ps + i * k, u_at(i), ldu,
                                     v_at(i), ldv, ws, lwork, inf + i, params.p));
  });
}

}  // namespace

// Registration, once, without touching the driver: from the plugin's static initializer (below),
// and from core/linalg/common.cpp in a static libnabla (where a static initializer would be dropped).
// Every entry of NABLA_LINALG_SOLVER, from the list (a missing one is a compile error here).
void register_cuda_solver() {
  static const bool done = [] {
    static const linalg_device::Solver solver = [] {
      linalg_device::Solver table;
      name_entries(table, "cuda");
      namespace impl = nabla::cuda;
      NABLA_LINALG_SOLVER(NABLA_FILL_ENTRY)
      return table;
    }();
    linalg_device::register_solver(DeviceType::cuda, &solver);
    return true;
  }();
  (void)done;
}

namespace {
struct SolverRegistrar {
  SolverRegistrar() { register_cuda_solver(); }
};
SolverRegistrar g_solver_registrar;
}  // namespace

}  // namespace nabla::cuda
