// gradcheck and gradgradcheck: compare the gradients autograd computes with finite differences,
// as torch.autograd.gradcheck does. Use them on your own functions, custom Functions and modules:
//
//   auto f = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * in[1]).sin()}; };
//   autograd::gradcheck(f, {randn({3}, kFloat64).requires_grad_(), randn({3}, kFloat64).requires_grad_()});
//
// Inputs should be float64 (float32 is too coarse for the default tolerances). Only inputs that
// require grad are checked, and only floating outputs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace nabla::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-5;  // |analytical - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
  bool raise = true;                 // throw GradcheckError with the details on failure (else return false)
  bool check_undefined_grad = true;  // a zero gradient must not crash backward
};

class GradcheckError : public AutogradError {
  using AutogradError::AutogradError;
};

using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// First derivatives: every (output element, input element) pair of the Jacobian.
bool gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});
// Second derivatives: gradcheck of the vector-Jacobian product (with create_graph) with respect to
// the inputs and the output gradients.
bool gradgradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

// Convenience for single-output functions.
inline TensorFn single(std::function<Tensor(const std::vector<Tensor>&)> f) {
  return [f = std::move(f)](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in)}; };
}

}  // namespace nabla::autograd
