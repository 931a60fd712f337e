// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
//
//   loss.backward();
//   double norm = nn::utils::clip_grad_norm_(model->parameters(), 1.0);
//   opt.step();
#pragma once

#include <limits>
#include <vector>

#include "../core/tensor.h"

namespace nabla::nn::utils {

// Scales the gradients in place so that their total norm (the p-norm of the per-tensor p-norms,
// p = norm_type, infinity for the max) is at most max_norm: every gradient is multiplied by
// min(1, max_norm / (total_norm + 1e-6)). Returns the total norm before clipping. Parameters
// without a gradient are skipped. error_if_nonfinite: throw ValueError (and leave the gradients
// alone) when the total norm is NaN or infinite.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace nabla::nn::utils
