// Matrix products in float16 and bfloat16 on the CPU (through core/cpu/gemm_lowp.h): mm, bmm, matmul
// in all its broadcasting and vector cases, dot, mv, linear (function and nn::Linear), with transposed
// and strided operands, against the float32 product of the same rounded inputs (tolerance scaled by
// sqrt(k)); the result dtype; gradients of mm, bmm and linear in bfloat16 against the float32
// gradients; and the error for mixed dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "nabla.h"

using namespace nabla;

namespace {

// Relative accuracy of one rounding (with margin): bfloat16 has 8 significant bits, float16 11.
double tol_of(DType d) { return d == kBFloat16 ? 1e-2 : 1e-3; }

// randn rounded to `d` (the low-precision operand) and the same values in float32.
struct Pair {
  Tensor low, ref;
};
Pair operand(IntArrayRef shape, DType d) {
  Tensor low = randn(shape).to(d);
  return {low, low.to(kFloat32)};
}

// |got - want| <= tol(d) * max(sqrt(k), max |want|): inputs ~ N(0, 1), so a k-term sum has scale
// sqrt(k), and the one rounding on store is relative to the largest value.
void expect_close(const Tensor& got, const Tensor& want, DType d, int64_t k, const std::string& what) {
  ASSERT_EQ(got.dtype(), d) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  if (want.numel() == 0) return;
  double err = (got.to(kFloat32) - want).abs().max().item<double>();
  double scale = std::max(std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))), want.abs().max().item<double>());
  double bound = tol_of(d) * scale;
  EXPECT_LE(err, bound) << what << " in " << dtype_name(d) << ", shape " << want.sizes() << ", k " << k;
}

class LowpMatmul : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { manual_seed(7); }
};

TEST_P(LowpMatmul, Mm) {
  DType d = GetParam();
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {5, 7, 3}, {64, 96, 80}, {130, 300, 70}, {4, 0, 3}, {0, 5, 3}}) {
    Pair a = operand({m, k}, d), b = operand({k, n}, d);
    expect_close(mm(a.low, b.low), mm(a.ref, b.ref), d, k, "mm");
  }
}

TEST_P(LowpMatmul, MmTransposedAndStridedOperands) {
  DType d = GetParam();
  Pair at = operand({150, 90}, d), bt = operand({110, 150}, d);  // a = at^T (90 x 150), b = bt^T (150 x 110)
  expect_close(mm(at.low.t(), bt.low.t()), mm(at.ref.t(), bt.ref.t()), d, 150, "mm(a^T, b^T)");
  Pair w = operand({90, 300}, d), b = operand({150, 40}, d);
  Tensor ws = w.low.slice(1, 0, 300, 2), wsr = w.ref.slice(1, 0, 300, 2);  // every other column: (90, 150)
  expect_close(mm(ws, b.low), mm(wsr, b.ref), d, 150, "mm(strided, b)");
  // A non-contiguous output view of a transposed result still comes out right.
  Tensor r = mm(b.low.t(), ws.t());
  expect_close(r, mm(b.ref.t(), wsr.t()), d, 150, "mm(b^T, strided^T)");
}

TEST_P(LowpMatmul, Bmm) {
  DType d = GetParam();
  Pair a = operand({6, 33, 40}, d), b = operand({6, 40, 21}, d);
  expect_close(bmm(a.low, b.low), bmm(a.ref, b.ref), d, 40, "bmm");
  expect_close(bmm(b.low.mT(), a.low.mT()), bmm(b.ref.mT(), a.ref.mT()), d, 40, "bmm(b^T, a^T)");
  Pair big_a = operand({2, 160, 200}, d), big_b = operand({2, 200, 140}, d);
  expect_close(bmm(big_a.low, big_b.low), bmm(big_a.ref, big_b.ref), d, 200, "bmm large");
}

TEST_P(LowpMatmul, MatmulBroadcastingAndVectors) {
  DType d = GetParam();
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{17}, {17}},                 // dot
      {{9, 17}, {17}},              // mv
      {{17}, {17, 5}},              // vector @ matrix
      {{3, 9, 17}, {17, 5}},        // batch folded into rows
      {{3, 9, 17}, {17}},           // batched mv
      {{17}, {4, 17, 5}},           // vector @ batch
      {{2, 1, 9, 17}, {3, 17, 5}},  // batch broadcasting both ways
      {{9, 17}, {2, 3, 17, 5}},     // matrix @ batch
      {{4, 9, 17}, {4, 17, 5}},     // plain batch
      {{0, 9, 17}, {17, 5}},        // empty batch
  };
  for (const Case& c : cases) {
    Pair a = operand(c.a, d), b = operand(c.b, d);
    std::string what = "matmul " + internal::str(c.a) + " @ " + internal::str(c.b);
    expect_close(matmul(a.low, b.low), matmul(a.ref, b.ref), d, 17, what);
  }
  // A transposed batch operand (non-contiguous lhs: the bmm path with strides).
  Pair a = operand({3, 17, 9}, d), b = operand({17, 5}, d);
  expect_close(matmul(a.low.mT(), b.low), matmul(a.ref.mT(), b.ref), d, 17, "matmul(a^T batch, b)");
  Pair v = operand({17}, d), w = operand({17}, d);
  expect_close(dot(v.low, w.low), dot(v.ref, w.ref), d, 17, "dot");
  Pair mat = operand({9, 17}, d);
  expect_close(mv(mat.low, v.low), mv(mat.ref, v.ref), d, 17, "mv");
}

TEST_P(LowpMatmul, Linear) {
  DType d = GetParam();
  Pair x = operand({4, 6, 48}, d), w = operand({30, 48}, d), bias = operand({30}, d);
  expect_close(nn::functional::linear(x.low, w.low, bias.low), nn::functional::linear(x.ref, w.ref, bias.ref), d, 48,
               "linear with bias");
  expect_close(nn::functional::linear(x.low, w.low), nn::functional::linear(x.ref, w.ref), d, 48, "linear");
  // Transposed input rows: x^T of a (48, 24) buffer.
  Pair xt = operand({48, 24}, d);
  expect_close(nn::functional::linear(xt.low.t(), w.low), nn::functional::linear(xt.ref.t(), w.ref), d, 48,
               "linear(x^T)");

  nn::Linear lin(48, 30);
  Tensor x32 = x.ref;
  lin.to(d);
  ASSERT_EQ(lin.weight.dtype(), d);
  Tensor y = lin.forward(x.low);
  Tensor want = nn::functional::linear(x32, lin.weight.to(kFloat32), lin.bias.to(kFloat32));
  expect_close(y, want, d, 48, "nn::Linear");
}

// addmm in one GEMM call: beta * bias + alpha * a @ b, bias full-sized or broadcast.
TEST_P(LowpMatmul, Addmm) {
  DType d = GetParam();
  Pair a = operand({20, 50}, d), b = operand({50, 12}, d), cm = operand({20, 12}, d), row = operand({12}, d);
  expect_close(addmm(cm.low, a.low, b.low), addmm(cm.ref, a.ref, b.ref), d, 50, "addmm");
  expect_close(addmm(row.low, a.low, b.low), addmm(row.ref, a.ref, b.ref), d, 50, "addmm, broadcast bias");
  expect_close(addmm(cm.low, a.low.t().contiguous().t(), b.low, 0.5, 2.0), addmm(cm.ref, a.ref, b.ref, 0.5, 2.0), d, 50,
               "addmm(beta 0.5, alpha 2, a^T layout)");
  Tensor nan_bias = full(cm.low.sizes(), std::nan(""), dtype(d));
  expect_close(addmm(nan_bias, a.low, b.low, 0.0), mm(a.ref, b.ref), d, 50, "addmm(beta 0): bias unread");
  EXPECT_THROW(addmm(operand({7}, d).low, a.low, b.low), ShapeError);
  EXPECT_THROW(addmm(cm.ref, a.low, b.low), DTypeError);
}

TEST_P(LowpMatmul, AddmmBackward) {
  DType d = GetParam();
  Pair bias = operand({20, 12}, d), a = operand({20, 50}, d), b = operand({50, 12}, d), g = operand({20, 12}, d);
  Tensor cl = bias.low.detach().requires_grad_(), al = a.low.detach().requires_grad_(),
         bl = b.low.detach().requires_grad_();
  Tensor cr = bias.ref.detach().requires_grad_(), ar = a.ref.detach().requires_grad_(),
         br = b.ref.detach().requires_grad_();
  addmm(cl, al, bl).backward(g.low);
  addmm(cr, ar, br).backward(g.ref);
  expect_close(cl.grad(), cr.grad(), d, 1, "addmm: grad bias");
  expect_close(al.grad(), ar.grad(), d, 12, "addmm: grad a");
  expect_close(bl.grad(), br.grad(), d, 20, "addmm: grad b");
}

TEST_P(LowpMatmul, Baddbmm) {
  DType d = GetParam();
  Pair a = operand({4, 10, 30}, d), b = operand({4, 30, 8}, d), full3 = operand({4, 10, 8}, d),
       row = operand({1, 8}, d);
  expect_close(baddbmm(full3.low, a.low, b.low), baddbmm(full3.ref, a.ref, b.ref), d, 30, "baddbmm");
  expect_close(baddbmm(row.low, a.low, b.low.mT().contiguous().mT(), 2.0, 0.5),
               baddbmm(row.ref, a.ref, b.ref, 2.0, 0.5), d, 30, "baddbmm(broadcast input, beta 2, alpha 0.5)");
  EXPECT_THROW(baddbmm(full3.low, a.low, b.low[0]), ShapeError);

  Pair g = operand({4, 10, 8}, d);
  Tensor il = full3.low.detach().requires_grad_(), al = a.low.detach().requires_grad_(),
         bl = b.low.detach().requires_grad_();
  Tensor ir = full3.ref.detach().requires_grad_(), ar = a.ref.detach().requires_grad_(),
         br = b.ref.detach().requires_grad_();
  baddbmm(il, al, bl).backward(g.low);
  baddbmm(ir, ar, br).backward(g.ref);
  expect_close(il.grad(), ir.grad(), d, 1, "baddbmm: grad input");
  expect_close(al.grad(), ar.grad(), d, 8, "baddbmm: grad batch1");
  expect_close(bl.grad(), br.grad(), d, 10, "baddbmm: grad batch2");
}

TEST_P(LowpMatmul, ResultDtype) {
  DType d = GetParam();
  Tensor a = randn({3, 4}).to(d), b = randn({4, 5}).to(d);
  EXPECT_EQ(mm(a, b).dtype(), d);
  EXPECT_EQ(matmul(a, b).dtype(), d);
  EXPECT_EQ(matmul(a[0], b).dtype(), d);
  EXPECT_EQ(matmul(a[0], a[1]).dtype(), d);
  EXPECT_EQ(matmul(a[0], a[1]).dim(), 0);
  EXPECT_EQ(bmm(a.unsqueeze(0), b.unsqueeze(0)).dtype(), d);
  EXPECT_EQ(nn::functional::linear(a, b.t()).dtype(), d);
}

// Gradients of a product in `d` (given the same upstream gradient, rounded to d) against those of
// the float32 product of the same rounded inputs.
TEST_P(LowpMatmul, MmBackward) {
  DType d = GetParam();
  Pair a = operand({40, 70}, d), b = operand({70, 30}, d), g = operand({40, 30}, d);
  Tensor al = a.low.detach().requires_grad_(), bl = b.low.detach().requires_grad_();
  Tensor ar = a.ref.detach().requires_grad_(), br = b.ref.detach().requires_grad_();
  mm(al, bl).backward(g.low);
  mm(ar, br).backward(g.ref);
  ASSERT_TRUE(al.grad().defined() && bl.grad().defined());
  expect_close(al.grad(), ar.grad(), d, 30, "mm: grad a");  // g @ b^T: k = 30
  expect_close(bl.grad(), br.grad(), d, 40, "mm: grad b");  // a^T @ g: k = 40
}

TEST_P(LowpMatmul, BmmAndMatmulBackward) {
  DType d = GetParam();
  Pair a = operand({3, 20, 24}, d), b = operand({24, 16}, d), g = operand({3, 20, 16}, d);
  Tensor al = a.low.detach().requires_grad_(), ar = a.ref.detach().requires_grad_();
  Tensor bl = b.low.detach().requires_grad_(), br = b.ref.detach().requires_grad_();
  matmul(al, bl).backward(g.low);  // batch folded into rows
  matmul(ar, br).backward(g.ref);
  expect_close(al.grad(), ar.grad(), d, 16, "matmul: grad a");
  expect_close(bl.grad(), br.grad(), d, 60, "matmul: grad b");

  Pair c = operand({3, 24, 16}, d);
  Tensor al2 = a.low.detach().requires_grad_(), ar2 = a.ref.detach().requires_grad_();
  Tensor cl = c.low.detach().requires_grad_(), cr = c.ref.detach().requires_grad_();
  bmm(al2, cl).backward(g.low);
  bmm(ar2, cr).backward(g.ref);
  expect_close(al2.grad(), ar2.grad(), d, 16, "bmm: grad a");
  expect_close(cl.grad(), cr.grad(), d, 20, "bmm: grad b");
}

TEST_P(LowpMatmul, LinearBackward) {
  DType d = GetParam();
  Pair x = operand({12, 40}, d), w = operand({24, 40}, d), g = operand({12, 24}, d);
  Tensor xl = x.low.detach().requires_grad_(), wl = w.low.detach().requires_grad_();
  Tensor xr = x.ref.detach().requires_grad_(), wr = w.ref.detach().requires_grad_();
  nn::functional::linear(xl, wl).backward(g.low);
  nn::functional::linear(xr, wr).backward(g.ref);
  expect_close(xl.grad(), xr.grad(), d, 24, "linear: grad x");
  expect_close(wl.grad(), wr.grad(), d, 12, "linear: grad weight");
}

INSTANTIATE_TEST_SUITE_P(, LowpMatmul, ::testing::Values(kBFloat16, kFloat16),
                         [](const auto& info) { return std::string(info.param == kBFloat16 ? "bf16" : "f16"); });

TEST_F(LowpMatmul, MixedDtypes) {
  // PyTorch raises for bf16 @ f32 ("expected scalar type BFloat16 but found Float"); so does nabla.
  Tensor a = randn({3, 4}).to(kBFloat16), b = randn({4, 5});
  EXPECT_THROW(mm(a, b), DTypeError);
  EXPECT_THROW(bmm(a.unsqueeze(0), b.unsqueeze(0)), DTypeError);
  EXPECT_THROW(matmul(a, b.to(kFloat16)), DTypeError);
  EXPECT_THROW(matmul(a[0], b.t()[0]), DTypeError);
  EXPECT_THROW(nn::functional::linear(a, b.t()), DTypeError);
  try {
    matmul(a, b);
    FAIL() << "matmul of bfloat16 and float32 did not throw";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: both operands must have the same dtype, got bfloat16 and float32"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
