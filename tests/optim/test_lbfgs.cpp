// L-BFGS: trajectories against libtorch 1.13's torch::optim::LBFGS on the Rosenbrock function
// (with and without the strong-Wolfe line search), convergence on a quadratic, the closure
// contract, state-dict resume and errors.
//
// The expected values were printed by a throwaway program linking Debian's libtorch 1.13
// (torch::optim::LBFGS with the same options, float64, the same closure) with %.17g.
#include <gtest/gtest.h>

#include <cmath>

#include "nabla.h"

using namespace nabla;

namespace {

// f(a, b) = (1 - a)^2 + 100 (b - a^2)^2, from (-1.5, 2).
struct Rosenbrock {
  Tensor x = tensor({-1.5, 2.0}, dtype(kFloat64)).requires_grad_();
  int evals = 0;
  std::function<Tensor()> closure(optim::Optimizer& opt) {
    return [this, &opt] {
      opt.zero_grad();
      Tensor a = x[0], b = x[1];
      Tensor f = (1 - a).pow(2) + 100 * (b - a * a).pow(2);
      f.backward();
      ++evals;
      return f;
    };
  }
};

struct Step {
  double loss, a, b;
  int evals;
};

// Same iterations and evaluations; the iterates agree to rounding (Rosenbrock's valley amplifies
// the last-bit differences of the reductions a little more each step).
void expect_steps(optim::LBFGS& opt, Rosenbrock& r, const std::vector<Step>& want) {
  auto closure = r.closure(opt);
  for (size_t s = 0; s < want.size(); ++s) {
    Tensor loss = opt.step(closure);
    EXPECT_NEAR(loss.item<double>(), want[s].loss, 1e-12 * std::abs(want[s].loss)) << "step " << s;
    EXPECT_NEAR(r.x[0].item<double>(), want[s].a, 1e-10) << "step " << s;
    EXPECT_NEAR(r.x[1].item<double>(), want[s].b, 1e-10) << "step " << s;
    EXPECT_EQ(r.evals, want[s].evals) << "step " << s;
  }
}

}  // namespace

TEST(LBFGS, FixedStepMatchesLibtorch) {
  // lr 0.1, max_iter 4, history_size 3, no line search: 4 closure calls per step.
  Rosenbrock r;
  optim::LBFGS opt({r.x}, {.lr = 0.1, .max_iter = 4, .history_size = 3});
  expect_steps(opt, r,
               {{12.5, -1.423156809660145, 2.0242583652627211, 4},
                {5.871813679613652, -1.4210861029628381, 2.0225358013911081, 8},
                {5.8625882224683519, -1.4157015439819725, 2.0127393129820583, 12},
                {5.8428873978383136, -1.3494831542817134, 1.846477513219084, 16}});
  EXPECT_EQ(opt.func_evals(), 16);
  EXPECT_EQ(opt.n_iter(), 16);
}

TEST(LBFGS, StrongWolfeMatchesLibtorch) {
  // lr 1, max_iter 5, history_size 3, line search: the evaluations the line search needed.
  Rosenbrock r;
  optim::LBFGS opt({r.x}, {.lr = 1, .max_iter = 5, .history_size = 3, .strong_wolfe = true});
  expect_steps(opt, r,
               {{12.5, -1.4190151739012853, 2.015228881713949, 6},
                {5.8518984149023323, -1.1382996644053165, 1.2446282267668627, 12},
                {4.8334249852491986, -0.56800259879083004, 0.32333590780763355, 18},
                {2.4586824116154582, -0.090266944604153604, 0.032331110881207568, 24}});
}

TEST(LBFGS, ConvergesOnAQuadraticAndRosenbrock) {
  // 0.5 x^T A x - b^T x: one step of up to 100 iterations ends at A^-1 b (libtorch: 9 evaluations,
  // stopping on tolerance_change with the same point).
  Tensor A =
      tensor({{4.0, 1.0, 0.5, 0.0}, {1.0, 3.0, 0.2, 0.1}, {0.5, 0.2, 2.0, 0.3}, {0.0, 0.1, 0.3, 1.0}}, dtype(kFloat64));
  Tensor b = tensor({1.0, -2.0, 0.5, 3.0}, dtype(kFloat64));
  Tensor x = zeros({4}, dtype(kFloat64)).requires_grad_();
  optim::LBFGS opt({x}, {.lr = 1, .max_iter = 100, .strong_wolfe = true});
  opt.step([&] {
    opt.zero_grad();
    Tensor f = 0.5 * x.dot(A.matmul(x)) - b.dot(x);
    f.backward();
    return f;
  });
  EXPECT_EQ(opt.func_evals(), 9);
  std::vector<double> got = {x[0].item<double>(), x[1].item<double>(), x[2].item<double>(), x[3].item<double>()};
  std::vector<double> libtorch = {0.51429045918766103, -0.92635993703583486, -0.26160515138537216, 3.1711158867977822};
  std::vector<double> solution = {0.5142906548751266, -0.92636051480941684, -0.26160420938217921, 3.1711173142955955};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(got[i], libtorch[i], 1e-12) << i;
    EXPECT_NEAR(got[i], solution[i], 1e-5) << i;
  }
  // Rosenbrock's minimum (1, 1) from (-1.5, 2), in float32 too, with several parameters.
  for (DType dt : {kFloat64, kFloat32}) {
    Tensor a = tensor({-1.5}, dtype(dt)).requires_grad_(), c = tensor({2.0}, dtype(dt)).requires_grad_();
    optim::LBFGS o2(
        {a, c}, {.lr = 1, .max_iter = 200, .tolerance_grad = 1e-9, .tolerance_change = 1e-12, .strong_wolfe = true});
    auto closure = [&] {
      o2.zero_grad();
      Tensor f = ((1 - a).pow(2) + 100 * (c - a * a).pow(2)).sum();
      f.backward();
      return f;
    };
    for (int s = 0; s < 3; ++s) o2.step(closure);
    double tol = dt == kFloat64 ? 1e-6 : 1e-3;
    EXPECT_NEAR(a.item<double>(), 1.0, tol) << dt;
    EXPECT_NEAR(c.item<double>(), 1.0, tol) << dt;
  }
}

TEST(LBFGS, StateDictResumesExactly) {
  // Two steps, save, two more; against a fresh optimizer loaded from the state dict.
  Rosenbrock r1;
  optim::LBFGS o1({r1.x}, {.lr = 1, .max_iter = 3, .history_size = 2, .strong_wolfe = true});
  auto c1 = r1.closure(o1);
  o1.step(c1);
  o1.step(c1);
  nn::StateDict sd = o1.state_dict();
  const int64_t saved_iters = o1.n_iter(), saved_evals = o1.func_evals();
  EXPECT_TRUE(sd.contains("lbfgs.old_dirs"));
  EXPECT_EQ(sd["lbfgs.old_dirs"].sizes(), (Shape{2, 2}));
  Tensor saved_x = r1.x.detach().clone();
  o1.step(c1);
  o1.step(c1);

  Rosenbrock r2;
  {
    autograd::NoGradGuard ng;
    r2.x.copy_(saved_x);
  }
  optim::LBFGS o2({r2.x}, {.lr = 1, .max_iter = 3, .history_size = 2, .strong_wolfe = true});
  o2.load_state_dict(sd);
  EXPECT_EQ(o2.n_iter(), saved_iters);
  EXPECT_EQ(o2.func_evals(), saved_evals);
  auto c2 = r2.closure(o2);
  o2.step(c2);
  o2.step(c2);
  EXPECT_TRUE(r2.x.equal(r1.x));  // bitwise
  EXPECT_EQ(o2.func_evals(), o1.func_evals());

  // A state dict that does not fit is rejected and leaves the optimizer as it was.
  nn::StateDict bad = sd;
  bad.erase("lbfgs.d");
  bad.insert("lbfgs.d", zeros({3}, dtype(kFloat64)));
  EXPECT_THROW(o2.load_state_dict(bad), ShapeError);
  nn::StateDict unexpected = sd;
  unexpected.insert("lbfgs.bogus", zeros({1}));
  EXPECT_THROW(o2.load_state_dict(unexpected), ValueError);
  EXPECT_EQ(o2.func_evals(), o1.func_evals());
}

TEST(LBFGS, ClosureContractAndErrors) {
  Rosenbrock r;
  optim::LBFGS opt({r.x});
  EXPECT_THROW(opt.step(), ValueError);  // needs a closure
  EXPECT_THROW(opt.step(std::function<Tensor()>{}), ValueError);
  EXPECT_THROW(opt.step([&] { return zeros({2}, dtype(kFloat64)); }), ValueError);  // not a loss
  // Already optimal: one evaluation, nothing moves.
  Tensor z = zeros({3}, dtype(kFloat64)).requires_grad_();
  optim::LBFGS flat({z});
  int calls = 0;
  flat.step([&] {
    flat.zero_grad();
    Tensor f = (z * z).sum();
    f.backward();
    ++calls;
    return f;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(z.equal(zeros({3}, dtype(kFloat64))));
  // The closure runs with grad enabled even when step() is called under NoGradGuard.
  {
    autograd::NoGradGuard ng;
    Rosenbrock r2;
    optim::LBFGS o2({r2.x}, {.max_iter = 2});
    o2.step(r2.closure(o2));
    EXPECT_EQ(r2.evals, 2);
  }
  EXPECT_THROW(optim::LBFGS({r.x}, {.lr = 0}), ValueError);
  EXPECT_THROW(optim::LBFGS({r.x}, {.history_size = 0}), ValueError);
  // The work of a step is bounded: a checkpoint asking for 10^11 iterations with tolerances of 0
  // made the fuzzer's step run for seconds, and could hang a real one.
  EXPECT_THROW(optim::LBFGS({r.x}, {.max_iter = 1000001}), ValueError);
  EXPECT_THROW(optim::LBFGS({r.x}, {.max_eval = 1000001}), ValueError);
  EXPECT_THROW(optim::LBFGS({r.x}, {.history_size = 1000001}), ValueError);
  EXPECT_NO_THROW(optim::LBFGS({r.x}, {.max_iter = 1000000, .max_eval = 1000000, .history_size = 1000000}));
  EXPECT_THROW(optim::LBFGS({tensor({1, 2})}), DTypeError);
  EXPECT_THROW(optim::LBFGS({r.x, zeros({2}, requires_grad())}), DTypeError);  // float64 and float32
}

// A NaN direction ends the step (PyTorch iterates on until max_iter): a checkpoint with a huge
// max_iter and NaN state made the checkpoint fuzzer's step run for minutes.
TEST(LBFGS, NaNDirectionEndsTheStep) {
  Tensor x = full({3}, std::nan(""), dtype(kFloat64)).requires_grad_();
  optim::LBFGS opt({x}, {.max_iter = 1000000, .max_eval = 1000000, .tolerance_grad = 0, .tolerance_change = 0});
  int calls = 0;
  opt.step([&] {
    opt.zero_grad();
    Tensor f = (x * x).sum();
    f.backward();
    ++calls;
    return f;
  });
  EXPECT_EQ(calls, 1);
}
