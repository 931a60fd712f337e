#include "nn/clip_grad.h"

#include <cmath>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::nn::utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NABLA_CHECK(ValueError, max_norm >= 0, "clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  NABLA_CHECK(ValueError, norm_type > 0, "clip_grad_norm_: norm_type must be positive, got ", norm_type);
  autograd::NoGradGuard ng;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0.0;
  bool inf_norm = std::isinf(norm_type);
  // Per-tensor norms, then the norm of the norms in float64 on the first gradient's device: one
  // synchronisation for the returned value, however many parameters (on a GPU, one per parameter
  // would stall the queue each time).
  const Device dev = grads[0].device();
  std::vector<Tensor> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(norm(g, norm_type).to(dev, kFloat64));
  Tensor all = stack(norms);
  double total = (inf_norm ? all.max() : norm(all, norm_type)).item<double>();
  if (error_if_nonfinite && !std::isfinite(total))
    throw ValueError(internal::str("clip_grad_norm_: the total norm of order ", norm_type,
                                   " of the gradients is non-finite (", total,
                                   "), so it cannot be clipped; pass error_if_nonfinite = false to clip anyway"));
  double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || std::isnan(coef))
    for (Tensor& g : grads) g.mul_(coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NABLA_CHECK(ValueError, clip_value >= 0, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  autograd::NoGradGuard ng;
  for (const Tensor& p : parameters)
    if (p.defined() && p.grad().defined()) {
      Tensor g = p.grad();
      g.clamp_(-clip_value, clip_value);
    }
}

}  // namespace nabla::nn::utils
