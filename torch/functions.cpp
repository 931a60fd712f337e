#include "torch/functions.h"

#include "core/error.h"
#include "nn/functional.h"

namespace torch {

namespace F = nabla::nn::functional;

nabla::nn::functional::Reduction detail::to_reduction(int64_t reduction, const char* op) {
  switch (reduction) {
    case Reduction::None: return F::Reduction::none;
    case Reduction::Mean: return F::Reduction::mean;
    case Reduction::Sum: return F::Reduction::sum;
    default: break;
  }
  throw nabla::ValueError(
      nabla::internal::str(op, ": reduction ", reduction, " is not torch::Reduction::None (0), Mean (1) or Sum (2)"));
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return nabla::log_softmax(dtype ? x.to(*dtype) : x, dim);
}
Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype) {
  return nabla::softmax(dtype ? x.to(*dtype) : x, dim);
}

Tensor dropout(const Tensor& input, double p, bool train) { return F::dropout(input, p, train); }
Tensor feature_dropout(const Tensor& input, double p, bool train) { return F::dropout2d(input, p, train); }

Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index) {
  return F::nll_loss(self, target,
                     {.weight = weight,
                      .ignore_index = ignore_index,
                      .reduction = detail::to_reduction(reduction, "torch::nll_loss")});
}
Tensor cross_entropy_loss(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction,
                          int64_t ignore_index, double label_smoothing) {
  return F::cross_entropy(self, target,
                          {.weight = weight,
                           .ignore_index = ignore_index,
                           .reduction = detail::to_reduction(reduction, "torch::cross_entropy_loss"),
                           .label_smoothing = label_smoothing});
}
Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return F::mse_loss(self, target, detail::to_reduction(reduction, "torch::mse_loss"));
}
Tensor l1_loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return F::l1_loss(self, target, detail::to_reduction(reduction, "torch::l1_loss"));
}
Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  return F::smooth_l1_loss(self, target,
                           {.reduction = detail::to_reduction(reduction, "torch::smooth_l1_loss"), .beta = beta});
}
Tensor huber_loss(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  return F::huber_loss(self, target,
                       {.reduction = detail::to_reduction(reduction, "torch::huber_loss"), .delta = delta});
}
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction) {
  return F::binary_cross_entropy(
      self, target, {.weight = weight, .reduction = detail::to_reduction(reduction, "torch::binary_cross_entropy")});
}
Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, int64_t reduction) {
  return F::binary_cross_entropy_with_logits(
      self, target,
      {.weight = weight,
       .pos_weight = pos_weight,
       .reduction = detail::to_reduction(reduction, "torch::binary_cross_entropy_with_logits")});
}

}  // namespace torch
