// Custom differentiable functions (autograd::Function, libtorch's style): values, gradcheck and
// gradgradcheck, mark_non_differentiable, outputs that alias inputs, saved tensors modified in place,
// and how backward's list of gradients maps onto forward's arguments (libtorch's rules).
// autograd::Function comes from nabla.h alone: this file includes nothing else of nabla, so it
// stops compiling if nabla.h stops including autograd/function.h.
#include <gtest/gtest.h>

#include <any>
#include <sstream>

#include "autograd/gradcheck.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

using autograd::GradList;

Tensor leaf(std::vector<double> v, std::vector<int64_t> shape) {
  return f64(std::move(v), std::move(shape)).requires_grad_();
}

// ---- custom Functions ------------------------------------------------------------------------------
struct ScaledCube : autograd::Function<ScaledCube> {
  // k * x^3, with k a plain double carried in ctx.data.
  static Tensor forward(autograd::Context& ctx, const Tensor& x, double k) {
    ctx.save_for_backward({x});
    ctx.data["k"] = k;
    return x * x * x * k;
  }
  static GradList backward(autograd::Context& ctx, GradList grads) {
    Tensor x = ctx.saved()[0];
    double k = std::any_cast<double>(ctx.data["k"]);
    return {grads[0] * x * x * (3 * k), Tensor()};  // one per argument (the double gets none)
  }
};

struct MulAdd : autograd::Function<MulAdd> {
  // (a * b + c, a > 0): the mask has no gradient.
  static std::tuple<Tensor, Tensor> forward(autograd::Context& ctx, const Tensor& a, const Tensor& b, const Tensor& c) {
    ctx.save_for_backward({a, b});
    Tensor mask = (a > 0).to(a.dtype());
    ctx.mark_non_differentiable({mask});
    return {a * b + c, mask};
  }
  static GradList backward(autograd::Context& ctx, GradList grads) {
    std::vector<Tensor> s = ctx.saved();
    GradList r(3);
    if (ctx.needs_input_grad(0)) r[0] = grads[0] * s[1];
    if (ctx.needs_input_grad(1)) r[1] = grads[0] * s[0];
    if (ctx.needs_input_grad(2)) r[2] = grads[0];
    return r;
  }
};

TEST(CustomFunction, ValuesGradcheckAndGradgradcheck) {
  Tensor x = leaf({0.5, -1.2, 2.0}, {3});
  Tensor y = ScaledCube::apply(x, 2.0);
  EXPECT_TRUE(tensor_is(y, {3}, {0.25, -3.456, 16}, 1e-12));
  EXPECT_STREQ(y.grad_fn()->name(), "ScaledCubeBackward");
  y.sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {1.5, 8.64, 24}, 1e-12));
  auto fn = autograd::single([](const std::vector<Tensor>& in) { return ScaledCube::apply(in[0], 1.5); });
  EXPECT_TRUE(autograd::gradcheck(fn, {lcg_tensor({4}, 1).requires_grad_()}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {lcg_tensor({4}, 2).requires_grad_()}));
  auto fn2 = [](const std::vector<Tensor>& in) {
    auto [r, m] = MulAdd::apply(in[0], in[1], in[2]);
    return std::vector<Tensor>{r};
  };
  std::vector<Tensor> in = {lcg_tensor({2, 3}, 3).requires_grad_(), lcg_tensor({2, 3}, 4).requires_grad_(),
                            lcg_tensor({2, 3}, 5).requires_grad_()};
  EXPECT_TRUE(autograd::gradcheck(fn2, in));
  EXPECT_TRUE(autograd::gradgradcheck(fn2, in));
}

TEST(CustomFunction, MarkNonDifferentiableAndNeedsInputGrad) {
  Tensor a = leaf({1, -2}, {2}), b = leaf({3, 4}, {2});
  Tensor c = f64({10, 20}, {2});  // no grad
  auto [r, mask] = MulAdd::apply(a, b, c);
  EXPECT_TRUE(r.requires_grad());
  EXPECT_FALSE(mask.requires_grad());
  EXPECT_EQ(mask.grad_fn(), nullptr);
  EXPECT_TRUE(tensor_is(mask, {2}, {1, 0}));
  EXPECT_TRUE(tensor_is(r, {2}, {13, 12}));
  r.sum().backward();
  EXPECT_TRUE(tensor_is(a.grad(), {2}, {3, 4}));
  EXPECT_TRUE(tensor_is(b.grad(), {2}, {1, -2}));
  // Without any input requiring grad, nothing is recorded.
  auto [r2, m2] = MulAdd::apply(f64({1}, {1}), f64({2}, {1}), f64({3}, {1}));
  EXPECT_FALSE(r2.requires_grad());
}

struct ScaleGrad : autograd::Function<ScaleGrad> {
  // Returns its input unchanged; backward scales the gradient by 10.
  static Tensor forward(autograd::Context&, const Tensor& x) { return x; }
  static GradList backward(autograd::Context&, GradList g) { return {g[0] * 10}; }
};

struct DoubleFirst : autograd::Function<DoubleFirst> {
  // (2a, b): the second output is the second input itself.
  static std::tuple<Tensor, Tensor> forward(autograd::Context&, const Tensor& a, const Tensor& b) { return {a * 2, b}; }
  static GradList backward(autograd::Context&, GradList g) { return {g[0] * 2, g[1]}; }
};

TEST(CustomFunction, ReturningAnInputLeavesTheInputsHistoryAlone) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = ScaleGrad::apply(x);
  EXPECT_TRUE(x.is_leaf());  // still a leaf: the output is an alias
  EXPECT_FALSE(y.is_same(x));
  EXPECT_EQ(y.data_ptr(), x.data_ptr());
  EXPECT_STREQ(y.grad_fn()->name(), "ScaleGradBackward");
  y.sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {10, 10}));
  (x * 1).sum().backward();  // x's own uses do not go through ScaleGradBackward
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {11, 11}));
  Tensor n = f64({3}, {1});  // an input that needs no grad keeps having no history
  auto [r, m] = DoubleFirst::apply(x, n);
  EXPECT_FALSE(n.requires_grad());
  EXPECT_EQ(n.grad_fn(), nullptr);
  EXPECT_TRUE(m.requires_grad());
  EXPECT_TRUE(tensor_is(m, {1}, {3}));
}

TEST(CustomFunction, SavedTensorModifiedInPlaceIsReported) {
  Tensor x = leaf({1, 2}, {2});
  Tensor h = x * 1;
  Tensor y = ScaledCube::apply(h, 1.0);
  h.add_(1);
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.sum().backward(); }, {"ScaledCubeBackward", "version"}));
}

struct SquareAndCube : autograd::Function<SquareAndCube> {
  // (x^2, x^3); backward differentiates the cube through its saved output (3 * cube / x), so a
  // second derivative must reach output 1 of this node, not output 0.
  static std::tuple<Tensor, Tensor> forward(autograd::Context& ctx, const Tensor& x) {
    Tensor cube = x * x * x;
    ctx.save_for_backward({x, cube});
    return {x * x, cube};
  }
  static GradList backward(autograd::Context& ctx, GradList g) {
    std::vector<Tensor> s = ctx.saved();
    Tensor gx;
    if (g[0].defined()) gx = g[0] * 2 * s[0];
    if (g[1].defined()) gx = gx.defined() ? gx + g[1] * 3 * s[1] / s[0] : g[1] * 3 * s[1] / s[0];
    return {gx};
  }
};

TEST(CustomFunction, SavedSecondOutputKeepsItsPlaceInDoubleBackward) {
  Tensor x = leaf({2.0, -1.5}, {2});
  auto [sq, cube] = SquareAndCube::apply(x);
  // d(x^3)/dx = 3x^2 through the saved output; its derivative 6x needs cube's own gradient.
  Tensor g = autograd::grad({cube.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  EXPECT_TRUE(tensor_is(g, {2}, {12, 6.75}, 1e-12));
  Tensor gg = autograd::grad({g.sum()}, {x})[0];
  EXPECT_TRUE(tensor_is(gg, {2}, {12, -9}, 1e-12));  // 6x (reattached as output 0 it was 6 - 3x)
  auto fn = [](const std::vector<Tensor>& in) {
    auto [a, b] = SquareAndCube::apply(in[0]);
    return std::vector<Tensor>{a, b};
  };
  EXPECT_TRUE(autograd::gradgradcheck(fn, {(lcg_tensor({3}, 6) + 2.0).requires_grad_()}));
}

// ---- how backward's gradients map onto forward's arguments (libtorch's CppNode<T>::apply) ----------
// libtorch wants one gradient per argument of forward; "returning too many results is ok, but only as
// long as they're all undefined" (they are dropped); a defined gradient for a non-Tensor argument is an
// error. nabla also takes one gradient per Tensor argument.
struct AxPlusY : autograd::Function<AxPlusY> {
  // a * x + y; backward returns what ctx.data["grads"] says: how many gradients, and which defined.
  static Tensor forward(autograd::Context& ctx, const Tensor& x, double a, const Tensor& y, int64_t how) {
    ctx.data["a"] = a;
    ctx.data["how"] = how;
    return x * a + y;
  }
  static GradList backward(autograd::Context& ctx, GradList g) {
    const double a = std::any_cast<double>(ctx.data["a"]);
    switch (std::any_cast<int64_t>(ctx.data["how"])) {
      case 0: return {g[0] * a, Tensor(), g[0], Tensor()};                      // one per argument
      case 1: return {g[0] * a, Tensor(), g[0], Tensor(), Tensor(), Tensor()};  // and trailing undefined ones
      case 2: return {g[0] * a, g[0]};                                          // one per Tensor argument
      case 3: return {g[0] * a, Tensor(), Tensor(), Tensor()};                  // y gets no gradient
      case 4: return {g[0] * a};                                                // too few
      case 5: return {g[0] * a, Tensor(), g[0], Tensor(), g[0]};                // a defined extra one
      default: return {g[0] * a, g[0], g[0], Tensor()};                         // a gradient for the double
    }
  }
};

TEST(CustomFunction, TrailingUndefinedGradientsMeanNoGradient) {
  for (int64_t how : {0, 1, 2}) {
    Tensor x = leaf({1, 2}, {2}), y = leaf({3, 4}, {2});
    AxPlusY::apply(x, 3.0, y, how).sum().backward();
    EXPECT_TRUE(tensor_is(x.grad(), {2}, {3, 3})) << how;
    EXPECT_TRUE(tensor_is(y.grad(), {2}, {1, 1})) << how;
  }
  // An undefined gradient for a Tensor input that requires grad: no gradient reaches it.
  Tensor x = leaf({1, 2}, {2}), y = leaf({3, 4}, {2});
  AxPlusY::apply(x, 3.0, y, int64_t{3}).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {3, 3}));
  EXPECT_FALSE(y.grad().defined());
  // libtorch: "returned an incorrect number of gradients" / "returned a gradient different that is
  // defined at position 2, but the corresponding forward input was not a Variable".
  EXPECT_TRUE(throws_with<AutogradError>([&] { AxPlusY::apply(x, 3.0, y, int64_t{4}).sum().backward(); },
                                         {"AxPlusYBackward", "returned 1 gradients", "expected 2", "or 4"}));
  EXPECT_TRUE(throws_with<AutogradError>([&] { AxPlusY::apply(x, 3.0, y, int64_t{5}).sum().backward(); },
                                         {"AxPlusYBackward", "returned 5 gradients"}));
  EXPECT_TRUE(throws_with<AutogradError>([&] { AxPlusY::apply(x, 3.0, y, int64_t{6}).sum().backward(); },
                                         {"AxPlusYBackward", "defined gradient at position 1", "not a Tensor"}));
}

// grad_fn prints as PyTorch's repr does: print(z.grad_fn) gives <AddBackward0>; a custom Function's
// node has no number (PyTorch's Python Functions print <ScaledCubeBackward ...>).
TEST(CustomFunction, GradFnPrintsWithoutANumber) {
  Tensor x = leaf({1, 2}, {2});
  std::ostringstream os;
  os << ScaledCube::apply(x, 2.0).grad_fn();
  EXPECT_EQ(os.str(), "<ScaledCubeBackward>");
}

}  // namespace
}  // namespace nabla::testing
