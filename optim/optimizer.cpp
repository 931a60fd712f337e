#include "optim/optimizer.h"

#include <cmath>
#include <map>
#include <set>
#include <unordered_set>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::optim {

namespace {

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

double scalar_of(const Tensor& t, const std::string& key, const std::string& who) {
  NABLA_CHECK(ValueError, t.defined() && t.numel() == 1, who, ".load_state_dict: '", key,
              "' must hold one number, got ",
              t.defined() ? internal::str(t.sizes()) : std::string("an undefined tensor"));
  return t.item<double>();
}

// A number from a state dict (a file) for the field `ref` is checked before it is used, so that a
// damaged checkpoint is an error and not undefined behaviour (an Adam step of 1e300 or INT64_MAX
// overflowed its conversion and `step += 1`) or a run of NaNs: floating fields must be finite,
// flags 0 or 1, integer fields whole numbers up to 2^53 in magnitude (counters: from 0), which a
// double holds exactly.
// (Only the type of the field `ref` points to is used.)
template <class FieldRef>
void check_number(const Tensor& t, const std::string& key, const std::string& who, const FieldRef& ref, bool counter) {
  const double v = scalar_of(t, key, who);
  constexpr double kMax = 9007199254740992.0;  // 2^53
  std::visit(overloaded{[&](double*) {
                          NABLA_CHECK(ValueError, std::isfinite(v), who, ".load_state_dict: '", key,
                                      "' must be a finite number, got ", v);
                        },
                        [&](bool*) {
                          NABLA_CHECK(ValueError, v == 0 || v == 1, who, ".load_state_dict: '", key,
                                      "' must be 0 or 1 (a flag), got ", v);
                        },
                        [&](int64_t*) {
                          const double lo = counter ? 0 : -kMax;
                          NABLA_CHECK(ValueError, v >= lo && v <= kMax && v == std::floor(v), who,
                                      ".load_state_dict: '", key, "' must be a whole number from ",
                                      counter ? "0" : "-2^53", " to 2^53, got ", v);
                        },
                        [](Tensor*) {}},
             ref);
}

}  // namespace

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  {
    autograd::AutoGradMode enable(true);
    loss = closure();
  }
  step();
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Group& g : groups_)
    for (Tensor& p : g.params) p.zero_grad(set_to_none);
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  NABLA_CHECK(IndexError, group < groups_.size(), name_, ": no parameter group ", group, " (it has ", groups_.size(),
              ")");
  return groups_[group].params;
}

std::vector<Tensor> Optimizer::all_params() const {
  std::vector<Tensor> out;
  for (const Group& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::add_group_params(std::vector<Tensor> params) {
  NABLA_CHECK(ValueError, !params.empty(), name_, ": got an empty parameter list");
  std::unordered_set<const TensorImpl*> seen;
  for (const Group& g : groups_)
    for (const Tensor& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    NABLA_CHECK(ValueError, p.defined(), name_, ": parameter ", i, " of the new group is undefined");
    NABLA_CHECK(ValueError, p.is_leaf(), name_, ": can't optimize a non-leaf tensor (parameter ", i,
                " was computed by an op; pass the leaf, or detach() it and set requires_grad)");
    NABLA_CHECK(DTypeError, p.is_floating_point(), name_, ": parameter ", i, " must be floating, got ", p.dtype());
    NABLA_CHECK(ValueError, seen.insert(p.impl()).second, name_, ": parameter ", i,
                " appears more than once (in this group or in another one)");
  }
  groups_.push_back(Group{std::move(params), std::nullopt});
}

bool Optimizer::has_option(std::string_view option) const {
  bool found = false;
  if (groups_.empty()) return false;
  visit_options(0, [&](const char* n, FieldRef) { found = found || option == n; });
  return found;
}

double Optimizer::get_option(size_t group, std::string_view option) const {
  NABLA_CHECK(IndexError, group < groups_.size(), name_, ": no parameter group ", group);
  std::optional<double> v;
  visit_options(group, [&](const char* n, FieldRef ref) {
    if (option != n) return;
    std::visit(overloaded{[&](double* d) { v = *d; }, [&](bool* b) { v = *b ? 1.0 : 0.0; },
                          [&](int64_t* i) { v = static_cast<double>(*i); }, [](Tensor*) {}},
               ref);
  });
  if (!v) [[unlikely]] {
    std::string names;
    visit_options(group, [&](const char* n, FieldRef) { names += (names.empty() ? "" : ", ") + std::string(n); });
    throw ValueError(internal::str(name_, ": unknown option '", option, "' (it has: ", names, ")"));
  }
  return *v;
}

void Optimizer::set_option(size_t group, std::string_view option, double value) {
  double old = get_option(group, option);  // checks the group and the name
  auto assign = [&](double x) {
    visit_options(group, [&](const char* n, FieldRef ref) {
      if (option != n) return;
      std::visit(overloaded{[&](double* d) { *d = x; }, [&](bool* b) { *b = x != 0; },
                            [&](int64_t* i) { *i = static_cast<int64_t>(x); }, [](Tensor*) {}},
                 ref);
    });
  };
  assign(value);
  try {
    validate_group(group);
  } catch (...) {
    assign(old);
    throw;
  }
}

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

std::optional<double> Optimizer::initial_lr(size_t group) const {
  NABLA_CHECK(IndexError, group < groups_.size(), name_, ": no parameter group ", group);
  return groups_[group].initial_lr;
}

void Optimizer::set_initial_lr(size_t group, double lr) {
  NABLA_CHECK(IndexError, group < groups_.size(), name_, ": no parameter group ", group);
  groups_[group].initial_lr = lr;
}

// ---- state dict -----------------------------------------------------------------------------------

StateDict Optimizer::state_dict() const {
  StateDict sd;
  auto f64 = [](double v) { return scalar_tensor(v, dtype(kFloat64)); };
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::vector<int64_t> ids;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) ids.push_back(index++);
    sd.insert(prefix + "params", tensor(ids, dtype(kInt64)));
    visit_options(g, [&](const char* n, FieldRef ref) {
      std::visit(
          overloaded{[&](double* d) { sd.insert(prefix + n, f64(*d)); },
                     [&](bool* b) { sd.insert(prefix + n, f64(*b ? 1.0 : 0.0)); },
                     [&](int64_t* i) { sd.insert(prefix + n, scalar_tensor(*i, dtype(kInt64))); }, [](Tensor*) {}},
          ref);
    });
    if (groups_[g].initial_lr) sd.insert(prefix + "initial_lr", f64(*groups_[g].initial_lr));
  }
  index = 0;
  for (const Group& grp : groups_)
    for (const Tensor& p : grp.params) {
      std::string prefix = "state." + std::to_string(index++) + ".";
      visit_state(p, false, [&](const char* n, FieldRef ref) {
        std::visit(overloaded{[&](double* d) { sd.insert(prefix + n, f64(*d)); },
                              [&](bool* b) { sd.insert(prefix + n, f64(*b ? 1.0 : 0.0)); },
                              [&](int64_t* i) { sd.insert(prefix + n, scalar_tensor(*i, dtype(kInt64))); },
                              [&](Tensor* t) {
                                if (t->defined()) sd.insert(prefix + n, t->detach());
                              }},
                   ref);
      });
    }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  const std::string who = name_;
  std::set<std::string> consumed;
  auto get = [&](const std::string& key) -> const Tensor& {
    const Tensor* t = sd.find(key);
    NABLA_CHECK(ValueError, t != nullptr, who, ".load_state_dict: missing key '", key, "'");
    consumed.insert(key);
    return *t;
  };

  // ---- validate everything first, so a bad state dict leaves the optimizer as it was ----
  size_t n_groups = 0;
  while (sd.contains("param_groups." + std::to_string(n_groups) + ".params")) ++n_groups;
  NABLA_CHECK(ValueError, n_groups == groups_.size(), who, ".load_state_dict: the state dict has ", n_groups,
              " parameter groups but the optimizer has ", groups_.size());
  std::vector<const Tensor*> params;  // by global index
  for (size_t g = 0; g < n_groups; ++g) {
    std::string prefix = "param_groups." + std::to_string(g) + ".";
    const Tensor& ids = get(prefix + "params");
    NABLA_CHECK(ValueError, ids.dim() == 1 && ids.size(0) == static_cast<int64_t>(groups_[g].params.size()), who,
                ".load_state_dict: parameter group ", g, " has ", ids.numel(), " parameters in the state dict but ",
                groups_[g].params.size(), " in the optimizer");
    visit_options(g, [&](const char* n, FieldRef ref) { check_number(get(prefix + n), prefix + n, who, ref, false); });
    if (sd.contains(prefix + "initial_lr")) {
      double lr = scalar_of(get(prefix + "initial_lr"), prefix + "initial_lr", who);
      NABLA_CHECK(ValueError, std::isfinite(lr) && lr >= 0, who, ".load_state_dict: '", prefix,
                  "initial_lr' must be a finite learning rate >= 0, got ", lr);
    }
    for (const Tensor& p : groups_[g].params) params.push_back(&p);
  }
  // state.<i>.<field>
  std::map<int64_t, std::map<std::string, const Tensor*>> state;
  for (const auto& [key, t] : sd) {
    if (!starts_with(key, "state.")) continue;
    size_t dot = key.find('.', 6);
    if (dot == std::string::npos) continue;  // reported as unexpected below
    std::string idx = key.substr(6, dot - 6);
    bool numeric = !idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos && idx.size() < 12;
    if (!numeric) continue;
    int64_t i = std::stoll(idx);
    if (i >= static_cast<int64_t>(params.size())) continue;
    state[i][key.substr(dot + 1)] = &t;
  }
  std::map<std::string, FieldRef> kinds;  // field name -> its type (the pointers, into a temporary, are not used)
  visit_default_state([&](const char* n, FieldRef ref) { kinds.emplace(n, ref); });
  for (const auto& [i, fields] : state)
    for (const auto& [field, t] : fields) {
      std::string key = "state." + std::to_string(i) + "." + field;
      auto k = kinds.find(field);
      if (k == kinds.end()) continue;  // unexpected
      consumed.insert(key);
      if (!std::holds_alternative<Tensor*>(k->second)) {
        check_number(*t, key, who, k->second, true);
      } else {
        const Tensor& p = *params[static_cast<size_t>(i)];
        NABLA_CHECK(ShapeError, t->defined() && (t->sizes() == p.sizes()), who, ".load_state_dict: '", key,
                    "' has shape ", t->defined() ? internal::str(t->sizes()) : std::string("(undefined)"),
                    " but parameter ", i, " has shape ", p.sizes());
      }
    }
  std::vector<std::string> unexpected;
  for (const auto& [key, t] : sd)
    if (!consumed.count(key)) unexpected.push_back(key);
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 10; ++i) list += (i ? ", '" : "'") + unexpected[i] + "'";
    if (unexpected.size() > 10) list += ", ...";
    throw ValueError(internal::str(who, ".load_state_dict: unexpected key(s): ", list));
  }

  // ---- apply ----
  for (size_t g = 0; g < n_groups; ++g) {
    std::string prefix = "param_groups." + std::to_string(g) + ".";
    visit_options(g, [&](const char* n, FieldRef ref) {
      double v = sd[prefix + n].item<double>();
      std::visit(overloaded{[&](double* d) { *d = v; }, [&](bool* b) { *b = v != 0; },
                            [&](int64_t* x) { *x = static_cast<int64_t>(v); }, [](Tensor*) {}},
                 ref);
    });
    groups_[g].initial_lr.reset();
    if (const Tensor* t = sd.find(prefix + "initial_lr")) groups_[g].initial_lr = t->item<double>();
    validate_group(g);
  }
  clear_state();
  autograd::NoGradGuard ng;
  for (const auto& entry : state) {  // (not a structured binding: the lambda captures it, clang < 16 cannot)
    const auto& fields = entry.second;
    const Tensor& p = *params[static_cast<size_t>(entry.first)];
    visit_state(p, true, [&](const char* n, FieldRef ref) {
      auto it = fields.find(n);
      if (it == fields.end()) return;
      const Tensor& src = *it->second;
      std::visit(overloaded{[&](double* d) { *d = src.item<double>(); }, [&](bool* b) { *b = src.item<double>() != 0; },
                            [&](int64_t* x) { *x = src.item<int64_t>(); },
                            [&](Tensor* t) {
                              // A private copy on the parameter's device, floating state in its dtype.
                              DType dt = src.is_floating_point() ? p.dtype() : src.dtype();
                              *t = src.detach().to(p.device(), dt).clone();
                            }},
                 ref);
    });
  }
}

}  // namespace nabla::optim
