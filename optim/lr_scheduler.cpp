#include "optim/lr_scheduler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/ops.h"

namespace nabla::optim {

namespace {

Tensor f64_vector(const std::vector<double>& v) { return tensor(v, dtype(kFloat64)); }

// Numbers read from a state dict come from a file: each is checked (finite, whole, in range)
// before any arithmetic, so that a damaged checkpoint is an error, not undefined behaviour or a
// schedule of NaNs.
std::vector<double> read_vector(const StateDict& sd, const std::string& key, size_t n, const std::string& who) {
  const Tensor* t = sd.find(key);
  NABLA_CHECK(ValueError, t != nullptr, who, ".load_state_dict: missing key '", key, "'");
  NABLA_CHECK(ValueError, t->dim() == 1 && t->size(0) == static_cast<int64_t>(n), who, ".load_state_dict: '", key,
              "' must have ", n, " values (one per parameter group), got shape ", t->sizes());
  Tensor c = t->to(kCPU, kFloat64).contiguous();
  std::vector<double> v(c.data_ptr<double>(), c.data_ptr<double>() + n);
  for (size_t i = 0; i < n; ++i)
    NABLA_CHECK(ValueError, std::isfinite(v[i]), who, ".load_state_dict: '", key, "' must hold finite numbers, got ",
                v[i], " at index ", i);
  return v;
}

const Tensor& read_scalar(const StateDict& sd, const std::string& key, const std::string& who) {
  const Tensor* t = sd.find(key);
  NABLA_CHECK(ValueError, t != nullptr && t->numel() == 1, who, ".load_state_dict: missing or non-scalar key '", key,
              "'");
  return *t;
}

// A number that may be +-inf (ReduceLROnPlateau's best starts there) but not NaN.
double read_number(const StateDict& sd, const std::string& key, const std::string& who) {
  double v = read_scalar(sd, key, who).item<double>();
  NABLA_CHECK(ValueError, !std::isnan(v), who, ".load_state_dict: '", key, "' is NaN");
  return v;
}

// Counters and epochs: whole numbers from `lo` to 2^53 (exact in a double, and far from overflow).
int64_t read_int(const StateDict& sd, const std::string& key, const std::string& who, int64_t lo = 0) {
  constexpr double kMax = 9007199254740992.0;           // 2^53
  double v = read_scalar(sd, key, who).item<double>();  // (an int64 above 2^53 rounds, and is refused)
  NABLA_CHECK(ValueError, v >= static_cast<double>(lo) && v <= kMax && v == std::floor(v), who, ".load_state_dict: '",
              key, "' must be a whole number from ", lo, " to 2^53, got ", v);
  return static_cast<int64_t>(v);
}

// One lr_lambda per parameter group, none empty (LambdaLR, MultiplicativeLR).
template <class Lambdas>
void check_lambdas(const Lambdas& fs, size_t groups, const char* who) {
  NABLA_CHECK(ValueError, fs.size() == groups, who, ": expected ", groups, " lr_lambdas (one per group), got ",
              fs.size());
  for (const auto& f : fs) NABLA_CHECK(ValueError, static_cast<bool>(f), who, ": an lr_lambda is empty");
}

// Python's a % m for m > 0 (never negative).
int64_t py_mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

// The option a scheduler cycles as momentum: Adam's beta1 or SGD's (RMSprop's) momentum.
std::string momentum_option(const Optimizer& opt, const char* who) {
  if (opt.has_option("beta1")) return "beta1";
  if (opt.has_option("momentum")) return "momentum";
  throw ValueError(internal::str(who, ": cycle_momentum needs an optimizer with a 'momentum' or 'beta1' option (",
                                 opt.name(), " has neither); pass cycle_momentum = false"));
}

StateDict prefixed(const StateDict& sd, const std::string& prefix) {
  StateDict out;
  for (const auto& [k, v] : sd)
    if (k.compare(0, prefix.size(), prefix) == 0) out.insert(k.substr(prefix.size()), v);
  return out;
}

}  // namespace

// ---- LRScheduler ----------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name) : opt_(optimizer), name_(std::move(name)) {
  for (size_t g = 0; g < num_groups(); ++g) {
    if (!opt_.initial_lr(g)) opt_.set_initial_lr(g, opt_.lr(g));
    base_lrs_.push_back(*opt_.initial_lr(g));
  }
}

void LRScheduler::apply(const LRList& lrs) {
  NABLA_CHECK(ValueError, lrs.size() == num_groups(), name_, ": computed ", lrs.size(), " learning rates for ",
              num_groups(), " parameter groups");
  for (size_t g = 0; g < lrs.size(); ++g) opt_.set_lr(g, lrs[g]);
  last_lrs_.clear();
  for (size_t g = 0; g < num_groups(); ++g) last_lrs_.push_back(group_lr(g));
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  auto cf = closed_form_lr();
  apply(cf ? *cf : get_lr());
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  sd.insert("last_epoch", scalar_tensor(last_epoch_, dtype(kInt64)));
  sd.insert("step_count", scalar_tensor(step_count_, dtype(kInt64)));
  sd.insert("base_lrs", f64_vector(base_lrs_));
  sd.insert("last_lr", f64_vector(last_lrs_));
  save_extra(sd);
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  // -1: a scheduler of a SequentialLR that has not started yet.
  int64_t last_epoch = read_int(sd, "last_epoch", name_, -1);
  int64_t step_count = read_int(sd, "step_count", name_);
  auto base = read_vector(sd, "base_lrs", num_groups(), name_);
  auto last = read_vector(sd, "last_lr", num_groups(), name_);
  load_extra(sd);
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base);
  last_lrs_ = std::move(last);
}

// ---- StepLR, MultiStepLR, ExponentialLR -----------------------------------------------------------

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma)
    : LRScheduler(opt, "StepLR"), step_size_(step_size), gamma_(gamma) {
  NABLA_CHECK(ValueError, step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

LRList StepLR::get_lr() {
  LRList out;
  bool decay = last_epoch_ != 0 && last_epoch_ % step_size_ == 0;
  for (size_t g = 0; g < num_groups(); ++g) out.push_back(decay ? group_lr(g) * gamma_ : group_lr(g));
  return out;
}

std::optional<LRList> StepLR::closed_form_lr() const {
  LRList out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return out;
}

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(opt, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

LRList MultiStepLR::get_lr() {
  auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  double f = std::pow(gamma_, static_cast<double>(count));
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g) out.push_back(count ? group_lr(g) * f : group_lr(g));
  return out;
}

std::optional<LRList> MultiStepLR::closed_form_lr() const {
  auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  LRList out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(passed)));
  return out;
}

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma) : LRScheduler(opt, "ExponentialLR"), gamma_(gamma) {
  initial_step();
}

LRList ExponentialLR::get_lr() {
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g) out.push_back(last_epoch_ == 0 ? group_lr(g) : group_lr(g) * gamma_);
  return out;
}

std::optional<LRList> ExponentialLR::closed_form_lr() const {
  LRList out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return out;
}

// ---- CosineAnnealingLR ----------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min)
    : LRScheduler(opt, "CosineAnnealingLR"), T_max_(T_max), eta_min_(eta_min) {
  NABLA_CHECK(ValueError, T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

LRList CosineAnnealingLR::get_lr() {
  LRList out;
  double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  for (size_t g = 0; g < num_groups(); ++g) {
    double lr = group_lr(g), base = base_lrs_[g];
    if (last_epoch_ == 0) {
      out.push_back(lr);
    } else if (py_mod(last_epoch_ - 1 - T_max_, 2 * T_max_) == 0) {
      out.push_back(lr + (base - eta_min_) * (1 - std::cos(M_PI / T)) / 2);
    } else {
      out.push_back((1 + std::cos(M_PI * e / T)) / (1 + std::cos(M_PI * (e - 1) / T)) * (lr - eta_min_) + eta_min_);
    }
  }
  return out;
}

std::optional<LRList> CosineAnnealingLR::closed_form_lr() const {
  LRList out;
  double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  for (double b : base_lrs_) out.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(M_PI * e / T)) / 2);
  return out;
}

// ---- LinearLR -------------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(opt, "LinearLR"), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  NABLA_CHECK(ValueError, start_factor > 0 && start_factor <= 1, "LinearLR: start_factor must be in (0, 1], got ",
              start_factor);
  NABLA_CHECK(ValueError, end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor must be in [0, 1], got ",
              end_factor);
  NABLA_CHECK(ValueError, total_iters > 0, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

LRList LinearLR::get_lr() {
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g) {
    double lr = group_lr(g);
    if (last_epoch_ == 0) {
      out.push_back(lr * start_factor_);
    } else if (last_epoch_ > total_iters_) {
      out.push_back(lr);
    } else {
      double d = end_factor_ - start_factor_;
      out.push_back(lr * (1.0 + d / (static_cast<double>(total_iters_) * start_factor_ +
                                     static_cast<double>(last_epoch_ - 1) * d)));
    }
  }
  return out;
}

std::optional<LRList> LinearLR::closed_form_lr() const {
  LRList out;
  double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double b : base_lrs_)
    out.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_)));
  return out;
}

// ---- LambdaLR -------------------------------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& opt, Lambda f) : LambdaLR(opt, std::vector<Lambda>(opt.num_param_groups(), f)) {}

LambdaLR::LambdaLR(Optimizer& opt, std::vector<Lambda> fs) : LRScheduler(opt, "LambdaLR"), lambdas_(std::move(fs)) {
  check_lambdas(lambdas_, num_groups(), "LambdaLR");
  initial_step();
}

LRList LambdaLR::get_lr() { return *closed_form_lr(); }

std::optional<LRList> LambdaLR::closed_form_lr() const {
  LRList out;
  for (size_t g = 0; g < base_lrs_.size(); ++g) out.push_back(base_lrs_[g] * lambdas_[g](last_epoch_));
  return out;
}

// ---- ConstantLR, PolynomialLR, MultiplicativeLR ---------------------------------------------------

ConstantLR::ConstantLR(Optimizer& opt, double factor, int64_t total_iters)
    : LRScheduler(opt, "ConstantLR"), factor_(factor), total_iters_(total_iters) {
  NABLA_CHECK(ValueError, factor > 0 && factor <= 1, "ConstantLR: factor must be in (0, 1], got ", factor);
  NABLA_CHECK(ValueError, total_iters >= 0, "ConstantLR: total_iters must be >= 0, got ", total_iters);
  initial_step();
}

LRList ConstantLR::get_lr() {
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g) {
    double lr = group_lr(g);
    if (last_epoch_ == 0) lr *= factor_;
    if (last_epoch_ == total_iters_) lr /= factor_;  // total_iters 0: both, the rate is unchanged
    out.push_back(lr);
  }
  return out;
}

std::optional<LRList> ConstantLR::closed_form_lr() const {
  LRList out;
  for (double b : base_lrs_) out.push_back(last_epoch_ >= total_iters_ ? b : b * factor_);
  return out;
}

PolynomialLR::PolynomialLR(Optimizer& opt, int64_t total_iters, double power)
    : LRScheduler(opt, "PolynomialLR"), total_iters_(total_iters), power_(power) {
  NABLA_CHECK(ValueError, total_iters > 0, "PolynomialLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

LRList PolynomialLR::get_lr() {
  LRList out;
  double t = static_cast<double>(total_iters_), e = static_cast<double>(last_epoch_);
  bool decay = last_epoch_ > 0 && last_epoch_ <= total_iters_;
  // (1 - e/T)^p / (1 - (e-1)/T)^p: the closed form's ratio between consecutive epochs.
  double f = decay ? std::pow((1.0 - e / t) / (1.0 - (e - 1) / t), power_) : 1.0;
  for (size_t g = 0; g < num_groups(); ++g) out.push_back(group_lr(g) * f);
  return out;
}

std::optional<LRList> PolynomialLR::closed_form_lr() const {
  LRList out;
  double done = static_cast<double>(std::min(total_iters_, last_epoch_)) / static_cast<double>(total_iters_);
  for (double b : base_lrs_) out.push_back(b * std::pow(1.0 - done, power_));
  return out;
}

MultiplicativeLR::MultiplicativeLR(Optimizer& opt, Lambda f)
    : MultiplicativeLR(opt, std::vector<Lambda>(opt.num_param_groups(), f)) {}

MultiplicativeLR::MultiplicativeLR(Optimizer& opt, std::vector<Lambda> fs)
    : LRScheduler(opt, "MultiplicativeLR"), lambdas_(std::move(fs)) {
  check_lambdas(lambdas_, num_groups(), "MultiplicativeLR");
  initial_step();
}

LRList MultiplicativeLR::get_lr() {
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g)
    out.push_back(last_epoch_ > 0 ? group_lr(g) * lambdas_[g](last_epoch_) : group_lr(g));
  return out;
}

// ---- CosineAnnealingWarmRestarts ------------------------------------------------------------------

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult, double eta_min)
    : LRScheduler(opt, "CosineAnnealingWarmRestarts"), T_0_(T_0), T_mult_(T_mult), eta_min_(eta_min) {
  NABLA_CHECK(ValueError, T_0 > 0, "CosineAnnealingWarmRestarts: T_0 must be positive, got ", T_0);
  NABLA_CHECK(ValueError, T_mult >= 1, "CosineAnnealingWarmRestarts: T_mult must be >= 1, got ", T_mult);
  initial_step();
}

void CosineAnnealingWarmRestarts::step(double epoch) {
  NABLA_CHECK(ValueError, epoch >= 0 && std::isfinite(epoch),
              "CosineAnnealingWarmRestarts.step: expected a non-negative "
              "epoch, got ",
              epoch);
  ++step_count_;
  double whole = std::floor(epoch);
  last_epoch_ = static_cast<int64_t>(whole);
  fraction_ = epoch - whole;
  apply(get_lr());
}

std::pair<double, double> CosineAnnealingWarmRestarts::position() const {
  double e = static_cast<double>(last_epoch_) + fraction_, T0 = static_cast<double>(T_0_);
  if (e < T0) return {e, T0};
  if (T_mult_ == 1) return {std::fmod(e, T0), T0};
  // Walk the periods (T_0, T_0 T_mult, ...): exact at the restarts, where a logarithm could round
  // an epoch into the previous period.
  double start = 0, Ti = T0;
  while (e >= start + Ti) {
    start += Ti;
    Ti *= static_cast<double>(T_mult_);
  }
  return {e - start, Ti};
}

std::optional<LRList> CosineAnnealingWarmRestarts::closed_form_lr() const {
  auto [T_cur, T_i] = position();
  LRList out;
  for (double b : base_lrs_) out.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(M_PI * T_cur / T_i)) / 2);
  return out;
}

void CosineAnnealingWarmRestarts::save_extra(StateDict& sd) const {
  sd.insert("epoch_fraction", scalar_tensor(fraction_, dtype(kFloat64)));
}

void CosineAnnealingWarmRestarts::load_extra(const StateDict& sd) {
  double fraction = read_number(sd, "epoch_fraction", name_);
  NABLA_CHECK(ValueError, fraction >= 0 && fraction < 1, name_,
              ".load_state_dict: 'epoch_fraction' must be in [0, 1), got ", fraction);
  fraction_ = fraction;
}

// ---- CyclicLR -------------------------------------------------------------------------------------

CyclicLR::CyclicLR(Optimizer& opt, double base_lr, double max_lr, CyclicLROptions o)
    : CyclicLR(opt, std::vector<double>(opt.num_param_groups(), base_lr),
               std::vector<double>(opt.num_param_groups(), max_lr), std::move(o)) {}

CyclicLR::CyclicLR(Optimizer& opt, std::vector<double> base_lrs, std::vector<double> max_lrs, CyclicLROptions o)
    : LRScheduler(opt, "CyclicLR"), o_(std::move(o)), max_lrs_(std::move(max_lrs)) {
  NABLA_CHECK(ValueError, base_lrs.size() == num_groups() && max_lrs_.size() == num_groups(), "CyclicLR: expected ",
              num_groups(), " base_lr and max_lr values (one per group), got ", base_lrs.size(), " and ",
              max_lrs_.size());
  int64_t down = o_.step_size_down.value_or(o_.step_size_up);
  NABLA_CHECK(ValueError, o_.step_size_up > 0 && down > 0,
              "CyclicLR: step_size_up and step_size_down must be positive, got ", o_.step_size_up, " and ", down);
  total_size_ = static_cast<double>(o_.step_size_up + down);
  step_ratio_ = static_cast<double>(o_.step_size_up) / total_size_;
  if (!o_.scale_fn) {  // the mode decides what the scale is a function of
    o_.scale_mode = o_.mode == CyclicLROptions::Mode::exp_range ? CyclicLROptions::ScaleMode::iterations
                                                                : CyclicLROptions::ScaleMode::cycle;
  }
  for (size_t g = 0; g < num_groups(); ++g) {
    opt_.set_lr(g, base_lrs[g]);
    opt_.set_initial_lr(g, base_lrs[g]);
  }
  base_lrs_ = std::move(base_lrs);
  if (o_.cycle_momentum) {
    momentum_option_ = momentum_option(opt_, "CyclicLR");
    for (size_t g = 0; g < num_groups(); ++g) opt_.set_option(g, momentum_option_, o_.max_momentum);
  }
  initial_step();
}

double CyclicLR::scale(double x) const {
  if (o_.scale_fn) return o_.scale_fn(x);
  switch (o_.mode) {
    case CyclicLROptions::Mode::triangular: return 1.0;
    case CyclicLROptions::Mode::triangular2: return 1.0 / std::pow(2.0, x - 1);
    case CyclicLROptions::Mode::exp_range: return std::pow(o_.gamma, x);
  }
  return 1.0;
}

LRList CyclicLR::get_lr() {
  double e = static_cast<double>(last_epoch_);
  double cycle = std::floor(1 + e / total_size_);
  double x = 1.0 + e / total_size_ - cycle;  // the position in the cycle, in [0, 1)
  double height = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  double s = scale(o_.scale_mode == CyclicLROptions::ScaleMode::cycle ? cycle : e);
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g) {
    out.push_back(base_lrs_[g] + (max_lrs_[g] - base_lrs_[g]) * height * s);
    if (o_.cycle_momentum)
      opt_.set_option(g, momentum_option_, o_.max_momentum - (o_.max_momentum - o_.base_momentum) * height * s);
  }
  return out;
}

// ---- OneCycleLR -----------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& opt, double max_lr, OneCycleOptions o)
    : OneCycleLR(opt, std::vector<double>(opt.num_param_groups(), max_lr), o) {}

OneCycleLR::OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, OneCycleOptions o)
    : LRScheduler(opt, "OneCycleLR"), o_(o) {
  if (o.total_steps > 0) {
    total_steps_ = o.total_steps;
  } else {
    NABLA_CHECK(ValueError, o.epochs > 0 && o.steps_per_epoch > 0,
                "OneCycleLR: give total_steps, or epochs and steps_per_epoch (all positive)");
    total_steps_ = o.epochs * o.steps_per_epoch;
  }
  NABLA_CHECK(ValueError, o.pct_start >= 0 && o.pct_start <= 1, "OneCycleLR: pct_start must be in [0, 1], got ",
              o.pct_start);
  NABLA_CHECK(ValueError, o.div_factor > 0 && o.final_div_factor > 0,
              "OneCycleLR: div_factor and final_div_factor must be positive");
  NABLA_CHECK(ValueError, max_lrs.size() == num_groups(), "OneCycleLR: expected ", num_groups(),
              " max_lr values (one per group), got ", max_lrs.size());
  double t = static_cast<double>(total_steps_), p = o.pct_start;
  if (o.three_phase) {
    phases_ = {{p * t - 1, 0, 1, true, false}, {2 * p * t - 2, 1, 0, false, true}, {t - 1, 0, 2, true, true}};
  } else {
    phases_ = {{p * t - 1, 0, 1, true, false}, {t - 1, 1, 2, false, true}};
  }
  base_lrs_.clear();
  for (size_t g = 0; g < num_groups(); ++g) {
    double initial = max_lrs[g] / o.div_factor;
    lrs_.push_back({initial, max_lrs[g], initial / o.final_div_factor});
    opt_.set_initial_lr(g, initial);
    base_lrs_.push_back(initial);
  }
  if (o.cycle_momentum) {
    momentum_option_ = momentum_option(opt_, "OneCycleLR");
    for (size_t g = 0; g < num_groups(); ++g) opt_.set_option(g, momentum_option_, o.max_momentum);
  }
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.anneal_strategy == OneCycleOptions::Anneal::linear) return (end - start) * pct + start;
  return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1);
}

LRList OneCycleLR::get_lr() {
  NABLA_CHECK(ValueError, last_epoch_ <= total_steps_, "OneCycleLR: tried to step ", last_epoch_,
              " times; the schedule has total_steps = ", total_steps_);
  double step = static_cast<double>(last_epoch_);
  LRList out;
  for (size_t g = 0; g < num_groups(); ++g) {
    double start = 0, lr = 0, mom = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (step <= ph.end_step || i + 1 == phases_.size()) {
        double span = ph.end_step - start;
        double pct = span != 0 ? (step - start) / span : 1.0;
        lr = anneal(lrs_[g][ph.start_lr], lrs_[g][ph.end_lr], pct);
        mom = anneal(ph.start_momentum_max ? o_.max_momentum : o_.base_momentum,
                     ph.end_momentum_max ? o_.max_momentum : o_.base_momentum, pct);
        break;
      }
      start = ph.end_step;
    }
    // Stepping once past the end (step == total_steps, as PyTorch allows) extrapolates the last
    // phase; a linear anneal can then go below zero, which no optimizer accepts.
    out.push_back(std::max(lr, 0.0));
    if (o_.cycle_momentum) opt_.set_option(g, momentum_option_, mom);
  }
  return out;
}

// ---- ReduceLROnPlateau ----------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, ReduceLROnPlateauOptions o)
    : LRScheduler(opt, "ReduceLROnPlateau"), o_(std::move(o)) {
  NABLA_CHECK(ValueError, o_.factor < 1 && o_.factor >= 0, "ReduceLROnPlateau: factor must be in [0, 1), got ",
              o_.factor);
  NABLA_CHECK(ValueError, o_.patience >= 0 && o_.cooldown >= 0,
              "ReduceLROnPlateau: patience and cooldown must be >= 0");
  if (o_.min_lrs.size() == 1) min_lrs_.assign(num_groups(), o_.min_lrs[0]);
  else min_lrs_ = o_.min_lrs;
  NABLA_CHECK(ValueError, min_lrs_.size() == num_groups(), "ReduceLROnPlateau: expected 1 or ", num_groups(),
              " min_lrs, got ", o_.min_lrs.size());
  best_ = o_.mode == ReduceLROnPlateauOptions::Mode::min ? std::numeric_limits<double>::infinity()
                                                         : -std::numeric_limits<double>::infinity();
  last_epoch_ = 0;
  for (size_t g = 0; g < num_groups(); ++g) last_lrs_.push_back(group_lr(g));
}

bool ReduceLROnPlateau::is_better(double a) const {
  using M = ReduceLROnPlateauOptions::Mode;
  using T = ReduceLROnPlateauOptions::ThresholdMode;
  double thr = o_.threshold;
  if (o_.mode == M::min) return o_.threshold_mode == T::rel ? a < best_ * (1 - thr) : a < best_ - thr;
  return o_.threshold_mode == T::rel ? a > best_ * (thr + 1) : a > best_ + thr;
}

void ReduceLROnPlateau::step() {
  throw ValueError("ReduceLROnPlateau: step() needs the monitored metric: call step(metric)");
}

void ReduceLROnPlateau::step(double metric) {
  ++step_count_;
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > o_.patience) {
    for (size_t g = 0; g < num_groups(); ++g) {
      double old_lr = group_lr(g);
      double new_lr = std::max(old_lr * o_.factor, min_lrs_[g]);
      if (old_lr - new_lr > o_.eps) opt_.set_lr(g, new_lr);
    }
    cooldown_counter_ = o_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lrs_.clear();
  for (size_t g = 0; g < num_groups(); ++g) last_lrs_.push_back(group_lr(g));
}

void ReduceLROnPlateau::save_extra(StateDict& sd) const {
  sd.insert("best", scalar_tensor(best_, dtype(kFloat64)));
  sd.insert("num_bad_epochs", scalar_tensor(num_bad_epochs_, dtype(kInt64)));
  sd.insert("cooldown_counter", scalar_tensor(cooldown_counter_, dtype(kInt64)));
}

void ReduceLROnPlateau::load_extra(const StateDict& sd) {
  double best = read_number(sd, "best", name_);
  int64_t bad = read_int(sd, "num_bad_epochs", name_);
  int64_t cool = read_int(sd, "cooldown_counter", name_);
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cool;
}

// ---- SequentialLR and ChainedScheduler ------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(opt, "SequentialLR"), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  NABLA_CHECK(ValueError, !schedulers_.empty(), "SequentialLR: expected at least one scheduler");
  NABLA_CHECK(ValueError, milestones_.size() + 1 == schedulers_.size(), "SequentialLR: expected ",
              schedulers_.size() - 1, " milestones for ", schedulers_.size(), " schedulers, got ", milestones_.size());
  NABLA_CHECK(ValueError, std::is_sorted(milestones_.begin(), milestones_.end()),
              "SequentialLR: milestones must be sorted");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    NABLA_CHECK(ValueError, schedulers_[i] != nullptr, "SequentialLR: scheduler ", i, " is null");
    NABLA_CHECK(ValueError, &schedulers_[i]->optimizer() == &opt, "SequentialLR: scheduler ", i, " (",
                schedulers_[i]->name(), ") belongs to another optimizer");
    NABLA_CHECK(ValueError, dynamic_cast<ReduceLROnPlateau*>(schedulers_[i].get()) == nullptr,
                "SequentialLR: ReduceLROnPlateau cannot be sequenced (it needs a metric)");
  }
  // Undo the construction-time steps of the schedulers and start the first one.
  for (size_t g = 0; g < num_groups(); ++g) opt_.set_lr(g, *opt_.initial_lr(g));
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_epoch_ = 0;
  step_count_ = 1;
  last_lrs_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++step_count_;
  ++last_epoch_;
  size_t idx =
      static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) s.step_to(0);
  else s.step();
  last_lrs_ = s.get_last_lr();
}

StateDict SequentialLR::state_dict() const {
  StateDict sd = LRScheduler::state_dict();
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (const auto& [k, v] : schedulers_[i]->state_dict()) sd.insert("schedulers." + std::to_string(i) + "." + k, v);
  return sd;
}

void SequentialLR::load_state_dict(const StateDict& sd) {
  LRScheduler::load_state_dict(sd);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->load_state_dict(prefixed(sd, "schedulers." + std::to_string(i) + "."));
}

ChainedScheduler::ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers)
    : LRScheduler(
          [&]() -> Optimizer& {
            NABLA_CHECK(ValueError, !schedulers.empty() && schedulers[0] != nullptr,
                        "ChainedScheduler: expected schedulers");
            return schedulers[0]->optimizer();
          }(),
          "ChainedScheduler"),
      schedulers_(std::move(schedulers)) {
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    NABLA_CHECK(ValueError, schedulers_[i] != nullptr && &schedulers_[i]->optimizer() == &opt_,
                "ChainedScheduler: scheduler ", i, " is null or belongs to another optimizer");
    NABLA_CHECK(ValueError, dynamic_cast<ReduceLROnPlateau*>(schedulers_[i].get()) == nullptr,
                "ChainedScheduler: ReduceLROnPlateau cannot be chained (it needs a metric)");
  }
  for (size_t g = 0; g < num_groups(); ++g) last_lrs_.push_back(group_lr(g));
}

void ChainedScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  for (auto& s : schedulers_) s->step();
  last_lrs_.clear();
  for (size_t g = 0; g < num_groups(); ++g) last_lrs_.push_back(group_lr(g));
}

StateDict ChainedScheduler::state_dict() const {
  StateDict sd = LRScheduler::state_dict();
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (const auto& [k, v] : schedulers_[i]->state_dict()) sd.insert("schedulers." + std::to_string(i) + "." + k, v);
  return sd;
}

void ChainedScheduler::load_state_dict(const StateDict& sd) {
  LRScheduler::load_state_dict(sd);
  for (size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->load_state_dict(prefixed(sd, "schedulers." + std::to_string(i) + "."));
}

}  // namespace nabla::optim
