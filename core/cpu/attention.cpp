// Fused attention on the CPU (flash_attention in core/ops.h): FlashAttention-2's forward and
// backward (Dao, 2023) over tiles of kBr queries x kBc keys. The tile products run on the GEMM
// (gemm_t, single-threaded inside a task); the online softmax, masks and dropout are loops over a
// tile row. Nothing of size L x S is ever allocated: a thread holds four kBr x kBc tiles.
//
// Forward, per task (b, h, query tile i): for each key tile j (up to the diagonal when causal)
//   s = q_i k_j^T * scale + bias_ij                     (kBr, kBc)
//   m_new = max(m, rowmax s); p = exp(s - m_new); l = l * exp(m - m_new) + rowsum p
//   o = o * exp(m - m_new) + dropout(p) v_j
// then o /= l and lse = m + log l. Tasks are taken from a counter, the longest (the last query
// tiles under causal) first; each writes its own rows, so the result does not depend on threads.
//
// Backward, per task (b, key/value head hk, group g of key tiles): for each key tile j of the
// group, for each query head h of hk and each query tile i (from the diagonal when causal),
// recompute p = exp(s - lse_i), then
//   dv_j += dropout(p)^T do_i;  dp = dropout(do_i v_j^T);  ds = p * (dp - D_i), D_i = rowsum(do_i * o_i)
//   dk_j += ds^T q_i * scale;   dq_i += ds k_j * scale
// A task owns its dk_j and dv_j rows. dq_i gets a contribution from every key tile: with few
// (b, hk) pairs the key tiles are split into G groups (G from the shapes alone), each with its own
// dq buffer, summed in group order at the end, so results are deterministic for any thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/philox.h"
#include "core/cpu/vmath.h"
#include "core/parallel.h"

namespace nabla::cpu::NABLA_CPU_ISA {

namespace {

// 128 x 128 tiles: the tile products are long enough for the GEMM's micro-kernel (forward and
// backward at T 4096, causal, 8 heads of 64, on 2 Zen 5 cores: 0.40 s, 64 x 64 tiles 0.63 s), and
// a thread's four tiles (256 KB) stay in its L2.
constexpr int64_t kBr = 128, kBc = 128;
static_assert(kBr == kBc, "the causal backward starts each key tile's query loop at its diagonal tile");

// A (B, H, rows, cols) operand with contiguous cols: element (b, h, i, c) at row(b, h, i)[c].
template <class T>
struct Rows {
  const T* p = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0;
  const T* row(int64_t b, int64_t h, int64_t i) const { return p + b * s0 + h * s1 + i * s2; }
};
template <class T>
Rows<T> rows_of(const Tensor& t) {
  return {static_cast<const T*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

// The additive mask (B, Hq, L, S), any strides (0 where broadcast); absent when p is null.
template <class T>
struct Bias {
  const T* p = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  void add(int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n, T* s) const {
    const T* r = p + b * s0 + h * s1 + i * s2 + j0 * s3;
    if (s3 == 1) {
      for (int64_t c = 0; c < n; ++c) s[c] += r[c];
    } else {
      for (int64_t c = 0; c < n; ++c) s[c] += r[c * s3];
    }
  }
};
template <class T>
Bias<T> bias_of(const Tensor& t) {
  if (!t.defined()) return {};
  return {static_cast<const T*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

inline float exp_t(float x) { return vmath::exp_f32(x); }
inline double exp_t(double x) { return std::exp(x); }

// exp(x[c] - m) in place for c < n (a loop the compiler vectorizes for float).
template <class T>
void exp_shifted(T* x, int64_t n, T m) {
  for (int64_t c = 0; c < n; ++c) x[c] = exp_t(x[c] - m);
}
// max and sum of x[0, n) in 16 partial results (kept in vector registers; the compiler may not
// reorder a reduction itself).
template <class T>
T row_max(const T* x, int64_t n) {
  constexpr int kW = 16;
  T acc[kW];
  for (int u = 0; u < kW; ++u) acc[u] = -std::numeric_limits<T>::infinity();
  int64_t c = 0;
  for (; c + kW <= n; c += kW)
    for (int u = 0; u < kW; ++u) acc[u] = std::max(acc[u], x[c + u]);
  for (; c < n; ++c) acc[0] = std::max(acc[0], x[c]);
  T m = acc[0];
  for (int u = 1; u < kW; ++u) m = std::max(m, acc[u]);
  return m;
}
template <class T>
T row_sum(const T* x, int64_t n) {
  constexpr int kW = 16;
  T acc[kW] = {};
  int64_t c = 0;
  for (; c + kW <= n; c += kW)
    for (int u = 0; u < kW; ++u) acc[u] += x[c + u];
  for (; c < n; ++c) acc[0] += x[c];
  for (int w = kW / 2; w > 0; w /= 2)
    for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
  return acc[0];
}

// Dropout on the float32 (B, Hq, L, S) weights: element e is kept, multiplied by 1 / keep, when
// its draw (word e % 4 of Philox block first + e / 4, Tensor::bernoulli_'s mapping) is below keep.
template <class T>
struct Dropout {
  bool on;
  uint64_t key, first;
  double keep;
  T inv_keep;
  int64_t S;
  Dropout(const AttentionParams& p, int64_t S_)
      : on(p.dropout_p > 0),
        key(p.seed),
        first(p.offset),
        keep(1.0 - p.dropout_p),
        inv_keep(static_cast<T>(1.0 / (1.0 - p.dropout_p))),
        S(S_) {}
  // The multipliers of keys j0 .. j0 + n - 1 of weight row `row` ((b * Hq + h) * L + i) into mult.
  void mask(int64_t row, int64_t j0, int64_t n, T* mult) const {
    uint32_t words[4][kLanes];
    uint64_t e = static_cast<uint64_t>(row * S + j0);
    int64_t i = 0;
    while (i < n) {
      philox_lanes(key, first + e / 4, words);
      for (int l = 0; l < kLanes && i < n; ++l)
        for (int w = static_cast<int>(e % 4); w < 4 && i < n; ++w, ++i, ++e)
          mult[i] = static_cast<double>(Philox::to_float(words[w][l])) < keep ? inv_keep : T(0);
    }
  }
};

// The keys j0 .. j0 + cols - 1 that query i sees: all, or under causal those with j <= i.
inline int64_t visible_keys(bool causal, int64_t i, int64_t j0, int64_t cols) {
  return causal ? std::clamp<int64_t>(i - j0 + 1, 0, cols) : cols;
}

// The score tiles s = q_i k_j^T * scale + bias, which forward and backward both compute.
template <class T>
struct Scores {
  Rows<T> Q, K;
  Bias<T> bias;
  int64_t E;
  T scale;
  bool causal;
  // The (rows, cols) tile of query rows i0.. (head h) and keys j0.. (head hk) into s (row stride
  // kBc), then row(r, i, n, s + r * kBc) for each row, n its visible keys (the rest is to be ignored).
  template <class F>
  void tile(int64_t b, int64_t h, int64_t hk, int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* s, F&& row) const {
    // (rows, E) x (E, cols), k_j read transposed in place
    gemm_t<T>(rows, cols, E, scale, Q.row(b, h, i0), Q.s2, 1, K.row(b, hk, j0), 1, K.s2, T(0), s, kBc);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r, n = visible_keys(causal, i, j0, cols);
      T* sr = s + r * kBc;
      if (bias.p) bias.add(b, h, i, j0, n, sr);
      row(r, i, n, sr);
    }
  }
};
template <class T>
Scores<T> scores_of(const Tensor& q, const Tensor& k, const Tensor& bias, const AttentionParams& p) {
  return {rows_of<T>(q), rows_of<T>(k), bias_of<T>(bias), q.size(3), static_cast<T>(p.scale), p.causal};
}

// Runs tasks [0, n) on every thread, each task taken from a shared counter (the tasks differ in
// length under causal masking; a static split would leave a thread idle).
template <class F>
void run_tasks(int64_t n, const F& f) {
  std::atomic<int64_t> next{0};
  const int64_t threads = std::min<int64_t>(in_parallel_region() ? 1 : get_num_threads(), n);
  parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < n;) f(t);
  });
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias_t, const AttentionParams& p, T* out,
             T* lse) {
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), E = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), Ev = v.size(3), group = Hq / Hkv;
  const Rows<T> V = rows_of<T>(v);
  const Scores<T> scores = scores_of<T>(q, k, bias_t, p);
  const Dropout<T> dropout(p, S);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t nq = (L + kBr - 1) / kBr, heads = B * Hq;
  run_tasks(heads * nq, [&](int64_t t) {
    T* s = thread_scratch<T>(Scratch::attention, kBr * kBc + 2 * kBr + kBc);  // s, m, l, mult
    T *m = s + kBr * kBc, *l = m + kBr, *mult = l + kBr;
    const int64_t qt = nq - 1 - t / heads, bh = t % heads;  // the last query tiles (longest when causal) first
    const int64_t b = bh / Hq, h = bh % Hq, hk = h / group;
    const int64_t i0 = qt * kBr, rows = std::min(kBr, L - i0);
    const int64_t kend = p.causal ? std::min(S, i0 + rows) : S;
    T* o = out + (bh * L + i0) * Ev;  // the output rows accumulate in place: (rows, Ev)
    std::fill(o, o + rows * Ev, T(0));
    std::fill(m, m + rows, neg_inf);
    std::fill(l, l + rows, T(0));
    for (int64_t j0 = 0; j0 < kend; j0 += kBc) {
      const int64_t cols = std::min(kBc, kend - j0);
      scores.tile(b, h, hk, i0, rows, j0, cols, s, [&](int64_t r, int64_t i, int64_t n, T* sr) {
        const T m_new = std::max(m[r], row_max(sr, n));
        if (m_new == neg_inf) {  // nothing visible yet in this row
          std::fill(sr, sr + cols, T(0));
          return;
        }
        const T alpha = exp_t(m[r] - m_new);  // 0 when m was -inf
        exp_shifted(sr, n, m_new);
        std::fill(sr + n, sr + cols, T(0));
        l[r] = l[r] * alpha + row_sum(sr, n);
        m[r] = m_new;
        if (alpha != T(1)) {
          T* orow = o + r * Ev;
          for (int64_t d = 0; d < Ev; ++d) orow[d] *= alpha;
        }
        if (dropout.on) {
          dropout.mask(bh * L + i, j0, n, mult);
          for (int64_t c = 0; c < n; ++c) sr[c] *= mult[c];
        }
      });
      // o += p v_j: (rows, cols) x (cols, Ev)
      gemm_t<T>(rows, Ev, cols, T(1), s, kBc, 1, V.row(b, hk, j0), V.s2, 1, T(1), o, Ev);
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* orow = o + r * Ev;
      if (l[r] == T(0)) {  // every key masked: softmax over nothing
        std::fill(orow, orow + Ev, std::numeric_limits<T>::quiet_NaN());
        lse[bh * L + i0 + r] = neg_inf;
        continue;
      }
      const T inv = T(1) / l[r];
      for (int64_t d = 0; d < Ev; ++d) orow[d] *= inv;
      lse[bh * L + i0 + r] = m[r] + std::log(l[r]);
    }
  });
}

template <class T>
void backward(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias_t,
              const Tensor& out, const T* lse, const AttentionParams& p, T* gq, T* gk, T* gv) {
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), E = q.size(3);
  const int64_t Hkv = k.size(1), S = k.size(2), Ev = v.size(3), group = Hq / Hkv;
  const Rows<T> Q = rows_of<T>(q), K = rows_of<T>(k), V = rows_of<T>(v), dO = rows_of<T>(gout);
  const Rows<T> O = rows_of<T>(out);
  const Scores<T> scores = scores_of<T>(q, k, bias_t, p);
  const Dropout<T> dropout(p, S);
  const T scale = scores.scale;
  const int64_t heads = B * Hq, nk = (S + kBc - 1) / kBc;

  // D_i = rowsum(do_i * o_i) (B * Hq * L)
  Tensor d_t = internal::make_empty({heads * L}, dtype_of<T>(), kCPU);
  T* D = d_t.data_ptr<T>();
  parallel_for(0, heads * L, std::max<int64_t>(1, 16384 / std::max<int64_t>(Ev, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (Hq * L), h = (r / L) % Hq, i = r % L;
      const T *g = dO.row(b, h, i), *o = O.row(b, h, i);
      T acc = 0;
      for (int64_t d = 0; d < Ev; ++d) acc += g[d] * o[d];
      D[r] = acc;
    }
  });

  // Groups of key tiles: at least 16 tasks where the key tiles allow, from the shapes alone; each
  // group beyond the first has a dq buffer of q's size, at most 64 MB of them.
  const int64_t pairs = B * Hkv, dq_bytes = heads * L * E * static_cast<int64_t>(sizeof(T));
  int64_t G = std::clamp<int64_t>((16 + pairs - 1) / pairs, 1, std::max<int64_t>(nk, 1));
  G = std::max<int64_t>(1, std::min<int64_t>(G, 1 + (int64_t{64} << 20) / std::max<int64_t>(dq_bytes, 1)));
  Tensor partial_t;
  if (G > 1) partial_t = internal::make_empty({(G - 1) * heads * L * E}, dtype_of<T>(), kCPU);
  T* partial = G > 1 ? partial_t.data_ptr<T>() : nullptr;
  std::fill(gq, gq + heads * L * E, T(0));
  if (partial) std::fill(partial, partial + (G - 1) * heads * L * E, T(0));
  std::fill(gk, gk + pairs * S * E, T(0));
  std::fill(gv, gv + pairs * S * Ev, T(0));

  run_tasks(pairs * G, [&](int64_t t) {
    T* ps = thread_scratch<T>(Scratch::attention, 4 * kBr * kBc);  // p, dropout(p), dp then ds, mult
    T *pd = ps + kBr * kBc, *dp = pd + kBr * kBc, *mult = dp + kBr * kBc;
    if (!dropout.on) pd = ps;
    const int64_t g = t % G, pair = t / G, b = pair / Hkv, hk = pair % Hkv;
    T* dq = g == 0 ? gq : partial + (g - 1) * heads * L * E;
    for (int64_t jt = g; jt < nk; jt += G) {
      const int64_t j0 = jt * kBc, cols = std::min(kBc, S - j0);
      T* dk = gk + (pair * S + j0) * E;  // (cols, E)
      T* dv = gv + (pair * S + j0) * Ev;
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        const int64_t bh = b * Hq + h;
        for (int64_t i0 = p.causal ? j0 / kBr * kBr : 0; i0 < L; i0 += kBr) {
          const int64_t rows = std::min(kBr, L - i0);
          scores.tile(b, h, hk, i0, rows, j0, cols, ps, [&](int64_t r, int64_t i, int64_t n, T* sr) {
            exp_shifted(sr, n, lse[bh * L + i]);  // the weights p (NaN in a row with every key masked)
            std::fill(sr + n, sr + kBc, T(0));
            if (dropout.on) {
              T* mr = mult + r * kBc;
              dropout.mask(bh * L + i, j0, n, mr);
              std::fill(mr + n, mr + kBc, T(0));
              T* pdr = pd + r * kBc;
              for (int64_t c = 0; c < kBc; ++c) pdr[c] = sr[c] * mr[c];
            }
          });
          // dv_j += dropout(p)^T do_i: (cols, rows) x (rows, Ev)
          gemm_t<T>(cols, Ev, rows, T(1), pd, 1, kBc, dO.row(b, h, i0), dO.s2, 1, T(1), dv, Ev);
          // dp = do_i v_j^T: (rows, Ev) x (Ev, cols)
          gemm_t<T>(rows, cols, Ev, T(1), dO.row(b, h, i0), dO.s2, 1, V.row(b, hk, j0), 1, V.s2, T(0), dp, kBc);
          for (int64_t r = 0; r < rows; ++r) {
            const T* pr = ps + r * kBc;
            T* dr = dp + r * kBc;
            const T Di = D[bh * L + i0 + r];
            if (dropout.on) {
              const T* mr = mult + r * kBc;
              for (int64_t c = 0; c < cols; ++c) dr[c] = pr[c] * (dr[c] * mr[c] - Di);
            } else {
              for (int64_t c = 0; c < cols; ++c) dr[c] = pr[c] * (dr[c] - Di);
            }
          }
          // dk_j += ds^T q_i * scale: (cols, rows) x (rows, E); dq_i += ds k_j * scale: (rows, cols) x (cols, E)
          gemm_t<T>(cols, E, rows, scale, dp, 1, kBc, Q.row(b, h, i0), Q.s2, 1, T(1), dk, E);
          gemm_t<T>(rows, E, cols, scale, dp, kBc, 1, K.row(b, hk, j0), K.s2, 1, T(1), dq + (bh * L + i0) * E, E);
        }
      }
    }
  });
  if (partial) {  // dq = group 0's + group 1's + ... in that order
    parallel_for(0, heads * L * E, 1 << 15, [&](int64_t e0, int64_t e1) {
      for (int64_t gi = 0; gi < G - 1; ++gi) {
        const T* src = partial + gi * heads * L * E;
        for (int64_t e = e0; e < e1; ++e) gq[e] += src[e];
      }
    });
  }
}

// q, k and v in the compute dtype with contiguous last dims (float16/bfloat16 as float32 copies).
Tensor compute_form(const Tensor& t) {
  if (!t.defined()) return t;
  if (lowp::is_lowp(t.dtype())) return as_f32(t);
  return t.stride(-1) == 1 || t.size(-1) <= 1 ? t : contig(t);
}

}  // namespace

bool has_flash_attention(const Tensor& q) {
  const DType dt = q.dtype();
  return dt == DType::f32 || dt == DType::f64 || lowp::is_lowp(dt);
}

void flash_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& bias,
                     const AttentionParams& p, const Tensor& out_in, const Tensor& lse) {
  if (out_in.numel() == 0) return;
  const Tensor q = compute_form(q_in), k = compute_form(k_in), v = compute_form(v_in);
  Tensor out = f32_out(out_in);
  visit_float(q.dtype(), "flash_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (k.size(2) == 0) {  // no keys: the weights are empty and the output 0, as the math path's matmul
      std::fill_n(out.data_ptr<T>(), out.numel(), T(0));
      std::fill_n(lse.data_ptr<T>(), lse.numel(), -std::numeric_limits<T>::infinity());
      return;
    }
    forward<T>(q, k, v, bias, p, out.data_ptr<T>(), lse.data_ptr<T>());
  });
  store_out(out, out_in);
}

void flash_attention_backward(const Tensor& grad_out, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                              const Tensor& bias, const Tensor& out_in, const Tensor& lse, const AttentionParams& p,
                              const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v) {
  const Tensor q = compute_form(q_in), k = compute_form(k_in), v = compute_form(v_in);
  const Tensor gout = compute_form(grad_out), out = compute_form(out_in);
  Tensor gq = f32_out(grad_q), gk = f32_out(grad_k), gv = f32_out(grad_v);
  visit_float(q.dtype(), "flash_attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (q.size(2) == 0 || k.size(2) == 0 || q.size(0) == 0) {  // nothing attends: every gradient is 0
      for (const Tensor* g : {&gq, &gk, &gv}) std::fill_n(g->data_ptr<T>(), g->numel(), T(0));
      return;
    }
    backward<T>(gout, q, k, v, bias, out, lse.data_ptr<T>(), p, gq.data_ptr<T>(), gk.data_ptr<T>(), gv.data_ptr<T>());
  });
  store_out(gq, grad_q);
  store_out(gk, grad_k);
  store_out(gv, grad_v);
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
