// The CPU's discrete Fourier transforms (the `fft` kernel of core/backend.h): a self-sorting
// Stockham FFT over the factors of n (radix 4, 2, 3, 5 butterflies written out, any other prime
// up to 31 by its O(p^2) DFT), Bluestein's chirp-z algorithm for lengths with a larger prime factor,
// and real transforms of even length computed as a complex FFT of half the length.
//
// Stockham, decimation in frequency: a stage of radix p over sequences of length n = p * m, s of
// them interleaved (stride s), reads a_r = x[q + s (j + r m)] and writes
//   y[q + s (p j + k)] = w_n^(j k) * sum_r a_r w_p^(r k)      (j < m, k < p, q < s),
// after which the s * p sequences of length m are transformed the same way; the output lands in
// natural order. The inverse transform is conj(fft(conj(x))).
#include <cmath>
#include <memory>
#include <mutex>
#include <numbers>
#include <unordered_map>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

template <class T>
struct Cx {
  T re, im;
};

// W values of T, one per line of a block of W lines transformed together (their elements side by
// side), so that every butterfly below runs W lines at once in SIMD registers: lane-wise arithmetic
// in fixed-size loops, which the compiler vectorises. A scalar T is the one-line case.
template <class T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};
#define NABLA_FFT_PACK_OP(OP)                                               \
  template <class T, int W>                                                 \
  inline Pack<T, W> operator OP(const Pack<T, W>& a, const Pack<T, W>& b) { \
    Pack<T, W> r;                                                           \
    for (int i = 0; i < W; ++i) r.v[i] = a.v[i] OP b.v[i];                  \
    return r;                                                               \
  }
NABLA_FFT_PACK_OP(+)
NABLA_FFT_PACK_OP(-)
NABLA_FFT_PACK_OP(*)
#undef NABLA_FFT_PACK_OP
template <class T, int W>
inline Pack<T, W> operator*(const Pack<T, W>& a, T c) {
  Pack<T, W> r;
  for (int i = 0; i < W; ++i) r.v[i] = a.v[i] * c;
  return r;
}
template <class T, int W>
inline Pack<T, W> operator-(const Pack<T, W>& a) {
  Pack<T, W> r;
  for (int i = 0; i < W; ++i) r.v[i] = -a.v[i];
  return r;
}

// The lanes of an element type: 1 for a scalar, W for a Pack.
template <class E>
struct Lanes {
  static constexpr int width = 1;
  using scalar = E;
};
template <class T, int W>
struct Lanes<Pack<T, W>> {
  static constexpr int width = W;
  using scalar = T;
};

template <class E>
inline Cx<E> operator+(const Cx<E>& a, const Cx<E>& b) {
  return {a.re + b.re, a.im + b.im};
}
template <class E>
inline Cx<E> operator-(const Cx<E>& a, const Cx<E>& b) {
  return {a.re - b.re, a.im - b.im};
}
// a * w for a twiddle (or chirp) w of the scalar type.
template <class E, class T>
inline Cx<E> mulw(const Cx<E>& a, const Cx<T>& w) {
  return {a.re * w.re - a.im * w.im, a.re * w.im + a.im * w.re};
}
template <class E, class T>
inline Cx<E> scale(const Cx<E>& a, T c) {
  return {a.re * c, a.im * c};
}
template <class E>
inline Cx<E> conj(const Cx<E>& a) {
  return {a.re, -a.im};
}
template <class E>
inline Cx<E> mul_neg_i(const Cx<E>& a) {  // -i a
  return {a.im, -a.re};
}

// exp(-2 pi i num / den), the angle reduced in integers first so that large n keep full accuracy.
template <class T>
Cx<T> root(int64_t num, int64_t den) {
  num %= den;
  if (num < 0) num += den;
  const double a = -2.0 * std::numbers::pi * static_cast<double>(num) / static_cast<double>(den);
  return {static_cast<T>(std::cos(a)), static_cast<T>(std::sin(a))};
}

constexpr int kMaxDirectPrime = 31;  // larger prime factors go to Bluestein

template <class T>
struct Plan {
  int64_t n = 0;
  std::vector<int> radices;                 // the stages, first to last
  std::vector<std::vector<Cx<T>>> twiddle;  // per stage: w_n^(j k) at [j * p + k]
  std::vector<std::vector<Cx<T>>> roots;    // per stage of a prime above 5: w_p^t, t < p (else empty)
  // Bluestein: the chirp w_k = exp(-i pi k^2 / n), and the FFT (length m) of its conjugate
  // wrapped around, divided by m.
  std::shared_ptr<const Plan<T>> sub;
  std::vector<Cx<T>> chirp, chirp_fft;
  // A plan of length n for a real transform of length 2n: w_2n^k, k <= n.
  std::vector<Cx<T>> real_twiddle;
};

template <class T>
std::shared_ptr<const Plan<T>> get_plan(int64_t n, bool for_real = false);

std::vector<int> factorize(int64_t n, bool& smooth) {
  std::vector<int> f;
  smooth = true;
  while (n % 4 == 0) f.push_back(4), n /= 4;
  while (n % 2 == 0) f.push_back(2), n /= 2;
  for (int64_t p = 3; p * p <= n; p += 2)
    while (n % p == 0) {
      if (p > kMaxDirectPrime) smooth = false;
      f.push_back(static_cast<int>(p)), n /= p;
    }
  if (n > kMaxDirectPrime) smooth = false;
  else if (n > 1) f.push_back(static_cast<int>(n));
  return f;  // only used when smooth
}

// The smallest 2^a 3^b 5^c >= n.
int64_t good_size(int64_t n) {
  int64_t best = 1;
  while (best < n) best *= 2;
  for (int64_t f5 = 1; f5 < best; f5 *= 5)
    for (int64_t f35 = f5; f35 < best; f35 *= 3) {
      int64_t v = f35;
      while (v < n) v *= 2;
      best = std::min(best, v);
    }
  return best;
}

template <class E, class T>
void run(const Plan<T>& P, Cx<E>* x, Cx<E>* y, Cx<E>* work);

template <class T>
std::shared_ptr<Plan<T>> make_plan(int64_t n, bool for_real) {
  auto P = std::make_shared<Plan<T>>();
  P->n = n;
  if (for_real)
    for (int64_t k = 0; k <= n; ++k) P->real_twiddle.push_back(root<T>(k, 2 * n));
  bool smooth = true;
  std::vector<int> f = factorize(n, smooth);
  if (!smooth) {
    // Bluestein: X_k = w_k sum_j (x_j w_j) conj(w_(k - j)), a cyclic convolution of length m >= 2n - 1.
    const int64_t m = good_size(2 * n - 1);
    P->sub = get_plan<T>(m);
    P->chirp.resize(n);
    for (int64_t k = 0; k < n; ++k) P->chirp[k] = root<T>((k * k) % (2 * n), 2 * n);  // exp(-i pi k^2 / n)
    std::vector<Cx<T>> b(m, Cx<T>{0, 0}), tmp(m), work(m);
    b[0] = conj(P->chirp[0]);
    for (int64_t j = 1; j < n; ++j) b[j] = b[m - j] = conj(P->chirp[j]);
    run(*P->sub, b.data(), tmp.data(), work.data());
    const T inv = T(1) / static_cast<T>(m);
    P->chirp_fft.resize(m);
    for (int64_t i = 0; i < m; ++i) P->chirp_fft[i] = scale(b[i], inv);
    return P;
  }
  P->radices = f;
  int64_t len = n;
  for (int p : f) {
    const int64_t m = len / p;
    std::vector<Cx<T>> tw(static_cast<size_t>(m * p));
    for (int64_t j = 0; j < m; ++j)
      for (int k = 0; k < p; ++k) tw[j * p + k] = root<T>(j * k, len);
    P->twiddle.push_back(std::move(tw));
    std::vector<Cx<T>> r;
    if (p > 5)
      for (int t = 0; t < p; ++t) r.push_back(root<T>(t, p));
    P->roots.push_back(std::move(r));
    len = m;
  }
  return P;
}

// Plans by length, per precision, shared by the threads; a bounded cache (a program that transforms
// many different lengths re-plans instead of growing without limit).
template <class T>
std::shared_ptr<const Plan<T>> get_plan(int64_t n, bool for_real) {
  static std::mutex mu;
  static std::unordered_map<int64_t, std::shared_ptr<const Plan<T>>> cache;
  const int64_t key = 2 * n + (for_real ? 1 : 0);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::shared_ptr<const Plan<T>> p = make_plan<T>(n, for_real);  // unlocked: Bluestein plans a sub-length
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 64) cache.clear();
  return cache.emplace(key, std::move(p)).first->second;
}

// One Stockham stage of radix p: m sequences positions j, s interleaved sequences q.
template <class E, class T, int P>
void stage(int64_t m, int64_t s, const Cx<T>* tw, const Cx<T>* roots, int p_dyn, const Cx<E>* x, Cx<E>* y) {
  const int p = P > 0 ? P : p_dyn;
  for (int64_t j = 0; j < m; ++j) {
    const Cx<T>* w = tw + j * p;
    for (int64_t q = 0; q < s; ++q) {
      const Cx<E>* in = x + q + s * j;
      Cx<E>* out = y + q + s * p * j;
      if constexpr (P == 2) {
        Cx<E> a0 = in[0], a1 = in[s * m];
        out[0] = a0 + a1;
        out[s] = mulw(a0 - a1, w[1]);
      } else if constexpr (P == 4) {
        Cx<E> a0 = in[0], a1 = in[s * m], a2 = in[2 * s * m], a3 = in[3 * s * m];
        Cx<E> t0 = a0 + a2, t1 = a0 - a2, t2 = a1 + a3, t3 = mul_neg_i(a1 - a3);
        out[0] = t0 + t2;
        out[s] = mulw(t1 + t3, w[1]);
        out[2 * s] = mulw(t0 - t2, w[2]);
        out[3 * s] = mulw(t1 - t3, w[3]);
      } else if constexpr (P == 3) {
        constexpr T h = T(0.86602540378443864676);  // sin(2 pi / 3)
        Cx<E> a0 = in[0], a1 = in[s * m], a2 = in[2 * s * m];
        Cx<E> t1 = a1 + a2, t2 = a0 - scale(t1, T(0.5)), t3 = scale(mul_neg_i(a1 - a2), h);
        out[0] = a0 + t1;
        out[s] = mulw(t2 + t3, w[1]);
        out[2 * s] = mulw(t2 - t3, w[2]);
      } else if constexpr (P == 5) {
        constexpr T c1 = T(0.30901699437494742410), c2 = T(-0.80901699437494742410);  // cos(2 pi / 5), cos(4 pi / 5)
        constexpr T s1 = T(0.95105651629515357212), s2 = T(0.58778525229247312917);   // sin(2 pi / 5), sin(4 pi / 5)
        Cx<E> a0 = in[0], a1 = in[s * m], a2 = in[2 * s * m], a3 = in[3 * s * m], a4 = in[4 * s * m];
        Cx<E> t1 = a1 + a4, t2 = a2 + a3, t3 = a1 - a4, t4 = a2 - a3;
        Cx<E> r1 = a0 + scale(t1, c1) + scale(t2, c2), r2 = a0 + scale(t1, c2) + scale(t2, c1);
        Cx<E> i1 = mul_neg_i(scale(t3, s1) + scale(t4, s2)), i2 = mul_neg_i(scale(t3, s2) - scale(t4, s1));
        out[0] = a0 + t1 + t2;
        out[s] = mulw(r1 + i1, w[1]);
        out[2 * s] = mulw(r2 + i2, w[2]);
        out[3 * s] = mulw(r2 - i2, w[3]);
        out[4 * s] = mulw(r1 - i1, w[4]);
      } else {
        for (int k = 0; k < p; ++k) {
          Cx<E> acc = in[0];
          int t = 0;
          for (int r = 1; r < p; ++r) {
            t += k;
            if (t >= p) t -= p;
            acc = acc + mulw(in[r * s * m], roots[t]);
          }
          out[k * s] = k == 0 ? acc : mulw(acc, w[k]);
        }
      }
    }
  }
}

// x (n) -> its DFT, in x; y and work are scratch of n and (Bluestein) 2 * m elements.
template <class E, class T>
void run(const Plan<T>& P, Cx<E>* x, Cx<E>* y, Cx<E>* work) {
  const int64_t n = P.n;
  if (P.sub) {
    const Plan<T>& S = *P.sub;
    const int64_t m = S.n;
    Cx<E>*a = work, *tmp = work + m;
    for (int64_t j = 0; j < n; ++j) a[j] = mulw(x[j], P.chirp[j]);
    for (int64_t j = n; j < m; ++j) a[j] = Cx<E>{};
    run(S, a, tmp, y);  // S is smooth: y is not used as Bluestein scratch there
    for (int64_t i = 0; i < m; ++i) a[i] = conj(mulw(a[i], P.chirp_fft[i]));
    run(S, a, tmp, y);  // the inverse as conj(fft(conj(.)))
    for (int64_t k = 0; k < n; ++k) x[k] = mulw(conj(a[k]), P.chirp[k]);
    return;
  }
  Cx<E>*src = x, *dst = y;
  int64_t len = n, s = 1;
  for (size_t st = 0; st < P.radices.size(); ++st) {
    const int p = P.radices[st];
    const int64_t m = len / p;
    const Cx<T>*tw = P.twiddle[st].data(), *rt = P.roots[st].data();
    switch (p) {
      case 2: stage<E, T, 2>(m, s, tw, rt, p, src, dst); break;
      case 3: stage<E, T, 3>(m, s, tw, rt, p, src, dst); break;
      case 4: stage<E, T, 4>(m, s, tw, rt, p, src, dst); break;
      case 5: stage<E, T, 5>(m, s, tw, rt, p, src, dst); break;
      default: stage<E, T, 0>(m, s, tw, rt, p, src, dst); break;
    }
    std::swap(src, dst);
    len = m;
    s *= p;
  }
  if (src != x)
    for (int64_t i = 0; i < n; ++i) x[i] = src[i];
}

// Scratch per thread and element type, grown to the largest line it has seen.
template <class E>
Cx<E>* scratch(size_t n) {
  thread_local std::vector<Cx<E>> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

template <class T>
size_t work_size(const Plan<T>& P) {
  return P.sub ? 2 * static_cast<size_t>(P.sub->n) : 0;
}

// Element i of the Lanes<E>::width lines at p[0], p[1], ...: a real or a complex value per lane.
template <class E>
inline E load_re(const char* const* p, int64_t i) {
  using T = typename Lanes<E>::scalar;
  if constexpr (Lanes<E>::width == 1) {
    return reinterpret_cast<const T*>(p[0])[i];
  } else {
    E r;
    for (int l = 0; l < Lanes<E>::width; ++l) r.v[l] = reinterpret_cast<const T*>(p[l])[i];
    return r;
  }
}
template <class E>
inline Cx<E> load_cx(const char* const* p, int64_t i) {
  using T = typename Lanes<E>::scalar;
  if constexpr (Lanes<E>::width == 1) {
    return reinterpret_cast<const Cx<T>*>(p[0])[i];
  } else {
    Cx<E> r;
    for (int l = 0; l < Lanes<E>::width; ++l) {
      const Cx<T> v = reinterpret_cast<const Cx<T>*>(p[l])[i];
      r.re.v[l] = v.re;
      r.im.v[l] = v.im;
    }
    return r;
  }
}
template <class E>
inline void store_re(char* const* p, int64_t i, const E& v) {
  using T = typename Lanes<E>::scalar;
  if constexpr (Lanes<E>::width == 1) {
    reinterpret_cast<T*>(p[0])[i] = v;
  } else {
    for (int l = 0; l < Lanes<E>::width; ++l) reinterpret_cast<T*>(p[l])[i] = v.v[l];
  }
}
template <class E>
inline void store_cx(char* const* p, int64_t i, const Cx<E>& v) {
  using T = typename Lanes<E>::scalar;
  if constexpr (Lanes<E>::width == 1) {
    reinterpret_cast<Cx<T>*>(p[0])[i] = v;
  } else {
    for (int l = 0; l < Lanes<E>::width; ++l) reinterpret_cast<Cx<T>*>(p[l])[i] = {v.re.v[l], v.im.v[l]};
  }
}

// Lines[l] (l < Lanes<E>::width; one line, or a block of them) transformed together: element i of
// line l at in[l] + i * stride -> out[l] + i * stride. `forward` picks c2c's direction and r2c's
// sign (the inverse of r2c is its conjugate); c2r is always the inverse.
template <class E, class T>
void fft_lines(FftKind kind, bool forward, int64_t n, const Plan<T>& plan, const char* const* in, char* const* out,
               int64_t stride) {
  const size_t need = static_cast<size_t>(n) * 2 + work_size(plan) + 4;
  Cx<E>* buf = scratch<E>(need);
  Cx<E>*x = buf, *y = buf + (n + 1), *work = buf + 2 * (n + 1);
  const T sign = forward ? T(1) : T(-1);
  if (kind == FftKind::c2c) {
    for (int64_t i = 0; i < n; ++i) {
      Cx<E> v = load_cx<E>(in, i * stride);
      x[i] = {v.re, v.im * sign};
    }
    run(plan, x, y, work);
    for (int64_t i = 0; i < n; ++i) store_cx<E>(out, i * stride, {x[i].re, x[i].im * sign});
    return;
  }
  if (kind == FftKind::r2c) {
    // `plan` is for n / 2 when n is even (x_2j + i x_2j+1 packed), else for n.
    if (n % 2 == 1) {
      for (int64_t i = 0; i < n; ++i) x[i] = {load_re<E>(in, i * stride), E{}};
      run(plan, x, y, work);
      for (int64_t k = 0; k <= n / 2; ++k) store_cx<E>(out, k * stride, {x[k].re, x[k].im * sign});
      return;
    }
    const int64_t h = n / 2;
    for (int64_t j = 0; j < h; ++j) x[j] = {load_re<E>(in, 2 * j * stride), load_re<E>(in, (2 * j + 1) * stride)};
    run(plan, x, y, work);
    x[h] = x[0];
    for (int64_t k = 0; k <= h; ++k) {
      Cx<E> zk = x[k], zc = conj(x[h - k]);
      Cx<E> e = scale(zk + zc, T(0.5)), o = mul_neg_i(scale(zk - zc, T(0.5)));  // (zk - zc) / 2i
      Cx<E> v = e + mulw(o, plan.real_twiddle[k]);
      store_cx<E>(out, k * stride, {v.re, v.im * sign});
    }
    return;
  }
  // c2r: in holds n / 2 + 1 coefficients; the imaginary parts of X_0 (and X_n/2, n even) are ignored.
  const int64_t h = n / 2;
  if (n % 2 == 1) {
    // The whole Hermitian spectrum, then an inverse complex FFT (conj trick).
    x[0] = {load_cx<E>(in, 0).re, E{}};
    for (int64_t k = 1; k <= h; ++k) {
      Cx<E> v = load_cx<E>(in, k * stride);
      x[k] = conj(v);
      x[n - k] = v;
    }
    run(plan, x, y, work);
    for (int64_t i = 0; i < n; ++i) store_re<E>(out, i * stride, x[i].re);
    return;
  }
  // Z_k = (X_k + conj(X_h-k)) + i w^-k (X_k - conj(X_h-k)), whose inverse FFT of length h is
  // n x_2j + i n x_2j+1; computed as conj(fft(conj(Z))).
  const Cx<E> x0 = {load_cx<E>(in, 0).re, E{}}, xh = {load_cx<E>(in, h * stride).re, E{}};
  for (int64_t k = 0; k < h; ++k) {
    Cx<E> xk = k == 0 ? x0 : load_cx<E>(in, k * stride);
    Cx<E> xc = conj(k == 0 ? xh : load_cx<E>(in, (h - k) * stride));
    Cx<E> d = mulw(xk - xc, conj(plan.real_twiddle[k]));
    Cx<E> z = (xk + xc) + Cx<E>{-d.im, d.re};
    x[k] = conj(z);
  }
  run(plan, x, y, work);
  for (int64_t j = 0; j < h; ++j) {
    store_re<E>(out, 2 * j * stride, x[j].re);
    store_re<E>(out, (2 * j + 1) * stride, -x[j].im);
  }
}

template <class T>
void fft_typed(const Tensor& x, int64_t dim, FftKind kind, bool forward, const Tensor& out) {
  const Shape& xs = x.sizes();
  const Shape& os = out.sizes();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xs[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= xs[d];
  const int64_t n = kind == FftKind::c2r ? os[dim] : xs[dim];  // the signal's length
  const int64_t len_in = xs[dim], len_out = os[dim];
  if (out.numel() == 0) return;
  if (n == 0 || xs[dim] == 0) throw ValueError("fft: a transform needs at least one element along its dim");
  const bool halved = kind != FftKind::c2c && n % 2 == 0;
  std::shared_ptr<const Plan<T>> plan = get_plan<T>(halved ? n / 2 : n, halved);
  const int64_t in_es = kind == FftKind::r2c ? sizeof(T) : 2 * sizeof(T);
  const int64_t out_es = kind == FftKind::c2r ? sizeof(T) : 2 * sizeof(T);
  const char* in = static_cast<const char*>(x.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  const int64_t lines = outer * inner;
  auto src = [&](int64_t l) { return in + ((l / inner) * len_in * inner + l % inner) * in_es; };
  auto dst = [&](int64_t l) { return o + ((l / inner) * len_out * inner + l % inner) * out_es; };
  // Blocks of W lines share the butterflies' SIMD registers (32 bytes of lanes) while a block's
  // scratch stays within a few MB; the lines left over, and blocks too large for the caches, go
  // one at a time.
  constexpr int W = static_cast<int>(32 / sizeof(T));
  using Block = Pack<T, W>;
  const size_t line_scratch = (2 * static_cast<size_t>(n) + work_size(*plan) + 4) * sizeof(Cx<T>);
  const int64_t blocks = lines >= W && line_scratch * W <= (size_t{4} << 20) ? lines / W : 0;
  const int64_t units = blocks + (lines - blocks * W);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1) / (blocks ? W : 1));
  parallel_for(0, units, grain, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const char* ins[W];
      char* outs[W];
      const int64_t first = u < blocks ? u * W : blocks * W + (u - blocks), count = u < blocks ? W : 1;
      for (int64_t l = 0; l < count; ++l) {
        ins[l] = src(first + l);
        outs[l] = dst(first + l);
      }
      if (u < blocks) fft_lines<Block, T>(kind, forward, n, *plan, ins, outs, inner);
      else fft_lines<T, T>(kind, forward, n, *plan, ins, outs, inner);
    }
  });
}

}  // namespace

// The c2r kernel is always the inverse (exp(+2 pi i jk / n)), as the backend list says; r2c is the
// forward one unless `forward` is false (then the conjugate).
void fft(const Tensor& x, int64_t dim, FftKind kind, bool forward, const Tensor& out) {
  NABLA_CHECK(ValueError, x.is_contiguous() && out.is_contiguous(), "fft: the kernel takes contiguous tensors");
  const DType real = kind == FftKind::r2c ? x.dtype() : kind == FftKind::c2r ? out.dtype() : to_real_dtype(x.dtype());
  if (real == DType::f32) return fft_typed<float>(x, dim, kind, forward, out);
  if (real == DType::f64) return fft_typed<double>(x, dim, kind, forward, out);
  throw NotImplemented(internal::str("fft: not implemented for dtype ", x.dtype(), " on the CPU"));
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
