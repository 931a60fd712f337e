// Distance modules (torch.nn.CosineSimilarity, torch.nn.PairwiseDistance): the functional forms
// (nn/functional.h) with their options held, for use inside models.
#pragma once

#include "functional.h"
#include "module.h"

namespace nabla::nn {

// sum(x1 * x2, dim) / (max(||x1||, eps) * max(||x2||, eps)), x1 and x2 broadcast.
class CosineSimilarity : public Module {
 public:
  explicit CosineSimilarity(int64_t dim = 1, double eps = 1e-8) : dim(dim), eps(eps) {}
  Tensor forward(Tensor x1, Tensor x2) override { return functional::cosine_similarity(x1, x2, dim, eps); }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim) + ", eps=" + repr_double(eps); }
  int64_t dim;
  double eps;
};

// ||x1 - x2 + eps||_p over the last dim.
class PairwiseDistance : public Module {
 public:
  explicit PairwiseDistance(double p = 2, double eps = 1e-6, bool keepdim = false) : p(p), eps(eps), keepdim(keepdim) {}
  Tensor forward(Tensor x1, Tensor x2) override { return functional::pairwise_distance(x1, x2, p, eps, keepdim); }
  std::string extra_repr() const override {
    return "p=" + repr_double(p) + ", eps=" + repr_double(eps) + ", keepdim=" + (keepdim ? "True" : "False");
  }
  double p, eps;
  bool keepdim;
};

}  // namespace nabla::nn
