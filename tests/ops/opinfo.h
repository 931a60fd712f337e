// The op registry (PyTorch's OpInfo, in C++). Every op registers how to call it and sample inputs;
// the generic suites in test_opinfo.cpp then run, for every op and sample:
//   gradcheck      float64 finite differences vs autograd        (ctest -R gradcheck)
//   gradgradcheck  the same for second derivatives (twice-differentiable ops)
//   noncontiguous  forward on strided copies of the inputs equals forward on contiguous ones
//   float32        float32 results agree with float64 ones
//   reference      for ops with a `ref`: the outputs equal the reference's
//   differential   for ops with a `torch` twin: outputs, dtypes and vector-Jacobian products equal
//                  PyTorch's on the same inputs (test_differential.cpp, tests/ops/)
// and a coverage test fails when a differentiable op has no samples, or an op has neither a
// PyTorch twin nor a reason for having none. gradgradcheck runs only on
// samples of at most kMaxGradGradElements input elements (its cost grows with the square of the
// size), and fails for an op none of whose samples is that small: give every twice-differentiable
// op at least one small sample that still exercises its options.
//
// Registering an op (in an opinfo_*.cpp file):
//   static Registrar reg({{
//     .name = "exp",
//     .torch = "torch.exp(x[0])",
//     .fn = [](const Inputs& x) { return Outputs{exp(x[0])}; },
//     .samples = unary_samples(-2, 2),
//   }});
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/op_schema.h"
#include "nabla.h"

namespace nabla::testing {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

// How to build one input: a shape, a value range, and a layout.
struct ArgSpec {
  Shape shape;
  double lo = -1, hi = 1;
  enum class Kind { uniform, integer_index, bool_mask, fixed, fixed_index, fixed_mask } kind = Kind::uniform;
  int64_t index_bound = 0;     // integer_index: values in [0, index_bound)
  bool transposed = false;     // build as the transpose of a contiguous tensor (last two dims)
  bool differentiable = true;  // whether gradcheck differentiates with respect to it
  std::vector<double> values;  // fixed: exact values (row-major), shape as given
};

struct Sample {
  std::vector<ArgSpec> args;
  std::string desc;
};

struct OpInfo {
  std::string name;
  // The ops (core/op_schema.h) this entry exercises; by default the op its name names ("exp",
  // "nn.kl_div" is kl_div, "linalg.inv" linalg_inv), none for a name that names no op (a module,
  // a variant such as "batch_norm_eval" that says which it is). Every differentiable op needs an
  // entry (OpRegistry.EveryDifferentiableOpHasGradcheckSamples).
  std::vector<OpId> ops;
  // The PyTorch twin: a Python expression computing the same outputs as `fn` from the inputs
  // `x[0]`, `x[1]`, ... (torch tensors; float inputs that gradcheck differentiates require grad),
  // giving a tensor or a (nested) tuple/list of them in fn's order. In scope: torch, F
  // (torch.nn.functional), nn (torch.nn) and T (tests/ops/twins.py, for twins longer than
  // an expression). The differential suite compares values, dtypes, shapes, NaN/inf positions,
  // vector-Jacobian products, and which errors are raised.
  std::string torch;
  // Why there is no twin (e.g. "random: PyTorch draws other numbers"); an op needs one of the two.
  std::string no_torch;
  std::function<Outputs(const Inputs&)> fn;
  std::vector<Sample> samples;
  bool differentiable = true;
  bool twice_differentiable = true;
  bool supports_float32 = true;
  double f32_tol = 1e-4;  // atol = rtol for the float32-vs-float64 comparison
  bool check_noncontiguous = true;
  // Ops whose numerical derivative is unreliable with the default eps can loosen tolerances.
  double grad_atol = 1e-5, grad_rtol = 1e-3;
  // Optional: the same outputs computed another way (an in-place op's out-of-place form). The
  // reference suite compares the two on every sample in float64, with and without autograd.
  std::function<Outputs(const Inputs&)> ref = nullptr;
  // An elementwise op that takes any dtype: the differential suite also runs it on bool, uint8,
  // int32, int64, float32 and float64 inputs (every dtype pair for two inputs), with NaN, +-inf
  // and +-0 among the float values, and compares result dtypes and values (or that both raise).
  bool sweep_dtypes = false;
  // Why the CUDA parity suite skips this entry (a CPU-only feature), or empty.
  std::string no_cuda;
};

// gradgradcheck skips samples with more input elements than this (all inputs together).
inline constexpr int64_t kMaxGradGradElements = 40;

std::vector<OpInfo>& registry();
const OpInfo* find_op(const std::string& name);

// The op an entry's name names, if any ("nn." and "linalg." prefixes as the schema spells them).
std::optional<OpId> op_of_entry_name(const std::string& name);

struct Registrar {
  explicit Registrar(std::vector<OpInfo> ops) {
    for (auto& op : ops) {
      if (op.ops.empty())
        if (auto id = op_of_entry_name(op.name)) op.ops = {*id};
      registry().push_back(std::move(op));
    }
  }
};

// Materializes a sample's inputs in `dtype` (floating args) on `device`; the same seed gives
// the same values in any dtype. Differentiable floating args require grad if `requires_grad`.
Inputs make_inputs(const Sample& s, DType dtype, Device device, bool requires_grad, uint64_t seed);

// A forward reference for an elementwise op: `f` applied in float64 to each element of the
// (broadcast) inputs, written with <cmath> and independent of nabla's kernels and op lists. The
// reference suite compares the op with it on every sample; every op of the elementwise op lists has
// one (OpRegistry.EveryElementwiseOpHasAScalarReference), so their forward is checked without
// PyTorch too.
std::function<Outputs(const Inputs&)> scalar_ref(double (*f)(double));
std::function<Outputs(const Inputs&)> scalar_ref(double (*f)(double, double));

// Common sample sets.
ArgSpec arg(Shape shape, double lo = -1, double hi = 1);
ArgSpec arg_t(Shape shape, double lo = -1, double hi = 1);  // non-contiguous (transposed) layout
// A uniform float input that gradcheck does not differentiate (running statistics, loss weights).
ArgSpec const_arg(Shape shape, double lo = -1, double hi = 1);
ArgSpec index_arg(Shape shape, int64_t bound);
ArgSpec mask_arg(Shape shape);
ArgSpec fixed_arg(Shape shape, std::vector<double> values, bool differentiable = true);
ArgSpec fixed_index(Shape shape, std::vector<double> values);  // int64 indices
ArgSpec fixed_mask(Shape shape, std::vector<double> values);   // bool mask: nonzero values are true
// Unary op samples over [lo, hi]: 2-D, scalar, empty, non-contiguous, 3-D.
std::vector<Sample> unary_samples(double lo, double hi);
// Binary op samples: same shape, broadcast both ways, scalar operand, non-contiguous, empty.
std::vector<Sample> binary_samples(double lo, double hi, double lo2, double hi2);

}  // namespace nabla::testing
