// Autograd behaviour: accumulation, retain_graph, grad modes, leaves and grad_fn names, detach,
// retain_grad and hooks, in-place checks, autograd::grad, higher-order derivatives, anomaly mode,
// deep graphs and memory, tie rules, broadcasting and views (custom Functions: test_custom_function.cpp).
#include <gtest/gtest.h>

#include <any>
#include <cmath>
#include <sstream>
#include <thread>

#include "autograd/gradcheck.h"
#include "core/allocator.h"
#include "core/elementwise_ops.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

using autograd::GradList;
using indexing::None;
using indexing::Slice;

Tensor leaf(std::vector<double> v, std::vector<int64_t> shape) {
  return f64(std::move(v), std::move(shape)).requires_grad_();
}

// ---- accumulation and retain_graph ---------------------------------------------------------------
TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, 2, 3}, {3});
  (x * x).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {2, 4, 6}));
  (x * x).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {4, 8, 12}));
  (x * 3).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {7, 11, 15}));
  x.zero_grad(false);
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {0, 0, 0}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  (x * 2).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {2, 2, 2}));
  EXPECT_EQ(x.grad().dtype(), kFloat64);
}

TEST(Autograd, BackwardTwiceNeedsRetainGraph) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = (x * x * x).sum();
  y.backward();
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.backward(); }, {"retain_graph", "second time"}));
  Tensor z = (x * x * x).sum();
  x.zero_grad();
  z.backward({}, /*retain_graph=*/true);
  z.backward();                                    // the second call may free it
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {6, 24}));  // 2 * 3x^2
  EXPECT_THROW(z.backward(), AutogradError);
}

TEST(Autograd, ExplicitGradientsAndMultipleOutputs) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * x;
  y.backward(f64({1, 0.5, -1}, {3}));
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {2, 2, -6}));
  Tensor a = leaf({2}, {1}), b = leaf({3}, {1});
  Tensor u = a * b, v = a + b;
  autograd::backward({u.sum(), v.sum()});
  EXPECT_TRUE(tensor_is(a.grad(), {1}, {4}));  // b + 1
  EXPECT_TRUE(tensor_is(b.grad(), {1}, {3}));  // a + 1
  // A gradient of the output's dtype is converted back to the leaf's dtype.
  Tensor f = tensor({1.f, 2.f}, requires_grad());
  (f.to(kFloat64) * 2).sum().backward();
  EXPECT_EQ(f.grad().dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(f.grad(), {2}, {2, 2}));
}

TEST(Autograd, BackwardFromALeafAndHooksSeeTheSummedGradient) {
  Tensor x = leaf({1, 2}, {2});
  x.backward(f64({3, 4}, {2}));  // a leaf's own gradient goes straight to .grad
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {3, 4}));
  x.zero_grad();
  int leaf_calls = 0, mid_calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++leaf_calls;
    return Tensor();
  });
  Tensor y = x * 2;
  y.register_hook([&](const Tensor& g) {
    ++mid_calls;
    EXPECT_TRUE(tensor_is(g, {2}, {4, 4}));  // both uses of y, summed
    return Tensor();
  });
  (y + y * 3).sum().backward();
  EXPECT_EQ(leaf_calls, 1);
  EXPECT_EQ(mid_calls, 1);
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {8, 8}));
}

// ---- grad modes ------------------------------------------------------------------------------------
TEST(GradMode, IsThreadLocal) {
  Tensor x = leaf({1}, {1});
  autograd::NoGradGuard ng;
  bool other_thread_records = false;
  std::thread t([&] { other_thread_records = (x * 2).requires_grad(); });
  t.join();
  EXPECT_TRUE(other_thread_records);
  EXPECT_FALSE((x * 2).requires_grad());
}

TEST(GradMode, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2}, {2});
  {
    autograd::NoGradGuard ng;
    EXPECT_FALSE(autograd::is_grad_enabled());
    Tensor y = x * 2 + 1;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_TRUE(y.is_leaf());
    x.mul_(2);  // in-place on a leaf is allowed without recording (what optimizers do)
    {
      autograd::AutoGradMode on(true);
      EXPECT_TRUE((x * 2).requires_grad());
    }
    EXPECT_FALSE(autograd::is_grad_enabled());
  }
  EXPECT_TRUE(autograd::is_grad_enabled());
  EXPECT_TRUE(tensor_is(x, {2}, {2, 4}));
  EXPECT_TRUE((x * 2).requires_grad());
}

TEST(GradMode, SetGradEnabled) {
  Tensor x = leaf({1}, {1});
  autograd::set_grad_enabled(false);
  Tensor y = x.exp();
  autograd::set_grad_enabled(true);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(x.exp().requires_grad());
  {
    autograd::NoGradGuard a;
    autograd::NoGradGuard b;  // nested guards restore in order
  }
  EXPECT_TRUE(autograd::is_grad_enabled());
}

TEST(GradMode, InferenceMode) {
  Tensor x = leaf({1, 2}, {2});
  Tensor buf = zeros({2});
  uint32_t v = buf.version();
  {
    autograd::InferenceMode im;
    EXPECT_TRUE(autograd::InferenceMode::is_enabled());
    EXPECT_FALSE(autograd::is_grad_enabled());
    Tensor y = x * 3;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    buf.add_(1);
    {
      autograd::InferenceMode off(false);  // a disabled guard changes nothing
      EXPECT_TRUE(autograd::InferenceMode::is_enabled());
    }
  }
  EXPECT_FALSE(autograd::InferenceMode::is_enabled());
  EXPECT_TRUE(autograd::is_grad_enabled());
  EXPECT_EQ(buf.version(), v + 1);  // in-place writes still count (see the next test)
  EXPECT_TRUE(tensor_is(buf, {2}, {1, 1}));
}

TEST(GradMode, InPlaceUnderInferenceModeStillCaughtByBackward) {
  // A tensor saved for backward and then modified inside an InferenceMode block: the backward
  // would use the new values and give a wrong gradient, so it must throw, as outside the guard.
  Tensor x = leaf({1, 2}, {2});
  Tensor w = tensor({3.f, 4.f});
  Tensor y = (x * w).sum();  // saves w
  {
    autograd::InferenceMode im;
    w.mul_(10);
  }
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.backward(); }, {"MulBackward", "modified by an in-place"}));
}

// ---- leaves, requires_grad, grad_fn --------------------------------------------------------------
TEST(Autograd, RequiresGradRules) {
  EXPECT_THROW(tensor({1, 2}).requires_grad_(), AutogradError);
  EXPECT_THROW(tensor({true}).requires_grad_(), AutogradError);
  EXPECT_NO_THROW(tensor({1, 2}).requires_grad_(false));
  EXPECT_TRUE(ones({1}, kFloat16).requires_grad_().requires_grad());
  Tensor x = leaf({1}, {1});
  Tensor y = x * 2;
  EXPECT_NO_THROW(y.requires_grad_(true));  // already does
  EXPECT_THROW(y.requires_grad_(false), AutogradError);
  x.requires_grad_(false);
  EXPECT_FALSE((x * 2).requires_grad());
  // Results of int ops on float leaves do not require grad.
  Tensor z = leaf({1.5}, {1});
  EXPECT_FALSE(argmax(z).requires_grad());
  EXPECT_FALSE((z > 1).requires_grad());
}

TEST(Autograd, IsLeafAndGradFnNames) {
  Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
  EXPECT_TRUE(a.is_leaf());
  EXPECT_TRUE(ones({2}).is_leaf());  // no grad: a leaf too
  struct C {
    Tensor t;
    const char* name;
  };
  for (const C& c : std::vector<C>{{a * b, "MulBackward"},
                                   {a + b, "AddBackward"},
                                   {a - b, "SubBackward"},
                                   {a / b, "DivBackward"},
                                   {a.exp(), "ExpBackward"},
                                   {a.sum(), "SumBackward"},
                                   {a.view({1, 2}), "ViewBackward"},
                                   {a.unsqueeze(0).mm(b.unsqueeze(1)), "MmBackward"},
                                   {a.leaky_relu(), "LeakyReluBackward"},
                                   {a[0], "SelectBackward"},
                                   {a.expand({2, 2}), "ExpandBackward"},
                                   {pow(a, 2.0), "PowBackward"},
                                   {a.clone(), "CloneBackward"},
                                   {cat({a, b}), "CatBackward"}}) {
    ASSERT_NE(c.t.grad_fn(), nullptr) << c.name;
    EXPECT_STREQ(c.t.grad_fn()->name(), c.name);
    // PyTorch 1.13's type(t.grad_fn).__name__ for each: the name with the number 0.
    EXPECT_EQ(c.t.grad_fn()->torch_name(), std::string(c.name) + "0");
    EXPECT_FALSE(c.t.is_leaf());
    EXPECT_TRUE(c.t.requires_grad());
  }
}

// print(z.grad_fn) in PyTorch 1.13: <AddBackward0 object at ...>; a leaf's grad_fn is None; its
// inputs' nodes <AccumulateGrad ...>; a write into a slice <CopySlices ...>.
TEST(Autograd, GradFnPrintsAsInPyTorch) {
  Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
  Tensor z = a + b;
  auto printed = [](const auto& v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  EXPECT_EQ(printed(z.grad_fn()), "<AddBackward0>");
  EXPECT_EQ(printed(*z.grad_fn()), "<AddBackward0>");
  EXPECT_EQ(printed(a.grad_fn()), "None");
  EXPECT_EQ(printed(z.grad_fn()->next_edges[0].fn.get()), "<AccumulateGrad>");
  Tensor c = zeros({3}, kFloat64);
  c.slice(0, 0, 2).copy_(a);
  EXPECT_EQ(printed(c.grad_fn()), "<CopySlices>");
  EXPECT_EQ(printed(z), "tensor([4., 6.], dtype=float64, grad_fn=<AddBackward0>)");
}

TEST(Autograd, DetachStopsGradients) {
  Tensor x = leaf({2, 3}, {2});
  Tensor y = (x.detach() * x).sum();  // d/dx = x (the detached factor is a constant)
  y.backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {2, 3}));
  Tensor d = (x * 2).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  Tensor e = x * 2;
  e.detach_();
  EXPECT_FALSE(e.requires_grad());
  EXPECT_TRUE(e.is_leaf());
}

// ---- retain_grad and hooks -----------------------------------------------------------------------
TEST(Hooks, RetainGradOnNonLeaf) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 3;
  Tensor w = x * 4;
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  ((y * y).sum() + w.sum()).backward();
  EXPECT_TRUE(tensor_is(y.grad(), {2}, {6, 12}));   // 2y
  EXPECT_FALSE(w.grad().defined());                 // not retained
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {22, 40}));  // 3 * 2y + 4
  EXPECT_THROW(ones({2}).retain_grad(), AutogradError);
}

TEST(Hooks, LeafHookModifiesGradientAndCanBeRemoved) {
  Tensor x = leaf({1, 2}, {2});
  int calls = 0;
  size_t h = x.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 10;
  });
  (x * x).sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {20, 40}));
  x.remove_hook(h);
  x.zero_grad();
  (x * x).sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {2, 4}));
  // A hook that returns an undefined tensor only observes.
  Tensor seen;
  x.register_hook([&](const Tensor& g) {
    seen = g.detach().clone();
    return Tensor();
  });
  x.zero_grad();
  (x * 5).sum().backward();
  EXPECT_TRUE(tensor_is(seen, {2}, {5, 5}));
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {5, 5}));
  EXPECT_THROW(ones({1}).register_hook([](const Tensor& g) { return g; }), AutogradError);
}

// torch.Tensor.register_post_accumulate_grad_hook: after the accumulation, with .grad itself.
TEST(Hooks, PostAccumulateGradHookSeesTheAccumulatedGradientAndMayTakeIt) {
  Tensor x = leaf({1, 2}, {2});
  std::vector<Tensor> seen;
  size_t h = x.register_post_accumulate_grad_hook([&](Tensor& grad) { seen.push_back(grad.detach().clone()); });
  (x * x).sum().backward();
  (x * 3).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(tensor_is(seen[0], {2}, {2, 4}));
  EXPECT_TRUE(tensor_is(seen[1], {2}, {5, 7}));  // accumulated: 2x + 3
  x.remove_hook(h);
  Tensor taken;
  x.register_post_accumulate_grad_hook([&](Tensor& grad) {
    taken = grad;
    grad = Tensor();  // the hook takes the gradient away
  });
  x.zero_grad();
  (x * 4).sum().backward();
  EXPECT_TRUE(tensor_is(taken, {2}, {4, 4}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(seen.size(), 2u);  // the removed hook did not run
  Tensor y = x * 2;
  EXPECT_THROW(y.register_post_accumulate_grad_hook([](Tensor&) {}), AutogradError);
  EXPECT_THROW(ones({1}).register_post_accumulate_grad_hook([](Tensor&) {}), AutogradError);
}

TEST(Hooks, NonLeafHookChangesWhatFlowsBack) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * x;
  Tensor got;
  size_t h = y.register_hook([&](const Tensor& g) {
    got = g.detach().clone();
    return g * -1;
  });
  y.retain_grad();  // the retained gradient sees the hook's result, as in PyTorch
  (y * 3).sum().backward({}, true);
  EXPECT_TRUE(tensor_is(got, {2}, {3, 3}));
  EXPECT_TRUE(tensor_is(y.grad(), {2}, {-3, -3}));
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {-6, -12}));  // -3 * 2x
  y.remove_hook(h);
  x.zero_grad();
  (y * 3).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {6, 12}));
}

// ---- in-place checks -------------------------------------------------------------------------------
TEST(InPlaceAutograd, ModifyingASavedTensorIsReported) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x.exp();  // ExpBackward saves its output
  y.add_(1);
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.sum().backward(); },
                                         {"ExpBackward", "version 1", "expected version 0", "in-place"}));
  Tensor a = x * 1;
  Tensor b = a * a;  // MulBackward saves a
  a.mul_(2);
  EXPECT_TRUE(throws_with<AutogradError>([&] { b.sum().backward(); }, {"MulBackward", "modified by an in-place"}));
  // Modifying a tensor that nothing saved is fine, and its own history is kept.
  Tensor c = x * 2;
  Tensor d = c + 1;  // AddBackward saves nothing
  c.mul_(3);
  // retain_graph: nabla frees every node's captured state after backward, even nodes like
  // x * 2 that saved no tensor (PyTorch would let a second backward through those pass).
  d.sum().backward({}, true);
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {2, 2}));
  x.zero_grad();
  c.sum().backward();  // c = (x * 2) * 3
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {6, 6}));
}

TEST(InPlaceAutograd, InPlaceOnNonLeafGivesCorrectGradients) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * 2;
  y.mul_(x);     // y = 2x^2
  y.add_(x, 3);  // y = 2x^2 + 3x
  y.relu_();
  y.sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {7, 11, 15}));  // 4x + 3
  EXPECT_STREQ(y.grad_fn()->name(), "CopyBackwards");
}

TEST(InPlaceAutograd, LeafThatRequiresGrad) {
  Tensor x = leaf({1, 2}, {2});
  EXPECT_TRUE(throws_with<AutogradError>([&] { x.add_(1); }, {"add", "leaf"}));
  EXPECT_THROW(x.fill_(0), AutogradError);
  EXPECT_THROW(x.zero_(), AutogradError);
  EXPECT_THROW(x.copy_(zeros({2}, kFloat64)), AutogradError);
  EXPECT_TRUE(throws_with<AutogradError>([&] { x[0].fill_(3); }, {"view of a leaf"}));  // through a view too
  EXPECT_THROW(x.slice(0, 1).mul_(2), AutogradError);
  {
    autograd::NoGradGuard ng;
    x.sub_(1);
  }
  EXPECT_TRUE(tensor_is(x, {2}, {0, 1}));
}

TEST(InPlaceAutograd, ViewWritesJoinTheGraphAndOlderViewsFollowTheBase) {
  // Writing a tensor that requires grad into a view of one that does not makes the base part of
  // the graph (CopySlices, as PyTorch): the gradient reaches the source through the base.
  Tensor x = leaf({1, 2}, {2});
  Tensor z = zeros({3}, kFloat64);
  z.index_put_({Slice(0, 2)}, x);
  EXPECT_STREQ(z.grad_fn()->name(), "CopySlices");
  (z * tensor({1., 2., 3.}, kFloat64)).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {1, 2}));
  x.zero_grad();
  Tensor z2 = zeros({3}, kFloat64);
  z2.slice(0, 1).add_(x * 2);  // an in-place op on a view: the base gets 2x in [1, 3)
  (z2 * z2).sum().backward();  // d/dx sum(4 x^2) = 8x
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {8, 16}));
  x.zero_grad();
  EXPECT_NO_THROW(z.slice(0, 1).copy_(x.detach()));  // no gradient involved: fine
  // A view made before its base was modified in place gets its history rebuilt from the base as
  // it is now (PyTorch regenerates the view's grad_fn the same way).
  Tensor y = x * 2;
  Tensor v = y[0];
  Tensor w = y.view({2, 1});
  Tensor u = y.slice(0, 1);
  y.mul_(3);
  EXPECT_STREQ(v.grad_fn()->name(), "AsStridedBackward");
  v.sum().backward({}, /*retain_graph=*/true);  // v = 6 x0; y's history serves the next ones too
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {6, 0}));
  (w * tensor({{1.}, {10.}}, kFloat64)).sum().backward({}, true);  // w = 6x, weighted
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {12, 60}));
  x.zero_grad();
  // After a write through another view, y[1:] += 7/6 y[0], the older view u = y[1:] is 6 x1 + 7 x0.
  y.slice(0, 1).add_(y.slice(0, 0, 1) * (7. / 6.));  // y = [6 x0, 6 x1 + 7 x0]
  EXPECT_STREQ(u.grad_fn()->name(), "AsStridedBackward");
  u.sum().backward({}, true);
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {7, 6}));
  x.zero_grad();
  // Re-created from the modified base, views are fine too.
  y[0].sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {6, 0}));
  x.zero_grad();
  // A base that did not require grad joins the graph through a write into one view: the views
  // made before it join too (a = z3[2] now requires grad, through the base).
  Tensor z3 = zeros({3}, kFloat64);
  Tensor a = z3[2];
  Tensor b = z3.slice(0, 0, 1);
  EXPECT_FALSE(a.requires_grad());
  z3.slice(0, 1).copy_(x);  // z3 = [0, x0, x1]
  EXPECT_TRUE(a.requires_grad());
  (a * 5 + b * 100).sum().backward();  // b holds the untouched 0: no gradient through it
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {0, 5}));
  x.zero_grad();
  // Views made under no_grad stay out of the graph, as in PyTorch.
  Tensor z4 = zeros({2}, kFloat64);
  Tensor c;
  {
    autograd::NoGradGuard ng;
    c = z4[0];
  }
  z4.copy_(x);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_FALSE((c * 2).requires_grad());
  // Modifying the base without recording (as an optimizer does) keeps views usable.
  Tensor p = leaf({1, 2}, {2});
  Tensor pt = p.view({1, 2});
  {
    autograd::NoGradGuard ng;
    p.mul_(2);
  }
  (pt * 3).sum().backward();
  EXPECT_TRUE(tensor_is(p.grad(), {2}, {3, 3}));
}

TEST(InPlaceAutograd, OlderViewsAfterInPlaceWritesPassGradcheckAndGradgradcheck) {
  // y = x * 1, v = y[:2]; then y[1:] *= x[:2]: y = [x0, x0 x1, x1 x2] and v = [x0, x0 x1].
  auto fn = autograd::single([](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 1;
    Tensor v = y.slice(0, 0, 2);
    y.slice(0, 1).mul_(in[0].slice(0, 0, 2));
    return v * v + y.sum();
  });
  Tensor x = leaf({1.5, -2, 3}, {3});
  Tensor out = fn({x})[0];
  EXPECT_TRUE(tensor_is(out, {2}, {1.5 * 1.5 + 1.5 - 3 - 6, 9 + 1.5 - 3 - 6}, 1e-12));
  EXPECT_TRUE(autograd::gradcheck(fn, {lcg_tensor({3}, 6).requires_grad_()}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {lcg_tensor({3}, 7).requires_grad_()}));
}

// ---- autograd::grad ------------------------------------------------------------------------------
TEST(GradFunction, ReturnsGradientsWithoutTouchingDotGrad) {
  Tensor x = leaf({1, 2}, {2}), y = leaf({3, 4}, {2});
  Tensor out = (x * y).sum();
  std::vector<Tensor> g = autograd::grad({out}, {x, y});
  EXPECT_TRUE(tensor_is(g[0], {2}, {3, 4}));
  EXPECT_TRUE(tensor_is(g[1], {2}, {1, 2}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(g[0].requires_grad());  // no create_graph: plain values
}

TEST(GradFunction, AllowUnused) {
  Tensor x = leaf({1}, {1}), unused = leaf({5}, {1});
  Tensor out = (x * x).sum();
  EXPECT_TRUE(throws_with<AutogradError>(
      [&] {
        autograd::grad({out}, {x, unused}, {}, true);
      },
      {"not used", "allow_unused"}));
  std::vector<Tensor> g = autograd::grad({out}, {x, unused}, {}, std::nullopt, false, /*allow_unused=*/true);
  EXPECT_TRUE(tensor_is(g[0], {1}, {2}));
  EXPECT_FALSE(g[1].defined());
  EXPECT_THROW(autograd::grad({out}, {ones({1})}), AutogradError);
}

TEST(GradFunction, TensorHooksApplyToCapturedGradients) {
  // As PyTorch: the gradient autograd::grad returns for an input is the one its hooks return,
  // for leaves and non-leaves alike.
  Tensor x = leaf({1, 2}, {2});
  x.register_hook([](const Tensor& g) { return g * 100; });
  EXPECT_TRUE(tensor_is(autograd::grad({(x * 3).sum()}, {x})[0], {2}, {300, 300}));
  Tensor z = leaf({1, 2}, {2}) * 2;
  z.register_hook([](const Tensor& g) { return g * 100; });
  EXPECT_TRUE(tensor_is(autograd::grad({(z * 3).sum()}, {z})[0], {2}, {300, 300}));
}

TEST(GradFunction, CreateGraphAndNonLeafInputs) {
  Tensor x = leaf({2}, {1});
  Tensor h = x * x;  // a non-leaf input
  Tensor out = (h * h).sum();
  std::vector<Tensor> g = autograd::grad({out}, {h}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(tensor_is(g[0], {1}, {8}));  // 2h
  ASSERT_TRUE(g[0].requires_grad());
  g[0].sum().backward();  // d(2h)/dx = 4x
  EXPECT_TRUE(tensor_is(x.grad(), {1}, {8}));
}

// ---- higher-order derivatives --------------------------------------------------------------------
TEST(HigherOrder, DerivativesOfCube) {
  Tensor x = leaf({-1, 0.5, 2}, {3});
  Tensor y = (x * x * x).sum();
  Tensor d1 = autograd::grad({y}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(tensor_is(d1, {3}, {3, 0.75, 12}));  // 3x^2
  Tensor d2 = autograd::grad({d1.sum()}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(tensor_is(d2, {3}, {-6, 3, 12}));  // 6x
  Tensor d3 = autograd::grad({d2.sum()}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(tensor_is(d3, {3}, {6, 6, 6}));
  // pow and exp/sin chains too: d2/dx2 sin(x^2) = 2cos(x^2) - 4x^2 sin(x^2)
  Tensor s = pow(x, 2.0).sin().sum();
  Tensor s1 = autograd::grad({s}, {x}, {}, std::nullopt, true)[0];
  Tensor s2 = autograd::grad({s1.sum()}, {x}, {})[0];
  std::vector<double> want;
  for (double v : {-1.0, 0.5, 2.0}) want.push_back(2 * std::cos(v * v) - 4 * v * v * std::sin(v * v));
  EXPECT_TRUE(tensor_is(s2, {3}, want, 1e-12));
}

TEST(HigherOrder, HessianVectorProductOfAQuadraticForm) {
  // f(x) = 0.5 x^T A x + b^T x with symmetric A: the Hessian is A, so Hv = A v.
  Tensor A = f64({4, 1, -2, 1, 3, 0.5, -2, 0.5, 5}, {3, 3}), b = f64({1, -1, 2}, {3});
  Tensor x = leaf({0.3, -0.7, 1.1}, {3}), v = f64({1, 2, -1}, {3});
  Tensor f = (x * mv(A, x)).sum() * 0.5 + (b * x).sum();
  Tensor g = autograd::grad({f}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(tensor_near(g, mv(A, x.detach()) + b, 1e-14));
  Tensor hv = autograd::grad({(g * v).sum()}, {x}, {}, true)[0];
  EXPECT_TRUE(tensor_is(hv, {3}, {4 + 2 + 2, 1 + 6 - 0.5, -2 + 1 - 5}, 1e-14));
  // The full Hessian, row by row.
  for (int64_t i = 0; i < 3; ++i) {
    Tensor row = autograd::grad({g[i]}, {x}, {}, true)[0];
    EXPECT_TRUE(tensor_near(row, A[i], 1e-14)) << i;
  }
}

TEST(HigherOrder, GradientPenaltyBackpropagatesToWeights) {
  // out = sum(tanh(W x)); penalty P = ||d out / d x||^2 = ||W^T s||^2 with s = 1 - tanh(W x)^2.
  // By hand: dP/dW_ij = 2 s_i u_j - 4 (W u)_i t_i s_i x_j, where u = W^T s and t = tanh(W x).
  std::vector<double> wv = {0.5, -0.3, 0.8, 0.1, 0.9, -0.4}, xv = {0.7, -1.2, 0.4};
  Tensor W = leaf(wv, {2, 3});
  Tensor x = leaf(xv, {3});
  Tensor out = tanh(mv(W, x)).sum();
  Tensor gx = autograd::grad({out}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  Tensor P = (gx * gx).sum();
  P.backward();
  double t[2], s[2], u[3] = {0, 0, 0}, Wu[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    double z = 0;
    for (int j = 0; j < 3; ++j) z += wv[i * 3 + j] * xv[j];
    t[i] = std::tanh(z);
    s[i] = 1 - t[i] * t[i];
    for (int j = 0; j < 3; ++j) u[j] += wv[i * 3 + j] * s[i];
  }
  double p = 0;
  for (int j = 0; j < 3; ++j) p += u[j] * u[j];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) Wu[i] += wv[i * 3 + j] * u[j];
  std::vector<double> dW;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) dW.push_back(2 * s[i] * u[j] - 4 * Wu[i] * t[i] * s[i] * xv[j]);
  EXPECT_NEAR(P.item<double>(), p, 1e-14);
  EXPECT_TRUE(tensor_is(gx, {3}, {u[0], u[1], u[2]}, 1e-14));
  EXPECT_TRUE(tensor_is(W.grad(), {2, 3}, dW, 1e-13));
}

// ---- anomaly mode ----------------------------------------------------------------------------------
TEST(Anomaly, NamesLogBackwardForLogOfZero) {
  Tensor x = leaf({0, 1}, {2});
  {
    autograd::DetectAnomalyGuard guard;
    Tensor y = x.log().sum();
    EXPECT_TRUE(throws_with<AutogradError>([&] { y.backward(); }, {"anomaly", "LogBackward", "'log'"}));
  }
  // Without anomaly mode the infinite gradient just arrives.
  x.zero_grad();
  x.log().sum().backward();
  EXPECT_TRUE(std::isinf(values(x.grad())[0]));
}

TEST(Anomaly, NamesDivBackwardForZeroOverZero) {
  autograd::DetectAnomalyGuard guard;
  Tensor x = leaf({0, 2}, {2});
  Tensor y = (x / x).sum();
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.backward(); }, {"DivBackward", "NaN or Inf"}));
  Tensor ok = leaf({1, 2}, {2});
  EXPECT_NO_THROW((ok / ok).sum().backward());
}

// ---- deep graphs and memory -----------------------------------------------------------------------
size_t live_bytes() { return cpu_memory_stats().allocated_bytes; }

TEST(DeepGraph, TenThousandOpsBackpropagate) {
  Tensor x = leaf({1.0}, {1});
  size_t before = live_bytes();
  {
    Tensor y = x;
    for (int i = 0; i < 10000; ++i) y = y * 1.0001;
    y.sum().backward();
  }
  EXPECT_NEAR(x.grad().item<double>(), std::pow(1.0001, 10000), 1e-9);
  x.zero_grad();
  EXPECT_EQ(live_bytes(), before);  // the whole chain is gone with its output
  // Dropping a deep graph that never ran backward does not recurse either.
  Tensor z = x;
  for (int i = 0; i < 20000; ++i) z = z + 1;
  z = Tensor();
  EXPECT_EQ(live_bytes(), before);
}

TEST(DeepGraph, MemoryDoesNotGrowAcrossIterations) {
  Tensor w = lcg_tensor({16, 16}, 1).requires_grad_();
  Tensor b = lcg_tensor({16}, 2).requires_grad_();
  auto step = [&] {
    Tensor x = lcg_tensor({8, 16}, 3);
    Tensor h = x;
    for (int i = 0; i < 20; ++i) h = tanh(linear(h, w, b)) + h * 0.5;
    Tensor loss = h.pow(2).mean() + softmax(h, 1).max();
    loss.backward();
    autograd::NoGradGuard ng;
    w.sub_(w.grad() * 1e-3);
    b.sub_(b.grad() * 1e-3);
    w.zero_grad();
    b.zero_grad();
  };
  step();  // warm-up: .grad buffers, caches
  size_t before = live_bytes();
  for (int it = 0; it < 100; ++it) step();
  EXPECT_EQ(live_bytes(), before);
  // A retained graph is freed when its output dies.
  {
    Tensor y = (w * 2).sum();
    y.backward({}, true);
  }
  w.zero_grad();
  EXPECT_EQ(live_bytes(), before);
}

// ---- tie rules -------------------------------------------------------------------------------------
TEST(Ties, FullMaxSplitsEvenlyAndMaxDimPicksTheFirst) {
  Tensor x = leaf({1, 3, 3, 2, 3}, {5});
  x.max().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {5}, {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3}));
  x.zero_grad();
  x.min().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {5}, {1, 0, 0, 0, 0}));
  x.zero_grad();
  std::get<0>(x.max(0)).backward();
  EXPECT_TRUE(tensor_is(x.grad(), {5}, {0, 1, 0, 0, 0}));
  Tensor m = leaf({5, 5, 1, 2, 7, 7}, {2, 3});
  std::get<0>(m.max(1)).sum().backward();
  EXPECT_TRUE(tensor_is(m.grad(), {2, 3}, {1, 0, 0, 0, 1, 0}));
  m.zero_grad();
  m.amax({1}).sum().backward();  // amax shares evenly, as PyTorch
  EXPECT_TRUE(tensor_is(m.grad(), {2, 3}, {0.5, 0.5, 0, 0, 0.5, 0.5}));
  Tensor a = leaf({1, 2}, {2}), b = leaf({1, 3}, {2});
  maximum(a, b).sum().backward();
  EXPECT_TRUE(tensor_is(a.grad(), {2}, {0.5, 0}));
  EXPECT_TRUE(tensor_is(b.grad(), {2}, {0.5, 1}));
}

// ---- broadcasting and views ------------------------------------------------------------------------
TEST(Broadcast, GradientsAreSummedBackToTheInputShape) {
  Tensor a = leaf({1, 2, 3}, {3, 1}), b = leaf({10, 20, 30, 40}, {1, 4});
  Tensor s = leaf({2}, {});
  ((a * b) * s).sum().backward();
  EXPECT_TRUE(tensor_is(a.grad(), {3, 1}, {200, 200, 200}));   // sum(b) * s
  EXPECT_TRUE(tensor_is(b.grad(), {1, 4}, {12, 12, 12, 12}));  // sum(a) * s
  EXPECT_TRUE(tensor_is(s.grad(), {}, {600}));
  Tensor v = leaf({1, 2}, {2}), m = leaf({1, 1, 1, 1, 1, 1}, {3, 2});
  (m + v).sum().backward();
  EXPECT_TRUE(tensor_is(v.grad(), {2}, {3, 3}));
  Tensor i = leaf({1.5}, {1});
  (tensor({1, 2, 3}) * i).sum().backward();  // int tensor times a float leaf
  EXPECT_TRUE(tensor_is(i.grad(), {1}, {6}));
}

// Every binary op of the op list (core/elementwise_ops.h) gives each operand the same gradient
// whether the other operand requires grad or not: a formula must read only what its op saved for
// that gradient (xlogy's gradient in x read x, which it saved only for y's: with y constant its
// backward raised "operation on an undefined tensor").
TEST(Broadcast, BinaryOpGradientsWithOneOperandConstant) {
  struct Op {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&);
  };
#define NABLA_BINARY_CASE(name, ...) {#name, [](const Tensor& a, const Tensor& b) { return nabla::name(a, b); }},
  const Op ops[] = {NABLA_BINARY_ARITH_OPS(NABLA_BINARY_CASE)};
#undef NABLA_BINARY_CASE
  const Tensor a = f64({0, 0.5, 1.5, 2.0, -0.7, 1.2}, {2, 3}), b = f64({0.8, 1.7, 0.6}, {3});
  const Tensor w = lcg_tensor({2, 3}, 11);
  for (const Op& op : ops) {
    auto grads = [&](bool ga, bool gb) {
      Tensor x = a.clone().requires_grad_(ga), y = b.clone().requires_grad_(gb);
      (op.fn(x, y) * w).sum().backward();
      return std::pair{x.grad(), y.grad()};
    };
    auto [ga, gb] = grads(true, true);
    Tensor only_a, only_b;
    EXPECT_NO_THROW(only_a = grads(true, false).first) << op.name;
    EXPECT_NO_THROW(only_b = grads(false, true).second) << op.name;
    EXPECT_TRUE(tensor_near(only_a, ga, 0, 0)) << op.name;
    EXPECT_TRUE(tensor_near(only_b, gb, 0, 0)) << op.name;
  }
}

// torch.xlogy's gradients in PyTorch 1.13 (x, y float64, both requiring grad):
//   x = [0, 0, 0, 0, 1, 2, 0, 1], y = [2, 0, -1, nan, -1, 0, inf, 0.5]
//   x.grad = [0.6931, 0, 0, nan, nan, -inf, inf, -0.6931]   (log y; 0 where x == 0 and y <= 0)
//   y.grad = [0, nan, -0, nan, -1, inf, 0, 2]               (x / y)
TEST(Broadcast, XlogyGradientsMatchPyTorchAtZero) {
  const double nan = std::nan(""), inf = INFINITY;
  Tensor x = leaf({0, 0, 0, 0, 1, 2, 0, 1}, {8}), y = leaf({2, 0, -1, nan, -1, 0, inf, 0.5}, {8});
  xlogy(x, y).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {8}, {std::log(2.0), 0, 0, nan, nan, -inf, inf, std::log(0.5)}, 1e-12));
  EXPECT_TRUE(tensor_is(y.grad(), {8}, {0, nan, 0, nan, -1, inf, 0, 2}, 1e-12));
  // y constant: the gradient in x alone (it used to raise in backward).
  Tensor x2 = leaf({0, 3}, {2});
  xlogy(x2, f64({2, 5}, {2})).sum().backward();
  EXPECT_TRUE(tensor_is(x2.grad(), {2}, {std::log(2.0), std::log(5.0)}, 1e-12));
}

TEST(Views, GradientsFlowThroughViews) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  (x.slice(1, 1) * 2).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {0, 2, 2, 0, 2, 2}));
  x.zero_grad();
  (x.select(0, 1) * f64({1, 2, 3}, {3})).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {0, 0, 0, 1, 2, 3}));
  x.zero_grad();
  x.unsqueeze(0).expand({4, 2, 3}).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {4, 4, 4, 4, 4, 4}));
  x.zero_grad();
  (x.permute({1, 0}) * f64({1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {1, 3, 5, 2, 4, 6}));
  x.zero_grad();
  x.index({tensor({1, 1, 0})}).sum().backward();  // repeated rows accumulate
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {1, 1, 1, 2, 2, 2}));
  x.zero_grad();
  x.index({Slice(), Slice(None, None, 2)}).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {1, 0, 1, 1, 0, 1}));
  x.zero_grad();
  x.index({x.detach() > 3.5}).sum().backward();  // mask
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {0, 0, 0, 1, 1, 1}));
  x.zero_grad();
  (x.t().reshape({6}) * arange(6, kFloat64)).sum().backward();  // reshape of a transpose copies
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {0, 2, 4, 1, 3, 5}));
  x.zero_grad();
  x.diagonal().sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {1, 0, 0, 0, 1, 0}));
  x.zero_grad();
  std::vector<Tensor> parts = x.split(2, 1);
  (parts[0].sum() * 2 + parts[1].sum()).backward();
  EXPECT_TRUE(tensor_is(x.grad(), {2, 3}, {2, 2, 1, 2, 2, 1}));
}

// split/chunk/unbind record one node for all their pieces (PyTorch's SplitBackward/UnbindBackward):
// its backward joins the pieces' gradients with one cat/stack, unused pieces counting as zeros.
TEST(AutogradViews, SplitAndUnbindPiecesShareOneNode) {
  Tensor x = f64({1, 2, 3, 4, 5, 6}, {3, 2}).requires_grad_();
  std::vector<Tensor> rows = x.unbind(0);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].grad_fn()->name(), std::string("UnbindBackward"));
  EXPECT_EQ(rows[0].grad_fn(), rows[2].grad_fn());
  (rows[2] * rows[2]).sum().backward();  // rows 0 and 1 unused: zero gradients
  EXPECT_TRUE(tensor_is(x.grad(), {3, 2}, {0, 0, 0, 0, 10, 12}));
  x.zero_grad();
  std::vector<Tensor> cols = x.chunk(2, 1);
  EXPECT_EQ(cols[1].grad_fn()->name(), std::string("SplitBackward"));
  (cols[0] * 3).sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3, 2}, {3, 0, 3, 0, 3, 0}));
  // Second derivatives flow through the join: d/dx sum(d/dx sum(row^3)) = 6 x on the used row.
  Tensor y = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor g = autograd::grad({y.unbind(0)[1].pow(3).sum()}, {y}, {}, true, true)[0];
  Tensor gg = autograd::grad({g.sum()}, {y})[0];
  EXPECT_TRUE(tensor_is(gg, {2, 2}, {0, 0, 18, 24}));
  // Writing into a piece in place goes through the base, as for any view.
  Tensor z = f64({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor w = z * 1;
  std::vector<Tensor> pieces = w.unbind(0);
  pieces[0].mul_(5);
  w.sum().backward();
  EXPECT_TRUE(tensor_is(z.grad(), {2, 2}, {5, 5, 1, 1}));
}

}  // namespace
}  // namespace nabla::testing
