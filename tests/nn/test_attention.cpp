// Attention: scaled_dot_product_attention and MultiheadAttention against float64 loop references
// (softmax(q k^T * scale + mask) v written out by hand) and against libtorch 1.13; PyTorch's
// state_dict keys, initialization and printing; gradients, dropout, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "autograd/gradcheck.h"
#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
namespace F = nn::functional;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- a row-major float64 matrix and the loop references -------------------------------------------
struct Mat {
  int64_t r = 0, c = 0;
  std::vector<double> a;
  Mat() = default;
  Mat(int64_t r, int64_t c) : r(r), c(c), a(static_cast<size_t>(r * c), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return a[static_cast<size_t>(i * c + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[static_cast<size_t>(i * c + j)]; }
};

Mat mat(const Tensor& t) {  // t: 2-D, or 1-D as one row
  Mat m(t.dim() == 1 ? 1 : t.size(0), t.size(-1));
  m.a = values(t);
  return m;
}

// x (n, in) W^T (out, in) + b
Mat linear_ref(const Mat& x, const Mat& w, const std::vector<double>& b) {
  Mat y(x.r, w.r);
  for (int64_t i = 0; i < x.r; ++i)
    for (int64_t o = 0; o < w.r; ++o) {
      double s = b.empty() ? 0.0 : b[static_cast<size_t>(o)];
      for (int64_t k = 0; k < x.c; ++k) s += x(i, k) * w(o, k);
      y(i, o) = s;
    }
  return y;
}

using BiasFn = std::function<double(int64_t i, int64_t j)>;

// softmax_j(sum_e q[i, e] k[j, e] * scale + bias(i, j)) and the weights times v.
std::pair<Mat, Mat> attention_ref(const Mat& q, const Mat& k, const Mat& v, double scale, const BiasFn& bias) {
  Mat w(q.r, k.r), out(q.r, v.c);
  for (int64_t i = 0; i < q.r; ++i) {
    double mx = -kInf;
    for (int64_t j = 0; j < k.r; ++j) {
      double s = 0;
      for (int64_t e = 0; e < q.c; ++e) s += q(i, e) * k(j, e);
      w(i, j) = s * scale + (bias ? bias(i, j) : 0.0);
      mx = std::max(mx, w(i, j));
    }
    double z = 0;
    for (int64_t j = 0; j < k.r; ++j) z += (w(i, j) = std::exp(w(i, j) - mx));
    for (int64_t j = 0; j < k.r; ++j) w(i, j) /= z;
    for (int64_t j = 0; j < k.r; ++j)
      for (int64_t e = 0; e < v.c; ++e) out(i, e) += w(i, j) * v(j, e);
  }
  return {out, w};
}

Mat cols(const Mat& m, int64_t start, int64_t n) {
  Mat s(m.r, n);
  for (int64_t i = 0; i < m.r; ++i)
    for (int64_t j = 0; j < n; ++j) s(i, j) = m(i, start + j);
  return s;
}
Mat rows(const Mat& m, int64_t start, int64_t n) {
  Mat s(n, m.c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m.c; ++j) s(i, j) = m(start + i, j);
  return s;
}
Mat append_row(const Mat& m, const std::vector<double>& row) {
  Mat s(m.r + 1, m.c);
  std::copy(m.a.begin(), m.a.end(), s.a.begin());
  std::copy(row.begin(), row.end(), s.a.begin() + m.r * m.c);
  return s;
}
std::vector<double> sub(const std::vector<double>& v, int64_t start, int64_t n) {
  return std::vector<double>(v.begin() + start, v.begin() + start + n);
}

// MultiheadAttention for one batch element by hand: q_in (L, E), k_in (S, kdim), v_in (S, vdim).
// bias(h, i, j) is the additive mask over the S keys (the extra bias_kv / zero positions get 0).
struct MhaRef {
  Mat out;                 // (L, E)
  std::vector<Mat> heads;  // per head (L, S')
};
MhaRef mha_ref(const nn::MultiheadAttention& m, const Mat& q_in, const Mat& k_in, const Mat& v_in,
               const std::function<double(int64_t, int64_t, int64_t)>& bias) {
  const int64_t E = m.embed_dim, H = m.num_heads, hd = E / H, S = k_in.r;
  Mat wq, wk, wv;
  if (m.in_proj_weight.defined()) {
    Mat w = mat(m.in_proj_weight);
    wq = rows(w, 0, E), wk = rows(w, E, E), wv = rows(w, 2 * E, E);
  } else {
    wq = mat(m.q_proj_weight), wk = mat(m.k_proj_weight), wv = mat(m.v_proj_weight);
  }
  std::vector<double> b = m.in_proj_bias.defined() ? values(m.in_proj_bias) : std::vector<double>(3 * E, 0.0);
  Mat q = linear_ref(q_in, wq, sub(b, 0, E)), k = linear_ref(k_in, wk, sub(b, E, E)),
      v = linear_ref(v_in, wv, sub(b, 2 * E, E));
  if (m.bias_k.defined()) k = append_row(k, values(m.bias_k)), v = append_row(v, values(m.bias_v));
  if (m.options.add_zero_attn)
    k = append_row(k, std::vector<double>(E, 0.0)), v = append_row(v, std::vector<double>(E, 0.0));
  MhaRef res;
  Mat concat(q_in.r, E);
  for (int64_t h = 0; h < H; ++h) {
    auto [o, w] =
        attention_ref(cols(q, h * hd, hd), cols(k, h * hd, hd), cols(v, h * hd, hd), 1 / std::sqrt(double(hd)),
                      [&](int64_t i, int64_t j) { return j < S && bias ? bias(h, i, j) : 0.0; });
    for (int64_t i = 0; i < q_in.r; ++i)
      for (int64_t e = 0; e < hd; ++e) concat(i, h * hd + e) = o(i, e);
    res.heads.push_back(w);
  }
  std::vector<double> ob = m.out_proj->bias.defined() ? values(m.out_proj->bias) : std::vector<double>{};
  res.out = linear_ref(concat, mat(m.out_proj->weight), ob);
  return res;
}

std::vector<std::string> keys_of(const nn::Module& m) { return m.state_dict().keys(); }
std::vector<std::vector<int64_t>> shapes_of(const nn::Module& m) {
  std::vector<std::vector<int64_t>> s;
  for (const auto& [k, t] : m.state_dict()) s.push_back(shape_of(t));
  return s;
}

}  // namespace

// ---- scaled_dot_product_attention ------------------------------------------------------------------

TEST(Attention, SdpaMatchesLoopReferenceWithBroadcastBatchDims) {
  manual_seed(1);
  // q (2, 3, L=4, E=5), k (3, S=6, 5), v (1, 3, 6, Ev=2): the batch dims broadcast to (2, 3).
  Tensor q = randn({2, 3, 4, 5}, dtype(kFloat64)), k = randn({3, 6, 5}, dtype(kFloat64)),
         v = randn({1, 3, 6, 2}, dtype(kFloat64));
  Tensor y = F::scaled_dot_product_attention(q, k, v);
  ASSERT_EQ(shape_of(y), (std::vector<int64_t>{2, 3, 4, 2}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b) {
      auto [want, w] = attention_ref(mat(q[a][b]), mat(k[b]), mat(v[0][b]), 1 / std::sqrt(5.0), nullptr);
      EXPECT_TRUE(tensor_is(y[a][b], {4, 2}, want.a, 1e-12, 1e-12)) << a << "," << b;
    }
}

TEST(Attention, SdpaMasksCausalAndScale) {
  manual_seed(2);
  Tensor q = randn({2, 3, 4}, dtype(kFloat64)), k = randn({2, 5, 4}, dtype(kFloat64)),
         v = randn({2, 5, 3}, dtype(kFloat64));
  // bool mask (L, S), true = may attend; broadcast over the batch.
  std::vector<double> allowed = {1, 0, 1, 1, 0, /**/ 0, 1, 1, 0, 1, /**/ 1, 1, 1, 1, 1};
  Tensor bmask = f64(allowed, {3, 5}).to(kBool);
  // float mask (2, 1, S): added to the scores.
  Tensor fmask = f64({0.5, -1, 0, 2, -kInf, 0, 0, -0.25, 1, 0.75}, {2, 1, 5});
  for (int64_t b = 0; b < 2; ++b) {
    Mat qb = mat(q[b]), kb = mat(k[b]), vb = mat(v[b]);
    double sc = 1 / 2.0;  // 1/sqrt(E)
    auto [r1, w1] =
        attention_ref(qb, kb, vb, sc, [&](int64_t i, int64_t j) { return allowed[i * 5 + j] ? 0.0 : -kInf; });
    EXPECT_TRUE(
        tensor_is(F::scaled_dot_product_attention(q, k, v, {.attn_mask = bmask})[b], {3, 3}, r1.a, 1e-12, 1e-12));
    auto fm = values(fmask);
    auto [r2, w2] = attention_ref(qb, kb, vb, sc, [&](int64_t, int64_t j) { return fm[b * 5 + j]; });
    EXPECT_TRUE(
        tensor_is(F::scaled_dot_product_attention(q, k, v, {.attn_mask = fmask})[b], {3, 3}, r2.a, 1e-12, 1e-12));
    // causal with L = 3 < S = 5: top-left aligned, key j allowed for query i when j <= i.
    auto [r3, w3] = attention_ref(qb, kb, vb, sc, [](int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; });
    EXPECT_TRUE(
        tensor_is(F::scaled_dot_product_attention(q, k, v, {.is_causal = true})[b], {3, 3}, r3.a, 1e-12, 1e-12));
    // a custom scale
    auto [r4, w4] = attention_ref(qb, kb, vb, 0.3, nullptr);
    EXPECT_TRUE(tensor_is(F::scaled_dot_product_attention(q, k, v, {.scale = 0.3})[b], {3, 3}, r4.a, 1e-12, 1e-12));
  }
  // Unbatched (L, E) operands.
  auto [r5, w5] = attention_ref(mat(q[0]), mat(k[0]), mat(v[0]), 0.5, nullptr);
  EXPECT_TRUE(tensor_is(F::scaled_dot_product_attention(q[0], k[0], v[0]), {3, 3}, r5.a, 1e-12, 1e-12));
  // The causal mask as an explicit bool mask gives the same.
  Tensor tri = ones({3, 5}, dtype(kBool)).tril();
  EXPECT_TRUE(tensor_near(F::scaled_dot_product_attention(q, k, v, {.attn_mask = tri}),
                          F::scaled_dot_product_attention(q, k, v, {.is_causal = true}), 1e-14, 1e-14));
}

TEST(Attention, SdpaDropoutIsSeededAndOnTheWeights) {
  manual_seed(3);
  Tensor q = randn({2, 4, 3}), k = randn({2, 5, 3}), v = randn({2, 5, 2});
  manual_seed(10);
  Tensor a = F::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5});
  manual_seed(10);
  Tensor b = F::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5});
  EXPECT_TRUE(equal(a, b));
  EXPECT_FALSE(allclose(a, F::scaled_dot_product_attention(q, k, v)));
  // The same as dropping out the softmax weights with the same draw.
  manual_seed(10);
  Tensor w = F::dropout(softmax(q.matmul(k.transpose(-2, -1)) / std::sqrt(3.0), -1), 0.5, true);
  EXPECT_TRUE(allclose(a, w.matmul(v), 1e-5, 1e-6));
}

TEST(Attention, SdpaErrorsShowShapes) {
  Tensor q = zeros({2, 3, 4}), k = zeros({2, 5, 4}), v = zeros({2, 5, 6});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::scaled_dot_product_attention(q, zeros({2, 5, 3}), v);
      },
      {"scaled_dot_product_attention", "query [2, 3, 4]", "key [2, 5, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::scaled_dot_product_attention(q, k, zeros({2, 4, 6}));
      },
      {"key [2, 5, 4]", "value [2, 4, 6]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::scaled_dot_product_attention(q, zeros({3, 5, 4}), zeros({3, 5, 6}));
      },
      {"do not broadcast", "[2, 3, 4]", "[3, 5, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 4}, dtype(kBool))});
      },
      {"attn_mask of shape [3, 4]", "[2, 3, 5]"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 5}, dtype(kInt64))});
      },
      {"attn_mask must be a bool or floating tensor", "int64"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        F::scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 5}), .is_causal = true});
      },
      {"is_causal and attn_mask cannot both be set"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { F::scaled_dot_product_attention(q, k.to(kFloat64), v); },
                                      {"same floating dtype", "float32", "float64"}));
}

// ---- MultiheadAttention: loop references -------------------------------------------------------------

// Rotary embeddings: the rotation by the definition for D = 2 (angle = position in radians), the
// property they exist for (rotated dot products depend on the positions' difference only), offset
// and positions agreeing, interleaved = half-split on interleaved features, dtype and errors.
TEST(Attention, RotaryEmbeddingRotatesByRelativePosition) {
  Tensor pair = tensor({1.0, 0.0}, kFloat64).expand({4, 2}).contiguous();  // rows at positions 0..3
  Tensor r = F::rotary_embedding(pair);
  for (int64_t p = 0; p < 4; ++p) {
    EXPECT_NEAR(r[p][0].item<double>(), std::cos(double(p)), 1e-15);
    EXPECT_NEAR(r[p][1].item<double>(), std::sin(double(p)), 1e-15);
  }
  manual_seed(4);
  Tensor q = randn({1, 8}, kFloat64), k = randn({1, 8}, kFloat64);
  auto at = [](const Tensor& x, int64_t p) { return F::rotary_embedding(x, {.offset = p}); };
  const double d = (at(q, 5) * at(k, 2)).sum().item<double>();
  EXPECT_NEAR((at(q, 13) * at(k, 10)).sum().item<double>(), d, 1e-12);  // both shifted by 8
  EXPECT_GT(std::abs((at(q, 13) * at(k, 11)).sum().item<double>() - d), 1e-6);
  // offset 3 is positions 3, 4, ...; per-sequence positions broadcast over the heads.
  Tensor x = randn({2, 3, 5, 8}, kFloat64);
  EXPECT_TRUE(allclose(F::rotary_embedding(x, {.offset = 3}),
                       F::rotary_embedding(x, {.positions = arange(3, 8, 1, kInt64)}), 0, 0));
  Tensor pos = tensor({0, 0, 0, 1, 2, 0, 1, 2, 3, 4}, kInt64).view({2, 1, 5});
  Tensor y = F::rotary_embedding(x, {.positions = pos});
  EXPECT_TRUE(allclose(y[1], F::rotary_embedding(x[1]), 0, 0));
  EXPECT_TRUE(allclose(y[0].narrow(1, 2, 3), F::rotary_embedding(x[0].narrow(1, 2, 3)), 0, 0));
  // interleaved pairs (2i, 2i + 1) = half-split pairs (i, i + 4) after moving the features there.
  Tensor perm = tensor({0, 2, 4, 6, 1, 3, 5, 7}, kInt64), inv = tensor({0, 4, 1, 5, 2, 6, 3, 7}, kInt64);
  EXPECT_TRUE(allclose(F::rotary_embedding(x, {.interleaved = true}),
                       F::rotary_embedding(x.index_select(-1, perm)).index_select(-1, inv), 1e-15, 1e-15));
  EXPECT_EQ(F::rotary_embedding(x.to(kBFloat16)).dtype(), kBFloat16);
  EXPECT_THROW(F::rotary_embedding(randn({3, 5})), ShapeError);
  EXPECT_THROW(F::rotary_embedding(x, {.positions = arange(4, kInt64)}), ShapeError);
  EXPECT_THROW(F::rotary_embedding(x, {.positions = arange(5, kFloat32)}), DTypeError);
  EXPECT_THROW(F::rotary_embedding(x, {.theta = 0}), ValueError);
}

// The SwiGLU feed-forward of LLaMA-style models as the README composes it from Linear and silu:
// w2(silu(w1 x) * w3 x), checked against the formula element by element in float64 and by gradcheck.
struct SwiGLU : nn::Module {
  SwiGLU(int64_t dim, int64_t hidden) : nn::Module("SwiGLU") {
    w1 = register_module("w1", std::make_shared<nn::Linear>(dim, hidden, nn::LinearOptions{.bias = false}));
    w2 = register_module("w2", std::make_shared<nn::Linear>(hidden, dim, nn::LinearOptions{.bias = false}));
    w3 = register_module("w3", std::make_shared<nn::Linear>(dim, hidden, nn::LinearOptions{.bias = false}));
  }
  Tensor forward(Tensor x) override { return w2->forward(F::silu(w1->forward(x)) * w3->forward(x)); }
  std::shared_ptr<nn::Linear> w1, w2, w3;
};

TEST(Attention, SwiGluCompositionMatchesItsFormula) {
  manual_seed(5);
  SwiGLU mlp(4, 6);
  mlp.to(kFloat64);
  Tensor x = randn({3, 4}, kFloat64);
  Tensor y = mlp.forward(x);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 4}));
  const Tensor w1 = mlp.w1->weight, w2 = mlp.w2->weight, w3 = mlp.w3->weight;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t o = 0; o < 4; ++o) {
      double want = 0;
      for (int64_t h = 0; h < 6; ++h) {
        double a = 0, b = 0;
        for (int64_t i = 0; i < 4; ++i) {
          a += w1[h][i].item<double>() * x[r][i].item<double>();
          b += w3[h][i].item<double>() * x[r][i].item<double>();
        }
        want += w2[o][h].item<double>() * (a / (1 + std::exp(-a))) * b;
      }
      EXPECT_NEAR(y[r][o].item<double>(), want, 1e-12);
    }
  autograd::gradcheck(autograd::single([&](const std::vector<Tensor>& in) { return mlp.forward(in[0]); }),
                      {x.requires_grad_()});
  EXPECT_EQ(mlp.parameters().size(), 3u);  // no biases, as LLaMA's
}

TEST(Attention, MhaMatchesLoopReferenceCrossAttention) {
  manual_seed(4);
  nn::MultiheadAttention m(6, 3);
  m.to(kFloat64);
  {
    autograd::NoGradGuard ng;
    m.in_proj_bias.copy_(randn({18}, dtype(kFloat64)));
    m.out_proj->bias.copy_(randn({6}, dtype(kFloat64)));
  }
  m.eval();
  // Seq first: query (L=3, N=2, 6), key/value (S=4, N=2, 6), three different tensors.
  Tensor q = randn({3, 2, 6}, dtype(kFloat64)), k = randn({4, 2, 6}, dtype(kFloat64)),
         v = randn({4, 2, 6}, dtype(kFloat64));
  auto [out, w_avg] = m.forward_attention(q, k, v);
  Tensor w_heads = m.forward_attention(q, k, v, {.average_attn_weights = false}).attn_weights;
  ASSERT_EQ(shape_of(out), (std::vector<int64_t>{3, 2, 6}));
  ASSERT_EQ(shape_of(w_avg), (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(shape_of(w_heads), (std::vector<int64_t>{2, 3, 3, 4}));
  for (int64_t n = 0; n < 2; ++n) {
    MhaRef r = mha_ref(m, mat(q.select(1, n)), mat(k.select(1, n)), mat(v.select(1, n)), nullptr);
    EXPECT_TRUE(tensor_is(out.select(1, n), {3, 6}, r.out.a, 1e-12, 1e-12));
    Mat avg(3, 4);
    for (int64_t h = 0; h < 3; ++h) {
      EXPECT_TRUE(tensor_is(w_heads[n][h], {3, 4}, r.heads[h].a, 1e-12, 1e-12));
      for (size_t i = 0; i < avg.a.size(); ++i) avg.a[i] += r.heads[h].a[i] / 3;
    }
    EXPECT_TRUE(tensor_is(w_avg[n], {3, 4}, avg.a, 1e-12, 1e-12));
  }
  // need_weights = false: the same output, no weights.
  auto res = m.forward_attention(q, k, v, {.need_weights = false});
  EXPECT_FALSE(res.attn_weights.defined());
  EXPECT_TRUE(tensor_near(res.output, out, 1e-14, 1e-14));
}

TEST(Attention, MhaMasksMatchLoopReference) {
  manual_seed(5);
  nn::MultiheadAttention m(4, 2);
  m.to(kFloat64);
  Tensor q = randn({3, 2, 4}, dtype(kFloat64)), kv = randn({5, 2, 4}, dtype(kFloat64));
  // key_padding_mask (N, S), true = ignore; attn_mask (L, S) bool, true = NOT allowed.
  std::vector<double> kpm = {0, 0, 0, 1, 1, /**/ 1, 0, 0, 0, 0};
  std::vector<double> am = {0, 1, 0, 0, 0, /**/ 0, 0, 0, 0, 0, /**/ 1, 0, 0, 0, 0};
  Tensor kpm_t = f64(kpm, {2, 5}).to(kBool), am_t = f64(am, {3, 5}).to(kBool);
  auto bias = [&](int64_t n) {
    return [&, n](int64_t, int64_t i, int64_t j) { return kpm[n * 5 + j] || am[i * 5 + j] ? -kInf : 0.0; };
  };
  auto [out, w] = m.forward_attention(q, kv, kv, {.key_padding_mask = kpm_t, .attn_mask = am_t});
  for (int64_t n = 0; n < 2; ++n) {
    MhaRef r = mha_ref(m, mat(q.select(1, n)), mat(kv.select(1, n)), mat(kv.select(1, n)), bias(n));
    EXPECT_TRUE(tensor_is(out.select(1, n), {3, 4}, r.out.a, 1e-12, 1e-12));
  }
  // The same masks as floats (-inf where not allowed) give the same; float masks are added.
  Tensor kpm_f = zeros({2, 5}, dtype(kFloat64)).masked_fill(kpm_t, -kInf);
  Tensor am_f = zeros({3, 5}, dtype(kFloat64)).masked_fill(am_t, -kInf);
  EXPECT_TRUE(tensor_near(m.forward_attention(q, kv, kv, {.key_padding_mask = kpm_f, .attn_mask = am_f}).output, out,
                          1e-14, 1e-14));
  // A per-head float attn_mask (N * H, L, S) with finite values.
  Tensor am3 = randn({4, 3, 5}, dtype(kFloat64));
  auto a3 = values(am3);
  auto [out3, w3] = m.forward_attention(q, kv, kv, {.attn_mask = am3, .average_attn_weights = false});
  for (int64_t n = 0; n < 2; ++n) {
    MhaRef r = mha_ref(m, mat(q.select(1, n)), mat(kv.select(1, n)), mat(kv.select(1, n)),
                       [&](int64_t h, int64_t i, int64_t j) { return a3[((n * 2 + h) * 3 + i) * 5 + j]; });
    EXPECT_TRUE(tensor_is(out3.select(1, n), {3, 4}, r.out.a, 1e-12, 1e-12));
    for (int64_t h = 0; h < 2; ++h) EXPECT_TRUE(tensor_is(w3[n][h], {3, 5}, r.heads[h].a, 1e-12, 1e-12));
  }
  // is_causal without a mask builds the causal mask: the same as -inf above the diagonal.
  Tensor x = randn({4, 2, 4}, dtype(kFloat64));
  Tensor causal = m.forward_attention(x, x, x, {.is_causal = true}).output;
  Tensor with_mask = m.forward_attention(x, x, x, {.attn_mask = full({4, 4}, -kInf, dtype(kFloat64)).triu(1)}).output;
  Tensor bool_mask = m.forward_attention(x, x, x, {.attn_mask = ones({4, 4}, dtype(kBool)).triu(1)}).output;
  EXPECT_TRUE(tensor_near(causal, with_mask, 1e-14, 1e-14));
  EXPECT_TRUE(tensor_near(causal, bool_mask, 1e-14, 1e-14));
  for (int64_t n = 0; n < 2; ++n) {
    MhaRef r = mha_ref(m, mat(x.select(1, n)), mat(x.select(1, n)), mat(x.select(1, n)),
                       [](int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; });
    EXPECT_TRUE(tensor_is(causal.select(1, n), {4, 4}, r.out.a, 1e-12, 1e-12));
  }
}

TEST(Attention, MhaKdimVdimBiasKvZeroAttnMatchLoopReference) {
  manual_seed(6);
  nn::MultiheadAttention m(4, 2,
                           {.add_bias_kv = true, .add_zero_attn = true, .kdim = 3, .vdim = 5, .batch_first = true});
  m.to(kFloat64);
  {
    autograd::NoGradGuard ng;
    m.in_proj_bias.copy_(randn({12}, dtype(kFloat64)));
  }
  EXPECT_FALSE(m.in_proj_weight.defined());
  // Batch first: query (N=2, L=3, 4), key (2, S=4, 3), value (2, 4, 5); key 3 of sample 0 padded.
  Tensor q = randn({2, 3, 4}, dtype(kFloat64)), k = randn({2, 4, 3}, dtype(kFloat64)),
         v = randn({2, 4, 5}, dtype(kFloat64));
  Tensor kpm = f64({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4}).to(kBool);
  auto [out, w] = m.forward_attention(q, k, v, {.key_padding_mask = kpm, .average_attn_weights = false});
  ASSERT_EQ(shape_of(out), (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(shape_of(w), (std::vector<int64_t>{2, 2, 3, 6}));  // S + bias_kv + zero position
  for (int64_t n = 0; n < 2; ++n) {
    MhaRef r = mha_ref(m, mat(q[n]), mat(k[n]), mat(v[n]),
                       [&](int64_t, int64_t, int64_t j) { return n == 0 && j == 3 ? -kInf : 0.0; });
    EXPECT_TRUE(tensor_is(out[n], {3, 4}, r.out.a, 1e-12, 1e-12));
    for (int64_t h = 0; h < 2; ++h) EXPECT_TRUE(tensor_is(w[n][h], {3, 6}, r.heads[h].a, 1e-12, 1e-12));
  }
}

TEST(Attention, MhaLayoutsAgree) {
  manual_seed(7);
  nn::MultiheadAttention seq(6, 2), bf(6, 2, {.batch_first = true});
  seq.to(kFloat64), bf.to(kFloat64);
  bf.load_state_dict(seq.state_dict());
  Tensor x = randn({3, 2, 6}, dtype(kFloat64)), mem = randn({5, 2, 6}, dtype(kFloat64));
  Tensor kpm = f64({0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, {2, 5}).to(kBool);
  // batch_first gives the transposed result.
  auto a = seq.forward_attention(x, mem, mem, {.key_padding_mask = kpm});
  auto b = bf.forward_attention(x.transpose(0, 1), mem.transpose(0, 1), mem.transpose(0, 1), {.key_padding_mask = kpm});
  EXPECT_TRUE(tensor_near(b.output, a.output.transpose(0, 1), 1e-14, 1e-14));
  EXPECT_TRUE(tensor_near(b.attn_weights, a.attn_weights, 1e-14, 1e-14));
  // Unbatched (L, E) is one batch element; kpm (S), per-head attn_mask (H, L, S).
  Tensor am = randn({2, 3, 5}, dtype(kFloat64));
  auto u = seq.forward_attention(x.select(1, 1), mem.select(1, 1), mem.select(1, 1),
                                 {.key_padding_mask = kpm[1], .attn_mask = am, .average_attn_weights = false});
  auto n1 =
      seq.forward_attention(x.narrow(1, 1, 1), mem.narrow(1, 1, 1), mem.narrow(1, 1, 1),
                            {.key_padding_mask = kpm.narrow(0, 1, 1), .attn_mask = am, .average_attn_weights = false});
  EXPECT_TRUE(tensor_near(u.output, n1.output.select(1, 0), 1e-14, 1e-14));
  EXPECT_TRUE(tensor_near(u.attn_weights, n1.attn_weights[0], 1e-14, 1e-14));
  EXPECT_EQ(shape_of(u.attn_weights), (std::vector<int64_t>{2, 3, 5}));
  // Self-attention through forward (packed in-projection) equals the per-projection path.
  Tensor self = seq.forward(x);
  Tensor separate = seq.forward_attention(x, x.clone(), x.clone()).output;
  EXPECT_TRUE(tensor_near(self, separate, 1e-13, 1e-13));
  Tensor kv_packed = seq.forward_attention(x, mem, mem).output;
  Tensor kv_separate = seq.forward_attention(x, mem, mem.clone()).output;
  EXPECT_TRUE(tensor_near(kv_packed, kv_separate, 1e-13, 1e-13));
  // (*m)(x) runs hooks and equals forward(x).
  int calls = 0;
  seq.register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, Tensor&) { ++calls; });
  EXPECT_TRUE(tensor_near(seq(x), self, 0, 0));
  EXPECT_EQ(calls, 1);
}

// ---- MultiheadAttention: libtorch 1.13 --------------------------------------------------------------

// From a throwaway libtorch 1.13 program (C++ API, float64, eval mode): every parameter and input
// filled by filled() above (0.5 * sin(0.37 n + c(name))), key names as PyTorch's.
TEST(Attention, MhaMatchesLibtorch) {
  nn::MultiheadAttention m(4, 2);
  fill_params(m);
  m.eval();
  Tensor x = filled({3, 2, 4}, "x");
  auto [out, w] = m.forward_attention(x, x, x);
  std::vector<double> want_out = {0.431643017269, 0.791463816468,  0.346849881035,  -0.336343337423, 0.745362829689,
                                  0.780047366462, 0.0310597724794, -0.382193291682, 0.470338267524,  0.789136117447,
                                  0.307732518276, -0.341109308055, 0.504040458266,  0.650741508864,  0.24893339958,
                                  -0.21337752269, 0.420797054042,  0.792282612053,  0.357844327314,  -0.335168364399,
                                  0.722524460628, 0.760390238198,  0.0503334540361, -0.359041011386};
  std::vector<double> want_w = {0.34280578709,  0.277139743417, 0.380054469493, 0.323378802892, 0.364577099938,
                                0.31204409717,  0.344260560909, 0.253939135839, 0.401800303252, 0.398170045111,
                                0.226454266346, 0.375375688543, 0.213745632301, 0.555138977961, 0.231115389738,
                                0.377719535115, 0.259072682019, 0.363207782866};
  EXPECT_TRUE(tensor_is(out, {3, 2, 4}, want_out, 1e-10, 1e-10));
  EXPECT_TRUE(tensor_is(w, {2, 3, 3}, want_w, 1e-10, 1e-10));
  // attn_mask float (L, S) with -inf at (0, 2) and 0.5 at (1, 0); key_padding_mask (1, 1) true.
  Tensor am = zeros({3, 3}, dtype(kFloat64));
  {
    autograd::NoGradGuard ng;
    am.index({0, 2}).fill_(-kInf);
    am.index({1, 0}).fill_(0.5);
  }
  Tensor kpm = zeros({2, 3}, dtype(kBool));
  kpm.index({1, 1}).fill_(true);
  auto [out2, w2] = m.forward_attention(x, x, x, {.key_padding_mask = kpm, .attn_mask = am});
  std::vector<double> want_out2 = {0.538159424754,  0.82095421855,   0.245681358875,   -0.384179968003, 0.935567715343,
                                   0.960624802893,  -0.126398614169, -0.59132474352,   0.456893167787,  0.799744636566,
                                   0.323101401338,  -0.348930783987, 0.902008075857,   0.95438676657,   -0.093970200457,
                                   -0.579206033296, 0.420797054042,  0.792282612053,   0.357844327314,  -0.335168364399,
                                   0.894170393584,  0.953538963422,  -0.0862862615609, -0.576964799704};
  std::vector<double> want_w2 = {0.556689657549,
                                 0.443310342451,
                                 0,
                                 0.44050751447,
                                 0.301874528923,
                                 0.257617956607,
                                 0.344260560909,
                                 0.253939135839,
                                 0.401800303252,
                                 1,
                                 0,
                                 0,
                                 0.600738857582,
                                 0,
                                 0.399261142418,
                                 0.508400776657,
                                 0,
                                 0.491599223343};
  EXPECT_TRUE(tensor_is(out2, {3, 2, 4}, want_out2, 1e-10, 1e-10));
  EXPECT_TRUE(tensor_is(w2, {2, 3, 3}, want_w2, 1e-10, 1e-10));

  // kdim = vdim = 3 (libtorch 1.13's C++ API needs equal key and value sizes), add_bias_kv,
  // add_zero_attn; per-head weights; key 3 of sample 0 padded.
  nn::MultiheadAttention m2(4, 2, {.add_bias_kv = true, .add_zero_attn = true, .kdim = 3, .vdim = 3});
  fill_params(m2);
  m2.eval();
  Tensor q = filled({2, 2, 4}, "q"), k = filled({4, 2, 3}, "k"), v = filled({4, 2, 3}, "v");
  Tensor kpm2 = zeros({2, 4}, dtype(kBool));
  kpm2.index({0, 3}).fill_(true);
  auto [out3, w3] = m2.forward_attention(q, k, v, {.key_padding_mask = kpm2, .average_attn_weights = false});
  std::vector<double> want_out3 = {0.423069866999, 0.829055594413, 0.362240046451, -0.37114421277,
                                   0.534673265605, 0.790583295466, 0.24365995616,  -0.354175612655,
                                   0.479781156183, 0.745394720448, 0.290357422574, -0.300518767361,
                                   0.517574410244, 0.834438336869, 0.26871162721,  -0.393487702638};
  std::vector<double> want_w3 = {0.205287123884,  0.160796292702,
                                 0.166916757414,  0,
                                 0.2461950479,    0.2208047781,
                                 0.153773141708,  0.304147907275,
                                 0.285406589888,  0,
                                 0.110775844387,  0.145896516742,
                                 0.232902856877,  0.233312621727,
                                 0.267528562906,  0,
                                 0.0915739028072, 0.174682055682,
                                 0.195033079559,  0.193283065959,
                                 0.18974342929,   0,
                                 0.220123165567,  0.201817259624,
                                 0.16498832753,   0.240026016863,
                                 0.158733518272,  0.179889674976,
                                 0.118076795843,  0.138285666516,
                                 0.159190014645,  0.184212121558,
                                 0.161121735819,  0.163711125555,
                                 0.163407098135,  0.168357904287,
                                 0.174691455745,  0.162678369441,
                                 0.178008439738,  0.171432603849,
                                 0.148482456886,  0.164706674341,
                                 0.172744510654,  0.211729426684,
                                 0.187143577673,  0.17726115514,
                                 0.0995289294204, 0.151592400428};
  EXPECT_TRUE(tensor_is(out3, {2, 2, 4}, want_out3, 1e-10, 1e-10));
  EXPECT_TRUE(tensor_is(w3, {2, 2, 2, 6}, want_w3, 1e-10, 1e-10));
}

// ---- MultiheadAttention: parameters, initialization, printing ---------------------------------------

TEST(Attention, MhaStateDictMatchesPyTorch) {
  using Keys = std::vector<std::string>;
  using Shapes = std::vector<std::vector<int64_t>>;
  // torch.nn.MultiheadAttention(8, 2).state_dict()
  nn::MultiheadAttention a(8, 2);
  EXPECT_EQ(keys_of(a), (Keys{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(shapes_of(a), (Shapes{{24, 8}, {24}, {8, 8}, {8}}));
  // kdim/vdim, add_bias_kv
  nn::MultiheadAttention b(8, 2, {.add_bias_kv = true, .kdim = 3, .vdim = 5});
  EXPECT_EQ(keys_of(b), (Keys{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
                              "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(shapes_of(b), (Shapes{{8, 8}, {8, 3}, {8, 5}, {24}, {1, 1, 8}, {1, 1, 8}, {8, 8}, {8}}));
  // bias = false: no in_proj_bias, no out_proj.bias
  nn::MultiheadAttention c(8, 4, {.bias = false});
  EXPECT_EQ(keys_of(c), (Keys{"in_proj_weight", "out_proj.weight"}));
  EXPECT_EQ(a.parameters().size(), 4u);
  EXPECT_EQ(a.head_dim, 4);
}

TEST(Attention, MhaInitializationMatchesPyTorch) {
  manual_seed(8);
  nn::MultiheadAttention m(64, 8, {.add_bias_kv = true});
  // xavier_uniform_ on in_proj_weight (192, 64): bound sqrt(6 / (64 + 192)).
  double bound = std::sqrt(6.0 / (64 + 192));
  double mx = m.in_proj_weight.abs().max().item<double>();
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.95 * bound);
  EXPECT_NEAR(m.in_proj_weight.std().item<double>(), bound / std::sqrt(3.0), 0.03 * bound);
  EXPECT_EQ(m.in_proj_bias.abs().max().item<double>(), 0.0);
  EXPECT_EQ(m.out_proj->bias.abs().max().item<double>(), 0.0);
  // out_proj.weight keeps Linear's U(-1/sqrt(64), 1/sqrt(64)).
  EXPECT_LE(m.out_proj->weight.abs().max().item<double>(), 1 / 8.0);
  EXPECT_GT(m.out_proj->weight.abs().max().item<double>(), 0.9 / 8.0);
  // xavier_normal_ on bias_k (1, 1, 64): fan_in = fan_out = 64, std = sqrt(2 / 128) = 0.125.
  Tensor bkv = cat({m.bias_k.flatten(), m.bias_v.flatten()});
  EXPECT_NEAR(bkv.std().item<double>(), 0.125, 0.03);
  // Separate projections: each xavier_uniform_ with its own fans.
  nn::MultiheadAttention s(64, 8, {.kdim = 32, .vdim = 16});
  EXPECT_LE(s.k_proj_weight.abs().max().item<double>(), std::sqrt(6.0 / (64 + 32)));
  EXPECT_GT(s.k_proj_weight.abs().max().item<double>(), 0.9 * std::sqrt(6.0 / (64 + 32)));
  EXPECT_LE(s.v_proj_weight.abs().max().item<double>(), std::sqrt(6.0 / (64 + 16)));
}

TEST(Attention, MhaPrintsLikePyTorch) {
  nn::MultiheadAttention m(4, 2);
  EXPECT_EQ(m.repr(), "MultiheadAttention(\n  (out_proj): Linear(in_features=4, out_features=4, bias=True)\n)");
}

// ---- MultiheadAttention: gradients, dropout, errors -------------------------------------------------

TEST(Attention, MhaGradientsReachEveryParameterAndInput) {
  manual_seed(9);
  nn::MultiheadAttention m(4, 2, {.add_bias_kv = true, .kdim = 3, .vdim = 5});
  Tensor q = randn({3, 2, 4}).requires_grad_(), k = randn({4, 2, 3}).requires_grad_(),
         v = randn({4, 2, 5}).requires_grad_();
  auto [out, w] = m.forward_attention(q, k, v);
  (out.square().sum() + w.square().sum()).backward();
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0) << name;
  }
  for (const Tensor& t : {q, k, v}) EXPECT_GT(t.grad().abs().sum().item<double>(), 0.0);
}

TEST(Attention, MhaDropoutOnlyInTraining) {
  manual_seed(11);
  nn::MultiheadAttention m(8, 2, {.dropout = 0.5});
  Tensor x = randn({5, 3, 8});
  m.eval();
  Tensor e1 = m(x), e2 = m(x);
  EXPECT_TRUE(equal(e1, e2));
  auto [eo, ew] = m.forward_attention(x, x, x);
  EXPECT_TRUE(allclose(ew.sum(-1), ones({3, 5}), 1e-5, 1e-6));  // rows of softmax weights
  m.train();
  manual_seed(1);
  Tensor t1 = m(x);
  manual_seed(1);
  Tensor t2 = m(x);
  EXPECT_TRUE(equal(t1, t2));      // seeded
  EXPECT_FALSE(allclose(t1, e1));  // and different from eval
  auto [to, tw] = m.forward_attention(x, x, x, {.average_attn_weights = false});
  // Dropped weights are 0 and kept ones scaled by 2: some rows no longer sum to 1.
  EXPECT_GT((tw == 0).sum().item<int64_t>(), 0);
  EXPECT_FALSE(allclose(tw.sum(-1), ones({3, 2, 5})));
}

TEST(Attention, MhaErrorsShowShapes) {
  EXPECT_TRUE(throws_with<ValueError>([] { nn::MultiheadAttention(10, 3); },
                                      {"MultiheadAttention", "embed_dim (10) must be divisible by num_heads (3)"}));
  nn::MultiheadAttention m(4, 2);
  Tensor x = zeros({3, 2, 4});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        m(zeros({3, 2, 5}));
      },
      {"MultiheadAttention", "embed_dim 4", "[3, 2, 5]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        m.forward_attention(x, zeros({5, 2, 4}), zeros({6, 2, 4}));
      },
      {"same length S", "key [5, 2, 4]", "value [6, 2, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        m.forward_attention(x, zeros({5, 3, 4}), zeros({5, 3, 4}));
      },
      {"batch size N", "query [3, 2, 4]", "key [5, 3, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        m.forward_attention(x, zeros({5, 4}), zeros({5, 4}));
      },
      {"3 dims", "query [3, 2, 4]", "key [5, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        m.forward_attention(x, x, x, {.attn_mask = zeros({3, 4})});
      },
      {"attn_mask of shape (L, S) = [3, 3]", "(N * num_heads, L, S) = [4, 3, 3]", "got [3, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        m.forward_attention(x, x, x, {.key_padding_mask = zeros({3, 2}, dtype(kBool))});
      },
      {"key_padding_mask of shape (N, S) = [2, 3]", "got [3, 2]"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        m.forward_attention(x, x, x, {.key_padding_mask = zeros({2, 3}, dtype(kInt64))});
      },
      {"key_padding_mask must be a bool or floating tensor", "int64", "[2, 3]"}));
  nn::MultiheadAttention kv(4, 2, {.kdim = 3});
  EXPECT_TRUE(throws_with<ShapeError>([&] { kv.forward_attention(x, x, x); }, {"kdim 3", "vdim 4", "key [3, 2, 4]"}));
}
