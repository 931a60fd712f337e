// nabla's own CPU GEMM (BLIS-style): C = alpha * A @ B + beta * C for float and double.
//
//   for jc in N by NC:          B block (KC x NC) packed into NR-wide column slivers
//     for pc in K by KC:
//       for ic in M by MC:      A block (MC x KC) packed into MR-tall row slivers
//         for each (MR x NR) tile: micro-kernel, an outer-product loop over KC in registers
//
// A and B are read through (row stride, column stride), so transposed operands are packed directly
// without a copy. The work is split across threads along M or N (whichever has more tiles); each
// thread packs its own panels, so no synchronisation is needed. On AVX2/FMA CPUs the micro-kernels
// are hand-written with intrinsics (6x16 float, 6x8 double), and where the CPU also has AVX-512 a
// 12x32 / 12x16 AVX-512 kernel takes over; the portable build uses plain C++.
#include <algorithm>
#include <vector>

#include "core/cpu/gemm_kernels.h"
#include "core/cpu/gemm_lowp.h"
#include "core/impl.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

using namespace gemm_internal;

// sum_p x[p * sx] * y[p] for contiguous y. With contiguous x, in 16 partial sums that the compiler
// keeps in vector registers (a dot product is a reduction, which it may not reorder itself); below
// 16 terms, in order.
template <class T>
T dot_contiguous(const T* x, int64_t sx, const T* y, int64_t k) {
  constexpr int kLanes = 16;
  int64_t p = 0;
  T s = T(0);
  if (sx == 1 && k >= kLanes) {
    T acc[kLanes] = {};
    for (; p + kLanes <= k; p += kLanes)
      for (int u = 0; u < kLanes; ++u) acc[u] += x[p + u] * y[p + u];
    for (int w = kLanes / 2; w > 0; w /= 2)  // pairwise: 16 -> 8 -> 4 -> 2 -> 1
      for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
    s = acc[0];
  }
  for (; p < k; ++p) s += x[p * sx] * y[p];
  return s;
}

// Small products: a direct loop beats packing. Accumulates a row of C at a time; when B's columns
// are contiguous (rsb == 1: a transposed weight, as linear's at batch 1), each element of C is one
// contiguous dot product instead (reading B with stride csb, as the row form would, misses the
// cache on every element: linear(3136 -> 128) at batch 1 took 224 us that way, 40 us this way).
template <class T>
void gemm_small(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb,
                int64_t csb, T beta, T* c, int64_t ldc) {
  if (rsb == 1 && csb != 1) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T v = alpha * dot_contiguous(a + i * rsa, csa, b + j * csb, k);
        T& ci = c[i * ldc + j];
        ci = beta == T(0) ? v : v + beta * ci;
      }
    return;
  }
  T row[256];
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j0 = 0; j0 < n; j0 += 256) {
      int64_t nn = std::min<int64_t>(256, n - j0);
      for (int64_t j = 0; j < nn; ++j) row[j] = T(0);
      for (int64_t p = 0; p < k; ++p) {
        T av = a[i * rsa + p * csa];
        const T* bp = b + p * rsb + j0 * csb;
        if (csb == 1) {
          for (int64_t j = 0; j < nn; ++j) row[j] += av * bp[j];
        } else {
          for (int64_t j = 0; j < nn; ++j) row[j] += av * bp[j * csb];
        }
      }
      T* ci = c + i * ldc + j0;
      if (beta == T(0)) {
        for (int64_t j = 0; j < nn; ++j) ci[j] = alpha * row[j];
      } else {
        for (int64_t j = 0; j < nn; ++j) ci[j] = alpha * row[j] + beta * ci[j];
      }
    }
  }
}

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t rsa, int64_t csa, const T* b, int64_t rsb,
          int64_t csb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const KernelSpec<T>& ks = kernel_spec_for_rows<T>(m);
  if (m * n * k <= 16 * 16 * 16 || m < 4 || (n < 8 && csb == 1)) {
    gemm_small(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    return;
  }
  int64_t mt = (m + ks.mr - 1) / ks.mr, nt = (n + ks.nr - 1) / ks.nr;
  int nthreads = in_parallel_region() ? 1 : get_num_threads();
  if (m * n * k < 64 * 64 * 64) nthreads = 1;  // threading costs more than it saves
  bool split_m = mt >= nt;
  int64_t tiles = split_m ? mt : nt;
  nthreads = static_cast<int>(std::min<int64_t>(nthreads, tiles));
  if (nthreads <= 1) {
    gemm_block<T>(ks, 0, m, 0, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    return;
  }
  parallel_for(0, nthreads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t lo = tiles * t / nthreads, hi = tiles * (t + 1) / nthreads;
      if (split_m) {
        gemm_block<T>(ks, lo * ks.mr, std::min(m, hi * ks.mr), 0, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
      } else {
        gemm_block<T>(ks, 0, m, lo * ks.nr, std::min(n, hi * ks.nr), k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
      }
    }
  });
}

// Integer (and other) matmuls: a plain triple loop with a wide accumulator.
template <class T>
void gemm_naive(int64_t m, int64_t n, int64_t k, double alpha, const T* a, int64_t rsa, int64_t csa, const T* b,
                int64_t rsb, int64_t csb, double beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<int64_t>(a[i * rsa + p * csa]) * static_cast<int64_t>(b[p * rsb + j * csb]);
      T& out = c[i * ldc + j];
      out = static_cast<T>(static_cast<int64_t>(alpha) * acc + (beta == 0 ? 0 : static_cast<int64_t>(beta) * out));
    }
  }
}

}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rsa, int64_t csa, const float* b,
           int64_t rsb, int64_t csb, float beta, float* c, int64_t ldc) {
  gemm<float>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}
void dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t rsa, int64_t csa, const double* b,
           int64_t rsb, int64_t csb, double beta, double* c, int64_t ldc) {
  gemm<double>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& out_in, double alpha, double beta) {
  // a: (B, m, k), b: (B, k, n), out: (B, m, n)
  int64_t batch = out_in.sizes()[0], m = out_in.sizes()[1], n = out_in.sizes()[2], k = a.sizes()[2];
  // The output must have unit column stride; otherwise compute into a contiguous buffer.
  bool direct = out_in.strides()[2] == 1 || n <= 1;
  Tensor out = direct ? out_in : internal::make_empty(out_in.sizes(), out_in.dtype(), out_in.device());
  if (!direct && beta != 0) copy(out_in, out);
  const int64_t ldc = out.strides()[1];
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ap = static_cast<const T*>(a.data_ptr());
    const T* bp = static_cast<const T*>(b.data_ptr());
    T* cp = static_cast<T*>(out.data_ptr());
    int64_t sa0 = a.strides()[0], sa1 = a.strides()[1], sa2 = a.strides()[2];
    int64_t sb0 = b.strides()[0], sb1 = b.strides()[1], sb2 = b.strides()[2];
    int64_t sc0 = out.strides()[0];
    auto one = [&](int64_t i) {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        gemm<T>(m, n, k, static_cast<T>(alpha), ap + i * sa0, sa1, sa2, bp + i * sb0, sb1, sb2, static_cast<T>(beta),
                cp + i * sc0, ldc);
      } else {
        gemm_naive<T>(m, n, k, alpha, ap + i * sa0, sa1, sa2, bp + i * sb0, sb1, sb2, beta, cp + i * sc0, ldc);
      }
    };
    // Many small matrices: one per thread. Few large ones: threads inside each gemm.
    if (batch > 1 && m * n * k < 128 * 128 * 128) {
      parallel_for(0, batch, std::max<int64_t>(1, 32768 / std::max<int64_t>(m * n * k, 1)), [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) one(i);
      });
    } else {
      for (int64_t i = 0; i < batch; ++i) one(i);
    }
  };
  // float16 / bfloat16: the low-precision GEMM (gemm_lowp.h), float32 sums rounded once on store,
  // reading a and b through their strides as the float32 path does.
  auto run_lowp = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ap = static_cast<const T*>(a.data_ptr());
    const T* bp = static_cast<const T*>(b.data_ptr());
    T* cp = static_cast<T*>(out.data_ptr());
    const int64_t sa0 = a.strides()[0], sa1 = a.strides()[1], sa2 = a.strides()[2];
    const int64_t sb0 = b.strides()[0], sb1 = b.strides()[1], sb2 = b.strides()[2];
    const int64_t sc0 = out.strides()[0];
    auto one = [&](int64_t i) {
      nabla::cpu::gemm_lowp<T, T>(m, n, k, static_cast<float>(alpha), ap + i * sa0, sa1, sa2, bp + i * sb0, sb1, sb2,
                                  static_cast<float>(beta), cp + i * sc0, ldc);
    };
    if (batch > 1 && m * n * k < 128 * 128 * 128) {
      parallel_for(0, batch, std::max<int64_t>(1, 32768 / std::max<int64_t>(m * n * k, 1)), [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) one(i);
      });
    } else {
      for (int64_t i = 0; i < batch; ++i) one(i);
    }
  };
  if (a.dtype() == DType::bf16 || a.dtype() == DType::f16) {
    if (a.dtype() == DType::bf16) run_lowp(type_tag<BFloat16>{});
    else run_lowp(type_tag<Half>{});
    if (!direct) copy(out, out_in);
    return;
  }
  visit_compute_dtype(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("matmul: not supported for bool tensors");
    } else {
      run(tag);
    }
  });
  if (!direct) copy(out, out_in);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
