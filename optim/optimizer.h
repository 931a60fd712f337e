// Optimizers: the base class, parameter groups and state dicts.
//
//   optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
//   // Parameter groups with their own options (a group without options uses the defaults):
//   optim::Adam opt2({{.params = model->backbone->parameters()},
//                     {.params = model->head->parameters(), .options = optim::AdamOptions{.lr = 1e-2}}},
//                    {.lr = 1e-3});
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//
// Updates run under NoGradGuard with in-place ops; per-parameter state tensors (momentum buffers,
// moment estimates) are created once, on a parameter's first step.
//
// state_dict() is flat and holds only tensors, so it saves to safetensors as it is:
//   param_groups.<g>.params      int64 (n): the global indices of the group's parameters
//   param_groups.<g>.<option>    float64 (): lr, momentum, beta1, ... (bools as 0/1), initial_lr
//   state.<i>.<name>             the state of parameter i (global index: group by group, in order),
//                                e.g. state.0.exp_avg; step counters are int64 ().
// load_state_dict() checks that the groups and their sizes match, that state tensors have their
// parameter's shape and that every number fits its field (floating values finite, flags 0 or 1,
// step counters whole numbers from 0 to 2^53: a state dict may come from a damaged file), and
// moves state to the parameter's device and dtype.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "../core/error.h"
#include "../core/ordered_dict.h"
#include "../core/tensor.h"

namespace nabla::torch_io {
class Value;
}

namespace nabla::optim {

using nn::StateDict;

class ZeroRedundancyOptimizer;  // distributed/zero_redundancy_optimizer.h: forwards to a wrapped optimizer

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // Evaluates closure() with grad enabled (it should zero the gradients, compute the loss and call
  // backward), then steps; returns the loss. (LBFGS calls the closure several times per step.)
  virtual Tensor step(const std::function<Tensor()>& closure);
  // Clears the gradients of all parameters (set_to_none: undefined, else zeros).
  void zero_grad(bool set_to_none = true);

  const std::string& name() const { return name_; }
  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const;
  std::vector<Tensor> all_params() const;

  // Hyper-parameters of a group by name ("lr", "momentum", "beta1", "weight_decay", ...), for
  // schedulers and for changing them during training.
  bool has_option(std::string_view option) const;
  double get_option(size_t group, std::string_view option) const;
  void set_option(size_t group, std::string_view option, double value);
  double lr(size_t group = 0) const { return get_option(group, "lr"); }
  void set_lr(size_t group, double lr) { set_option(group, "lr", lr); }
  void set_lr(double lr);  // every group
  // The learning rate a scheduler started from (PyTorch's group["initial_lr"]).
  std::optional<double> initial_lr(size_t group) const;
  void set_initial_lr(size_t group, double lr);

  // One parameter group, as libtorch's optimizer.param_groups()[i] gives it: its parameters and
  // its hyper-parameters by name.
  //   for (auto& g : opt.param_groups()) g.set_lr(g.lr() * 0.1);
  class ParamGroupView {
   public:
    const std::vector<Tensor>& params() const { return opt_->params(group_); }
    double option(std::string_view name) const { return opt_->get_option(group_, name); }
    void set_option(std::string_view name, double value) const { opt_->set_option(group_, name, value); }
    double lr() const { return option("lr"); }
    void set_lr(double lr) const { set_option("lr", lr); }
    size_t index() const { return group_; }

   private:
    friend class Optimizer;
    ParamGroupView(Optimizer* opt, size_t group) : opt_(opt), group_(group) {}
    Optimizer* opt_;
    size_t group_;
  };
  std::vector<ParamGroupView> param_groups() {
    std::vector<ParamGroupView> v;
    for (size_t g = 0; g < num_param_groups(); ++g) v.push_back(ParamGroupView(this, g));
    return v;
  }

  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& state);
  // PyTorch's optimizer.state_dict() as torch_io::load returns it ({'state': {0: {'exp_avg': ...}},
  // 'param_groups': [{'lr': 0.001, 'betas': (0.9, 0.999), ..., 'params': [0, 1]}]}), mapped to this
  // optimizer's parameters by order, as PyTorch does; and this optimizer's state in that layout, for
  // torch_io::save and opt.load_state_dict in Python. See optim/torch_state.cpp.
  void load_state_dict(const torch_io::Value& pytorch_state);
  torch_io::Value torch_state_dict() const;

 protected:
  // A reference to one named field of an options or state struct.
  using FieldRef = std::variant<double*, bool*, int64_t*, Tensor*>;
  // A non-owning reference to a callable (a std::function would allocate for most lambdas).
  class FieldFn {
   public:
    template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FieldFn>)
        FieldFn(F&& f)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
        : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* o, const char* n, FieldRef r) { (*static_cast<std::remove_reference_t<F>*>(o))(n, r); }) {}
    void operator()(const char* name, FieldRef ref) const { call_(obj_, name, ref); }

   private:
    void* obj_;
    void (*call_)(void*, const char*, FieldRef);
  };

  Optimizer(std::string name) : name_(std::move(name)) {}
  // Registers a group (after the derived class checked its options).
  void add_group_params(std::vector<Tensor> params);
  std::vector<Tensor>& mutable_params(size_t group) { return groups_[group].params; }

  // Implemented by OptimizerImpl from the Options and State structs' visit().
  virtual void visit_options(size_t group, const FieldFn& fn) const = 0;
  virtual void validate_group(size_t group) const = 0;
  // create: make the parameter's state if it has none; else fn is not called for stateless params.
  virtual void visit_state(const Tensor& param, bool create, const FieldFn& fn) const = 0;
  // The fields of a fresh State (names and kinds), e.g. to validate a state dict before loading.
  virtual void visit_default_state(const FieldFn& fn) const = 0;
  virtual void clear_state() = 0;

 private:
  friend class ZeroRedundancyOptimizer;
  struct Group {
    std::vector<Tensor> params;
    std::optional<double> initial_lr;
  };
  std::string name_;
  std::vector<Group> groups_;
};

// What a parameter group is given as: parameters, and options (the optimizer's defaults if unset).
template <class Options>
struct ParamGroup {
  std::vector<Tensor> params{};
  std::optional<Options> options{};
};

// The common implementation: groups of typed Options and per-parameter State. Options and State
// list their fields in `template <class F> void visit(F&& f)` as f("name", field); Options also
// has `void check() const`, which throws ValueError on invalid hyper-parameters.
template <class Options, class State>
class OptimizerImpl : public Optimizer {
 public:
  using ParamGroup = optim::ParamGroup<Options>;
  using options_type = Options;

  void add_param_group(ParamGroup group) {
    Options o = group.options.value_or(defaults_);
    o.check();
    options_.push_back(o);
    try {
      add_group_params(std::move(group.params));
    } catch (...) {
      options_.pop_back();
      throw;
    }
  }
  Options& options(size_t group = 0) {
    NABLA_CHECK(IndexError, group < options_.size(), name(), ": no parameter group ", group);
    return options_[group];
  }
  const Options& options(size_t group = 0) const { return const_cast<OptimizerImpl*>(this)->options(group); }
  const Options& defaults() const { return defaults_; }

 protected:
  OptimizerImpl(const char* name, std::vector<ParamGroup> groups, Options defaults)
      : Optimizer(name), defaults_(defaults) {
    defaults_.check();
    NABLA_CHECK(ValueError, !groups.empty(), name, ": got an empty list of parameter groups");
    for (auto& g : groups) add_param_group(std::move(g));
  }
  OptimizerImpl(const char* name, std::vector<Tensor> params, Options defaults)
      : OptimizerImpl(name, std::vector<ParamGroup>{ParamGroup{std::move(params), std::nullopt}}, defaults) {}

  // The state of a parameter, created on first use.
  State& state(const Tensor& p) { return state_[p.impl()]; }

  void visit_options(size_t group, const FieldFn& fn) const override {
    Options& o = const_cast<Options&>(options_[group]);
    o.visit([&](const char* n, auto& field) { fn(n, FieldRef(&field)); });
  }
  void validate_group(size_t group) const override { options_[group].check(); }
  void visit_state(const Tensor& p, bool create, const FieldFn& fn) const override {
    auto& map = const_cast<std::unordered_map<const TensorImpl*, State>&>(state_);
    auto it = map.find(p.impl());
    if (it == map.end()) {
      if (!create) return;
      it = map.emplace(p.impl(), State{}).first;
    }
    it->second.visit([&](const char* n, auto& field) { fn(n, FieldRef(&field)); });
  }
  void visit_default_state(const FieldFn& fn) const override {
    State s;
    s.visit([&](const char* n, auto& field) { fn(n, FieldRef(&field)); });
  }
  void clear_state() override { state_.clear(); }

 private:
  Options defaults_;
  std::vector<Options> options_;
  std::unordered_map<const TensorImpl*, State> state_;
};

}  // namespace nabla::optim
