#include "optim/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::optim {

namespace {
// Upper bound of max_iter, max_eval and history_size (nabla's; PyTorch has none): a step of a
// million iterations is a damaged file's, not a user's.
constexpr int64_t kMaxIterations = 1'000'000;
}  // namespace

void LBFGSOptions::check() const {
  NABLA_CHECK(ValueError, lr > 0, "LBFGS: invalid learning rate ", lr, " (must be > 0)");
  // The bounds on the work of one step keep a damaged or hostile checkpoint (max_iter 1e11 with
  // tolerances of 0) from turning step() into a hang; PyTorch has none.
  NABLA_CHECK(ValueError, max_iter > 0 && max_iter <= kMaxIterations, "LBFGS: invalid max_iter ", max_iter,
              " (must be from 1 to ", kMaxIterations, " per step)");
  NABLA_CHECK(ValueError, max_eval == -1 || (max_eval > 0 && max_eval <= kMaxIterations), "LBFGS: invalid max_eval ",
              max_eval, " (must be from 1 to ", kMaxIterations, ", or -1 for max_iter * 5 / 4)");
  NABLA_CHECK(ValueError, history_size > 0 && history_size <= kMaxIterations, "LBFGS: invalid history_size ",
              history_size, " (must be from 1 to ", kMaxIterations, ")");
  NABLA_CHECK(ValueError, tolerance_grad >= 0 && tolerance_change >= 0, "LBFGS: tolerances must be >= 0");
}

LBFGS::LBFGS(std::vector<Tensor> params, LBFGSOptions defaults) : OptimizerImpl("LBFGS", std::move(params), defaults) {
  const std::vector<Tensor>& ps = this->params(0);
  for (const Tensor& p : ps) {
    NABLA_CHECK(DTypeError, is_floating(p.dtype()), "LBFGS: parameters must be floating point, got ", p.dtype());
    NABLA_CHECK(DeviceError, p.device() == ps[0].device(),
                "LBFGS: all parameters must be on one device (they form one "
                "vector); got ",
                ps[0].device(), " and ", p.device());
    NABLA_CHECK(DTypeError, p.dtype() == ps[0].dtype(),
                "LBFGS: all parameters must have one dtype (they form one vector); "
                "got ",
                ps[0].dtype(), " and ", p.dtype());
  }
}

void LBFGS::step() {
  throw ValueError(
      "LBFGS: step() needs a closure that re-evaluates the loss: "
      "opt.step([&] { opt.zero_grad(); Tensor loss = ...; loss.backward(); return loss; })");
}

int64_t LBFGS::numel() const {
  int64_t n = 0;
  for (const Tensor& p : params(0)) n += p.numel();
  return n;
}

// A fresh vector each time (the closure may zero the gradients in place).
Tensor LBFGS::flat_grad() const {
  const std::vector<Tensor>& ps = params(0);
  Tensor out = empty({numel()}, dtype(ps[0].dtype()).device(ps[0].device()));
  int64_t off = 0;
  for (const Tensor& p : ps) {
    Tensor slot = out.narrow(0, off, p.numel());
    if (p.grad().defined()) slot.copy_(p.grad().reshape({-1}));
    else slot.zero_();
    off += p.numel();
  }
  return out;
}

void LBFGS::add_to_params(double step_size, const Tensor& direction) {
  int64_t off = 0;
  for (Tensor& p : mutable_params(0)) {
    p.add_(direction.narrow(0, off, p.numel()).view(p.sizes()), step_size);
    off += p.numel();
  }
}

std::vector<Tensor> LBFGS::clone_params() const {
  std::vector<Tensor> out;
  for (const Tensor& p : params(0)) out.push_back(p.clone());
  return out;
}

void LBFGS::set_params(const std::vector<Tensor>& values) {
  std::vector<Tensor>& ps = mutable_params(0);
  for (size_t i = 0; i < ps.size(); ++i) ps[i].copy_(values[i]);
}

namespace {

// The closure's loss (it runs with grad enabled), checked to be one element.
Tensor run_closure(const std::function<Tensor()>& closure) {
  autograd::AutoGradMode enable(true);
  Tensor loss = closure();
  NABLA_CHECK(ValueError, loss.defined() && loss.numel() == 1,
              "LBFGS: the closure must return the loss (one element), got ",
              loss.defined() ? internal::str("shape ", loss.sizes()) : std::string("an undefined tensor"));
  return loss;
}

double dotd(const Tensor& a, const Tensor& b) { return a.dot(b).item<double>(); }
double max_abs(const Tensor& a) { return a.abs().max().item<double>(); }

// The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to the
// bounds (the interval between the points by default); the middle when the cubic has none.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  double d2_square = d1 * d1 - g1 * g2;
  if (d2_square < 0) return (lo + hi) / 2;
  double d2 = std::sqrt(d2_square);
  double m = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                      : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
  return std::min(std::max(m, lo), hi);
}

}  // namespace

std::pair<double, Tensor> LBFGS::evaluate_at(const std::function<Tensor()>& closure, const std::vector<Tensor>& x,
                                             double t, const Tensor& d) {
  add_to_params(t, d);
  double f = run_closure(closure).item<double>();
  Tensor g = flat_grad();
  set_params(x);
  return {f, g};
}

// The strong-Wolfe line search of minFunc (as torch.optim.LBFGS's): bracket a step that satisfies
// sufficient decrease (c1) and the curvature condition (c2), then zoom in by cubic interpolation.
LBFGS::LineSearchResult LBFGS::strong_wolfe(const std::function<Tensor()>& closure, double t, const Tensor& d, double f,
                                            const Tensor& g, double gtd) {
  constexpr double c1 = 1e-4, c2 = 0.9;
  constexpr int64_t max_ls = 25;
  const double tolerance_change = options(0).tolerance_change;
  const std::vector<Tensor> x = clone_params();
  const double d_norm = max_abs(d);
  // Plain variables, not a structured binding: the lambda below captures them (clang < 16 cannot).
  double f_new;
  Tensor g_new;
  std::tie(f_new, g_new) = evaluate_at(closure, x, t, d);
  int64_t evals = 1;
  double gtd_new = dotd(g_new, d);

  // Bracketing: [t_prev, t] until the interval holds a point meeting the conditions.
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Tensor g_prev = g;
  double bt[2] = {0, 0}, bf[2] = {0, 0}, bgtd[2] = {0, 0};
  Tensor bg[2];
  int nb = 0;  // points in the bracket (1: done)
  bool done = false;
  int64_t ls_iter = 0;
  while (ls_iter < max_ls) {
    auto bracket = [&] {
      bt[0] = t_prev, bt[1] = t;
      bf[0] = f_prev, bf[1] = f_new;
      bg[0] = g_prev, bg[1] = g_new;
      bgtd[0] = gtd_prev, bgtd[1] = gtd_new;
      nb = 2;
    };
    if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {  // too far: the minimum is behind
      bracket();
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {  // both conditions hold at t
      bt[0] = t, bf[0] = f_new, bg[0] = g_new;
      nb = 1;
      done = true;
      break;
    }
    if (gtd_new >= 0) {  // the slope turned: a minimum lies in [t_prev, t]
      bracket();
      break;
    }
    double next =
        cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::pair{t + 0.01 * (t - t_prev), t * 10});
    t_prev = t, f_prev = f_new, g_prev = g_new, gtd_prev = gtd_new;
    t = next;
    std::tie(f_new, g_new) = evaluate_at(closure, x, t, d);
    ++evals;
    gtd_new = dotd(g_new, d);
    ++ls_iter;
  }
  if (ls_iter == max_ls) {  // no bracket found: the best of the start and the last trial
    bt[0] = 0, bt[1] = t;
    bf[0] = f, bf[1] = f_new;
    bg[0] = g, bg[1] = g_new;
    nb = 2;
  }

  // Zoom: shrink the bracket around a point meeting the conditions.
  bool insufficient_progress = false;
  int low = bf[0] <= bf[nb - 1] ? 0 : 1, high = 1 - low;
  while (!done && ls_iter < max_ls) {
    if (std::abs(bt[1] - bt[0]) * d_norm < tolerance_change) break;
    t = cubic_interpolate(bt[0], bf[0], bgtd[0], bt[1], bf[1], bgtd[1]);
    // Keep trials at least a tenth of the bracket away from its ends when progress stalls.
    double bmax = std::max(bt[0], bt[1]), bmin = std::min(bt[0], bt[1]);
    double eps = 0.1 * (bmax - bmin);
    if (std::min(bmax - t, t - bmin) < eps) {
      if (insufficient_progress || t >= bmax || t <= bmin) {
        t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    std::tie(f_new, g_new) = evaluate_at(closure, x, t, d);
    ++evals;
    gtd_new = dotd(g_new, d);
    ++ls_iter;
    if (f_new > f + c1 * t * gtd || f_new >= bf[low]) {
      bt[high] = t, bf[high] = f_new, bg[high] = g_new, bgtd[high] = gtd_new;
      low = bf[0] <= bf[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (bt[high] - bt[low]) >= 0) {
        bt[high] = bt[low], bf[high] = bf[low], bg[high] = bg[low], bgtd[high] = bgtd[low];
      }
      bt[low] = t, bf[low] = f_new, bg[low] = g_new, bgtd[low] = gtd_new;
    }
  }
  return {bf[low], bg[low], bt[low], evals};
}

Tensor LBFGS::step(const std::function<Tensor()>& closure) {
  NABLA_CHECK(ValueError, static_cast<bool>(closure), "LBFGS.step: the closure is empty");
  autograd::NoGradGuard ng;
  const LBFGSOptions& o = options(0);
  const int64_t max_eval = o.max_eval < 0 ? o.max_iter * 5 / 4 : o.max_eval;

  Tensor orig_loss = run_closure(closure);
  double loss = orig_loss.item<double>();
  int64_t current_evals = 1;
  ++func_evals_;
  Tensor g = flat_grad();
  bool optimal = max_abs(g) <= o.tolerance_grad;
  if (optimal) return orig_loss;

  for (int64_t n_iter = 1; n_iter <= o.max_iter; ++n_iter) {
    ++n_iter_;
    // The direction: steepest descent at first, then the two-loop recursion over the history.
    if (n_iter_ == 1) {
      d_ = g.neg();
      old_dirs_.clear(), old_stps_.clear(), ro_.clear();
      H_diag_ = 1;
    } else {
      Tensor y = g.sub(prev_flat_grad_);
      Tensor s = d_.mul(t_);
      double ys = dotd(y, s);
      if (ys > 1e-10) {  // keep only pairs with positive curvature
        if (static_cast<int64_t>(old_dirs_.size()) == o.history_size) {
          old_dirs_.erase(old_dirs_.begin());
          old_stps_.erase(old_stps_.begin());
          ro_.erase(ro_.begin());
        }
        old_dirs_.push_back(y);
        old_stps_.push_back(s);
        ro_.push_back(1.0 / ys);
        H_diag_ = ys / dotd(y, y);
      }
      const size_t k = old_dirs_.size();
      al_.assign(k, 0.0);
      Tensor q = g.neg();
      for (size_t i = k; i-- > 0;) {
        al_[i] = dotd(old_stps_[i], q) * ro_[i];
        q.add_(old_dirs_[i], -al_[i]);
      }
      Tensor r = q.mul(H_diag_);
      for (size_t i = 0; i < k; ++i) {
        double be = dotd(old_dirs_[i], r) * ro_[i];
        r.add_(old_stps_[i], al_[i] - be);
      }
      d_ = r;
    }
    if (prev_flat_grad_.defined()) prev_flat_grad_.copy_(g);
    else prev_flat_grad_ = g.clone();
    prev_loss_ = loss;

    // The step length: lr, and on the very first iteration at most lr / |g|_1.
    t_ = n_iter_ == 1 ? std::min(1.0, 1.0 / g.abs().sum().item<double>()) * o.lr : o.lr;
    double gtd = dotd(g, d_);
    // Not a descent direction (any more), or not a number: PyTorch goes on with a NaN direction
    // until max_iter, making every parameter NaN; nabla stops (a hostile checkpoint with a huge
    // max_iter and NaN state would otherwise hang the step).
    if (!(gtd <= -o.tolerance_change)) break;

    int64_t ls_evals = 0;
    if (o.strong_wolfe) {
      LineSearchResult r = strong_wolfe(closure, t_, d_, loss, g, gtd);
      loss = r.loss, g = r.grad, t_ = r.t, ls_evals = r.evals;
      add_to_params(t_, d_);
      optimal = max_abs(g) <= o.tolerance_grad;
    } else {
      add_to_params(t_, d_);
      if (n_iter != o.max_iter) {  // the last iteration's loss would go unused
        loss = run_closure(closure).item<double>();
        g = flat_grad();
        optimal = max_abs(g) <= o.tolerance_grad;
        ls_evals = 1;
      }
    }
    current_evals += ls_evals;
    func_evals_ += ls_evals;

    if (n_iter == o.max_iter || current_evals >= max_eval || optimal) break;
    if (max_abs(d_.mul(t_)) <= o.tolerance_change) break;         // no progress in x
    if (std::abs(loss - prev_loss_) < o.tolerance_change) break;  // nor in f
  }
  return orig_loss;
}

// ---- state dict: the base keys plus lbfgs.* ---------------------------------------------------------

namespace {
const char* const kPrefix = "lbfgs.";
}

StateDict LBFGS::state_dict() const {
  StateDict sd = Optimizer::state_dict();
  auto f64 = [](double v) { return scalar_tensor(v, dtype(kFloat64)); };
  sd.insert("lbfgs.func_evals", scalar_tensor(func_evals_, dtype(kInt64)));
  sd.insert("lbfgs.n_iter", scalar_tensor(n_iter_, dtype(kInt64)));
  sd.insert("lbfgs.t", f64(t_));
  sd.insert("lbfgs.H_diag", f64(H_diag_));
  sd.insert("lbfgs.prev_loss", f64(prev_loss_));
  if (d_.defined()) sd.insert("lbfgs.d", d_.clone());
  if (prev_flat_grad_.defined()) sd.insert("lbfgs.prev_flat_grad", prev_flat_grad_.clone());
  if (!old_dirs_.empty()) {
    sd.insert("lbfgs.old_dirs", stack(old_dirs_));
    sd.insert("lbfgs.old_stps", stack(old_stps_));
    sd.insert("lbfgs.ro", tensor(ro_, dtype(kFloat64)));
  }
  return sd;
}

void LBFGS::load_state_dict(const StateDict& sd) {
  StateDict base, own;
  for (const auto& [k, v] : sd) {
    if (k.rfind(kPrefix, 0) == 0) own.insert(k.substr(std::char_traits<char>::length(kPrefix)), v);
    else base.insert(k, v);
  }
  // Validate the L-BFGS part before anything changes.
  const int64_t n = numel();
  auto number = [&](const char* key) {
    const Tensor* t = own.find(key);
    NABLA_CHECK(ValueError, t != nullptr && t->numel() == 1, "LBFGS.load_state_dict: missing or non-scalar key 'lbfgs.",
                key, "'");
    return t->item<double>();
  };
  auto vec = [&](const char* key, Shape shape) -> Tensor {
    const Tensor* t = own.find(key);
    if (!t) return {};
    NABLA_CHECK(ShapeError, t->sizes() == shape, "LBFGS.load_state_dict: 'lbfgs.", key, "' has shape ", t->sizes(),
                " but the parameters call for ", shape);
    const Tensor& p0 = params(0)[0];
    return t->to(p0.device(), p0.dtype()).clone();
  };
  for (const auto& [k, v] : own) {
    static const char* const known[] = {"func_evals", "n_iter",         "t",        "H_diag",   "prev_loss",
                                        "d",          "prev_flat_grad", "old_dirs", "old_stps", "ro"};
    NABLA_CHECK(ValueError, std::find(std::begin(known), std::end(known), k) != std::end(known),
                "LBFGS.load_state_dict: unexpected key 'lbfgs.", k, "'");
  }
  int64_t func_evals = static_cast<int64_t>(number("func_evals")), n_iter = static_cast<int64_t>(number("n_iter"));
  double t = number("t"), H_diag = number("H_diag"), prev_loss = number("prev_loss");
  Tensor d = vec("d", {n}), prev = vec("prev_flat_grad", {n});
  const Tensor* ro_t = own.find("ro");
  int64_t k = ro_t ? ro_t->numel() : 0;
  NABLA_CHECK(ValueError, k <= options(0).history_size, "LBFGS.load_state_dict: the history has ", k,
              " pairs but history_size is ", options(0).history_size);
  Tensor dirs = vec("old_dirs", {k, n}), stps = vec("old_stps", {k, n});
  NABLA_CHECK(ValueError, (k == 0) == !dirs.defined() && (k == 0) == !stps.defined(),
              "LBFGS.load_state_dict: 'lbfgs.old_dirs', 'lbfgs.old_stps' and 'lbfgs.ro' go together");
  Optimizer::load_state_dict(base);
  func_evals_ = func_evals, n_iter_ = n_iter, t_ = t, H_diag_ = H_diag, prev_loss_ = prev_loss;
  d_ = d, prev_flat_grad_ = prev;
  old_dirs_.clear(), old_stps_.clear(), ro_.clear();
  Tensor ro_c = k ? ro_t->to(kCPU, kFloat64).contiguous() : Tensor();
  for (int64_t i = 0; i < k; ++i) {
    old_dirs_.push_back(dirs.select(0, i).clone());
    old_stps_.push_back(stps.select(0, i).clone());
    ro_.push_back(ro_c.data_ptr<double>()[i]);
  }
}

}  // namespace nabla::optim
