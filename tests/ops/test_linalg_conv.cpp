// Matrix products against a float64 triple loop (every matmul form, transposed operands, GEMM sizes
// that cross the blocking), and convolution / pooling against naive reference implementations,
// with output shapes exactly as PyTorch computes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

// ---- float64 references ---------------------------------------------------------------------------
// (m, k) @ (k, n) in double; a and b any layout and dtype.
Tensor ref_mm(const Tensor& a, const Tensor& b) {
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> av = values(a), bv = values(b), c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      double x = av[i * k + p];
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += x * bv[p * n + j];
    }
  return f64(c, {m, n});
}

// PyTorch's matmul semantics spelled out with ref_mm: 1-D operands get a dim added and removed,
// batch dims broadcast.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  Tensor A = a.dim() == 1 ? a.unsqueeze(0) : a, B = b.dim() == 1 ? b.unsqueeze(1) : b;
  Shape ba(A.sizes().begin(), A.sizes().end() - 2), bb(B.sizes().begin(), B.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "ref");
  Shape ea = batch, eb = batch;
  ea.push_back(A.size(-2));
  ea.push_back(A.size(-1));
  eb.push_back(B.size(-2));
  eb.push_back(B.size(-1));
  int64_t nb = shape_numel(batch);
  Tensor A3 = A.expand(ea).reshape({nb, A.size(-2), A.size(-1)});
  Tensor B3 = B.expand(eb).reshape({nb, B.size(-2), B.size(-1)});
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < nb; ++i) outs.push_back(ref_mm(A3[i], B3[i]));
  Shape os = batch;
  os.push_back(A.size(-2));
  os.push_back(B.size(-1));
  Tensor r = stack(outs).view(os);
  if (a.dim() == 1) r = r.squeeze(-2);
  if (b.dim() == 1) r = r.squeeze(-1);
  return r;
}

// Tolerance for a product with inner size k of values in [-1, 1]: each of the k terms (and, for
// float32, the rounding of the inputs) may contribute a few units of roundoff.
::testing::AssertionResult product_near(const Tensor& got, const Tensor& ref, int64_t k) {
  double eps = got.dtype() == kFloat64 ? 2.3e-16 : 1.2e-7;
  return tensor_near(got, ref, 4 * eps * static_cast<double>(std::max<int64_t>(k, 1)), 0);
}

// ---- matmul forms ----------------------------------------------------------------------------------
TEST(Matmul, AllFormsMatchReference) {
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  std::vector<Case> cases = {
      {{5}, {5}, {}},                           // dot
      {{3, 5}, {5, 4}, {3, 4}},                 // mm
      {{5}, {5, 4}, {4}},                       // vector @ matrix
      {{3, 5}, {5}, {3}},                       // matrix @ vector
      {{2, 3, 5}, {2, 5, 4}, {2, 3, 4}},        // bmm
      {{2, 3, 5}, {5, 4}, {2, 3, 4}},           // batch @ matrix (folded into one mm)
      {{3, 5}, {2, 5, 4}, {2, 3, 4}},           // matrix @ batch
      {{2, 1, 3, 5}, {4, 5, 2}, {2, 4, 3, 2}},  // broadcast batch dims
      {{5}, {2, 5, 4}, {2, 4}},                 // vector @ batch
      {{2, 3, 5}, {5}, {2, 3}},                 // batch @ vector
      {{0, 5}, {5, 4}, {0, 4}},                 // empty rows
      {{3, 0}, {0, 4}, {3, 4}},                 // empty inner dim: zeros
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    for (DType dt : {kFloat64, kFloat32}) {
      Tensor a = lcg_tensor(c.a, seed++, dt), b = lcg_tensor(c.b, seed++, dt);
      Tensor r = matmul(a, b);
      EXPECT_EQ(r.dtype(), dt);
      EXPECT_EQ(shape_of(r), c.out) << a.sizes() << " @ " << b.sizes();
      EXPECT_TRUE(product_near(r, ref_matmul(a, b), c.a.back())) << a.sizes() << " @ " << b.sizes() << " " << dt;
    }
  }
  EXPECT_TRUE(tensor_is(matmul(zeros({3, 0}), zeros({0, 4})), {3, 4}, std::vector<double>(12, 0)));
}

TEST(Matmul, TransposedAndStridedOperands) {
  Tensor a = lcg_tensor({7, 5}, 11), b = lcg_tensor({4, 7}, 12);
  // a.t(): (5, 7) column-major; b.t(): (7, 4) column-major.
  EXPECT_TRUE(product_near(matmul(a.t(), b.t()), ref_mm(a.t(), b.t()), 7));
  Tensor c = lcg_tensor({5, 7}, 13);
  EXPECT_TRUE(product_near(matmul(c, b.t()), ref_mm(c, b.t()), 7));
  EXPECT_TRUE(product_near(matmul(a.t(), c.t()), ref_mm(a.t(), c.t()), 7));
  // Every other row / column.
  Tensor big = lcg_tensor({10, 14}, 14);
  Tensor s1 = big.slice(0, 0, std::nullopt, 2), s2 = lcg_tensor({14, 6}, 15).slice(0, 0, std::nullopt, 2);
  EXPECT_TRUE(product_near(matmul(s1.slice(1, 0, 7), s2), ref_mm(s1.slice(1, 0, 7), s2), 7));
  // Batched with transposed matrices and an expanded (stride-0) batch.
  Tensor ba = lcg_tensor({3, 4, 6}, 16).mT(), bb = lcg_tensor({1, 4, 5}, 17).expand({3, 4, 5});
  EXPECT_TRUE(product_near(matmul(ba, bb), ref_matmul(ba, bb), 4));
  EXPECT_TRUE(product_near(bmm(ba, bb), ref_matmul(ba, bb), 4));
  Tensor f32 = lcg_tensor({6, 9}, 18, kFloat32).t();
  EXPECT_TRUE(product_near(mm(f32, lcg_tensor({6, 3}, 19, kFloat32)), ref_mm(f32, lcg_tensor({6, 3}, 19)), 6));
}

// GEMM sizes that cross the blocking (micro-tiles of 6 x 16 / 6 x 8, KC = 256, MC = 96 / 144).
class GemmSizes : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(GemmSizes, MatchesNaiveDoubleReference) {
  auto [m, k, n] = GetParam();
  Tensor a = lcg_tensor({m, k}, m * 31 + k), b = lcg_tensor({k, n}, n * 17 + k);
  Tensor ref = ref_mm(a, b);
  EXPECT_TRUE(product_near(mm(a, b), ref, k)) << "float64";
  EXPECT_TRUE(product_near(mm(a.to(kFloat32), b.to(kFloat32)), ref, k)) << "float32";
  // Transposed operands take the packing path with swapped strides.
  Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
  EXPECT_TRUE(product_near(mm(at, bt), ref, k)) << "float64 transposed";
  EXPECT_TRUE(product_near(mm(at.to(kFloat32), bt.to(kFloat32)), ref, k)) << "float32 transposed";
}

INSTANTIATE_TEST_SUITE_P(Linalg, GemmSizes,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(7, 13, 5),
                                           std::make_tuple(6, 256, 16), std::make_tuple(97, 257, 17),
                                           std::make_tuple(145, 300, 257), std::make_tuple(513, 129, 600)),
                         [](const auto& i) {
                           return std::to_string(std::get<0>(i.param)) + "x" + std::to_string(std::get<1>(i.param)) +
                                  "x" + std::to_string(std::get<2>(i.param));
                         });

TEST(Matmul, MmBmmMvDotOuter) {
  Tensor a = tensor({{1., 2.}, {3., 4.}}), b = tensor({{5., 6.}, {7., 8.}});
  EXPECT_TRUE(tensor_is(mm(a, b), {2, 2}, {19, 22, 43, 50}));
  EXPECT_TRUE(tensor_is(a.mm(b.t()), {2, 2}, {17, 23, 39, 53}));
  EXPECT_TRUE(tensor_is(bmm(stack({a, b}), stack({b, a})), {2, 2, 2}, {19, 22, 43, 50, 23, 34, 31, 46}));
  EXPECT_TRUE(tensor_is(mv(a, tensor({1., -1.})), {2}, {-1, -1}));
  EXPECT_TRUE(tensor_is(dot(tensor({1., 2., 3.}), tensor({4., 5., 6.})), {}, {32}));
  EXPECT_TRUE(tensor_is(outer(tensor({1., 2.}), tensor({3., 4., 5.})), {2, 3}, {3, 4, 5, 6, 8, 10}));
  EXPECT_TRUE(tensor_is(tensor({1., 2.}).dot(tensor({3., 4.})), {}, {11}));
  EXPECT_THROW(dot(tensor({1., 2.}), tensor({1., 2., 3.})), ShapeError);
  EXPECT_THROW(mv(a, tensor({1., 2., 3.})), ShapeError);
  EXPECT_THROW(bmm(stack({a, b}), stack({a, b, a})), ShapeError);
  EXPECT_THROW(mm(a, b.to(kFloat64)), DTypeError);
}

TEST(Einsum, MatchesTheOpsItGeneralizes) {
  Tensor a = lcg_tensor({3, 4}, 31), b = lcg_tensor({4, 5}, 32), sq = lcg_tensor({4, 4}, 33);
  Tensor x = lcg_tensor({2, 3, 4}, 34), y = lcg_tensor({2, 4, 5}, 35), u = lcg_tensor({4}, 36), v = lcg_tensor({5}, 37);
  EXPECT_TRUE(tensor_near(einsum("ij,jk->ik", {a, b}), ref_mm(a, b), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("ij,jk", {a, b}), ref_mm(a, b), 1e-14));  // implicit output "ik"
  EXPECT_TRUE(tensor_near(einsum(" ij , jk -> ik ", {a, b}), ref_mm(a, b), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("ij,kj->ik", {a, b.t()}), ref_mm(a, b), 1e-14));  // a transposed operand
  EXPECT_TRUE(tensor_near(einsum("bij,bjk->bik", {x, y}), ref_matmul(x, y), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("ij->ji", {a}), a.t(), 0));
  EXPECT_TRUE(tensor_near(einsum("ba", {a}), a.t(), 0));  // implicit output in alphabetical order
  EXPECT_TRUE(tensor_near(einsum("ii->i", {sq}), sq.diagonal(), 0));
  EXPECT_TRUE(tensor_near(einsum("ii", {sq}), sq.diagonal().sum(), 1e-14));  // trace
  EXPECT_TRUE(tensor_near(einsum("ij->", {a}), a.sum(), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("ij->j", {a}), a.sum(0), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("i,i->", {u, u}), (u * u).sum(), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("i,j->ij", {u, v}), outer(u, v), 0));
  EXPECT_TRUE(tensor_near(einsum("i,j", {u, v}), outer(u, v), 0));
  EXPECT_TRUE(tensor_near(einsum("ij,ij->ij", {a, a}), a * a, 0));  // elementwise: every label kept
  EXPECT_TRUE(tensor_near(einsum("bij->bj", {x}), x.sum(1), 1e-14));
}

TEST(Einsum, EllipsisBroadcastRepeatsAndThreeOperands) {
  // The ellipsis dims broadcast as matmul's batch dims do.
  Tensor p = lcg_tensor({2, 1, 3, 4}, 41), q = lcg_tensor({5, 4, 2}, 42);
  EXPECT_TRUE(tensor_near(einsum("...ij,...jk->...ik", {p, q}), ref_matmul(p, q), 1e-14));
  EXPECT_TRUE(tensor_near(einsum("...ij->...ji", {p}), p.transpose(-1, -2), 0));
  EXPECT_TRUE(tensor_near(einsum("i...->...", {p}), p.sum(0), 1e-14));
  // A label of size 1 broadcasts: sum_j a[i, 0] b[j, k] = a[i, 0] sum_j b[j, k].
  Tensor a1 = lcg_tensor({2, 1}, 43), b = lcg_tensor({3, 4}, 44);
  EXPECT_TRUE(tensor_near(einsum("ij,jk->ik", {a1, b}), a1 * b.sum(0, true), 1e-14));
  // A label repeated within an operand and then summed: sum_i t[i, i, j].
  Tensor t = lcg_tensor({3, 3, 2}, 45);
  Tensor tr = t.select(0, 0).select(0, 0) + t.select(0, 1).select(0, 1) + t.select(0, 2).select(0, 2);
  EXPECT_TRUE(tensor_near(einsum("iij->j", {t}), tr, 1e-14));
  // Bilinear form out[b, a] = sum_n,m x1[b, n] w[a, n, m] x2[b, m], against loops.
  Tensor x1 = lcg_tensor({2, 3}, 46), w = lcg_tensor({4, 3, 5}, 47), x2 = lcg_tensor({2, 5}, 48);
  std::vector<double> ref;
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t ai = 0; ai < 4; ++ai) {
      double acc = 0;
      for (int64_t n = 0; n < 3; ++n)
        for (int64_t m = 0; m < 5; ++m)
          acc += x1[bi][n].item<double>() * w[ai][n][m].item<double>() * x2[bi][m].item<double>();
      ref.push_back(acc);
    }
  EXPECT_TRUE(tensor_is(einsum("bn,anm,bm->ba", {x1, w, x2}), {2, 4}, ref, 1e-13));
  // The output may order the ellipsis anywhere; upper-case labels sort before lower-case ones.
  EXPECT_EQ(einsum("ij...->...ji", {p.permute({2, 3, 0, 1})}).sizes(), Shape({2, 1, 4, 3}));
  EXPECT_TRUE(tensor_near(einsum("aB", {a1}), a1.t(), 0));
}

TEST(Einsum, ClearErrors) {
  Tensor a = lcg_tensor({3, 4}, 51), b = lcg_tensor({5, 6}, 52);
  EXPECT_TRUE(throws_with<ShapeError>([&] { einsum("ij,jk->ik", {a, b}); }, {"einsum", "'j'", "size"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum("ij,jk->ik", {a}); }, {"2 operand subscripts", "1 operands"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { einsum("ijk->i", {a}); }, {"[3, 4]", "name 3"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum("i1->i", {a}); }, {"invalid subscript '1'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum("ij->iz", {a}); }, {"'z'", "appears in no operand"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum("ij->ii", {a}); }, {"'i'", "twice"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum("...j->j", {a}); }, {"ellipsis", "add '...'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum("i..j", {a}); }, {"ellipsis"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { einsum("ii->i", {a}); }, {"'i' has size 4", "[3, 4]", "3 elsewhere"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { einsum("ii->i", {lcg_tensor({1, 3}, 55)}); }, {"repeated", "[1, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        einsum("...i,...i->...", {lcg_tensor({2, 3}, 53), lcg_tensor({4, 3}, 54)});
      },
      {"ellipsis", "broadcast"}));
  EXPECT_TRUE(throws_with<DTypeError>([&] { einsum("ij,jk", {a, a.t().to(kFloat32)}); }, {"einsum", "float32"}));
  EXPECT_THROW(einsum("ij", {}), ValueError);
}

TEST(Matmul, AddmmAndLinear) {
  Tensor bias = tensor({1., 10.}), a = tensor({{1., 2.}, {3., 4.}}), b = tensor({{1., 0.}, {0., 1.}});
  EXPECT_TRUE(tensor_is(addmm(bias, a, b), {2, 2}, {2, 12, 4, 14}));
  EXPECT_TRUE(tensor_is(addmm(bias, a, b, 0.5, 2), {2, 2}, {2.5, 9, 6.5, 13}));
  EXPECT_TRUE(tensor_is(addmm(bias, a, b, 0, 1), {2, 2}, {1, 2, 3, 4}));
  // linear: x @ w^T + b, any leading dims.
  Tensor x = lcg_tensor({2, 3, 4}, 21), w = lcg_tensor({5, 4}, 22), bb = lcg_tensor({5}, 23);
  Tensor ref = ref_matmul(x, w.t()) + bb;
  EXPECT_TRUE(tensor_near(linear(x, w, bb), ref, 1e-14));
  EXPECT_TRUE(tensor_near(linear(x, w), ref_matmul(x, w.t()), 1e-14));
  EXPECT_TRUE(tensor_near(linear(x[0], w.t().contiguous().t(), bb), ref[0], 1e-14));
  EXPECT_TRUE(tensor_near(linear(x.select(2, 0).unsqueeze(-1).expand({2, 3, 4}), w, bb),
                          ref_matmul(x.select(2, 0).unsqueeze(-1).expand({2, 3, 4}), w.t()) + bb, 1e-14));
  EXPECT_THROW(linear(x, w.t()), ShapeError);
  EXPECT_THROW(linear(x, w, lcg_tensor({4}, 24)), ShapeError);
}

// ---- convolution -----------------------------------------------------------------------------------
struct ConvArgs {
  std::vector<int64_t> x, w;  // (N, C, H, W), (O, C/g, kh, kw)
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  bool bias = true;
};

// Direct convolution in double.
// With `gy` and `grads`, also the gradients of sum(y * gy) w.r.t. x and w, by the same loops.
Tensor ref_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvArgs& a, const Tensor& gy = Tensor(),
                  std::vector<Tensor>* grads = nullptr) {
  int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  int64_t O = w.size(0), kh = w.size(2), kw = w.size(3), G = a.groups, Cg = C / G, Og = O / G;
  int64_t Ho = (H + 2 * a.ph - a.dh * (kh - 1) - 1) / a.sh + 1, Wo = (W + 2 * a.pw - a.dw * (kw - 1) - 1) / a.sw + 1;
  std::vector<double> xv = values(x), wv = values(w), bv = b.defined() ? values(b) : std::vector<double>(O, 0.0);
  std::vector<double> y(N * O * Ho * Wo), gyv = gy.defined() ? values(gy) : std::vector<double>(y.size(), 0.0);
  std::vector<double> gx(xv.size()), gw(wv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t g = o / Og;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = bv[o];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t ih = oh * a.sh - a.ph + i * a.dh, iw = ow * a.sw - a.pw + j * a.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t xi = ((n * C + g * Cg + c) * H + ih) * W + iw, wi = ((o * Cg + c) * kh + i) * kw + j;
                double gyo = gyv[((n * O + o) * Ho + oh) * Wo + ow];
                s += xv[xi] * wv[wi];
                gx[xi] += gyo * wv[wi];
                gw[wi] += gyo * xv[xi];
              }
          y[((n * O + o) * Ho + oh) * Wo + ow] = s;
        }
    }
  if (grads) *grads = {f64(gx, shape_of(x)), f64(gw, shape_of(w))};
  return f64(y, {N, O, Ho, Wo});
}

void PrintTo(const ConvArgs& a, std::ostream* os) {
  *os << "x " << IntArrayRef(a.x) << " w " << IntArrayRef(a.w) << " stride [" << a.sh << ", " << a.sw << "] padding ["
      << a.ph << ", " << a.pw << "] dilation [" << a.dh << ", " << a.dw << "] groups " << a.groups;
}

class Conv2dCases : public ::testing::TestWithParam<ConvArgs> {};

TEST_P(Conv2dCases, MatchesDirectConvolution) {
  const ConvArgs& a = GetParam();
  Tensor x = lcg_tensor(a.x, 101), w = lcg_tensor(a.w, 102), b = a.bias ? lcg_tensor({a.w[0]}, 103) : Tensor();
  Tensor ref = ref_conv2d(x, w, b, a);
  Tensor y = conv2d(x, w, b, {a.sh, a.sw}, {a.ph, a.pw}, {a.dh, a.dw}, a.groups);
  EXPECT_TRUE(tensor_near(y, ref, 1e-13));
  Tensor y32 = conv2d(x.to(kFloat32), w.to(kFloat32), a.bias ? b.to(kFloat32) : Tensor(), {a.sh, a.sw}, {a.ph, a.pw},
                      {a.dh, a.dw}, a.groups);
  EXPECT_TRUE(tensor_near(y32, ref, 2e-5));
  // The gradients in float64 and float32 (their own packing and kernels) agree with the reference's.
  Tensor gy = lcg_tensor(shape_of(ref), 104);
  std::vector<Tensor> gref;
  ref_conv2d(x, w, b, a, gy, &gref);
  auto grads = [&](DType dt) {
    Tensor xg = x.to(dt).detach().requires_grad_(), wg = w.to(dt).detach().requires_grad_();
    Tensor bg = a.bias ? b.to(dt).detach().requires_grad_() : Tensor();
    conv2d(xg, wg, bg, {a.sh, a.sw}, {a.ph, a.pw}, {a.dh, a.dw}, a.groups).backward(gy.to(dt));
    return std::vector<Tensor>{xg.grad(), wg.grad(), a.bias ? bg.grad() : zeros({1})};
  };
  std::vector<Tensor> g64 = grads(kFloat64), g32 = grads(kFloat32);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(tensor_near(g64[i], gref[i], 1e-12)) << (i == 0 ? "input" : "weight") << " gradient, float64";
    EXPECT_TRUE(tensor_near(g32[i], gref[i], 1e-4, 1e-4)) << (i == 0 ? "input" : "weight") << " gradient, float32";
  }
  if (a.bias) EXPECT_TRUE(tensor_near(g32[2], g64[2], 1e-4, 1e-4)) << "bias gradient";
  // Non-contiguous input and weight (channels-last storage) give the same result.
  Tensor xn = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
  Tensor wn = w.permute({2, 3, 0, 1}).contiguous().permute({2, 3, 0, 1});
  EXPECT_TRUE(tensor_near(conv2d(xn, wn, b, {a.sh, a.sw}, {a.ph, a.pw}, {a.dh, a.dw}, a.groups), ref, 1e-13));
}

INSTANTIATE_TEST_SUITE_P(
    Conv, Conv2dCases,
    ::testing::Values(
        ConvArgs{.x = {1, 1, 5, 5}, .w = {1, 1, 3, 3}}, ConvArgs{.x = {2, 3, 7, 6}, .w = {4, 3, 3, 3}},
        ConvArgs{.x = {2, 3, 7, 6}, .w = {4, 3, 3, 3}, .sh = 2, .sw = 2},
        ConvArgs{.x = {1, 2, 6, 6}, .w = {3, 2, 3, 3}, .ph = 1, .pw = 1, .bias = false},
        ConvArgs{.x = {2, 2, 8, 7}, .w = {2, 2, 3, 2}, .sh = 2, .sw = 1, .ph = 2, .pw = 1},
        ConvArgs{.x = {1, 2, 9, 9}, .w = {2, 2, 3, 3}, .dh = 2, .dw = 3},
        ConvArgs{.x = {2, 4, 5, 5}, .w = {6, 2, 3, 3}, .ph = 1, .pw = 1, .groups = 2},
        ConvArgs{.x = {1, 3, 6, 5}, .w = {3, 1, 3, 3}, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 3},
        ConvArgs{.x = {2, 5, 4, 4}, .w = {3, 5, 1, 1}},
        ConvArgs{.x = {1, 2, 10, 3}, .w = {2, 2, 5, 1}, .sh = 3, .ph = 2, .dh = 2},
        ConvArgs{.x = {3, 1, 4, 4}, .w = {1, 1, 4, 4}},
        // Larger than one packed panel (many 32-column slivers, several k blocks), so the
        // float32 GEMM path with its im2col packing is exercised, not the few-tap kernels.
        ConvArgs{.x = {2, 10, 12, 12}, .w = {20, 10, 5, 5}},
        ConvArgs{.x = {4, 16, 14, 13}, .w = {8, 16, 3, 3}, .ph = 1, .pw = 1},
        ConvArgs{.x = {1, 9, 21, 17}, .w = {7, 9, 3, 3}, .sh = 2, .sw = 2, .ph = 2, .pw = 1, .dh = 2, .dw = 2},
        ConvArgs{.x = {1, 12, 9, 40}, .w = {6, 4, 3, 3}, .sw = 3, .ph = 1, .pw = 1, .groups = 3},
        // stride 1 with padding that keeps the size: the padded-rows path, also for the
        // input gradient (run as a convolution with flipped weights), grouped and dilated.
        ConvArgs{.x = {2, 16, 12, 20}, .w = {8, 8, 3, 3}, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .groups = 2},
        // One image with many output channels: fewer images than threads, so the
        // threads split the output rows (pointwise, padded rows, im2col; the input
        // gradients too).
        ConvArgs{.x = {1, 8, 9, 9}, .w = {40, 8, 1, 1}},
        ConvArgs{.x = {1, 16, 10, 12}, .w = {40, 16, 3, 3}, .ph = 1, .pw = 1},
        ConvArgs{.x = {1, 40, 11, 11}, .w = {36, 40, 3, 3}, .sh = 2, .sw = 2, .ph = 1, .pw = 1}),
    [](const auto& i) { return "case" + std::to_string(i.index); });

TEST(Conv, UnbatchedInputAndShapes) {
  Tensor x = lcg_tensor({3, 6, 6}, 1), w = lcg_tensor({2, 3, 3, 3}, 2);
  Tensor y = conv2d(x, w, {}, 1, 1);
  EXPECT_EQ(shape_of(y), (std::vector<int64_t>{2, 6, 6}));
  ConvArgs a{.x = {1, 3, 6, 6}, .w = {2, 3, 3, 3}, .ph = 1, .pw = 1, .bias = false};
  EXPECT_TRUE(tensor_near(y, ref_conv2d(x.unsqueeze(0), w, Tensor(), a)[0], 1e-13));
}

TEST(Conv, KnownValues) {
  // A 3x3 box filter over 0..15 in a 4x4 image.
  Tensor x = arange(16, kFloat32).view({1, 1, 4, 4});
  Tensor y = conv2d(x, ones({1, 1, 3, 3}));
  EXPECT_TRUE(tensor_is(y, {1, 1, 2, 2}, {45, 54, 81, 90}));
  Tensor yp = conv2d(x, ones({1, 1, 3, 3}), tensor({1.f}), 2, 1);
  EXPECT_TRUE(tensor_is(yp, {1, 1, 2, 2}, {11, 25, 52, 91}));
}

TEST(Conv, Errors) {
  Tensor x = zeros({1, 4, 5, 5});
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        conv2d(x, zeros({2, 3, 3, 3}));
      },
      {"conv2d", "4 channels", "[2, 3, 3, 3]"}));
  EXPECT_THROW(conv2d(x, zeros({3, 2, 3, 3}), {}, 1, 0, 1, 2), ShapeError);  // 3 out channels, 2 groups
  EXPECT_THROW(conv2d(x, zeros({2, 4, 7, 7})), ShapeError);                  // kernel larger than the input
  EXPECT_THROW(conv2d(x, zeros({2, 4, 3, 3}), zeros({3})), ShapeError);
  EXPECT_THROW(conv2d(x, zeros({2, 4, 3, 3}), {}, 0), ValueError);
  EXPECT_THROW(conv2d(x, zeros({2, 4, 3, 3}), {}, 1, -1), ValueError);
  EXPECT_THROW(conv2d(x, zeros({2, 4, 3, 3}, kFloat64)), DTypeError);
  // A kernel larger than the input fails even when the stride would make the output formula
  // round up to one row (PyTorch: "Kernel size can't be greater than actual input size").
  EXPECT_THROW(conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 3, 3}), {}, 2), ShapeError);
}

// y[n, g*Og + o, ih*s - p + ki*d, ...] += x[n, g*Cg + c, ih, iw] * w[g*Cg + c, o, ki, kj]
Tensor ref_conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, int64_t s, int64_t p, int64_t op,
                            int64_t groups, int64_t d) {
  int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  int64_t Og = w.size(1), kh = w.size(2), kw = w.size(3), O = Og * groups, Cg = C / groups;
  int64_t Ho = (H - 1) * s - 2 * p + d * (kh - 1) + op + 1, Wo = (W - 1) * s - 2 * p + d * (kw - 1) + op + 1;
  std::vector<double> xv = values(x), wv = values(w), y(N * O * Ho * Wo, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      int64_t g = c / Cg;
      for (int64_t o = 0; o < Og; ++o)
        for (int64_t ih = 0; ih < H; ++ih)
          for (int64_t iw = 0; iw < W; ++iw)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t oh = ih * s - p + i * d, ow = iw * s - p + j * d;
                if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
                y[((n * O + g * Og + o) * Ho + oh) * Wo + ow] +=
                    xv[((n * C + c) * H + ih) * W + iw] * wv[((c * Og + o) * kh + i) * kw + j];
              }
    }
  Tensor r = f64(y, {N, O, Ho, Wo});
  return b.defined() ? r + b.view({1, -1, 1, 1}) : r;
}

TEST(ConvTranspose, MatchesScatterReference) {
  struct C {
    std::vector<int64_t> x, w;
    int64_t s, p, op, g, d;
  };
  for (const C& c : std::vector<C>{{{1, 2, 3, 3}, {2, 3, 3, 3}, 1, 0, 0, 1, 1},
                                   {{2, 2, 4, 3}, {2, 2, 3, 3}, 2, 1, 1, 1, 1},
                                   {{1, 4, 3, 3}, {4, 1, 2, 2}, 2, 0, 0, 2, 1},
                                   {{1, 2, 4, 4}, {2, 2, 3, 3}, 1, 2, 0, 1, 2},
                                   {{1, 1, 2, 5}, {1, 2, 4, 1}, 3, 1, 2, 1, 1}}) {
    Tensor x = lcg_tensor(c.x, 201), w = lcg_tensor(c.w, 202), b = lcg_tensor({c.w[1] * c.g}, 203);
    Tensor y = conv_transpose2d(x, w, b, c.s, c.p, c.op, c.g, c.d);
    EXPECT_TRUE(tensor_near(y, ref_conv_transpose2d(x, w, b, c.s, c.p, c.op, c.g, c.d), 1e-13)) << x.sizes();
  }
  // The transpose of a convolution: <conv(x), y> == <x, conv_transpose(y)>.
  Tensor x = lcg_tensor({1, 3, 7, 7}, 204), w = lcg_tensor({2, 3, 3, 3}, 205);
  Tensor cy = conv2d(x, w, {}, 2, 1);
  Tensor y = lcg_tensor(shape_of(cy), 206);
  Tensor ty = conv_transpose2d(y, w, {}, 2, 1);
  EXPECT_NEAR((cy * y).sum().item<double>(), (x * ty).sum().item<double>(), 1e-12);
  EXPECT_THROW(conv_transpose2d(y, w, {}, 2, 1, 2), ValueError);  // output_padding must be < stride
}

TEST(Conv1d, MatchesConv2dReference) {
  Tensor x = lcg_tensor({2, 4, 11}, 301), w = lcg_tensor({6, 2, 3}, 302), b = lcg_tensor({6}, 303);
  Tensor y = conv1d(x, w, b, 2, 1, 2, 2);
  ConvArgs a{.x = {2, 4, 1, 11}, .w = {6, 2, 1, 3}, .sw = 2, .pw = 1, .dw = 2, .groups = 2};
  Tensor ref = ref_conv2d(x.unsqueeze(2), w.unsqueeze(2), b, a).squeeze(2);
  EXPECT_EQ(shape_of(y), (std::vector<int64_t>{2, 6, 5}));
  EXPECT_TRUE(tensor_near(y, ref, 1e-13));
  EXPECT_TRUE(tensor_near(conv1d(x[0], w, b, 2, 1, 2, 2), ref[0], 1e-13));
  EXPECT_TRUE(tensor_is(conv1d(tensor({{{1., 2., 3., 4.}}}), tensor({{{1., -1.}}})), {1, 1, 3}, {-1, -1, -1}));
}

// ---- pooling ---------------------------------------------------------------------------------------
// PyTorch's pooling_output_shape (floor division, and ceil_mode's last window must start inside).
int64_t pt_pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

TEST(Pool, MaxPoolShapesAsPyTorch) {
  struct C {
    int64_t in, k, s, p, d;
    bool ceil;
    int64_t want;  // from PyTorch's formula, written out
  };
  for (const C& c : std::vector<C>{{5, 2, 2, 0, 1, false, 2},
                                   {5, 2, 2, 0, 1, true, 3},
                                   {6, 3, 2, 1, 1, false, 3},
                                   {6, 3, 2, 1, 1, true, 4},
                                   {5, 2, 2, 1, 1, true, 3},
                                   {7, 3, 1, 0, 2, false, 3},
                                   {7, 3, 2, 1, 2, true, 3},
                                   {4, 4, 1, 0, 1, false, 1},
                                   {10, 3, 3, 0, 1, true, 4},
                                   {10, 3, 3, 1, 1, true, 4},
                                   {1, 1, 1, 0, 1, false, 1}}) {
    ASSERT_EQ(pt_pool_out(c.in, c.k, c.s, c.p, c.d, c.ceil), c.want);
    Tensor y = max_pool2d(zeros({1, 2, c.in, c.in}), c.k, c.s, c.p, c.d, c.ceil);
    EXPECT_EQ(shape_of(y), (std::vector<int64_t>{1, 2, c.want, c.want}))
        << c.in << " k" << c.k << " s" << c.s << " p" << c.p << " d" << c.d << " ceil" << c.ceil;
  }
  // A sweep against the formula.
  for (int64_t in = 1; in <= 9; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t p = 0; p * 2 <= k; ++p)
          for (bool ceil_mode : {false, true}) {
            int64_t want = pt_pool_out(in, k, s, p, 1, ceil_mode);
            if (want <= 0) {
              EXPECT_THROW(max_pool2d(zeros({1, 1, in, in}), k, s, p, 1, ceil_mode), ShapeError)
                  << in << " k" << k << " s" << s << " p" << p << " ceil" << ceil_mode;
              continue;
            }
            Tensor y = avg_pool2d(zeros({1, 1, in, in + 1}), k, s, p, ceil_mode);
            EXPECT_EQ(shape_of(y), (std::vector<int64_t>{1, 1, want, pt_pool_out(in + 1, k, s, p, 1, ceil_mode)}))
                << in << " k" << k << " s" << s << " p" << p << " ceil" << ceil_mode;
          }
}

// Max pooling in double, windows clipped to the input.
Tensor ref_max_pool(const Tensor& x, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  int64_t Ho = pt_pool_out(H, k, s, p, d, ceil_mode), Wo = pt_pool_out(W, k, s, p, d, ceil_mode);
  std::vector<double> xv = values(x), y;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double m = -INFINITY;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            int64_t ih = oh * s - p + i * d, iw = ow * s - p + j * d;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) m = std::max(m, xv[(pl * H + ih) * W + iw]);
          }
        y.push_back(m);
      }
  return f64(y, {x.size(0), x.size(1), Ho, Wo});
}

TEST(Pool, MaxPoolValuesAndIndices) {
  Tensor x = lcg_tensor({2, 3, 7, 8}, 401);
  for (auto [k, s, p, d, c] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, bool>>{
           {2, 2, 0, 1, false}, {3, 2, 1, 1, true}, {3, 1, 1, 2, false}, {2, 3, 1, 1, true}}) {
    auto [y, idx] = max_pool2d_with_indices(x, k, s, p, d, c);
    EXPECT_TRUE(tensor_near(y, ref_max_pool(x, k, s, p, d, c), 0)) << k << s << p << d << c;
    // Indices are flat positions in each (H, W) plane holding the maximum.
    EXPECT_TRUE(tensor_near(x.flatten(2).gather(2, idx.flatten(2)).view(y.sizes()), y, 0));
  }
  Tensor t = arange(16, kFloat32).view({1, 1, 4, 4});
  auto [y, idx] = max_pool2d_with_indices(t, 2);
  EXPECT_TRUE(tensor_is(y, {1, 1, 2, 2}, {5, 7, 13, 15}));
  EXPECT_EQ(int_values(idx), (std::vector<int64_t>{5, 7, 13, 15}));
  EXPECT_TRUE(tensor_near(max_pool2d(x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}), 3, 2, 1),
                          ref_max_pool(x, 3, 2, 1, 1, false), 0));
  EXPECT_TRUE(tensor_near(max_pool2d(x[0], 2), ref_max_pool(x, 2, 2, 0, 1, false)[0], 0));  // (C, H, W)
  EXPECT_THROW(max_pool2d(x, 2, 2, 2), ValueError);  // padding over half the kernel
}

// avg_pool2d in double with PyTorch's divisor rule.
Tensor ref_avg_pool(const Tensor& x, int64_t k, int64_t s, int64_t p, bool ceil_mode, bool count_include_pad) {
  int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  int64_t Ho = pt_pool_out(H, k, s, p, 1, ceil_mode), Wo = pt_pool_out(W, k, s, p, 1, ceil_mode);
  std::vector<double> xv = values(x), y;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        int64_t h0 = oh * s - p, w0 = ow * s - p;
        int64_t h1 = std::min(h0 + k, H + p), w1 = std::min(w0 + k, W + p);
        int64_t pool = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, H), w1 = std::min(w1, W);
        double sum = 0;
        for (int64_t i = h0; i < h1; ++i)
          for (int64_t j = w0; j < w1; ++j) sum += xv[(pl * H + i) * W + j];
        y.push_back(sum / (count_include_pad ? pool : (h1 - h0) * (w1 - w0)));
      }
  return f64(y, {x.size(0), x.size(1), Ho, Wo});
}

TEST(Pool, AvgPoolCountIncludePad) {
  // 3x3 ones, kernel 2, stride 1, padding 1: corners see 1 real element of 4.
  Tensor o = ones({1, 1, 3, 3});
  EXPECT_TRUE(tensor_is(avg_pool2d(o, 2, 1, 1, false, true), {1, 1, 4, 4},
                        {.25, .5, .5, .25, .5, 1, 1, .5, .5, 1, 1, .5, .25, .5, .5, .25}));
  EXPECT_TRUE(tensor_is(avg_pool2d(o, 2, 1, 1, false, false), {1, 1, 4, 4}, std::vector<double>(16, 1)));
  Tensor x = lcg_tensor({2, 2, 7, 6}, 501);
  for (auto [k, s, p, c] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {2, 2, 0, false}, {3, 2, 1, true}, {3, 2, 1, false}, {2, 3, 1, true}, {3, 3, 0, true}}) {
    for (bool include : {true, false})
      EXPECT_TRUE(tensor_near(avg_pool2d(x, k, s, p, c, include), ref_avg_pool(x, k, s, p, c, include), 1e-14))
          << k << s << p << c << include;
  }
}

TEST(Pool, AdaptivePools) {
  Tensor x = lcg_tensor({2, 3, 7, 5}, 601);
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 2}, {7, 5}, {4, 3}, {2, 5}}) {
    std::vector<double> xv = values(x), avg, mx;
    for (int64_t pl = 0; pl < 6; ++pl)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          // PyTorch: start = floor(i * in / out), end = ceil((i + 1) * in / out)
          int64_t h0 = i * 7 / oh, h1 = ((i + 1) * 7 + oh - 1) / oh, w0 = j * 5 / ow, w1 = ((j + 1) * 5 + ow - 1) / ow;
          double s = 0, m = -INFINITY;
          for (int64_t a = h0; a < h1; ++a)
            for (int64_t b = w0; b < w1; ++b) {
              s += xv[(pl * 7 + a) * 5 + b];
              m = std::max(m, xv[(pl * 7 + a) * 5 + b]);
            }
          avg.push_back(s / ((h1 - h0) * (w1 - w0)));
          mx.push_back(m);
        }
    EXPECT_TRUE(tensor_is(adaptive_avg_pool2d(x, {oh, ow}), {2, 3, oh, ow}, avg, 1e-14)) << oh << "x" << ow;
    EXPECT_TRUE(tensor_is(adaptive_max_pool2d(x, {oh, ow}), {2, 3, oh, ow}, mx, 0)) << oh << "x" << ow;
  }
  EXPECT_EQ(shape_of(adaptive_avg_pool2d(x[0], 2)), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_THROW(adaptive_avg_pool2d(x, {0, 1}), ShapeError);
}

}  // namespace
}  // namespace nabla::testing
