// The differential suite: nabla against PyTorch itself (Debian's python3-torch), on the same inputs.
//
// Every op-registry entry with a `torch` twin (opinfo.h) runs here on each of its samples, in
// float64 and float32: nabla's outputs, and the gradients of sum_k <y_k, v_k> for random
// cotangents v_k, go to a safetensors file with a JSON list of the cases; one run of
// tests/ops/torch_diff.py evaluates each twin in PyTorch and compares values, dtypes,
// shapes, NaN/inf positions, gradients, and which side raised. Besides the registry's samples:
//   - entries marked `sweep_dtypes` also run on every dtype (every dtype pair for two inputs),
//     with NaN, +-inf and +-0 among the float values;
//   - every entry whose first output is differentiable runs "in place on the output":
//     y = op(x); y.mul_(2); backward. Both sides must raise (the op saved y) or agree;
//   - every entry runs its first sample under autocast(kCPU, kBFloat16) against the twin under
//     torch.autocast("cpu", dtype=torch.bfloat16), on float32 inputs and on bfloat16 ones: the
//     outputs' dtypes and shapes must agree (values against float32: tests/ops/test_autocast_ops.cpp),
//     or both raise. PyTorch 1.13's CPU lists are shorter than 2.x's, which nabla follows: the
//     differences are KNOWN entries.
// Tolerances: float64 1e-7 (relative and absolute), float32 the larger of 1e-4 and the entry's
// f32_tol; integers and bools exactly. Deliberate differences are listed (with their reasons) in
// torch_diff.py's KNOWN, and in the README's "Differences from PyTorch".
//
// Without python3-torch the suite skips, unless NABLA_REQUIRE_TORCH=1 (scripts/test.sh sets it),
// where that is a failure. NABLA_DIFF_FILTER=regex limits the run to matching op names.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "io/safetensors.h"
#include "nn/serialize.h"
#include "opinfo.h"
#include "optim/optim.h"
#include "tests/common/python_torch.h"

namespace nabla::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kPython = "/usr/bin/python3";

// Collects the cases and the tensors they refer to.
struct Cases {
  nn::StateDict tensors;
  json list = json::array();
  std::map<std::string, std::string> op_of;  // case id -> op name
  size_t next_id = 0;  // ids are never reused, also for cases dropped after their inputs were stored

  std::string put(const std::string& name, const Tensor& t) {
    autograd::NoGradGuard ng;
    tensors.insert(name, t.detach().contiguous().clone());
    return name;
  }
};

// Cotangents in [-1, 1], the same for every run of the suite.
Tensor cotangent(const Tensor& y, uint64_t seed) {
  autograd::NoGradGuard ng;
  manual_seed(seed);
  return (rand(y.sizes(), kFloat64) * 2 - 1).to(y.dtype());
}

std::string error_text(const std::exception& e) { return e.what(); }

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(const OpInfo& op, DType dt) {
  if (dt == kFloat32) {
    double t = std::max(1e-4, op.f32_tol);
    return {t, t};
  }
  return {1e-7, 1e-7};
}

// Runs one case in nabla and records it: inputs, outputs, cotangents and gradients (or errors).
void add_case(Cases& c, const OpInfo& op, const std::string& sample, const Inputs& in, DType dt, const char* mode,
              uint64_t seed) {
  std::string id = std::to_string(c.next_id++);
  json cs = {{"id", id},
             {"op", op.name},
             {"sample", sample},
             {"dtype", std::string(dtype_name(dt))},
             {"mode", mode},
             {"twin", op.torch},
             {"error", nullptr},
             {"grad_error", nullptr},
             {"outputs", json::array()},
             {"cotangents", json::object()},
             {"grads", json::object()}};
  Tolerance tol = tolerance(op, dt);
  cs["rtol"] = tol.rtol;
  cs["atol"] = tol.atol;
  json inputs = json::array();
  std::vector<Tensor> grad_inputs;
  std::vector<size_t> grad_index;
  for (size_t i = 0; i < in.size(); ++i) {
    inputs.push_back({{"name", c.put(id + "/x" + std::to_string(i), in[i])}, {"grad", in[i].requires_grad()}});
    if (in[i].requires_grad()) {
      grad_inputs.push_back(in[i]);
      grad_index.push_back(i);
    }
  }
  cs["inputs"] = inputs;
  const bool inplace = std::string(mode) == "inplace_output";
  const bool under_autocast = std::string(mode) == "autocast";

  Outputs out;
  try {
    std::optional<AutocastGuard> guard;
    if (under_autocast) guard.emplace(autocast(kCPU, kBFloat16));
    out = op.fn(in);
  } catch (const std::exception& e) { cs["error"] = error_text(e); }
  if (!cs["error"].is_null()) {
    if (inplace) return;  // only cases whose forward works are checked in place
    c.op_of[id] = op.name;
    c.list.push_back(cs);
    return;
  }

  std::vector<Tensor> ys, vs;
  if (inplace) {
    if (out.empty() || !out[0].defined() || !is_floating(out[0].dtype()) || !out[0].requires_grad()) return;
    Tensor v = cotangent(out[0], seed);
    cs["cotangents"]["0"] = c.put(id + "/v0", v);
    try {
      out[0].mul_(2);
      ys = {out[0]};
      vs = {v};
    } catch (const std::exception& e) { cs["grad_error"] = error_text(e); }
  } else {
    for (size_t k = 0; k < out.size(); ++k) {
      const Tensor& y = out[k];
      cs["outputs"].push_back(y.defined() ? json(c.put(id + "/y" + std::to_string(k), y)) : json(nullptr));
      if (y.defined() && is_floating(y.dtype()) && y.requires_grad()) {
        Tensor v = cotangent(y, seed * 31 + k);
        cs["cotangents"][std::to_string(k)] = c.put(id + "/v" + std::to_string(k), v);
        ys.push_back(y);
        vs.push_back(v);
      }
    }
  }
  if (!grad_inputs.empty() && cs["grad_error"].is_null() && !under_autocast) {
    try {
      std::vector<Tensor> gs;
      if (!ys.empty()) gs = autograd::grad(ys, grad_inputs, vs, std::nullopt, false, /*allow_unused=*/true);
      for (size_t j = 0; j < grad_inputs.size(); ++j) {
        Tensor g = j < gs.size() && gs[j].defined() ? gs[j] : zeros_like(grad_inputs[j]);
        cs["grads"][std::to_string(grad_index[j])] = c.put(id + "/g" + std::to_string(grad_index[j]), g);
      }
    } catch (const std::exception& e) { cs["grad_error"] = error_text(e); }
  }
  if (inplace && grad_inputs.empty()) return;
  c.op_of[id] = op.name;
  c.list.push_back(cs);
}

// ---- the dtype sweep ------------------------------------------------------------------------------
const std::vector<DType> kSweepDtypes = {kBool, kUInt8, kInt32, kInt64, kFloat32, kFloat64};

// Values of each dtype; `rhs` leaves out zero for integers (integer division by zero raises, and
// would hide every other element of the case).
Tensor sweep_values(DType dt, bool rhs) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<double> v;
  if (dt == kBool) v = {0, 1};
  else if (dt == kUInt8) v = rhs ? std::vector<double>{1, 2, 3, 7, 200} : std::vector<double>{0, 1, 2, 3, 7, 200};
  else if (is_floating(dt)) v = {nan, inf, -inf, -0.0, 0.0, 0.5, -1.5, 1.0, 3.0, -3.0};
  else v = rhs ? std::vector<double>{-3, -1, 1, 2, 7} : std::vector<double>{-3, -1, 0, 1, 2, 7};
  return tensor(v, {static_cast<int64_t>(v.size())}, kFloat64).to(dt);
}

Tensor sweep_input(DType dt, bool rhs, Shape shape) {
  Tensor t = sweep_values(dt, rhs).reshape(shape);
  if (is_floating(dt)) t = t.detach().requires_grad_(true);
  return t;
}

void add_sweep_cases(Cases& c, const OpInfo& op, size_t arity, uint64_t& seed) {
  if (arity == 1) {
    for (DType dt : kSweepDtypes)
      add_case(c, op, std::string("sweep:") + dtype_name(dt), {sweep_input(dt, false, {-1})}, dt, "forward", ++seed);
    return;
  }
  for (DType da : kSweepDtypes)
    for (DType db : kSweepDtypes) {
      // Every pair of values: a (n, 1) against b (1, m).
      Inputs in = {sweep_input(da, false, {-1, 1}), sweep_input(db, true, {1, -1})};
      DType wider = is_floating(da) ? da : db;
      add_case(c, op, std::string("sweep:") + dtype_name(da) + "," + dtype_name(db), in, wider, "forward", ++seed);
    }
}

// ---- optimizers ----------------------------------------------------------------------------------
// Each optimizer takes kOptSteps steps from the same parameters with the same gradients on both
// sides; the parameters after every step must agree. `torch` builds the optimizer over `params`.
struct OptimizerCase {
  std::string name, torch;
  std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make;
};
constexpr int kOptSteps = 6;

template <class O, class Opt>
std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make_opt(Opt o) {
  return [o](std::vector<Tensor> p) { return std::make_unique<O>(std::move(p), o); };
}

std::vector<OptimizerCase> optimizer_cases() {
  using namespace optim;
  return {
      {"SGD", "torch.optim.SGD(params, lr=0.1)", make_opt<SGD>(SGDOptions{.lr = 0.1})},
      {"SGD_momentum_nesterov_wd", "torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)",
       make_opt<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true})},
      {"SGD_dampening_maximize", "torch.optim.SGD(params, lr=0.05, momentum=0.8, dampening=0.3, maximize=True)",
       make_opt<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.8, .dampening = 0.3, .maximize = true})},
      {"Adam", "torch.optim.Adam(params, lr=0.01)", make_opt<Adam>(AdamOptions{.lr = 0.01})},
      {"Adam_amsgrad_wd",
       "torch.optim.Adam(params, lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1, amsgrad=True)",
       make_opt<Adam>(AdamOptions{.lr = 0.02, .betas = {0.8, 0.9}, .eps = 1e-6, .weight_decay = 0.1, .amsgrad = true})},
      {"AdamW", "torch.optim.AdamW(params, lr=0.01, weight_decay=0.3)",
       make_opt<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.3})},
      {"AdamW_amsgrad_maximize", "torch.optim.AdamW(params, lr=0.01, amsgrad=True, maximize=True)",
       make_opt<AdamW>(AdamWOptions{.lr = 0.01, .amsgrad = true, .maximize = true})},
      {"RMSprop", "torch.optim.RMSprop(params, lr=0.01)", make_opt<RMSprop>(RMSpropOptions{.lr = 0.01})},
      {"RMSprop_centered_momentum_wd",
       "torch.optim.RMSprop(params, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1)",
       make_opt<RMSprop>(
           RMSpropOptions{.lr = 0.01, .alpha = 0.9, .weight_decay = 0.1, .momentum = 0.5, .centered = true})},
      {"Adagrad", "torch.optim.Adagrad(params, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.2)",
       make_opt<Adagrad>(
           AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1, .initial_accumulator_value = 0.2})},
      {"Adadelta", "torch.optim.Adadelta(params, lr=0.9, rho=0.8, weight_decay=0.1)",
       make_opt<Adadelta>(AdadeltaOptions{.lr = 0.9, .rho = 0.8, .weight_decay = 0.1})},
      {"Adamax", "torch.optim.Adamax(params, lr=0.01, weight_decay=0.1)",
       make_opt<Adamax>(AdamaxOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"NAdam", "torch.optim.NAdam(params, lr=0.01, weight_decay=0.1)",
       make_opt<NAdam>(NAdamOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"RAdam", "torch.optim.RAdam(params, lr=0.01, weight_decay=0.1)",
       make_opt<RAdam>(RAdamOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"Rprop", "torch.optim.Rprop(params, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 0.05))",
       make_opt<Rprop>(RpropOptions{.lr = 0.01, .etas = {0.4, 1.3}, .step_sizes = {1e-4, 0.05}})},
      {"Rprop_maximize", "torch.optim.Rprop(params, lr=0.02, maximize=True)",
       make_opt<Rprop>(RpropOptions{.lr = 0.02, .maximize = true})},
      {"ASGD", "torch.optim.ASGD(params, lr=0.01, lambd=0.01, alpha=0.5, t0=1, weight_decay=0.1)",
       make_opt<ASGD>(ASGDOptions{.lr = 0.01, .lambd = 0.01, .alpha = 0.5, .t0 = 1, .weight_decay = 0.1})},
  };
}

void add_optimizer_case(Cases& c, const OptimizerCase& oc, DType dt, uint64_t seed) {
  std::string id = std::to_string(c.next_id++);
  Tolerance tol = dt == kFloat32 ? Tolerance{1e-4, 1e-4} : Tolerance{1e-7, 1e-7};
  json cs = {{"id", id},
             {"op", "optim." + oc.name},
             {"sample", "steps"},
             {"dtype", std::string(dtype_name(dt))},
             {"mode", "optimizer"},
             {"twin", oc.torch},
             {"error", nullptr},
             {"grad_error", nullptr},
             {"rtol", tol.rtol},
             {"atol", tol.atol},
             {"inputs", json::array()},
             {"grads", json::array()},
             {"outputs", json::array()},
             {"cotangents", json::object()}};
  manual_seed(seed);
  std::vector<Tensor> params = {(rand({3, 4}, kFloat64) * 2 - 1).to(dt), (rand({4}, kFloat64) * 2 - 1).to(dt)};
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].requires_grad_(true);
    cs["inputs"].push_back({{"name", c.put(id + "/x" + std::to_string(i), params[i])}, {"grad", true}});
  }
  try {
    std::unique_ptr<optim::Optimizer> opt = oc.make(params);
    for (int step = 0; step < kOptSteps; ++step) {
      json grads = json::array(), after = json::array();
      for (size_t i = 0; i < params.size(); ++i) {
        Tensor g = (rand(params[i].sizes(), kFloat64) * 2 - 1).to(dt);
        params[i].set_grad(g);
        grads.push_back(c.put(id + "/g" + std::to_string(step) + "_" + std::to_string(i), g));
      }
      opt->step();
      for (size_t i = 0; i < params.size(); ++i)
        after.push_back(c.put(id + "/y" + std::to_string(step) + "_" + std::to_string(i), params[i]));
      cs["grads"].push_back(grads);
      cs["outputs"].push_back(after);
    }
  } catch (const std::exception& e) { cs["error"] = error_text(e); }
  c.op_of[id] = oc.name;
  c.list.push_back(cs);
}

// Runs the whole suite; fills `report` with one line per failure and returns the counts.
struct Summary {
  size_t ops = 0, cases = 0, passed = 0, known = 0, failed = 0;
  std::vector<std::string> failures, known_lines;
};

Summary run_suite(const std::string& filter) {
  Cases c;
  std::regex re(filter.empty() ? ".*" : filter);
  Summary s;
  uint64_t seed = 1000;
  for (const OpInfo& op : registry()) {
    if (op.torch.empty() || !std::regex_search(op.name, re)) continue;
    ++s.ops;
    for (size_t i = 0; i < op.samples.size(); ++i) {
      std::vector<DType> dts = {kFloat64};
      if (op.supports_float32) dts.push_back(kFloat32);
      for (DType dt : dts) {
        Inputs in = make_inputs(op.samples[i], dt, kCPU, true, i + 1);
        add_case(c, op, op.samples[i].desc, in, dt, "forward", ++seed);
      }
      Inputs in = make_inputs(op.samples[i], kFloat64, kCPU, true, i + 1);
      add_case(c, op, op.samples[i].desc, in, kFloat64, "inplace_output", ++seed);
    }
    if (op.supports_float32 && !op.samples.empty())
      for (DType dt : {kFloat32, kBFloat16}) {
        manual_seed(seed);
        Inputs in = make_inputs(op.samples[0], dt, kCPU, false, 1);
        add_case(c, op, op.samples[0].desc, in, dt, "autocast", ++seed);
      }
    if (op.sweep_dtypes) add_sweep_cases(c, op, op.samples.front().args.size(), seed);
  }
  for (const OptimizerCase& oc : optimizer_cases()) {
    if (!std::regex_search("optim." + oc.name, re)) continue;
    ++s.ops;
    for (DType dt : {kFloat64, kFloat32}) add_optimizer_case(c, oc, dt, ++seed);
  }
  fs::path dir = fs::temp_directory_path() / ("nabla-differential-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string cases_path = (dir / "cases.json").string(), tensors_path = (dir / "tensors.safetensors").string(),
              results_path = (dir / "results.json").string();
  {
    std::ofstream f(cases_path);
    f << c.list.dump();
  }
  safetensors::save_file(c.tensors, tensors_path);
  std::string script = std::string(NABLA_TESTS_DIR) + "/ops/torch_diff.py";
  std::string cmd = std::string(kPython) + " " + script + " " + cases_path + " " + tensors_path + " " + results_path;
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    s.failures.push_back("torch_diff.py exited with status " + std::to_string(rc) + " (" + cmd + ")");
    return s;
  }
  json results = json::parse(std::ifstream(results_path));
  fs::remove_all(dir);
  std::map<std::string, json> by_id;
  for (const json& r : results["results"]) by_id[r["id"].get<std::string>()] = r;
  for (const json& cs : c.list) {
    ++s.cases;
    std::string id = cs["id"];
    std::string where = cs["op"].get<std::string>() + " [" + cs["sample"].get<std::string>() + ", " +
                        cs["dtype"].get<std::string>() + ", " + cs["mode"].get<std::string>() + "]";
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      ++s.failed;
      s.failures.push_back(where + ": no verdict from torch_diff.py");
    } else if (!it->second["known"].is_null()) {
      ++s.known;
      s.known_lines.push_back(where + ": " + it->second["known"].get<std::string>());
    } else if (it->second["ok"].get<bool>()) {
      ++s.passed;
    } else {
      ++s.failed;
      s.failures.push_back(where + ": " + it->second["msg"].get<std::string>() +
                           "\n    twin: " + cs["twin"].get<std::string>());
    }
  }
  return s;
}

TEST(Differential, EveryRegistryEntryHasAPytorchTwinOrAReason) {
  std::string missing, both;
  for (const OpInfo& op : registry()) {
    if (op.torch.empty() && op.no_torch.empty()) missing += " " + op.name;
    if (!op.torch.empty() && !op.no_torch.empty()) both += " " + op.name;
  }
  EXPECT_TRUE(missing.empty()) << "registry entries with neither a `torch` twin nor a `no_torch` reason:" << missing;
  EXPECT_TRUE(both.empty()) << "registry entries with both a twin and a reason for having none:" << both;
}

TEST(Differential, RegistryMatchesPytorch) {
  NABLA_NEEDS_PYTHON_MODULES("torch, numpy");
  const char* f = std::getenv("NABLA_DIFF_FILTER");
  Summary s = run_suite(f ? f : "");
  std::printf(
      "differential suite: %zu ops and optimizers with a PyTorch twin, %zu cases: %zu agree, %zu known differences, "
      "%zu differ\n",
      s.ops, s.cases, s.passed, s.known, s.failed);
  for (const std::string& k : s.known_lines) std::printf("  known: %s\n", k.c_str());
  std::string all;
  for (const std::string& line : s.failures) all += "\n  " + line;
  EXPECT_TRUE(s.failures.empty()) << s.failures.size() << " cases differ from PyTorch:" << all;
  EXPECT_GT(s.cases, 0u);
}

}  // namespace
}  // namespace nabla::testing
