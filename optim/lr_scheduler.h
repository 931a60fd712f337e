// Learning-rate schedulers, with torch.optim.lr_scheduler's semantics: constructing one records
// each group's initial_lr and applies the schedule's value at epoch 0; each step() advances
// last_epoch by one and sets the groups' learning rates. Rates are computed in PyTorch's chainable
// (recursive) form, so schedulers compose as they do there.
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
//   // 5 epochs of linear warm-up from 0.01 to 0.1, then cosine annealing over 95 epochs.
//   optim::SequentialLR sched(opt, {std::make_shared<optim::LinearLR>(opt, 0.1, 1.0, 5),
//                                   std::make_shared<optim::CosineAnnealingLR>(opt, 95)}, {5});
//   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(); sched.step(); }
//
// state_dict() holds the schedule's progress (last_epoch, step_count, base_lrs, last_lr and what a
// scheduler keeps beyond them) as tensors; the hyper-parameters come from the constructor. The
// optimizer's own state dict holds the current learning rates. load_state_dict() checks each
// number (epochs and counts whole, up to 2^53; learning rates finite) before using it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/small_vector.h"
#include "optimizer.h"

namespace nabla::optim {

// Learning rates, one per parameter group (inline for up to 8 groups, so stepping a scheduler
// allocates nothing).
using LRList = SmallVector<double, 8>;

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch (or iteration, for per-step schedules) and sets the learning rates.
  virtual void step();
  // The learning rates set by the last step (one per parameter group).
  const std::vector<double>& get_last_lr() const { return last_lrs_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::string& name() const { return name_; }
  Optimizer& optimizer() const { return opt_; }

  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& state);

 protected:
  LRScheduler(Optimizer& optimizer, std::string name);
  // The learning rates at last_epoch_ (already advanced), from the groups' current rates.
  virtual LRList get_lr() = 0;
  // The learning rates at last_epoch_ from base_lrs alone, for schedulers that have such a form
  // (used when a SequentialLR restarts a scheduler at epoch 0).
  virtual std::optional<LRList> closed_form_lr() const { return std::nullopt; }
  // The construction-time step to epoch 0; derived constructors call it last.
  void initial_step();
  // What a scheduler keeps beyond the common fields.
  virtual void save_extra(StateDict&) const {}
  virtual void load_extra(const StateDict&) {}
  double group_lr(size_t g) const { return opt_.lr(g); }
  size_t num_groups() const { return opt_.num_param_groups(); }
  void apply(const LRList& lrs);

  Optimizer& opt_;
  std::string name_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> base_lrs_, last_lrs_;

 private:
  friend class SequentialLR;
  friend class ChainedScheduler;
  void step_to(int64_t epoch);  // jump to `epoch` (closed form where there is one)
};

// lr * gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr * gamma at each milestone epoch (a milestone listed twice multiplies by gamma^2).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr * gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  double gamma_;
};

// eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, in the recursive form
// lr_t = eta_min + (lr_{t-1} - eta_min) (1 + cos(pi t / T_max)) / (1 + cos(pi (t - 1) / T_max)).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// Multiplies base_lr by a factor going linearly from start_factor (epoch 0) to end_factor (epoch
// total_iters), then keeps it.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// base_lr * lr_lambda(epoch); one function for all groups or one per group. The functions are not
// saved in the state dict.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t epoch)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  std::vector<Lambda> lambdas_;
};

// base_lr * factor until epoch total_iters, then base_lr (a constant warm-up).
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, int64_t total_iters = 5);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  double factor_;
  int64_t total_iters_;
};

// base_lr * (1 - min(epoch, total_iters) / total_iters)^power: decays to 0 at total_iters.
class PolynomialLR : public LRScheduler {
 public:
  PolynomialLR(Optimizer& optimizer, int64_t total_iters = 5, double power = 1.0);

 protected:
  LRList get_lr() override;
  std::optional<LRList> closed_form_lr() const override;

 private:
  int64_t total_iters_;
  double power_;
};

// lr * lr_lambda(epoch) at every step after the first (the factors compound, unlike LambdaLR).
class MultiplicativeLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t epoch)>;
  MultiplicativeLR(Optimizer& optimizer, Lambda lr_lambda);
  MultiplicativeLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);

 protected:
  LRList get_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

// SGDR (Loshchilov & Hutter): cosine annealing from base_lr to eta_min over T_i epochs, then a
// restart at base_lr; T_0 for the first period, each next one T_mult times longer. step() advances
// one epoch; step(epoch) jumps to a (possibly fractional) epoch, to anneal within an epoch:
//   for (int64_t i = 0; i < iters; ++i) { train_batch(); sched.step(epoch + double(i) / iters); }
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult = 1, double eta_min = 0);
  using LRScheduler::step;
  void step(double epoch);
  // Epochs since the last restart (fractional after step(epoch)) and the current period.
  double T_cur() const { return position().first; }
  double T_i() const { return position().second; }

 protected:
  LRList get_lr() override { return *closed_form_lr(); }
  std::optional<LRList> closed_form_lr() const override;
  void save_extra(StateDict& sd) const override;
  void load_extra(const StateDict& sd) override;

 private:
  std::pair<double, double> position() const;  // (T_cur, T_i) at last_epoch + fraction
  int64_t T_0_, T_mult_;
  double eta_min_;
  double fraction_ = 0;  // the part of the epoch given to step(epoch) beyond last_epoch
};

// Cyclical learning rates (Smith): each cycle rises from base_lr to max_lr over step_size_up steps
// and falls back over step_size_down, the amplitude scaled by mode (or scale_fn); momentum (or
// Adam's beta1) cycles the other way, between max_momentum and base_momentum. Step it after every
// batch. Constructing it sets the groups' learning rates to base_lr.
struct CyclicLROptions {
  int64_t step_size_up = 2000;
  std::optional<int64_t> step_size_down{};  // default: step_size_up
  // triangular: no scaling; triangular2: the amplitude halves each cycle; exp_range: it is
  // multiplied by gamma^iterations.
  enum class Mode { triangular, triangular2, exp_range } mode = Mode::triangular;
  double gamma = 1.0;
  // A custom amplitude scale in [0, 1] (replaces mode), of the cycle number (1, 2, ...) or of the
  // iteration count, as scale_mode says.
  std::function<double(double)> scale_fn;
  enum class ScaleMode { cycle, iterations } scale_mode = ScaleMode::cycle;
  bool cycle_momentum = true;
  double base_momentum = 0.8, max_momentum = 0.9;
};

class CyclicLR : public LRScheduler {
 public:
  CyclicLR(Optimizer& optimizer, double base_lr, double max_lr, CyclicLROptions options = {});
  CyclicLR(Optimizer& optimizer, std::vector<double> base_lrs, std::vector<double> max_lrs,
           CyclicLROptions options = {});

 protected:
  LRList get_lr() override;

 private:
  double scale(double cycle) const;
  CyclicLROptions o_;
  std::vector<double> max_lrs_;
  double total_size_, step_ratio_;
  std::string momentum_option_;  // "beta1" or "momentum" when cycling momentum
};

struct OneCycleOptions {
  int64_t total_steps = 0;  // or epochs * steps_per_epoch
  int64_t epochs = 0, steps_per_epoch = 0;
  double pct_start = 0.3;
  enum class Anneal { cos, linear } anneal_strategy = Anneal::cos;
  bool cycle_momentum = true;  // cycles "beta1" (Adam-like) or "momentum" (SGD-like) inversely to lr
  double base_momentum = 0.85, max_momentum = 0.95;
  double div_factor = 25.0;       // initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min_lr = initial_lr / final_div_factor
  bool three_phase = false;
};

// The 1cycle policy (Smith & Topor): lr rises from initial_lr to max_lr over pct_start of the
// steps, then anneals to min_lr (with three_phase: back to initial_lr, then to min_lr). Step it
// after every batch.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleOptions options);
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, OneCycleOptions options);
  int64_t total_steps() const { return total_steps_; }

 protected:
  LRList get_lr() override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;  // 0: initial_lr, 1: max_lr, 2: min_lr
    bool start_momentum_max, end_momentum_max;
  };
  double anneal(double start, double end, double pct) const;
  OneCycleOptions o_;
  int64_t total_steps_;
  std::vector<Phase> phases_;
  std::vector<std::array<double, 3>> lrs_;  // per group: initial, max, min
  std::string momentum_option_;             // "beta1" or "momentum"
};

// Lowers the learning rates by `factor` when a metric has stopped improving for `patience`
// epochs: call step(metric) after each validation.
struct ReduceLROnPlateauOptions {
  enum class Mode { min, max } mode = Mode::min;
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  enum class ThresholdMode { rel, abs } threshold_mode = ThresholdMode::rel;
  int64_t cooldown = 0;
  std::vector<double> min_lrs = {0.0};  // one for all groups, or one per group
  double eps = 1e-8;                    // changes smaller than this are ignored
};

class ReduceLROnPlateau : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  void step() override;  // throws: the metric is required
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

 protected:
  LRList get_lr() override { return LRList(last_lrs_.begin(), last_lrs_.end()); }
  void save_extra(StateDict& sd) const override;
  void load_extra(const StateDict& sd) override;

 private:
  bool is_better(double a) const;
  ReduceLROnPlateauOptions o_;
  std::vector<double> min_lrs_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0;
};

// Runs schedulers one after another: schedulers[i] from milestones[i-1] on (restarted at its
// epoch 0 there). The usual warm-up: SequentialLR(opt, {LinearLR(...), CosineAnnealingLR(...)}, {W}).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;

 protected:
  LRList get_lr() override { return LRList(last_lrs_.begin(), last_lrs_.end()); }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

// Steps every scheduler at each step, so their (chainable) factors multiply.
class ChainedScheduler : public LRScheduler {
 public:
  explicit ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers);
  void step() override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;

 protected:
  LRList get_lr() override { return LRList(last_lrs_.begin(), last_lrs_.end()); }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
};

}  // namespace nabla::optim
