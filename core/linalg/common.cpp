// What the linear algebra families share (core/linalg/common.h), and the device solver's table.
#include "core/linalg/common.h"

#include <climits>
#include <cstring>
#include <vector>

#ifdef NABLA_CUDA_STATIC
namespace nabla::cuda {
void register_cuda_solver();  // cuda/solver.cpp, part of a static libnabla built with CUDA
}
#endif

namespace nabla {

namespace linalg_device {
namespace {
DeviceTable<const Solver>& solvers() {
  static DeviceTable<const Solver> table;
  return table;
}
}  // namespace
void register_solver(DeviceType type, const Solver* solver) { solvers().set(type, solver); }
const Solver* solver_for(DeviceType type) {
#ifdef NABLA_CUDA_STATIC
  // A static libnabla: the solver is linked in, its static initializer is not (see core/cuda_plugin.cpp).
  if (type == DeviceType::cuda) cuda::register_cuda_solver();
#endif
  return solvers().find(type);
}
}  // namespace linalg_device

namespace linalg_internal {

void check_float(const char* op, const Tensor& A, const char* name, bool allow_16bit) {
  NABLA_CHECK(ValueError, A.defined(), op, ": ", name, " is undefined");
  if (allow_16bit) {
    NABLA_CHECK(DTypeError, is_floating(A.dtype()), op, ": expected ", name, " to be a floating tensor, got ",
                internal::describe(A));
    return;
  }
  NABLA_CHECK(DTypeError, A.dtype() == kFloat32 || A.dtype() == kFloat64, op, ": expected ", name,
              " to be a float32 or float64 tensor, got ", internal::describe(A));
}
void check_matrix(const char* op, const Tensor& A, const char* name) {
  check_float(op, A, name);
  NABLA_CHECK(ShapeError, A.dim() >= 2, op, ": ", name, " must have at least 2 dimensions, got ",
              internal::describe(A));
  NABLA_CHECK(ShapeError, rows(A) <= INT_MAX && cols(A) <= INT_MAX, op, ": matrices of ", internal::describe(A),
              " are too large for LAPACK");
}
void check_square(const char* op, const Tensor& A) {
  check_matrix(op, A);
  NABLA_CHECK(ShapeError, rows(A) == cols(A), op, ": A must be batches of square matrices, got ",
              internal::describe(A));
}
void check_pair(const char* op, const Tensor& A, const Tensor& B) {
  check_float(op, B, "B");
  NABLA_CHECK(DTypeError, A.dtype() == B.dtype(), op, ": A and B must have the same dtype, got ", internal::describe(A),
              " and ", internal::describe(B));
  internal::check_same_device(op, {&A, &B});
}

std::string batch_prefix(const Tensor& A, int64_t b) {
  return A.dim() > 2 ? internal::str("(Batch element ", b, "): ") : std::string();
}

namespace {
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
}  // namespace

// A fresh contiguous host copy of t (any layout), made on the calling thread.
Tensor serial_copy(const Tensor& t) {
  Tensor h = t.detach().to(kCPU);
  Tensor out = internal::make_empty(h.sizes(), h.dtype(), kCPU);
  if (h.numel() == 0) return out;
  switch (h.dtype()) {
    case DType::f64: copy_serial(h, out.data_ptr<double>()); break;
    case DType::f32: copy_serial(h, out.data_ptr<float>()); break;
    case DType::i64: copy_serial(h, out.data_ptr<int64_t>()); break;
    default: return h.clone();
  }
  return out;
}

Tensor on_device(const Tensor& t, Device device) {
  Tensor c = t.is_contiguous() ? t : serial_copy(t);
  return device.is_cpu() ? c : c.to(device);
}

namespace {
template <class T>
void zero_triangle_of(Tensor& t, bool upper) {
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
}  // namespace

void zero_triangle(Tensor& t, bool upper) {
  by_dtype(t.dtype(), [&](auto z) { zero_triangle_of<decltype(z)>(t, upper); });
}

bool all_zero(const Tensor& g) {
  autograd::NoGradGuard ng;
  return g.numel() == 0 || !any(ne(g, 0)).item<bool>();
}

const linalg_device::Solver* device_solver(const Tensor& A) {
  if (A.numel() == 0) return nullptr;
  return linalg_device::solver_for(A.device().type);
}

Tensor device_fresh(const Tensor& t) {
  Tensor c = internal::make_empty(t.sizes(), t.dtype(), t.device());
  if (c.numel() > 0) c.copy_(t.detach());
  return c;
}

}  // namespace linalg_internal
}  // namespace nabla
