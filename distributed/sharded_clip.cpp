#include "distributed/sharded_clip.h"

#include <cmath>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::distributed {

double clip_sharded_grad_norm_(ProcessGroup& group, const std::vector<Tensor>& grads, double max_norm, double norm_type,
                               const char* who) {
  NABLA_CHECK(ValueError, max_norm >= 0, who, ".clip_grad_norm_: max_norm must be non-negative, got ", max_norm);
  NABLA_CHECK(ValueError, norm_type > 0, who, ".clip_grad_norm_: norm_type must be positive, got ", norm_type);
  autograd::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  Device comm = kCPU;  // the nccl backend reduces on the gradients' GPU
  if (group.backend() == "nccl")
    for (const Tensor& g : grads)
      if (g.defined()) comm = g.device();
  Tensor part = zeros({1}, TensorOptions(kFloat64).device(comm));
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    Tensor n = norm(g, norm_type).to(comm, kFloat64).reshape({1});
    part = inf ? maximum(part, n) : part + n.pow(norm_type);
  }
  group.all_reduce(part, inf ? ReduceOp::max : ReduceOp::sum).wait();
  double total = part.to(kCPU).item<double>();
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || std::isnan(coef))
    for (const Tensor& g : grads)
      if (g.defined()) Tensor(g).mul_(coef);
  return total;
}

}  // namespace nabla::distributed
