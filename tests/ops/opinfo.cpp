// The op registry's machinery (see opinfo.h): the list, lookups, the sample builders and making
// a sample's inputs. The entries are in opinfo_*.cpp, the suites that walk them in test_opinfo.cpp
// (and tests/cuda, tests/onnx).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/elementwise_ops.h"
#include "opinfo.h"

namespace nabla::testing {

std::vector<OpInfo>& registry() {
  static std::vector<OpInfo> ops;
  return ops;
}

std::optional<OpId> op_of_entry_name(const std::string& name) {
  std::string n = name.rfind("nn.", 0) == 0 ? name.substr(3) : name;
  if (n.rfind("linalg.", 0) == 0) n = "linalg_" + n.substr(7);
  return op_from_name(n);
}

const OpInfo* find_op(const std::string& name) {
  for (const OpInfo& op : registry())
    if (op.name == name) return &op;
  return nullptr;
}

ArgSpec arg(Shape shape, double lo, double hi) {
  ArgSpec a;
  a.shape = std::move(shape);
  a.lo = lo;
  a.hi = hi;
  return a;
}
ArgSpec arg_t(Shape shape, double lo, double hi) {
  ArgSpec a = arg(std::move(shape), lo, hi);
  a.transposed = true;
  return a;
}
ArgSpec const_arg(Shape shape, double lo, double hi) {
  ArgSpec a = arg(std::move(shape), lo, hi);
  a.differentiable = false;
  return a;
}
ArgSpec index_arg(Shape shape, int64_t bound) {
  ArgSpec a;
  a.shape = std::move(shape);
  a.kind = ArgSpec::Kind::integer_index;
  a.index_bound = bound;
  a.differentiable = false;
  return a;
}
ArgSpec mask_arg(Shape shape) {
  ArgSpec a;
  a.shape = std::move(shape);
  a.kind = ArgSpec::Kind::bool_mask;
  a.differentiable = false;
  return a;
}
ArgSpec fixed_arg(Shape shape, std::vector<double> values, bool differentiable) {
  ArgSpec a;
  a.shape = std::move(shape);
  a.kind = ArgSpec::Kind::fixed;
  a.values = std::move(values);
  a.differentiable = differentiable;
  return a;
}

ArgSpec fixed_index(Shape shape, std::vector<double> values) {
  ArgSpec a = fixed_arg(std::move(shape), std::move(values), false);
  a.kind = ArgSpec::Kind::fixed_index;
  return a;
}

ArgSpec fixed_mask(Shape shape, std::vector<double> values) {
  ArgSpec a = fixed_arg(std::move(shape), std::move(values), false);
  a.kind = ArgSpec::Kind::fixed_mask;
  return a;
}

std::vector<Sample> unary_samples(double lo, double hi) {
  return {{{arg({3, 4}, lo, hi)}, "2d"},
          {{arg({}, lo, hi)}, "scalar"},
          {{arg({0, 3}, lo, hi)}, "empty"},
          {{arg_t({4, 3}, lo, hi)}, "noncontiguous"},
          {{arg({2, 1, 3}, lo, hi)}, "3d"}};
}

std::vector<Sample> binary_samples(double lo, double hi, double lo2, double hi2) {
  return {{{arg({3, 4}, lo, hi), arg({3, 4}, lo2, hi2)}, "same_shape"},
          {{arg({3, 4}, lo, hi), arg({4}, lo2, hi2)}, "broadcast_rhs"},
          {{arg({3, 1}, lo, hi), arg({1, 4}, lo2, hi2)}, "broadcast_both"},
          {{arg({}, lo, hi), arg({2, 3}, lo2, hi2)}, "scalar_lhs"},
          {{arg_t({4, 3}, lo, hi), arg({4, 3}, lo2, hi2)}, "noncontiguous"},
          {{arg({0, 3}, lo, hi), arg({3}, lo2, hi2)}, "empty"}};
}

namespace {
// f over the elements of the broadcast inputs, in float64.
Tensor map_elements(const Inputs& in, const std::function<double(const double*)>& f) {
  std::vector<Tensor> args;
  for (const Tensor& t : in) args.push_back(t.detach().to(kFloat64));
  args = broadcast_tensors(args);
  std::vector<const double*> data;
  for (Tensor& t : args) {
    t = t.contiguous();
    data.push_back(t.data_ptr<double>());
  }
  Tensor out = empty(args[0].sizes(), TensorOptions().dtype(kFloat64));
  double* o = out.data_ptr<double>();
  std::vector<double> v(args.size());
  for (int64_t j = 0; j < out.numel(); ++j) {
    for (size_t k = 0; k < data.size(); ++k) v[k] = data[k][j];
    o[j] = f(v.data());
  }
  return out;
}
}  // namespace

std::function<Outputs(const Inputs&)> scalar_ref(double (*f)(double)) {
  return [f](const Inputs& x) { return Outputs{map_elements({x[0]}, [f](const double* v) { return f(v[0]); })}; };
}
std::function<Outputs(const Inputs&)> scalar_ref(double (*f)(double, double)) {
  return [f](const Inputs& x) {
    return Outputs{map_elements({x[0], x[1]}, [f](const double* v) { return f(v[0], v[1]); })};
  };
}

Inputs make_inputs(const Sample& s, DType dtype, Device device, bool requires_grad, uint64_t seed) {
  Inputs out;
  autograd::NoGradGuard ng;
  for (size_t i = 0; i < s.args.size(); ++i) {
    const ArgSpec& a = s.args[i];
    manual_seed(seed * 1000 + i);
    Tensor t;
    Shape shape = a.shape;
    if (a.transposed && shape.size() >= 2) std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    switch (a.kind) {
      case ArgSpec::Kind::uniform: t = (rand(shape, kFloat64) * (a.hi - a.lo) + a.lo).to(dtype); break;
      case ArgSpec::Kind::integer_index: t = randint(0, std::max<int64_t>(a.index_bound, 1), shape, kInt64); break;
      case ArgSpec::Kind::bool_mask: t = rand(shape, kFloat64) > 0.5; break;
      case ArgSpec::Kind::fixed: t = tensor(a.values, shape, kFloat64).to(dtype); break;
      case ArgSpec::Kind::fixed_index: t = tensor(a.values, shape, kFloat64).to(kInt64); break;
      case ArgSpec::Kind::fixed_mask: t = tensor(a.values, shape, kFloat64) != 0.0; break;
    }
    if (a.transposed && t.dim() >= 2) t = t.mT();
    t = t.to(device);
    if (requires_grad && a.differentiable && is_floating(t.dtype())) t = t.detach().requires_grad_(true);
    out.push_back(t);
  }
  return out;
}

}  // namespace nabla::testing
