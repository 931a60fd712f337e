// gradcheck: the analytical Jacobian (one vector-Jacobian product per output element) against the
// numerical one (central differences, one pair of forward calls per input element).
#include "autograd/gradcheck.h"

#include <cxxabi.h>
#include <cmath>
#include <memory>
#include <sstream>

#include "autograd/autograd.h"
#include "autograd/function.h"
#include "core/generator.h"
#include "core/impl.h"

namespace nabla::autograd {

std::string demangled_type_name(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string s = status == 0 && d ? d.get() : mangled;
  auto pos = s.rfind("::");
  return pos == std::string::npos ? s : s.substr(pos + 2);
}

namespace {

bool differentiable_output(const Tensor& t) { return t.defined() && is_floating(t.dtype()); }

// Values of a tensor as doubles in row-major order.
std::vector<double> values(const Tensor& t) {
  NoGradGuard ng;
  Tensor c = t.detach().to(kCPU, DType::f64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

Tensor one_hot_like(const Tensor& like, int64_t j, double value) {
  NoGradGuard ng;
  Tensor z = zeros({like.numel()}, dtype(like.dtype()));
  z.data_ptr<double>()[j] = value;  // like is float64
  return z.view(like.sizes()).to(like.device());
}

std::string matrix_str(const std::vector<double>& m, int64_t rows, int64_t cols) {
  std::ostringstream os;
  os.precision(6);
  for (int64_t r = 0; r < std::min<int64_t>(rows, 8); ++r) {
    os << "    [";
    for (int64_t c = 0; c < std::min<int64_t>(cols, 8); ++c) os << (c ? ", " : "") << m[r * cols + c];
    os << (cols > 8 ? ", ...]\n" : "]\n");
  }
  if (rows > 8) os << "    ...\n";
  return os.str();
}

bool fail(const GradcheckOptions& o, const std::string& msg) {
  if (o.raise) throw GradcheckError(msg);
  return false;
}

}  // namespace

bool gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
  std::vector<size_t> diff;  // inputs that require grad
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    NABLA_CHECK(GradcheckError, inputs[i].dtype() == DType::f64, "gradcheck: input ", i, " is ", inputs[i].dtype(),
                "; use float64 inputs (finite differences in float32 are too coarse)");
    diff.push_back(i);
  }
  NABLA_CHECK(GradcheckError, !diff.empty(),
              "gradcheck: no input requires grad; call requires_grad_() on the inputs to check");
  std::vector<Tensor> outs = fn(inputs);

  // Numerical Jacobians: num[k][d] is (outputs[k].numel x inputs[diff[d]].numel), row-major.
  std::vector<std::vector<std::vector<double>>> num(outs.size(), std::vector<std::vector<double>>(diff.size()));
  for (size_t d = 0; d < diff.size(); ++d) {
    const Tensor& x = inputs[diff[d]];
    int64_t n = x.numel();
    for (size_t k = 0; k < outs.size(); ++k)
      if (differentiable_output(outs[k])) num[k][d].assign(static_cast<size_t>(outs[k].numel() * n), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      // Perturbed copies stay leaves that require grad: the function may differentiate
      // internally (gradgradcheck's function does).
      std::vector<Tensor> plus = inputs, minus = inputs;
      {
        NoGradGuard ng;
        plus[diff[d]] = (x.detach() + one_hot_like(x, j, o.eps)).requires_grad_();
        minus[diff[d]] = (x.detach() - one_hot_like(x, j, o.eps)).requires_grad_();
      }
      std::vector<Tensor> fp = fn(plus), fm = fn(minus);
      NABLA_CHECK(GradcheckError, fp.size() == outs.size() && fm.size() == outs.size(),
                  "gradcheck: the function returned a different number of outputs for perturbed inputs");
      for (size_t k = 0; k < outs.size(); ++k) {
        if (!differentiable_output(outs[k])) continue;
        std::vector<double> a = values(fp[k]), b = values(fm[k]);
        int64_t m = outs[k].numel();
        for (int64_t r = 0; r < m; ++r) num[k][d][r * n + j] = (a[r] - b[r]) / (2 * o.eps);
      }
    }
  }

  // Analytical Jacobians, one vector-Jacobian product per output element.
  std::vector<Tensor> diff_inputs;
  for (size_t d : diff) diff_inputs.push_back(inputs[d]);
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!differentiable_output(outs[k])) continue;
    int64_t m = outs[k].numel();
    std::vector<std::vector<double>> ana(diff.size());
    for (size_t d = 0; d < diff.size(); ++d) ana[d].assign(static_cast<size_t>(m * inputs[diff[d]].numel()), 0.0);
    if (outs[k].requires_grad()) {
      Tensor o64 = outs[k];
      for (int64_t r = 0; r < m; ++r) {
        Tensor go = one_hot_like(zeros(o64.sizes(), dtype(DType::f64).device(o64.device())), r, 1.0).to(o64.dtype());
        std::vector<Tensor> g = grad({o64}, diff_inputs, {go}, true, false, true);
        for (size_t d = 0; d < diff.size(); ++d) {
          if (!g[d].defined()) continue;
          NABLA_CHECK(GradcheckError, g[d].sizes() == inputs[diff[d]].sizes(), "gradcheck: gradient for input ",
                      diff[d], " has shape ", g[d].sizes(), " but the input has shape ", inputs[diff[d]].sizes());
          std::vector<double> v = values(g[d]);
          int64_t n = inputs[diff[d]].numel();
          for (int64_t j = 0; j < n; ++j) ana[d][r * n + j] = v[j];
        }
      }
      if (o.check_undefined_grad && m > 0) {
        // A zero output gradient must give zero input gradients (and not crash).
        std::vector<Tensor> g = grad({o64}, diff_inputs, {zeros_like(o64)}, true, false, true);
        for (size_t d = 0; d < diff.size(); ++d)
          if (g[d].defined()) {
            for (double v : values(g[d]))
              if (v != 0 && !std::isnan(v))
                return fail(o, internal::str("gradcheck: a zero gradient for output ", k,
                                             " produced a nonzero gradient for input ", diff[d]));
          }
      }
    }
    for (size_t d = 0; d < diff.size(); ++d) {
      const auto& a = ana[d];
      const auto& nm = num[k][d];
      int64_t n = inputs[diff[d]].numel();
      for (size_t e = 0; e < a.size(); ++e) {
        double diffv = std::fabs(a[e] - nm[e]);
        bool ok = diffv <= o.atol + o.rtol * std::fabs(nm[e]) || (std::isnan(a[e]) && std::isnan(nm[e]));
        if (!ok) {
          return fail(o,
                      internal::str("gradcheck: Jacobian mismatch for output ", k, " with respect to input ", diff[d],
                                    " at (output element ", e / n, ", input element ", e % n, "): numerical ", nm[e],
                                    ", analytical ", a[e], " (atol ", o.atol, ", rtol ", o.rtol, ")\n  numerical:\n",
                                    matrix_str(nm, m, n), "  analytical:\n", matrix_str(a, m, n)));
        }
      }
    }
  }
  return true;
}

bool gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
  std::vector<Tensor> outs = fn(inputs);
  // Random output gradients (fixed seed, without disturbing the user's generator).
  Generator& gen = default_generator(kCPU);
  Generator::State saved = gen.get_state();
  gen.manual_seed(12345);
  std::vector<Tensor> gos;
  std::vector<size_t> out_idx;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!differentiable_output(outs[k]) || !outs[k].requires_grad()) continue;
    gos.push_back(randn(outs[k].sizes(), dtype(DType::f64)).to(outs[k].device()).requires_grad_());
    out_idx.push_back(k);
  }
  gen.set_state(saved);
  NABLA_CHECK(GradcheckError, !gos.empty(), "gradgradcheck: the function has no differentiable output");
  size_t ni = inputs.size();
  std::vector<size_t> diff;
  for (size_t i = 0; i < ni; ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) diff.push_back(i);

  TensorFn vjp = [&](const std::vector<Tensor>& all) {
    std::vector<Tensor> in(all.begin(), all.begin() + static_cast<long>(ni));
    std::vector<Tensor> o2 = fn(in);
    std::vector<Tensor> sel, go;
    for (size_t j = 0; j < out_idx.size(); ++j) {
      if (!o2[out_idx[j]].requires_grad()) continue;
      sel.push_back(o2[out_idx[j]]);
      go.push_back(all[ni + j]);
    }
    std::vector<Tensor> diff_in;
    for (size_t d : diff) diff_in.push_back(in[d]);
    std::vector<Tensor> res;
    if (sel.empty() || diff_in.empty()) {
      for (const Tensor& t : diff_in) res.push_back(zeros_like(t));
      return res;
    }
    std::vector<Tensor> g = grad(sel, diff_in, go, true, true, true);
    for (size_t d = 0; d < g.size(); ++d) res.push_back(g[d].defined() ? g[d] : zeros_like(diff_in[d]));
    return res;
  };
  std::vector<Tensor> all = inputs;
  all.insert(all.end(), gos.begin(), gos.end());
  return gradcheck(vjp, all, o);
}

}  // namespace nabla::autograd
