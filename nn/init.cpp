#include "nn/init.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/graph.h"
#include "core/ops.h"

namespace nabla::nn::init {

namespace {

void check_floating(const Tensor& t, const char* op) {
  NABLA_CHECK(ValueError, t.defined(), "init::", op, ": tensor is undefined");
  NABLA_CHECK(DTypeError, t.is_floating_point(), "init::", op, ": tensor must be floating, got ", t.dtype());
}

int64_t fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::fan_in ? in : out;
}

// The inverse error function: a rational first guess refined by Newton steps on erf (exact to
// double precision in (-1, 1)).
double erfinv(double y) {
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5) {  // Giles' single-precision approximation
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      p = c + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      p = c + p * w;
    x = p * y;
  }
  for (int i = 0; i < 3; ++i) {  // Newton: f(x) = erf(x) - y, f'(x) = 2/sqrt(pi) exp(-x^2)
    double err = std::erf(x) - y;
    x -= err / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  }
  return x;
}

// Fills t (any device and floating dtype) from a CPU float64 buffer.
void assign(Tensor& t, const std::vector<double>& v) {
  Tensor src = tensor(v, t.sizes(), dtype(kFloat64));
  t.copy_(src);
}

}  // namespace

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::linear:
    case Nonlinearity::conv1d:
    case Nonlinearity::conv2d:
    case Nonlinearity::conv_transpose2d:
    case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::selu: return 3.0 / 4.0;
  }
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  NABLA_CHECK(ShapeError, t.dim() >= 2,
              "init: fan in and fan out cannot be computed for a tensor with fewer than 2 dims, got ", t.sizes());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor uniform_(Tensor t, double a, double b) {
  check_floating(t, "uniform_");
  NABLA_CHECK(ValueError, a <= b, "init::uniform_: a (", a, ") must not exceed b (", b, ")");
  autograd::NoGradGuard ng;
  t.uniform_(a, b);
  return t;
}

Tensor normal_(Tensor t, double mean, double std) {
  check_floating(t, "normal_");
  autograd::NoGradGuard ng;
  t.normal_(mean, std);
  return t;
}

Tensor constant_(Tensor t, double value) {
  NABLA_CHECK(ValueError, t.defined(), "init::constant_: tensor is undefined");
  autograd::NoGradGuard ng;
  t.fill_(value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

Tensor xavier_uniform_(Tensor t, double gain) {
  check_floating(t, "xavier_uniform_");
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  double a = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(std::move(t), -a, a);
}

Tensor xavier_normal_(Tensor t, double gain) {
  check_floating(t, "xavier_normal_");
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(std::move(t), 0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nl) {
  check_floating(t, "kaiming_uniform_");
  int64_t f = fan(t, mode);
  if (f == 0) return t;  // PyTorch warns and leaves an empty tensor alone
  double bound = std::sqrt(3.0) * calculate_gain(nl, a) / std::sqrt(static_cast<double>(f));
  return uniform_(std::move(t), -bound, bound);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nl) {
  check_floating(t, "kaiming_normal_");
  int64_t f = fan(t, mode);
  if (f == 0) return t;
  return normal_(std::move(t), 0, calculate_gain(nl, a) / std::sqrt(static_cast<double>(f)));
}

Tensor orthogonal_(Tensor t, double gain) {
  check_floating(t, "orthogonal_");
  NABLA_CHECK(ShapeError, t.dim() >= 2, "init::orthogonal_: only tensors with 2 or more dims are supported, got ",
              t.sizes());
  if (t.numel() == 0) return t;
  autograd::NoGradGuard ng;
  int64_t rows = t.size(0), cols = t.numel() / rows;
  // Work on the tall orientation: A is (m, n) with m >= n, columns orthonormalized.
  bool wide = rows < cols;
  int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  Tensor g = randn({rows, cols}, dtype(kFloat64));
  if (wide) g = g.t();
  g = g.contiguous();
  const double* gp = g.data_ptr<double>();
  std::vector<double> q(static_cast<size_t>(m * n));  // column j at q[i * n + j]
  for (int64_t i = 0; i < m * n; ++i) q[static_cast<size_t>(i)] = gp[i];
  // Modified Gram-Schmidt, twice for orthogonality to working precision. Its R has a positive
  // diagonal, which is the sign convention PyTorch applies (q *= sign(diag(r))).
  for (int64_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < m; ++i) dot += q[i * n + k] * q[i * n + j];
        for (int64_t i = 0; i < m; ++i) q[i * n + j] -= dot * q[i * n + k];
      }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += q[i * n + j] * q[i * n + j];
    norm = std::sqrt(norm);
    NABLA_CHECK(ValueError, norm > 0, "init::orthogonal_: degenerate random matrix (try again)");
    for (int64_t i = 0; i < m; ++i) q[i * n + j] /= norm;
  }
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] = gain * (wide ? q[c * n + r] : q[r * n + c]);
  assign(t, out);
  return t;
}

Tensor trunc_normal_(Tensor t, double mean, double std, double a, double b) {
  check_floating(t, "trunc_normal_");
  NABLA_CHECK(ValueError, std > 0 && a < b, "init::trunc_normal_: need std > 0 and a < b, got std=", std, ", a=", a,
              ", b=", b);
  autograd::NoGradGuard ng;
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  double l = cdf((a - mean) / std), u = cdf((b - mean) / std);
  // Uniform in [2l - 1, 2u - 1], through erfinv, scaled: a normal truncated to [a, b].
  Tensor uni = empty(t.sizes(), dtype(kFloat64));
  uni.uniform_(2 * l - 1, 2 * u - 1);
  const double* up = uni.data_ptr<double>();
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    double x = erfinv(up[i]) * std * std::sqrt(2.0) + mean;
    v[i] = std::min(std::max(x, a), b);
  }
  assign(t, v);
  return t;
}

}  // namespace nabla::nn::init
