// torch.linalg on CUDA through cuSOLVER (cuda/solver.cpp, core/linalg/solver.h).
//
// CudaSolver.plan_*: the host-side planning of cuda/solver_plan.h (which call takes a batch, how
// the matrices of a strided tensor are addressed, chunks, dtypes), plain C++ checked on every
// machine. CudaSolver.gpu_*: every routed op against the CPU (LAPACK) in float32 and float64,
// single, batched on both sides of each batched-call cut-off, non-contiguous (transposed matrices,
// permuted batch dims), and singular or indefinite inputs raising the CPU's errors; they skip
// without a GPU, and scripts/gpu-verify.sh runs them (its default filter and Cuda*).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <climits>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/impl.h"
#include "core/linalg/lapack.h"
#include "core/linalg/solver.h"
#include "cuda/solver_plan.h"
#include "cuda_test_util.h"
#include "nabla.h"

namespace nabla::cuda::solver {
namespace {

// ---- host: cuda/solver_plan.h ---------------------------------------------------------------------

TEST(CudaSolver, PlanContiguousBatchIsPackedColumnMajor) {
  // (2, 3, c=4, r=5): six 5 x 4 column-major matrices back to back.
  MatrixBatch b = column_major_batch({2, 3, 4, 5}, {60, 20, 5, 1});
  ASSERT_TRUE(b.ok) << b.why;
  EXPECT_EQ(b.rows, 5);
  EXPECT_EQ(b.cols, 4);
  EXPECT_EQ(b.ld, 5);
  EXPECT_EQ(b.count, 6);
  ASSERT_EQ(b.offsets.size(), 6u);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(b.offsets[i], i * 20);
  EXPECT_TRUE(b.packed);
  // One matrix, no batch dims.
  MatrixBatch one = column_major_batch({4, 5}, {5, 1});
  ASSERT_TRUE(one.ok);
  EXPECT_EQ(one.count, 1);
  EXPECT_EQ(one.offsets, std::vector<int64_t>{0});
  EXPECT_TRUE(one.packed);
}

TEST(CudaSolver, PlanPermutedBatchDimsAddressEachMatrixAndAreNotPacked) {
  // A contiguous (3, 2, 4, 5) seen with its batch dims swapped: sizes (2, 3, 4, 5), strides (20, 40, 5, 1).
  MatrixBatch b = column_major_batch({2, 3, 4, 5}, {20, 40, 5, 1});
  ASSERT_TRUE(b.ok) << b.why;
  EXPECT_EQ(b.count, 6);
  // Batch element (i, j) is at i * 20 + j * 40, in row-major order of (i, j).
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 40, 80, 20, 60, 100}));
  EXPECT_FALSE(b.packed);
  // The looped and pointer-array calls take it; the strided batched ones do not.
  EXPECT_EQ(eigh_call(b.count, 4, b.packed), Call::looped);
  EXPECT_EQ(svd_call(b.count, 5, 4, b.packed), Call::looped);
  EXPECT_EQ(lu_call(b.count, 5), Call::pointers);
}

TEST(CudaSolver, PlanPaddedLeadingDimensionAndGappedBatches) {
  // Rows narrowed from 8 to 5: ld 8; batch stride 4 * 8 = 32 keeps it packed, 40 does not.
  MatrixBatch b = column_major_batch({3, 4, 5}, {32, 8, 1});
  ASSERT_TRUE(b.ok) << b.why;
  EXPECT_EQ(b.ld, 8);
  EXPECT_TRUE(b.packed);
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 32, 64}));
  MatrixBatch gap = column_major_batch({3, 4, 5}, {40, 8, 1});
  ASSERT_TRUE(gap.ok);
  EXPECT_FALSE(gap.packed);
  EXPECT_EQ(gap.offsets, (std::vector<int64_t>{0, 40, 80}));
}

TEST(CudaSolver, PlanRejectsRowMajorAndShortLeadingDimensions) {
  // A transposed view (row-major matrices, unit stride across a row): not column-major.
  MatrixBatch t = column_major_batch({2, 4, 5}, {20, 1, 4});
  EXPECT_FALSE(t.ok);
  EXPECT_NE(t.why.find("column-major"), std::string::npos) << t.why;
  // ld 3 < 5 rows: columns overlap.
  MatrixBatch s = column_major_batch({4, 5}, {3, 1});
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.why.find("leading dimension"), std::string::npos) << s.why;
  // A broadcast batch (stride 0) would be written in place by every matrix's call.
  MatrixBatch bc = column_major_batch({3, 4, 5}, {0, 5, 1});
  EXPECT_FALSE(bc.ok);
  EXPECT_NE(bc.why.find("broadcast"), std::string::npos) << bc.why;
  // Fewer than two dims.
  EXPECT_FALSE(column_major_batch({5}, {1}).ok);
  // Sizes beyond cuSOLVER's int.
  MatrixBatch big = column_major_batch({2, int64_t(INT_MAX) + 1}, {int64_t(INT_MAX) + 1, 1});
  EXPECT_FALSE(big.ok);
}

TEST(CudaSolver, PlanSingleRowsColumnsAndEmptyBatches) {
  // One row (r = 1): the stride down a column does not matter; ld is the column stride.
  MatrixBatch row = column_major_batch({2, 4, 1}, {4, 1, 7});
  ASSERT_TRUE(row.ok) << row.why;
  EXPECT_EQ(row.ld, 1);
  EXPECT_TRUE(row.packed);
  // One column (c = 1): ld = rows whatever the stride of dim -2.
  MatrixBatch col = column_major_batch({2, 1, 5}, {5, 99, 1});
  ASSERT_TRUE(col.ok) << col.why;
  EXPECT_EQ(col.ld, 5);
  EXPECT_TRUE(col.packed);
  // An empty batch: nothing to address, nothing to call.
  MatrixBatch empty = column_major_batch({0, 3, 3}, {9, 3, 1});
  ASSERT_TRUE(empty.ok);
  EXPECT_EQ(empty.count, 0);
  EXPECT_TRUE(empty.offsets.empty());
  // A size-1 batch dim of stride 0 is not a broadcast.
  EXPECT_TRUE(column_major_batch({1, 3, 3}, {0, 3, 1}).ok);
}

TEST(CudaSolver, PlanWhichCallEachOpMakes) {
  // LU: one matrix looped (cuSOLVER getrf), a batch of small ones through cuBLAS's batched LU.
  EXPECT_EQ(lu_call(1, 4), Call::looped);
  EXPECT_EQ(lu_call(2, kMaxBatchedLuN), Call::pointers);
  EXPECT_EQ(lu_call(2, kMaxBatchedLuN + 1), Call::looped);
  EXPECT_EQ(lu_solve_call(8, 16), Call::pointers);
  // Cholesky: potrfBatched for any batch.
  EXPECT_EQ(cholesky_call(1), Call::looped);
  EXPECT_EQ(cholesky_call(2), Call::pointers);
  // eigh: syevjBatched for packed batches of matrices up to 32 x 32.
  EXPECT_EQ(eigh_call(4, 32, true), Call::strided);
  EXPECT_EQ(eigh_call(4, 33, true), Call::looped);
  EXPECT_EQ(eigh_call(1, 8, true), Call::looped);
  EXPECT_EQ(eigh_call(4, 8, false), Call::looped);
  // svd: gesvdjBatched when both dims are at most 32.
  EXPECT_EQ(svd_call(4, 32, 7, true), Call::strided);
  EXPECT_EQ(svd_call(4, 7, 33, true), Call::looped);
  EXPECT_EQ(svd_call(1, 4, 4, true), Call::looped);
  EXPECT_EQ(svd_call(4, 4, 4, false), Call::looped);
}

TEST(CudaSolver, PlanBatchesBeyondIntGoInChunks) {
  EXPECT_TRUE(batch_chunks(0).empty());
  std::vector<Chunk> one = batch_chunks(5);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first, 0);
  EXPECT_EQ(one[0].count, 5);
  std::vector<Chunk> small = batch_chunks(7, 3);
  ASSERT_EQ(small.size(), 3u);
  EXPECT_EQ(small[0].first, 0);
  EXPECT_EQ(small[1].first, 3);
  EXPECT_EQ(small[2].first, 6);
  EXPECT_EQ(small[2].count, 1);
  const int64_t huge = int64_t(INT_MAX) * 2 + 3;
  std::vector<Chunk> big = batch_chunks(huge);
  ASSERT_EQ(big.size(), 3u);
  EXPECT_EQ(big[0].count, INT_MAX);
  EXPECT_EQ(big[1].first, int64_t(INT_MAX));
  EXPECT_EQ(big[2].first, int64_t(INT_MAX) * 2);
  EXPECT_EQ(big[2].count, 3);
}

TEST(CudaSolver, PlanDtypeDispatchAndWorkspaceSizes) {
  EXPECT_EQ(scalar_of(kFloat32), Scalar::f32);
  EXPECT_EQ(scalar_of(kFloat64), Scalar::f64);
  for (DType dt : {DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8, DType::boolean})
    EXPECT_EQ(scalar_of(dt), Scalar::none) << dt;
  EXPECT_EQ(workspace_bytes(10, Scalar::f32), 40u);
  EXPECT_EQ(workspace_bytes(10, Scalar::f64), 80u);
  EXPECT_EQ(workspace_bytes(0, Scalar::f64), 8u);  // never a null workspace
}

// ---- host: the device forwards of core/linalg/ through LAPACK ------------------------------------
//
// LAPACK itself behind core/linalg/solver.h's interface, registered for CPU tensors: the ops then
// take the device path (fresh copies in the layouts the solver contract names, the interface's
// in-place kernels, infos read back once, errors) on any machine, addressing the matrices with
// cuda/solver_plan.h as cuda/solver.cpp does. Only the cuSOLVER calls themselves are left to the
// gpu_* tests.

// core/linalg/lapack.h's overloads, with the routines looked up at run time in the OpenBLAS that libnabla
// loaded (the tests do not link LAPACK themselves).
namespace lp {
template <class F>
F fn(const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  if (!p) throw Error(std::string("LAPACK's ") + name + " is not loaded");
  return reinterpret_cast<F>(p);
}
void getrf(int m, int n, float* a, int lda, int* ipiv, int* info) {
  static auto f = fn<decltype(&sgetrf_)>("sgetrf_");
  f(&m, &n, a, &lda, ipiv, info);
}
void getrf(int m, int n, double* a, int lda, int* ipiv, int* info) {
  static auto f = fn<decltype(&dgetrf_)>("dgetrf_");
  f(&m, &n, a, &lda, ipiv, info);
}
void getrs(char t, int n, int k, const float* a, int lda, const int* ipiv, float* b, int ldb, int* info) {
  static auto f = fn<decltype(&sgetrs_)>("sgetrs_");
  f(&t, &n, &k, a, &lda, ipiv, b, &ldb, info, 1);
}
void getrs(char t, int n, int k, const double* a, int lda, const int* ipiv, double* b, int ldb, int* info) {
  static auto f = fn<decltype(&dgetrs_)>("dgetrs_");
  f(&t, &n, &k, a, &lda, ipiv, b, &ldb, info, 1);
}
void potrf(char u, int n, float* a, int lda, int* info) {
  static auto f = fn<decltype(&spotrf_)>("spotrf_");
  f(&u, &n, a, &lda, info, 1);
}
void potrf(char u, int n, double* a, int lda, int* info) {
  static auto f = fn<decltype(&dpotrf_)>("dpotrf_");
  f(&u, &n, a, &lda, info, 1);
}
void geqrf(int m, int n, float* a, int lda, float* tau, float* work, int lwork, int* info) {
  static auto f = fn<decltype(&sgeqrf_)>("sgeqrf_");
  f(&m, &n, a, &lda, tau, work, &lwork, info);
}
void geqrf(int m, int n, double* a, int lda, double* tau, double* work, int lwork, int* info) {
  static auto f = fn<decltype(&dgeqrf_)>("dgeqrf_");
  f(&m, &n, a, &lda, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, float* a, int lda, const float* tau, float* work, int lwork, int* info) {
  static auto f = fn<decltype(&sorgqr_)>("sorgqr_");
  f(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, double* a, int lda, const double* tau, double* work, int lwork, int* info) {
  static auto f = fn<decltype(&dorgqr_)>("dorgqr_");
  f(&m, &n, &k, a, &lda, tau, work, &lwork, info);
}
void gesdd(char j, int m, int n, float* a, int lda, float* s, float* u, int ldu, float* vt, int ldvt, float* work,
           int lwork, int* iwork, int* info) {
  static auto f = fn<decltype(&sgesdd_)>("sgesdd_");
  f(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}
void gesdd(char j, int m, int n, double* a, int lda, double* s, double* u, int ldu, double* vt, int ldvt, double* work,
           int lwork, int* iwork, int* info) {
  static auto f = fn<decltype(&dgesdd_)>("dgesdd_");
  f(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);
}
void syevd(char j, char u, int n, float* a, int lda, float* w, float* work, int lwork, int* iwork, int liwork,
           int* info) {
  static auto f = fn<decltype(&ssyevd_)>("ssyevd_");
  f(&j, &u, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
void syevd(char j, char u, int n, double* a, int lda, double* w, double* work, int lwork, int* iwork, int liwork,
           int* info) {
  static auto f = fn<decltype(&dsyevd_)>("dsyevd_");
  f(&j, &u, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);
}
}  // namespace lp

int g_fake_calls = 0;  // calls into the fake solver: proof that the ops took the device path

MatrixBatch plan_of(const Tensor& t) {
  ++g_fake_calls;
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  MatrixBatch b = column_major_batch(sizes, strides);
  if (!b.ok) throw ValueError("fake solver: " + b.why + " " + internal::describe(t));
  return b;
}
template <class T>
T* mat(const Tensor& t, const MatrixBatch& b, int64_t i) {
  return static_cast<T*>(t.data_ptr()) + b.offsets[static_cast<size_t>(i)];
}
template <class F>
void by_dt(const Tensor& t, F&& f) {
  if (t.dtype() == kFloat64) f(double{});
  else f(float{});
}

void fake_getrf(const Tensor& a, const Tensor& ipiv, const Tensor& info) {
  MatrixBatch b = plan_of(a);
  by_dt(a, [&](auto z) {
    using T = decltype(z);
    for (int64_t i = 0; i < b.count; ++i)
      lp::getrf(b.rows, b.rows, mat<T>(a, b, i), b.ld, ipiv.data_ptr<int>() + i * b.rows, info.data_ptr<int>() + i);
  });
}
void fake_getrs(bool transpose, const Tensor& lu, const Tensor& ipiv, const Tensor& rhs) {
  MatrixBatch a = plan_of(lu), x = plan_of(rhs);
  by_dt(lu, [&](auto z) {
    using T = decltype(z);
    int inf = 0;
    for (int64_t i = 0; i < a.count; ++i)
      lp::getrs(transpose ? 'T' : 'N', a.rows, x.cols, mat<T>(lu, a, i), a.ld, ipiv.data_ptr<int>() + i * a.rows,
                mat<T>(rhs, x, i), x.ld, &inf);
  });
}
void fake_potrf(bool upper, const Tensor& a, const Tensor& info) {
  MatrixBatch b = plan_of(a);
  by_dt(a, [&](auto z) {
    using T = decltype(z);
    for (int64_t i = 0; i < b.count; ++i)
      lp::potrf(upper ? 'U' : 'L', b.rows, mat<T>(a, b, i), b.ld, info.data_ptr<int>() + i);
  });
}
void fake_geqrf(const Tensor& a, const Tensor& tau) {
  MatrixBatch b = plan_of(a);
  const int k = std::min(b.rows, b.cols);
  by_dt(a, [&](auto z) {
    using T = decltype(z);
    std::vector<T> work(std::max(b.rows, b.cols) * 64 + 1);
    int inf = 0;
    for (int64_t i = 0; i < b.count; ++i)
      lp::geqrf(b.rows, b.cols, mat<T>(a, b, i), b.ld, tau.data_ptr<T>() + i * k, work.data(),
                static_cast<int>(work.size()), &inf);
  });
}
void fake_orgqr(const Tensor& q, const Tensor& tau) {
  MatrixBatch b = plan_of(q);
  const int k = static_cast<int>(tau.sizes().back());
  by_dt(q, [&](auto z) {
    using T = decltype(z);
    std::vector<T> work(std::max(b.rows, b.cols) * 64 + 1);
    int inf = 0;
    for (int64_t i = 0; i < b.count; ++i)
      lp::orgqr(b.rows, b.cols, k, mat<T>(q, b, i), b.ld, tau.data_ptr<T>() + i * k, work.data(),
                static_cast<int>(work.size()), &inf);
  });
}
void fake_syevd(bool vectors, bool upper, const Tensor& a, const Tensor& w, const Tensor& info) {
  MatrixBatch b = plan_of(a);
  const int n = b.rows;
  by_dt(a, [&](auto z) {
    using T = decltype(z);
    std::vector<T> work(2 * n * n + 6 * n + 1 + 64);
    std::vector<int> iwork(5 * n + 3);
    for (int64_t i = 0; i < b.count; ++i)
      lp::syevd(vectors ? 'V' : 'N', upper ? 'U' : 'L', n, mat<T>(a, b, i), b.ld, w.data_ptr<T>() + i * n, work.data(),
                static_cast<int>(work.size()), iwork.data(), static_cast<int>(iwork.size()), info.data_ptr<int>() + i);
  });
}
// gesdd, with V^T turned into V as cuSOLVER's gesvdj returns it.
void fake_gesvd(const Tensor& a, const Tensor& s, const Tensor& u, const Tensor& v, const Tensor& info) {
  MatrixBatch b = plan_of(a);
  const int m = b.rows, n = b.cols, k = std::min(m, n);
  const bool vectors = u.defined();
  MatrixBatch bu, bv;
  if (vectors) {
    bu = plan_of(u);
    bv = plan_of(v);
  }
  const bool full = vectors && (bu.cols > k || bv.cols > k);
  const char jobz = !vectors ? 'N' : full ? 'A' : 'S';
  by_dt(a, [&](auto z) {
    using T = decltype(z);
    const int vrows = full ? n : k;
    std::vector<T> vt(static_cast<size_t>(vrows) * n + 1), u1(static_cast<size_t>(m) * m + 1);
    std::vector<T> work(static_cast<size_t>(4 * std::max(m, n) * std::max(m, n) + 8 * std::max(m, n) + 64));
    std::vector<int> iwork(8 * k + 1);
    for (int64_t i = 0; i < b.count; ++i) {
      lp::gesdd(jobz, m, n, mat<T>(a, b, i), b.ld, s.data_ptr<T>() + i * k, vectors ? mat<T>(u, bu, i) : u1.data(),
                vectors ? bu.ld : 1, vt.data(), vectors ? std::max(vrows, 1) : 1, work.data(),
                static_cast<int>(work.size()), iwork.data(), info.data_ptr<int>() + i);
      if (!vectors) continue;
      T* pv = mat<T>(v, bv, i);
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < bv.cols; ++c)
          pv[r + static_cast<int64_t>(c) * bv.ld] = vt[c + static_cast<size_t>(r) * vrows];
    }
  });
}

// The solver table with one fake_<entry> per entry of core/linalg/solver.h's list.
const linalg_device::Solver kLapackSolver = [] {
  linalg_device::Solver s;
  name_entries(s, "cpu");
  s.getrf.fn = &fake_getrf;
  s.getrs.fn = &fake_getrs;
  s.potrf.fn = &fake_potrf;
  s.geqrf.fn = &fake_geqrf;
  s.orgqr.fn = &fake_orgqr;
  s.syevd.fn = &fake_syevd;
  s.gesvd.fn = &fake_gesvd;
  int entries = 0, filled = 0;
  s.for_each_entry([&](const auto& entry) { ++entries, filled += entry ? 1 : 0; });
  if (filled != entries) throw Error("the fake solver does not fill every entry of NABLA_LINALG_SOLVER");
  return s;
}();

// Registers LAPACK as the CPU's device solver for the scope.
struct LapackAsDeviceSolver {
  LapackAsDeviceSolver() { linalg_device::register_solver(DeviceType::cpu, &kLapackSolver); }
  ~LapackAsDeviceSolver() { linalg_device::register_solver(DeviceType::cpu, nullptr); }
};

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) { return e.what(); }
  return "no error";
}

// Every routed op's outputs and errors through the device path equal the host path's.
TEST(CudaSolver, DeviceForwardsThroughLapackMatchTheHostPath) {
  manual_seed(11);
  auto outputs = [](DType dt) {
    std::vector<std::pair<std::string, Tensor>> out;
    auto add = [&](const std::string& name, const Tensor& t) { out.emplace_back(name, t); };
    const int64_t n = 5;
    Tensor A = randn({2, 3, n, n}, dtype(dt)) + eye(n, std::nullopt, dtype(dt)) * 5.0;
    Tensor At = A.mT(), Ap = A.permute({1, 0, 2, 3});
    Tensor B = randn({2, 3, n, 2}, dtype(dt));
    Tensor X = randn({2, n, n}, dtype(dt));
    Tensor S = matmul(X, X.mT()) + eye(n, std::nullopt, dtype(dt)) * 5.0;
    Tensor Y = X + X.mT();
    for (auto [name, M] :
         {std::pair<std::string, Tensor>{"A", A}, {"At", At}, {"Ap", Ap}, {"A0", A.select(0, 1).select(0, 2)}}) {
      add("inv " + name, linalg::inv(M));
      add("det " + name, linalg::det(M));
      auto [sg, la] = linalg::slogdet(M);
      add("slogdet sign " + name, sg);
      add("slogdet log " + name, la);
    }
    add("solve", linalg::solve(A, B));
    add("solve broadcast", linalg::solve(A, B.select(0, 0).select(0, 1)));
    add("solve right", linalg::solve(At, B.mT(), false));
    add("solve vector", linalg::solve(Ap, randn({3, 2, n}, dtype(dt))));
    Tensor flip = cat({A.narrow(-2, 1, 1), A.narrow(-2, 0, 1), A.narrow(-2, 2, n - 2)}, -2);
    add("det flipped", linalg::det(flip));
    add("slogdet flipped", std::get<0>(linalg::slogdet(flip)));
    add("cholesky", linalg::cholesky(S));
    add("cholesky upper", linalg::cholesky(S.mT() + S.triu(1), true));
    add("cholesky one", linalg::cholesky(S.select(0, 1)));
    for (Shape sh : {Shape{2, 6, 4}, Shape{4, 6}, Shape{3, 3}}) {
      Tensor M = randn(sh, dtype(dt));
      for (const char* mode : {"reduced", "complete", "r"}) {
        auto [Q, R] = linalg::qr(M, mode);
        add(internal::str("qr Q ", sh, mode), Q);
        add(internal::str("qr R ", sh, mode), R);
      }
      add(internal::str("qr transposed ", sh), std::get<0>(linalg::qr(M.mT())));
      for (bool full : {false, true}) {
        auto [U, Sv, Vh] = linalg::svd(M, full);
        add(internal::str("svd U ", sh, full), U);
        add(internal::str("svd S ", sh, full), Sv);
        add(internal::str("svd Vh ", sh, full), Vh);
      }
      add(internal::str("svdvals ", sh), linalg::svdvals(M.mT()));
      add(internal::str("nuc ", sh), linalg::matrix_norm(M, "nuc"));
    }
    for (const char* uplo : {"L", "U"}) {
      auto [L, V] = linalg::eigh(Y + Y.triu(1) * 2, uplo);
      add(std::string("eigh L ") + uplo, L);
      add(std::string("eigh V ") + uplo, V);
      add(std::string("eigvalsh ") + uplo, linalg::eigvalsh(Y.mT(), uplo));
    }
    return out;
  };
  for (DType dt : {kFloat32, kFloat64}) {
    manual_seed(12);
    auto host = outputs(dt);
    std::vector<std::pair<std::string, Tensor>> dev;
    g_fake_calls = 0;
    {
      LapackAsDeviceSolver fake;
      manual_seed(12);
      dev = outputs(dt);
    }
    EXPECT_GT(g_fake_calls, 60) << "the ops did not take the device path";
    g_fake_calls = 0;
    ASSERT_EQ(host.size(), dev.size());
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    for (size_t i = 0; i < host.size(); ++i) {
      EXPECT_EQ(dev[i].second.dtype(), host[i].second.dtype()) << host[i].first;
      EXPECT_TRUE(testing::close_on_host(dev[i].second, host[i].second, tol)) << host[i].first << " " << dt;
    }
  }
}

TEST(CudaSolver, DeviceForwardsThroughLapackRaiseTheHostErrors) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor A = randn({3, 3, 3}, dtype(dt)) + eye(3, std::nullopt, dtype(dt)) * 3.0;
    A.select(0, 1).select(0, 2).fill_(0);  // batch element 1: a zero row
    Tensor S = eye(4, std::nullopt, dtype(dt)).expand({3, 4, 4}).clone();
    S.select(0, 2).select(0, 1).select(0, 1).fill_(-1.0);  // batch element 2: leading minor of order 2
    Tensor B = randn({3, 3, 2}, dtype(dt));
    const std::vector<std::function<void()>> calls = {
        [&] { linalg::inv(A); },      [&] { linalg::solve(A, B); },      [&] { linalg::inv(A.select(0, 1)); },
        [&] { linalg::cholesky(S); }, [&] { linalg::cholesky(S.mT()); }, [&] { linalg::cholesky(S.select(0, 2)); }};
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string host = message_of(calls[i]);
      ASSERT_NE(host, "no error") << i;
      LapackAsDeviceSolver fake;
      EXPECT_EQ(message_of(calls[i]), host) << i;
    }
    EXPECT_NE(message_of([&] { linalg::inv(A); }).find("(Batch element 1): The diagonal element 3 is zero"),
              std::string::npos);
    // Singular det/slogdet: no error, 0, sign 0, -inf.
    LapackAsDeviceSolver fake;
    EXPECT_EQ(linalg::det(A).select(0, 1).item<double>(), 0.0);
    auto [sg, la] = linalg::slogdet(A);
    EXPECT_EQ(sg.select(0, 1).item<double>(), 0.0);
    EXPECT_EQ(la.select(0, 1).item<double>(), -std::numeric_limits<double>::infinity());
  }
}

}  // namespace
}  // namespace nabla::cuda::solver

// ---- GPU: every routed op against the CPU -----------------------------------------------------------

namespace nabla::testing {
namespace {

// shape with its last two dims replaced by (r, c).
Shape with_last(IntArrayRef shape, int64_t r, int64_t c) {
  Shape s(shape.begin(), shape.end());
  s[s.size() - 2] = r;
  s[s.size() - 1] = c;
  return s;
}

double tol_for(DType dt) { return dt == kFloat64 ? 1e-8 : 2e-3; }

Tensor well_conditioned(IntArrayRef shape, DType dt) {
  const int64_t n = shape.back();
  return randn(shape, dtype(dt)) + eye(n, std::nullopt, dtype(dt)) * static_cast<double>(n);
}
Tensor spd(IntArrayRef shape, DType dt) {
  Tensor x = randn(shape, dtype(dt));
  const int64_t n = shape.back();
  return matmul(x, x.mT()) + eye(n, std::nullopt, dtype(dt)) * static_cast<double>(n);
}
Tensor symmetric(IntArrayRef shape, DType dt) {
  Tensor x = randn(shape, dtype(dt));
  return x + x.mT();
}

// The message before " (A: ...)", which names the device.
std::string head(const std::string& msg) { return msg.substr(0, msg.find(" (A: ")); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) { return e.what(); }
  return "no error";
}

// Columns of X (*, r, c) with their signs fixed (the largest |entry| of each column positive), so
// that singular and eigen vectors from different libraries compare.
Tensor fix_column_signs(const Tensor& X) {
  Tensor h = X.to(kCPU, kFloat64);
  Tensor idx = argmax(abs(h), -2, true);  // (*, 1, c)
  Tensor s = sign(gather(h, -2, idx));
  return h * where(eq(s, 0), 1.0, s);
}

const DType kDtypes[] = {kFloat32, kFloat64};

TEST(CudaSolver, GpuInvSolveDetMatchCpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(1);
  for (DType dt : kDtypes) {
    const double tol = tol_for(dt);
    // One matrix (looped getrf), small batches (cuBLAS batched), a batch above the cut-off (looped).
    for (Shape shape : {Shape{6, 6}, Shape{2, 3, 5, 5}, Shape{2, 140, 140}}) {
      Tensor A = well_conditioned(shape, dt);
      Tensor Ac = A.to(kCUDA);
      SCOPED_TRACE(internal::str(dt, " ", shape));
      EXPECT_TRUE(close_on_host(linalg::inv(Ac), linalg::inv(A), tol));
      EXPECT_TRUE(close_on_host(linalg::inv(Ac.mT()), linalg::inv(A.mT()), tol));               // transposed matrices
      if (shape.back() <= 6) EXPECT_TRUE(close_on_host(linalg::det(Ac), linalg::det(A), tol));  // 140 x 140: inf
      auto [s, l] = linalg::slogdet(Ac);
      auto [s0, l0] = linalg::slogdet(A);
      EXPECT_TRUE(close_on_host(s, s0, 0));
      EXPECT_TRUE(close_on_host(l, l0, tol));
      Shape bshape = shape;
      bshape.back() = 3;
      Tensor B = randn(bshape, dtype(dt));
      EXPECT_TRUE(close_on_host(linalg::solve(Ac, B.to(kCUDA)), linalg::solve(A, B), tol));
      EXPECT_TRUE(close_on_host(linalg::solve(Ac.mT(), B.to(kCUDA), true), linalg::solve(A.mT(), B, true), tol));
      Tensor Bl = randn(with_last(shape, 3, shape.back()), dtype(dt));
      EXPECT_TRUE(close_on_host(linalg::solve(Ac, Bl.to(kCUDA), false), linalg::solve(A, Bl, false), tol));
      Tensor v = randn(Shape(shape.begin(), shape.end() - 1), dtype(dt));  // vector right sides
      EXPECT_TRUE(close_on_host(linalg::solve(Ac, v.to(kCUDA)), linalg::solve(A, v), tol));
    }
    // Permuted batch dims, a broadcast right side, negative determinants.
    Tensor A = well_conditioned({3, 2, 4, 4}, dt);
    Tensor P = A.permute({1, 0, 2, 3}), Pc = A.to(kCUDA).permute({1, 0, 2, 3});
    EXPECT_TRUE(close_on_host(linalg::inv(Pc), linalg::inv(P), tol));
    Tensor B = randn({4, 2}, dtype(dt));
    EXPECT_TRUE(close_on_host(linalg::solve(Pc, B.to(kCUDA)), linalg::solve(P, B), tol));
    // Two rows swapped: negative determinants.
    Tensor flip = cat({A.narrow(-2, 1, 1), A.narrow(-2, 0, 1), A.narrow(-2, 2, 2)}, -2);
    EXPECT_TRUE(close_on_host(linalg::det(flip.to(kCUDA)), linalg::det(flip), tol));
    auto [fs, fl] = linalg::slogdet(flip.to(kCUDA));
    auto [fs0, fl0] = linalg::slogdet(flip);
    EXPECT_TRUE(close_on_host(fs, fs0, 0));
    EXPECT_TRUE(close_on_host(fl, fl0, tol));
  }
}

TEST(CudaSolver, GpuSingularInputsRaiseTheCpuErrorsWithTheBatchElement) {
  NABLA_REQUIRE_CUDA();
  for (DType dt : kDtypes) {
    Tensor A = well_conditioned({3, 3, 3}, dt);
    A.select(0, 1).select(0, 2).fill_(0);  // batch element 1: a zero row, exactly singular
    Tensor Ac = A.to(kCUDA);
    const std::string cpu_inv = error_of([&] { linalg::inv(A); });
    EXPECT_NE(cpu_inv.find("(Batch element 1): The diagonal element 3 is zero"), std::string::npos) << cpu_inv;
    EXPECT_EQ(head(error_of([&] { linalg::inv(Ac); })), head(cpu_inv));
    Tensor B = randn({3, 3, 2}, dtype(dt));
    const std::string cpu_solve = error_of([&] { linalg::solve(A, B); });
    EXPECT_NE(cpu_solve.find("(Batch element 1)"), std::string::npos) << cpu_solve;
    EXPECT_EQ(head(error_of([&] { linalg::solve(Ac, B.to(kCUDA)); })), head(cpu_solve));
    // One matrix (the looped path) and 140 x 140 ones (looped batch).
    EXPECT_EQ(head(error_of([&] { linalg::inv(Ac.select(0, 1)); })),
              head(error_of([&] { linalg::inv(A.select(0, 1)); })));
    Tensor big = well_conditioned({2, 140, 140}, dt);
    big.select(0, 1).select(0, 7).fill_(0);
    EXPECT_EQ(head(error_of([&] { linalg::inv(big.to(kCUDA)); })), head(error_of([&] { linalg::inv(big); })));
    // det and slogdet of a singular matrix: 0, sign 0, -inf, no error.
    EXPECT_TRUE(close_on_host(linalg::det(Ac), linalg::det(A), tol_for(dt) * 100));
    auto [s, l] = linalg::slogdet(Ac);
    auto [s0, l0] = linalg::slogdet(A);
    EXPECT_TRUE(close_on_host(s, s0, 0));
    EXPECT_TRUE(close_on_host(l, l0, tol_for(dt)));
    // cholesky of an indefinite matrix: the leading minor of order 2 in batch element 2.
    Tensor S = spd({3, 4, 4}, dt);
    S.select(0, 2).select(0, 1).select(0, 1).fill_(-100.0);
    const std::string cpu_chol = error_of([&] { linalg::cholesky(S); });
    EXPECT_NE(cpu_chol.find("(Batch element 2)"), std::string::npos) << cpu_chol;
    EXPECT_NE(cpu_chol.find("leading minor of order 2"), std::string::npos) << cpu_chol;
    EXPECT_EQ(head(error_of([&] { linalg::cholesky(S.to(kCUDA)); })), head(cpu_chol));
    EXPECT_EQ(head(error_of([&] { linalg::cholesky(S.select(0, 2).to(kCUDA)); })),
              head(error_of([&] { linalg::cholesky(S.select(0, 2)); })));
  }
}

TEST(CudaSolver, GpuCholeskyMatchesCpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(2);
  for (DType dt : kDtypes)
    for (Shape shape : {Shape{7, 7}, Shape{2, 3, 6, 6}, Shape{1, 5, 5}}) {
      SCOPED_TRACE(internal::str(dt, " ", shape));
      Tensor A = spd(shape, dt), Ac = A.to(kCUDA);
      EXPECT_TRUE(close_on_host(linalg::cholesky(Ac), linalg::cholesky(A), tol_for(dt)));
      EXPECT_TRUE(close_on_host(linalg::cholesky(Ac, true), linalg::cholesky(A, true), tol_for(dt)));
      EXPECT_TRUE(close_on_host(linalg::cholesky(Ac.mT()), linalg::cholesky(A.mT()), tol_for(dt)));
      // Only the lower triangle is read: garbage above it changes nothing.
      Tensor G = A + A.triu(1) * 3;
      EXPECT_TRUE(close_on_host(linalg::cholesky(G.to(kCUDA)), linalg::cholesky(A), tol_for(dt)));
    }
}

TEST(CudaSolver, GpuQrMatchesCpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(3);
  for (DType dt : kDtypes)
    for (Shape shape : {Shape{6, 4}, Shape{4, 6}, Shape{2, 3, 5, 5}, Shape{2, 7, 3}}) {
      Tensor A = randn(shape, dtype(dt)), Ac = A.to(kCUDA);
      for (const char* mode : {"reduced", "complete", "r"}) {
        SCOPED_TRACE(internal::str(dt, " ", shape, " ", mode));
        auto [Q, R] = linalg::qr(Ac, mode);
        auto [Q0, R0] = linalg::qr(A, mode);
        // Householder QR has one answer for LAPACK's and cuSOLVER's reflector convention.
        EXPECT_TRUE(close_on_host(R, R0, tol_for(dt)));
        EXPECT_TRUE(close_on_host(Q, Q0, tol_for(dt)));
        EXPECT_EQ(Q.device(), Ac.device());
      }
      auto [Qt, Rt] = linalg::qr(Ac.mT());
      auto [Qt0, Rt0] = linalg::qr(A.mT());
      EXPECT_TRUE(close_on_host(Qt, Qt0, tol_for(dt)));
      EXPECT_TRUE(close_on_host(Rt, Rt0, tol_for(dt)));
    }
}

TEST(CudaSolver, GpuEighMatchesCpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(4);
  for (DType dt : kDtypes)
    // One matrix (syevd), a batch of small ones (syevjBatched), a batch above 32 (syevd looped).
    for (Shape shape : {Shape{6, 6}, Shape{2, 3, 8, 8}, Shape{2, 40, 40}}) {
      Tensor A = symmetric(shape, dt), Ac = A.to(kCUDA);
      for (const char* uplo : {"L", "U"}) {
        SCOPED_TRACE(internal::str(dt, " ", shape, " ", uplo));
        // Garbage in the triangle that is not read.
        Tensor G = std::string(uplo) == "L" ? A + A.triu(1) : A + A.tril(-1);
        auto [L, V] = linalg::eigh(G.to(kCUDA), uplo);
        auto [L0, V0] = linalg::eigh(G, uplo);
        EXPECT_TRUE(close_on_host(L, L0, tol_for(dt) * 10));
        EXPECT_TRUE(close_on_host(fix_column_signs(V), fix_column_signs(V0), tol_for(dt) * 10));
        EXPECT_TRUE(close_on_host(matmul(V * L.unsqueeze(-2), V.mT()), A, tol_for(dt) * 10));
        EXPECT_TRUE(close_on_host(linalg::eigvalsh(G.to(kCUDA), uplo), L0, tol_for(dt) * 10));
      }
      auto [Lp, Vp] = linalg::eigh(Ac.mT());  // transposed (the same symmetric matrix)
      EXPECT_TRUE(close_on_host(Lp, std::get<0>(linalg::eigh(A)), tol_for(dt) * 10));
    }
}

TEST(CudaSolver, GpuSvdMatchesCpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(5);
  for (DType dt : kDtypes)
    // One matrix and large batches (gesvdj looped), small batches (gesvdjBatched); tall and wide.
    for (Shape shape : {Shape{7, 4}, Shape{4, 7}, Shape{2, 3, 6, 5}, Shape{3, 5, 9}, Shape{2, 40, 35}}) {
      Tensor A = randn(shape, dtype(dt)), Ac = A.to(kCUDA);
      const int64_t k = std::min(shape[shape.size() - 2], shape.back());
      for (bool full : {false, true}) {
        SCOPED_TRACE(internal::str(dt, " ", shape, full ? " full" : " reduced"));
        auto [U, S, Vh] = linalg::svd(Ac, full);
        auto [U0, S0, Vh0] = linalg::svd(A, full);
        ASSERT_EQ(U.sizes(), U0.sizes());
        ASSERT_EQ(Vh.sizes(), Vh0.sizes());
        EXPECT_TRUE(close_on_host(S, S0, tol_for(dt) * 10));
        // The first k singular vectors are unique up to sign (distinct singular values); the rest
        // of a full U or V is any orthonormal completion.
        EXPECT_TRUE(close_on_host(fix_column_signs(U.narrow(-1, 0, k)), fix_column_signs(U0.narrow(-1, 0, k)),
                                  tol_for(dt) * 100));
        EXPECT_TRUE(close_on_host(fix_column_signs(Vh.narrow(-2, 0, k).mT()),
                                  fix_column_signs(Vh0.narrow(-2, 0, k).mT()), tol_for(dt) * 100));
        Tensor Ur = U.narrow(-1, 0, k), Vr = Vh.narrow(-2, 0, k);
        EXPECT_TRUE(close_on_host(matmul(Ur * S.unsqueeze(-2), Vr), A, tol_for(dt) * 10));
        const int64_t uc = U.sizes().back(), vr = Vh.sizes()[Vh.dim() - 2];
        EXPECT_TRUE(close_on_host(matmul(U.mT(), U),
                                  eye(uc, std::nullopt, dtype(dt)).expand(with_last(U.sizes(), uc, uc)),
                                  tol_for(dt) * 10));
        EXPECT_TRUE(close_on_host(matmul(Vh, Vh.mT()),
                                  eye(vr, std::nullopt, dtype(dt)).expand(with_last(Vh.sizes(), vr, vr)),
                                  tol_for(dt) * 10));
      }
      EXPECT_TRUE(close_on_host(linalg::svdvals(Ac), linalg::svdvals(A), tol_for(dt) * 10));
      EXPECT_TRUE(close_on_host(linalg::svdvals(Ac.mT()), linalg::svdvals(A.mT()), tol_for(dt) * 10));
      EXPECT_TRUE(close_on_host(linalg::matrix_norm(Ac, "nuc"), linalg::matrix_norm(A, "nuc"), tol_for(dt) * 10));
      EXPECT_TRUE(close_on_host(linalg::matrix_norm(Ac, 2.0), linalg::matrix_norm(A, 2.0), tol_for(dt) * 10));
    }
}

TEST(CudaSolver, GpuGradientsThroughRoutedForwardsMatchCpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(6);
  Tensor A = well_conditioned({2, 4, 4}, kFloat64);
  Tensor S = spd({2, 4, 4}, kFloat64);
  Tensor M = randn({2, 5, 3}, dtype(kFloat64));
  auto grad = [](const Tensor& x, auto&& f) {
    Tensor p = x.detach().requires_grad_(true);
    f(p).sum().backward();
    return p.grad();
  };
  auto both = [&](const Tensor& x, auto&& f) { EXPECT_TRUE(close_on_host(grad(x.to(kCUDA), f), grad(x, f), 1e-8)); };
  both(A, [](const Tensor& p) { return linalg::inv(p); });
  both(A, [](const Tensor& p) { return linalg::det(p); });
  both(A, [](const Tensor& p) { return std::get<1>(linalg::slogdet(p)); });
  both(A, [](const Tensor& p) { return linalg::solve(p, p.narrow(-1, 0, 2)); });
  both(S, [](const Tensor& p) { return linalg::cholesky(p); });
  both(S, [](const Tensor& p) { return linalg::eigvalsh(p); });
  both(M, [](const Tensor& p) { return linalg::svdvals(p); });
  both(M, [](const Tensor& p) { return std::get<1>(linalg::qr(p)); });
}

TEST(CudaSolver, GpuEmptyInputsKeepTheirDeviceAndShapes) {
  NABLA_REQUIRE_CUDA();
  Tensor E = empty({0, 3, 3}, dtype(kFloat32).device(kCUDA));
  EXPECT_EQ(linalg::inv(E).device(), kCUDA);
  EXPECT_EQ(linalg::inv(E).sizes(), E.sizes());
  EXPECT_EQ(linalg::det(E).sizes(), Shape{0});
  Tensor Z = empty({2, 0, 0}, dtype(kFloat64).device(kCUDA));
  EXPECT_TRUE(close_on_host(linalg::det(Z), ones({2}, dtype(kFloat64)), 0));
  auto [U, S, Vh] = linalg::svd(empty({3, 0}, dtype(kFloat32).device(kCUDA)));
  EXPECT_EQ(U.sizes(), (Shape{3, 3}));
  EXPECT_EQ(S.sizes(), Shape{0});
  EXPECT_EQ(U.device(), kCUDA);
}

}  // namespace
}  // namespace nabla::testing
