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
// are hand-written with intrinsics (6x16 float, 6x8 double); the portable build uses plain C++.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/impl.h"
#include "core/parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define NABLA_GEMM_AVX2 1
#endif

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

template <class T>
struct GemmConfig;
template <>
struct GemmConfig<float> {
  static constexpr int MR = 6, NR = 16;
  static constexpr int64_t KC = 256, MC = 144, NC = 3072;
};
template <>
struct GemmConfig<double> {
  static constexpr int MR = 6, NR = 8;
  static constexpr int64_t KC = 256, MC = 96, NC = 2048;
};

// Writes an MR x NR accumulator tile (row-major, ld = NR) into C: C = alpha * acc + beta * C.
template <class T>
inline void store_tile(const T* acc, int64_t m, int64_t n, T* c, int64_t ldc, T alpha, T beta) {
  constexpr int NR = GemmConfig<T>::NR;
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    const T* ai = acc + i * NR;
    if (beta == T(0)) {
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * ai[j];
    } else {
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * ai[j] + beta * ci[j];
    }
  }
}

// Portable micro-kernel: acc (MR x NR) = sum_p a[p*MR + i] * b[p*NR + j].
template <class T>
void ukernel_generic(int64_t k, const T* a, const T* b, T* acc) {
  constexpr int MR = GemmConfig<T>::MR, NR = GemmConfig<T>::NR;
  T r[MR][NR] = {};
  for (int64_t p = 0; p < k; ++p) {
    const T* bp = b + p * NR;
    const T* ap = a + p * MR;
    for (int i = 0; i < MR; ++i) {
      T av = ap[i];
      for (int j = 0; j < NR; ++j) r[i][j] += av * bp[j];
    }
  }
  std::memcpy(acc, r, sizeof(r));
}

#ifdef NABLA_GEMM_AVX2
// 6x16 float micro-kernel: 12 ymm accumulators, B rows loaded as two ymm, A broadcast per row.
// Writes straight into C when the tile is full, else into acc for store_tile.
inline void ukernel_f32(int64_t k, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta,
                        bool full, float* acc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < k; ++p) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += 6;
    b += 16;
  }
  __m256 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (!full) {
    for (int i = 0; i < 6; ++i) {
      _mm256_storeu_ps(acc + i * 16, rows[i][0]);
      _mm256_storeu_ps(acc + i * 16 + 8, rows[i][1]);
    }
    return;
  }
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  for (int i = 0; i < 6; ++i) {
    float* ci = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(va, rows[i][0]), r1 = _mm256_mul_ps(va, rows[i][1]);
    if (beta != 0.0f) {
      r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), r0);
      r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), r1);
    }
    _mm256_storeu_ps(ci, r0);
    _mm256_storeu_ps(ci + 8, r1);
  }
}

inline void ukernel_f64(int64_t k, const double* a, const double* b, double* c, int64_t ldc, double alpha,
                        double beta, bool full, double* acc) {
  __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
          c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t p = 0; p < k; ++p) {
    __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
    __m256d av = _mm256_broadcast_sd(a);
    c00 = _mm256_fmadd_pd(av, b0, c00);
    c01 = _mm256_fmadd_pd(av, b1, c01);
    av = _mm256_broadcast_sd(a + 1);
    c10 = _mm256_fmadd_pd(av, b0, c10);
    c11 = _mm256_fmadd_pd(av, b1, c11);
    av = _mm256_broadcast_sd(a + 2);
    c20 = _mm256_fmadd_pd(av, b0, c20);
    c21 = _mm256_fmadd_pd(av, b1, c21);
    av = _mm256_broadcast_sd(a + 3);
    c30 = _mm256_fmadd_pd(av, b0, c30);
    c31 = _mm256_fmadd_pd(av, b1, c31);
    av = _mm256_broadcast_sd(a + 4);
    c40 = _mm256_fmadd_pd(av, b0, c40);
    c41 = _mm256_fmadd_pd(av, b1, c41);
    av = _mm256_broadcast_sd(a + 5);
    c50 = _mm256_fmadd_pd(av, b0, c50);
    c51 = _mm256_fmadd_pd(av, b1, c51);
    a += 6;
    b += 8;
  }
  __m256d rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (!full) {
    for (int i = 0; i < 6; ++i) {
      _mm256_storeu_pd(acc + i * 8, rows[i][0]);
      _mm256_storeu_pd(acc + i * 8 + 4, rows[i][1]);
    }
    return;
  }
  __m256d va = _mm256_set1_pd(alpha), vb = _mm256_set1_pd(beta);
  for (int i = 0; i < 6; ++i) {
    double* ci = c + i * ldc;
    __m256d r0 = _mm256_mul_pd(va, rows[i][0]), r1 = _mm256_mul_pd(va, rows[i][1]);
    if (beta != 0.0) {
      r0 = _mm256_fmadd_pd(vb, _mm256_loadu_pd(ci), r0);
      r1 = _mm256_fmadd_pd(vb, _mm256_loadu_pd(ci + 4), r1);
    }
    _mm256_storeu_pd(ci, r0);
    _mm256_storeu_pd(ci + 4, r1);
  }
}
#endif

template <class T>
inline void micro(int64_t k, const T* a, const T* b, T* c, int64_t ldc, int64_t m, int64_t n, T alpha, T beta) {
  constexpr int MR = GemmConfig<T>::MR, NR = GemmConfig<T>::NR;
  alignas(64) T acc[MR * NR];
  bool full = m == MR && n == NR;
#ifdef NABLA_GEMM_AVX2
  if constexpr (std::is_same_v<T, float>) {
    ukernel_f32(k, a, b, c, ldc, alpha, beta, full, acc);
  } else {
    ukernel_f64(k, a, b, c, ldc, alpha, beta, full, acc);
  }
  if (full) return;
#else
  ukernel_generic(k, a, b, acc);
#endif
  store_tile(acc, m, n, c, ldc, alpha, beta);
}

// Packs A(i0:i0+mc, p0:p0+kc) into MR-row slivers, zero-padded: out[s][p][i].
template <class T>
void pack_a(const T* a, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, T* out) {
  constexpr int MR = GemmConfig<T>::MR;
  for (int64_t s = 0; s < mc; s += MR) {
    int64_t rows = std::min<int64_t>(MR, mc - s);
    const T* as = a + s * rsa;
    if (rows == MR && csa == 1) {
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < MR; ++i) out[p * MR + i] = as[i * rsa + p];
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t i = 0; i < rows; ++i) out[p * MR + i] = as[i * rsa + p * csa];
        for (int64_t i = rows; i < MR; ++i) out[p * MR + i] = T(0);
      }
    }
    out += kc * MR;
  }
}

// Packs B(p0:p0+kc, j0:j0+nc) into NR-column slivers, zero-padded: out[s][p][j].
template <class T>
void pack_b(const T* b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, T* out) {
  constexpr int NR = GemmConfig<T>::NR;
  for (int64_t s = 0; s < nc; s += NR) {
    int64_t cols = std::min<int64_t>(NR, nc - s);
    const T* bs = b + s * csb;
    if (cols == NR && csb == 1) {
      for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * NR, bs + p * rsb, NR * sizeof(T));
    } else if (cols == NR && rsb == 1) {
      for (int j = 0; j < NR; ++j)
        for (int64_t p = 0; p < kc; ++p) out[p * NR + j] = bs[j * csb + p];
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < cols; ++j) out[p * NR + j] = bs[p * rsb + j * csb];
        for (int64_t j = cols; j < NR; ++j) out[p * NR + j] = T(0);
      }
    }
    out += kc * NR;
  }
}

template <class T>
struct PackBuffers {
  std::vector<T> a, b;
};

// Runs the blocked algorithm on C rows [m0, m1) and columns [n0, n1), single-threaded.
template <class T>
void gemm_block(int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t k, T alpha, const T* a, int64_t rsa,
                int64_t csa, const T* b, int64_t rsb, int64_t csb, T beta, T* c, int64_t ldc) {
  using C = GemmConfig<T>;
  thread_local PackBuffers<T> buf;
  size_t need_a = static_cast<size_t>(C::MC + C::MR) * C::KC, need_b = static_cast<size_t>(C::NC + C::NR) * C::KC;
  if (buf.a.size() < need_a + 16) buf.a.resize(need_a + 16);
  if (buf.b.size() < need_b + 16) buf.b.resize(need_b + 16);
  // 64-byte aligned views into the buffers
  T* pa = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buf.a.data()) + 63) & ~uintptr_t(63));
  T* pb = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buf.b.data()) + 63) & ~uintptr_t(63));
  for (int64_t jc = n0; jc < n1; jc += C::NC) {
    int64_t nc = std::min<int64_t>(C::NC, n1 - jc);
    for (int64_t pc = 0; pc < k; pc += C::KC) {
      int64_t kc = std::min<int64_t>(C::KC, k - pc);
      T beta_eff = pc == 0 ? beta : T(1);
      pack_b(b + pc * rsb + jc * csb, rsb, csb, kc, nc, pb);
      for (int64_t ic = m0; ic < m1; ic += C::MC) {
        int64_t mc = std::min<int64_t>(C::MC, m1 - ic);
        pack_a(a + ic * rsa + pc * csa, rsa, csa, mc, kc, pa);
        for (int64_t jr = 0; jr < nc; jr += C::NR) {
          int64_t n = std::min<int64_t>(C::NR, nc - jr);
          const T* bp = pb + (jr / C::NR) * kc * C::NR;
          for (int64_t ir = 0; ir < mc; ir += C::MR) {
            int64_t m = std::min<int64_t>(C::MR, mc - ir);
            micro<T>(kc, pa + (ir / C::MR) * kc * C::MR, bp, c + (ic + ir) * ldc + jc + jr, ldc, m, n, alpha,
                     beta_eff);
          }
        }
      }
    }
  }
}

// Small products: a direct loop beats packing. Accumulates a row of C at a time.
template <class T>
void gemm_small(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t rsa, int64_t csa, const T* b,
                int64_t rsb, int64_t csb, T beta, T* c, int64_t ldc) {
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
  using C = GemmConfig<T>;
  if (m * n * k <= 16 * 16 * 16 || m < 4 || (n < 8 && csb == 1)) {
    gemm_small(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    return;
  }
  int64_t mt = (m + C::MR - 1) / C::MR, nt = (n + C::NR - 1) / C::NR;
  int nthreads = in_parallel_region() ? 1 : get_num_threads();
  if (m * n * k < 64 * 64 * 64) nthreads = 1;  // threading costs more than it saves
  bool split_m = mt >= nt;
  int64_t tiles = split_m ? mt : nt;
  nthreads = static_cast<int>(std::min<int64_t>(nthreads, tiles));
  if (nthreads <= 1) {
    gemm_block<T>(0, m, 0, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
    return;
  }
  parallel_for(0, nthreads, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t lo = tiles * t / nthreads, hi = tiles * (t + 1) / nthreads;
      if (split_m) {
        gemm_block<T>(lo * C::MR, std::min(m, hi * C::MR), 0, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
      } else {
        gemm_block<T>(0, m, lo * C::NR, std::min(n, hi * C::NR), k, alpha, a, rsa, csa, b, rsb, csb, beta, c, ldc);
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
  Tensor out = direct ? out_in : detail::make_empty(out_in.sizes(), out_in.dtype(), out_in.device());
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
