// Polynomial regression with custom autograd functions, in libtorch's idioms (PyTorch's
// "Defining new autograd functions" tutorial, in C++): y = a + b P3(c + d x), P3 a Legendre
// polynomial written as a torch::autograd::Function, plus a linear function whose backward returns
// a trailing undefined gradient for its non-tensor argument. Compiled against libtorch 1.13 and
// nabla's torch layer; test_programs.cpp compares the printed numbers.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// P3(x) = (5 x^3 - 3 x) / 2, with its derivative 1.5 (5 x^2 - 1) in backward.
struct LegendrePolynomial3 : public torch::autograd::Function<LegendrePolynomial3> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor input) {
    ctx->save_for_backward({input});
    return 0.5 * (5 * input.pow(3) - 3 * input);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_output) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor input = saved[0];
    return {grad_output[0] * 1.5 * (5 * input.pow(2) - 1)};
  }
};

// y = x * scale + shift (shift a tensor, scale a double kept in saved_data): backward returns no
// gradient for scale, and an extra undefined one after it.
struct ScaleShift : public torch::autograd::Function<ScaleShift> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor shift, double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({x});
    return x * scale + shift;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_output) {
    double scale = ctx->saved_data["scale"].toDouble();
    torch::Tensor g = grad_output[0];
    return {g * scale, g.sum().reshape({1}), torch::Tensor(), torch::Tensor()};
  }
};

int main() {
  torch::Tensor x = torch::linspace(-M_PI, M_PI, 200, torch::TensorOptions().dtype(torch::kFloat64));
  torch::Tensor y = torch::sin(x);

  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  torch::Tensor a = torch::full({}, 0.0, opts), b = torch::full({}, -1.0, opts);
  torch::Tensor c = torch::full({}, 0.0, opts), d = torch::full({}, 0.3, opts);
  torch::Tensor shift = torch::zeros({1}, opts);

  const double learning_rate = 5e-6;
  torch::optim::SGD optimizer({a, b, c, d, shift}, torch::optim::SGDOptions(learning_rate));
  for (int t = 0; t < 2000; ++t) {
    torch::Tensor p = LegendrePolynomial3::apply(c + d * x);
    torch::Tensor y_pred = ScaleShift::apply(b * p, shift, 1.0) + a;
    torch::Tensor loss = (y_pred - y).pow(2).sum();
    if (t % 400 == 399) std::printf("step %d loss %.6f\n", t + 1, loss.item<double>());
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  std::printf("result y = %.6f + %.6f * P3(%.6f + %.6f x) + %.6f\n", a.item<double>(), b.item<double>(),
              c.item<double>(), d.item<double>(), shift.item<double>());

  // The same gradient through the built-in ops, for the custom function's backward.
  torch::Tensor z = torch::tensor({0.25, -0.5, 1.0}, torch::dtype(torch::kFloat64).requires_grad(true));
  LegendrePolynomial3::apply(z).sum().backward();
  torch::Tensor expected = 1.5 * (5 * z.detach().pow(2) - 1);
  std::printf("grad_check max_diff %.9f\n", (z.grad() - expected).abs().max().item<double>());
  std::printf("grad %.6f %.6f %.6f\n", z.grad()[0].item<double>(), z.grad()[1].item<double>(),
              z.grad()[2].item<double>());
}
