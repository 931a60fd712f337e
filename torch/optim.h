// libtorch's optimizers and their builder options, over nabla's.
//
//   torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));
//   torch::optim::Adam g_opt(g->parameters(), torch::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));
//   for (auto& group : opt.param_groups())
//     static_cast<torch::optim::SGDOptions&>(group.options()).lr(0.001);   // or group.options().set_lr(0.001)
//
// torch::optim::SGD is an nabla::optim::SGD (so nabla's schedulers, checkpoints and GradScaler take
// it), made from a torch::optim::SGDOptions, and a torch::optim::Optimizer (libtorch's base class,
// for functions that take one). An options object is a builder holding nabla's
// aggregate; the ones param_groups() returns are bound to their group, so a setter changes the
// optimizer's option. The list param_groups() returns lives until the next call; its params() are
// copies of the group's tensor handles (the tensors themselves are shared).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../optim/adagrad.h"
#include "../optim/adam.h"
#include "../optim/lbfgs.h"
#include "../optim/optimizer.h"
#include "../optim/rmsprop.h"
#include "../optim/sgd.h"
#include "types.h"

namespace torch::optim {

// The base of every optimizer's options, as libtorch's.
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;  // an unbound copy of the values
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
};

class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}  // NOLINT: {params}
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  OptimizerParamGroup(const OptimizerParamGroup& other)
      : params_(other.params_), options_(other.options_ ? other.options_->clone() : nullptr) {}
  OptimizerParamGroup(OptimizerParamGroup&&) = default;

  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options() { return checked_options(); }
  const OptimizerOptions& options() const { return const_cast<OptimizerParamGroup*>(this)->checked_options(); }
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }

 private:
  OptimizerOptions& checked_options() {
    NABLA_CHECK(nabla::ValueError, options_ != nullptr, "torch::optim::OptimizerParamGroup: this group has no options");
    return *options_;
  }
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

// libtorch's Optimizer base class: what a function taking `torch::optim::Optimizer&` calls. Each
// torch:: optimizer implements it beside its nabla base (torch::optim::SGD is an
// nabla::optim::SGD); nabla_optimizer() reaches that one.
class Optimizer {
 public:
  using LossClosure = std::function<Tensor()>;
  virtual ~Optimizer() = default;
  // One step; with a closure (L-BFGS), the loss it returned first. Without one, an undefined Tensor.
  virtual Tensor step(LossClosure closure = nullptr) = 0;
  virtual void zero_grad(bool set_to_none = true) = 0;
  virtual std::vector<OptimizerParamGroup>& param_groups() = 0;
  virtual std::vector<Tensor> parameters() const = 0;
  virtual nabla::optim::Optimizer& nabla_optimizer() = 0;
  virtual const nabla::optim::Optimizer& nabla_optimizer() const = 0;
};

// libtorch's LR scheduler: step() sets every group's learning rate to get_lrs() and counts the
// step. (nabla's own schedulers, nabla::optim::StepLR and the rest, follow torch.optim's Python
// semantics, where a StepLR decays one step() earlier than libtorch's C++ one.)
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer) : optimizer_(optimizer.nabla_optimizer()) {}
  virtual ~LRScheduler() = default;
  void step() {
    std::vector<double> lrs = get_lrs();
    NABLA_CHECK(nabla::ValueError, lrs.size() == optimizer_.num_param_groups(),
                "torch::optim::LRScheduler: ", lrs.size(), " learning rates for ", optimizer_.num_param_groups(),
                " parameter groups");
    for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
    ++step_count_;
  }

 protected:
  virtual std::vector<double> get_lrs() = 0;
  std::vector<double> get_current_lrs() const {
    std::vector<double> lrs;
    for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) lrs.push_back(optimizer_.lr(g));
    return lrs;
  }
  unsigned step_count_ = 0;
  nabla::optim::Optimizer& optimizer_;
};

// Multiplies the learning rates by gamma at every step_size-th step() after the first, as libtorch's.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, unsigned step_size, double gamma = 0.1)
      : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
    NABLA_CHECK(nabla::ValueError, step_size > 0, "torch::optim::StepLR: step_size is 0");
  }

 private:
  std::vector<double> get_lrs() override {
    std::vector<double> lrs = get_current_lrs();
    if (step_count_ != 0 && step_count_ % step_size_ == 0)
      for (double& lr : lrs) lr *= gamma_;
    return lrs;
  }
  unsigned step_size_;
  double gamma_;
};

namespace detail {
// A torch:: options class over nabla's aggregate N: the builder's own copy, or (bound) group
// `group` of a live optimizer Opt. Self is the options class (CRTP), for the setters' return type.
template <class Self, class N, class Opt>
class BoundOptions : public OptimizerOptions {
 public:
  using nabla_type = N;
  std::unique_ptr<OptimizerOptions> clone() const override {
    auto copy = std::make_unique<Self>(static_cast<const Self&>(*this));
    copy->bind(nullptr, 0);
    copy->own_ = n();
    return copy;
  }
  double get_lr() const override { return n().lr; }
  void set_lr(double lr) override { n().lr = lr; }
  // nabla's options: the values this object holds or reaches.
  const N& to_nabla() const { return n(); }
  void bind(Opt* optimizer, size_t group) {
    opt_ = optimizer;
    group_ = group;
  }

 protected:
  N& n() { return opt_ ? opt_->options(group_) : own_; }
  const N& n() const { return opt_ ? static_cast<const Opt*>(opt_)->options(group_) : own_; }
  Self& self() { return static_cast<Self&>(*this); }

 private:
  N own_{};
  Opt* opt_ = nullptr;
  size_t group_ = 0;
};

// An nabla optimizer Opt made from libtorch's arguments, with libtorch's param_groups().
template <class Opt, class Options>
class Adapter : public Opt, public torch::optim::Optimizer {
 public:
  Adapter(std::vector<Tensor> params, const Options& defaults) : Opt(std::move(params), defaults.to_nabla()) {}
  Adapter(const std::vector<OptimizerParamGroup>& groups, const Options& defaults)
      : Opt(nabla_groups(groups), defaults.to_nabla()) {}

  Tensor step(LossClosure closure = nullptr) override {
    if (closure) return Opt::step(closure);
    Opt::step();
    return {};
  }
  void zero_grad(bool set_to_none = true) override { Opt::zero_grad(set_to_none); }
  nabla::optim::Optimizer& nabla_optimizer() override { return *this; }
  const nabla::optim::Optimizer& nabla_optimizer() const override { return *this; }
  // Every group's parameters, in order (libtorch's Optimizer::parameters()).
  std::vector<Tensor> parameters() const override { return this->all_params(); }

  std::vector<OptimizerParamGroup>& param_groups() override {
    groups_.clear();
    for (size_t g = 0; g < this->num_param_groups(); ++g) {
      auto options = std::make_unique<Options>();
      options->bind(this, g);
      groups_.emplace_back(this->params(g), std::move(options));
    }
    return groups_;
  }

 private:
  static std::vector<typename Opt::ParamGroup> nabla_groups(const std::vector<OptimizerParamGroup>& groups) {
    std::vector<typename Opt::ParamGroup> out;
    for (const OptimizerParamGroup& g : groups) {
      typename Opt::ParamGroup group{.params = g.params()};
      if (g.has_options()) {
        auto* o = dynamic_cast<const Options*>(&g.options());
        NABLA_CHECK(nabla::ValueError, o != nullptr,
                    "torch::optim: a parameter group's options are of another optimizer's kind");
        group.options = o->to_nabla();
      }
      out.push_back(std::move(group));
    }
    return out;
  }
  std::vector<OptimizerParamGroup> groups_;
};
}  // namespace detail

// A builder field over nabla's aggregate: name(value) sets it and returns *this, name() reads it.
#define NABLA_TORCH_OPTION(T, name, field) \
  Self& name(T value) {                    \
    this->n().field = value;               \
    return this->self();                   \
  }                                        \
  T name() const { return this->n().field; }

class SGDOptions : public detail::BoundOptions<SGDOptions, nabla::optim::SGDOptions, nabla::optim::SGD> {
  using Self = SGDOptions;

 public:
  SGDOptions(double lr = 1e-3) { this->n().lr = lr; }  // NOLINT: SGD(params, 0.1), as libtorch
  NABLA_TORCH_OPTION(double, lr, lr)
  NABLA_TORCH_OPTION(double, momentum, momentum)
  NABLA_TORCH_OPTION(double, dampening, dampening)
  NABLA_TORCH_OPTION(double, weight_decay, weight_decay)
  NABLA_TORCH_OPTION(bool, nesterov, nesterov)
};

template <class Self, class N, class Opt>
class AdamLikeOptions : public detail::BoundOptions<Self, N, Opt> {
 public:
  NABLA_TORCH_OPTION(double, lr, lr)
  NABLA_TORCH_OPTION(double, eps, eps)
  NABLA_TORCH_OPTION(double, weight_decay, weight_decay)
  NABLA_TORCH_OPTION(bool, amsgrad, amsgrad)
  Self& betas(const std::tuple<double, double>& b) {
    this->n().betas = {std::get<0>(b), std::get<1>(b)};
    return this->self();
  }
  std::tuple<double, double> betas() const { return {this->n().betas.first, this->n().betas.second}; }
};
class AdamOptions : public AdamLikeOptions<AdamOptions, nabla::optim::AdamOptions, nabla::optim::Adam> {
 public:
  AdamOptions(double lr = 1e-3) { this->n().lr = lr; }  // NOLINT: SGD(params, 0.1), as libtorch
};
class AdamWOptions : public AdamLikeOptions<AdamWOptions, nabla::optim::AdamWOptions, nabla::optim::AdamW> {
 public:
  AdamWOptions(double lr = 1e-3) { this->n().lr = lr; }  // NOLINT: SGD(params, 0.1), as libtorch
};

class RMSpropOptions
    : public detail::BoundOptions<RMSpropOptions, nabla::optim::RMSpropOptions, nabla::optim::RMSprop> {
  using Self = RMSpropOptions;

 public:
  RMSpropOptions(double lr = 1e-2) { this->n().lr = lr; }  // NOLINT: SGD(params, 0.1), as libtorch
  NABLA_TORCH_OPTION(double, lr, lr)
  NABLA_TORCH_OPTION(double, alpha, alpha)
  NABLA_TORCH_OPTION(double, eps, eps)
  NABLA_TORCH_OPTION(double, weight_decay, weight_decay)
  NABLA_TORCH_OPTION(double, momentum, momentum)
  NABLA_TORCH_OPTION(bool, centered, centered)
};

class AdagradOptions
    : public detail::BoundOptions<AdagradOptions, nabla::optim::AdagradOptions, nabla::optim::Adagrad> {
  using Self = AdagradOptions;

 public:
  AdagradOptions(double lr = 1e-2) { this->n().lr = lr; }  // NOLINT: SGD(params, 0.1), as libtorch
  NABLA_TORCH_OPTION(double, lr, lr)
  NABLA_TORCH_OPTION(double, lr_decay, lr_decay)
  NABLA_TORCH_OPTION(double, weight_decay, weight_decay)
  NABLA_TORCH_OPTION(double, initial_accumulator_value, initial_accumulator_value)
  NABLA_TORCH_OPTION(double, eps, eps)
};

class LBFGSOptions : public detail::BoundOptions<LBFGSOptions, nabla::optim::LBFGSOptions, nabla::optim::LBFGS> {
  using Self = LBFGSOptions;

 public:
  LBFGSOptions(double lr = 1) { this->n().lr = lr; }  // NOLINT(google-explicit-constructor)
  NABLA_TORCH_OPTION(double, lr, lr)
  NABLA_TORCH_OPTION(int64_t, max_iter, max_iter)
  NABLA_TORCH_OPTION(double, tolerance_grad, tolerance_grad)
  NABLA_TORCH_OPTION(double, tolerance_change, tolerance_change)
  NABLA_TORCH_OPTION(int64_t, history_size, history_size)
  Self& max_eval(std::optional<int64_t> v) {
    this->n().max_eval = v.value_or(-1);
    return *this;
  }
  std::optional<int64_t> max_eval() const {
    return this->n().max_eval < 0 ? std::nullopt : std::optional<int64_t>(this->n().max_eval);
  }
  // "strong_wolfe", or none.
  Self& line_search_fn(std::optional<std::string> fn) {
    NABLA_CHECK(nabla::ValueError, !fn || *fn == "strong_wolfe",
                "torch::optim::LBFGSOptions: line_search_fn must be \"strong_wolfe\" or none, got \"", *fn, "\"");
    this->n().strong_wolfe = fn.has_value();
    return *this;
  }
};

#undef NABLA_TORCH_OPTION

// libtorch's SGD takes its options (lr has no default there); the others default them.
class SGD : public detail::Adapter<nabla::optim::SGD, SGDOptions> {
 public:
  using Adapter::Adapter;
};
class Adam : public detail::Adapter<nabla::optim::Adam, AdamOptions> {
 public:
  using Adapter::Adapter;
  explicit Adam(std::vector<Tensor> params) : Adapter(std::move(params), AdamOptions()) {}
};
class AdamW : public detail::Adapter<nabla::optim::AdamW, AdamWOptions> {
 public:
  using Adapter::Adapter;
  explicit AdamW(std::vector<Tensor> params) : Adapter(std::move(params), AdamWOptions()) {}
};
class RMSprop : public detail::Adapter<nabla::optim::RMSprop, RMSpropOptions> {
 public:
  using Adapter::Adapter;
  explicit RMSprop(std::vector<Tensor> params) : Adapter(std::move(params), RMSpropOptions()) {}
};
// optimizer.step(closure), the closure returning the loss after its own backward.
class LBFGS : public detail::Adapter<nabla::optim::LBFGS, LBFGSOptions> {
 public:
  using Adapter::Adapter;
  explicit LBFGS(std::vector<Tensor> params) : Adapter(std::move(params), LBFGSOptions()) {}
};
class Adagrad : public detail::Adapter<nabla::optim::Adagrad, AdagradOptions> {
 public:
  using Adapter::Adapter;
  explicit Adagrad(std::vector<Tensor> params) : Adapter(std::move(params), AdagradOptions()) {}
};

}  // namespace torch::optim
