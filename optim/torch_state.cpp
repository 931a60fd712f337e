// Optimizer state in PyTorch's layout (optim/optimizer.h: load_state_dict(torch_io::Value) and
// torch_state_dict()), so a run started in Python resumes in nabla and the other way round.
//
// PyTorch:  {'state': {0: {'step': tensor(5.), 'exp_avg': ..., 'exp_avg_sq': ...}, 1: {...}},
//            'param_groups': [{'lr': 0.001, 'betas': (0.9, 0.999), 'eps': 1e-08, 'weight_decay': 0,
//                              'amsgrad': False, 'maximize': False, 'foreach': None, ..., 'params': [0, 1]}]}
// nabla:    the flat state dict of Optimizer::state_dict() (param_groups.0.lr, param_groups.0.beta1,
//           state.0.exp_avg, ...), which load_state_dict(StateDict) validates and applies.
// State is keyed by parameter id; PyTorch maps the ids listed by the saved groups, in order, to the
// current parameters in order, and so does this. Options are matched by name (betas split into
// beta1 and beta2); PyTorch's implementation switches (foreach, capturable, differentiable, fused)
// are ignored, and any other option nabla lacks is an error unless it is off (False, None or 0).
#include <map>

#include "core/ops.h"
#include "io/torch_file.h"
#include "optim/optimizer.h"

namespace nabla::optim {

namespace {

bool implementation_switch(const std::string& k) {
  return k == "foreach" || k == "capturable" || k == "differentiable" || k == "fused";
}

bool is_off(const torch_io::Value& v) { return v.is_none() || (v.is_number() && v.to_double() == 0); }

Tensor scalar(const torch_io::Value& v) {
  if (v.kind() == torch_io::Kind::integer) return scalar_tensor(v.to_int(), dtype(kInt64));
  return scalar_tensor(v.to_double(), dtype(kFloat64));
}

}  // namespace

void Optimizer::load_state_dict(const torch_io::Value& pt) {
  using torch_io::Kind;
  const std::string who = name_ + ".load_state_dict";
  NABLA_CHECK(ValueError, pt.is_dict() && pt.contains("state") && pt.contains("param_groups"), who,
              ": expected PyTorch's optimizer.state_dict() (a dict with 'state' and 'param_groups'), got a ",
              torch_io::kind_name(pt.kind()), pt.is_dict() ? " without them" : "");
  const torch_io::Value& groups = pt["param_groups"];
  NABLA_CHECK(ValueError, groups.is_list() || groups.is_tuple(), who, ": 'param_groups' is a ",
              torch_io::kind_name(groups.kind()), ", not a list");
  NABLA_CHECK(ValueError, groups.size() == groups_.size(), who, ": the state dict has ", groups.size(),
              " parameter groups but the optimizer has ", groups_.size());
  StateDict sd;
  std::map<int64_t, int64_t> position;  // saved parameter id -> global index here
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const torch_io::Value& grp = groups[g];
    NABLA_CHECK(ValueError, grp.is_dict() && grp.contains("params"), who, ": parameter group ", g,
                " is not a dict with 'params'");
    const torch_io::Value& ids = grp["params"];
    NABLA_CHECK(ValueError, (ids.is_list() || ids.is_tuple()) && ids.size() == groups_[g].params.size(), who,
                ": parameter group ", g, " lists ", ids.is_list() || ids.is_tuple() ? ids.size() : 0,
                " parameters in the state dict but has ", groups_[g].params.size(), " in the optimizer");
    std::vector<int64_t> global;
    for (const torch_io::Value& id : ids.items()) {
      NABLA_CHECK(ValueError, id.kind() == Kind::integer, who, ": parameter ids must be ints, got ", id.repr());
      NABLA_CHECK(ValueError, position.emplace(id.to_int(), index).second, who, ": parameter id ", id.to_int(),
                  " is listed twice");
      global.push_back(index++);
    }
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    sd.insert(prefix + "params", tensor(global, dtype(kInt64)));
    std::map<std::string, Tensor> options;
    for (const auto& [key, v] : grp.entries()) {
      NABLA_CHECK(ValueError, key.is_string(), who, ": parameter group ", g, " has the key ", key.repr());
      const std::string& k = key.to_string();
      if (k == "params") continue;
      if (k == "betas" && has_option("beta1")) {
        NABLA_CHECK(ValueError, (v.is_tuple() || v.is_list()) && v.size() == 2 && v[0].is_number() && v[1].is_number(),
                    who, ": 'betas' of group ", g, " must be two numbers, got ", v.repr());
        options["beta1"] = scalar(v[0]);
        options["beta2"] = scalar(v[1]);
      } else if (k == "initial_lr" || has_option(k)) {
        NABLA_CHECK(ValueError, v.is_number(), who, ": option '", k, "' of group ", g, " is ", v.repr(),
                    ", not a number");
        options[k] = scalar(v);
      } else {
        NABLA_CHECK(ValueError, implementation_switch(k) || is_off(v), who, ": PyTorch option '", k, "' = ", v.repr(),
                    " of group ", g, " has no equivalent in nabla's ", name_);
      }
    }
    // Options an older PyTorch did not save keep their current values.
    visit_options(g, [&](const char* n, FieldRef) {
      if (!options.count(n)) options[n] = scalar_tensor(get_option(g, n), dtype(kFloat64));
    });
    for (auto& [k, t] : options) sd.insert(prefix + k, t);
  }
  const torch_io::Value& state = pt["state"];
  NABLA_CHECK(ValueError, state.is_dict(), who, ": 'state' is a ", torch_io::kind_name(state.kind()), ", not a dict");
  for (const auto& [id, fields] : state.entries()) {
    NABLA_CHECK(ValueError, id.kind() == Kind::integer && position.count(id.to_int()), who, ": state for parameter ",
                id.repr(), ", which no parameter group lists");
    NABLA_CHECK(ValueError, fields.is_dict(), who, ": the state of parameter ", id.to_int(), " is not a dict");
    const std::string prefix = "state." + std::to_string(position[id.to_int()]) + ".";
    for (const auto& [name, v] : fields.entries()) {
      NABLA_CHECK(ValueError, name.is_string(), who, ": state field ", name.repr(), " of parameter ", id.to_int());
      if (v.is_none()) continue;  // e.g. SGD's momentum_buffer before its first step
      NABLA_CHECK(ValueError, v.is_tensor() || v.is_number(), who, ": state '", name.to_string(), "' of parameter ",
                  id.to_int(), " is ", v.repr());
      sd.insert(prefix + name.to_string(), v.is_tensor() ? v.to_tensor() : scalar(v));
    }
  }
  load_state_dict(sd);
}

torch_io::Value Optimizer::torch_state_dict() const {
  using torch_io::Value;
  Value groups = Value::list();
  Value state = Value::dict();
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    Value grp = Value::dict();
    double beta1 = 0;
    visit_options(g, [&](const char* n, FieldRef ref) {
      const std::string k = n;
      if (double* const* d = std::get_if<double*>(&ref)) {
        if (k == "beta1") beta1 = **d;
        else if (k == "beta2") grp.set("betas", Value::tuple({beta1, **d}));
        else grp.set(k, **d);
      } else if (bool* const* b = std::get_if<bool*>(&ref)) {
        grp.set(k, **b);
      } else if (int64_t* const* i = std::get_if<int64_t*>(&ref)) {
        grp.set(k, **i);
      }
    });
    if (groups_[g].initial_lr) grp.set("initial_lr", *groups_[g].initial_lr);
    Value ids = Value::list();
    for (const Tensor& p : groups_[g].params) {
      const int64_t id = index++;
      ids.append(id);
      Value fields = Value::dict();
      visit_state(p, false, [&](const char* n, FieldRef ref) {
        if (double* const* d = std::get_if<double*>(&ref)) fields.set(n, **d);
        else if (bool* const* b = std::get_if<bool*>(&ref)) fields.set(n, **b);
        // PyTorch (1.12 and later) keeps step counts as float32 tensors.
        else if (int64_t* const* i = std::get_if<int64_t*>(&ref))
          fields.set(n, scalar_tensor(static_cast<double>(**i), dtype(kFloat32)));
        else if (Tensor* const* t = std::get_if<Tensor*>(&ref); t && (*t)->defined()) fields.set(n, (*t)->detach());
      });
      if (fields.size()) state.set(id, fields);
    }
    grp.set("params", ids);
    groups.append(grp);
  }
  return Value::dict({{"state", state}, {"param_groups", groups}});
}

}  // namespace nabla::optim
