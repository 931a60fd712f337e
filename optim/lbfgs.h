// L-BFGS (torch.optim.LBFGS): a quasi-Newton method for full-batch problems, with an optional
// strong-Wolfe line search. Each step() runs up to max_iter iterations and evaluates the closure
// as often as it needs (it must zero the gradients, compute the loss, call backward and return the
// loss):
//
//   optim::LBFGS opt({x}, {.lr = 1, .max_iter = 20, .strong_wolfe = true});
//   auto closure = [&] { opt.zero_grad(); Tensor loss = f(x); loss.backward(); return loss; };
//   for (int i = 0; i < 10; ++i) opt.step(closure);
//
// As in PyTorch: one parameter group; the parameters are treated as one flat vector (all on one
// device, of one floating dtype); the curvature history costs (history_size + 1) copies of the
// parameters. Without the line search, each iteration moves by lr times the L-BFGS direction (the
// first by min(1, 1 / |g|_1) lr). The state dict holds the history under "lbfgs.*" keys (old_dirs
// and old_stps as (k, n) matrices), so a run resumes exactly.
#pragma once

#include <vector>

#include "optimizer.h"

namespace nabla::optim {

// Differs from PyTorch: a step ends when the search direction is NaN (PyTorch goes on until
// max_iter with NaN parameters).
struct LBFGSOptions {
  double lr = 1;
  int64_t max_iter = 20;           // iterations per step()
  int64_t max_eval = -1;           // closure evaluations per step(); -1: max_iter * 5 / 4
  double tolerance_grad = 1e-7;    // stop when max |g| falls below it
  double tolerance_change = 1e-9;  // stop when the loss or the step changes less than this
  int64_t history_size = 100;
  bool strong_wolfe = false;  // PyTorch's line_search_fn="strong_wolfe"

  void check() const;
  template <class F>
  void visit(F&& f) {
    f("lr", lr);
    f("max_iter", max_iter);
    f("max_eval", max_eval);
    f("tolerance_grad", tolerance_grad);
    f("tolerance_change", tolerance_change);
    f("history_size", history_size);
    f("strong_wolfe", strong_wolfe);
  }
};

// L-BFGS keeps no per-parameter state; its state is the optimizer's own (see below).
struct LBFGSParamState {
  template <class F>
  void visit(F&&) {}
};

class LBFGS : public OptimizerImpl<LBFGSOptions, LBFGSParamState> {
 public:
  LBFGS(std::vector<Tensor> params, LBFGSOptions defaults = {});
  // One optimization step of up to max_iter iterations; returns the loss at the start of the step.
  Tensor step(const std::function<Tensor()>& closure) override;
  void step() override;  // throws: L-BFGS needs a closure

  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;
  // Closure evaluations and iterations so far, over all steps.
  int64_t func_evals() const { return func_evals_; }
  int64_t n_iter() const { return n_iter_; }

 private:
  int64_t numel() const;
  Tensor flat_grad() const;
  void add_to_params(double step_size, const Tensor& direction);
  std::vector<Tensor> clone_params() const;
  void set_params(const std::vector<Tensor>& values);
  // f and the flat gradient at x + t d (parameters are x again afterwards).
  std::pair<double, Tensor> evaluate_at(const std::function<Tensor()>& closure, const std::vector<Tensor>& x, double t,
                                        const Tensor& d);
  struct LineSearchResult {
    double loss;
    Tensor grad;
    double t;
    int64_t evals;
  };
  LineSearchResult strong_wolfe(const std::function<Tensor()>& closure, double t, const Tensor& d, double f,
                                const Tensor& g, double gtd);

  // The state across steps (PyTorch keeps it in the first parameter's state).
  int64_t func_evals_ = 0, n_iter_ = 0;
  Tensor d_, prev_flat_grad_;
  double t_ = 0, H_diag_ = 1, prev_loss_ = 0;
  std::vector<Tensor> old_dirs_, old_stps_;
  std::vector<double> ro_, al_;
};

}  // namespace nabla::optim
