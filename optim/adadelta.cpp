#include "optim/adadelta.h"
#include "optim/fused.h"

#include "core/backend.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"

namespace nabla::optim {

void AdadeltaOptions::check() const {
  NABLA_CHECK(ValueError, lr >= 0, "Adadelta: invalid learning rate ", lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, rho >= 0 && rho <= 1, "Adadelta: invalid rho ", rho, " (must be in [0, 1])");
  NABLA_CHECK(ValueError, eps >= 0, "Adadelta: invalid eps ", eps, " (must be >= 0)");
  NABLA_CHECK(ValueError, weight_decay >= 0, "Adadelta: invalid weight_decay ", weight_decay, " (must be >= 0)");
}

void Adadelta::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const AdadeltaOptions& o = options(gi);
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      AdadeltaParamState& s = state(p);
      if (!s.square_avg.defined()) {
        s.square_avg = zeros_like(p);
        s.acc_delta = zeros_like(p);
      }
      s.step += 1;
      // One fused pass where the backend has it (contiguous tensors), else the same update in Tensor ops.
      if (fused_steps(p.device())
              .adadelta_step(p, p.grad(), s.square_avg, s.acc_delta,
                             {o.lr, o.rho, o.eps, o.weight_decay, o.maximize})) {
        internal::bump_version(p);  // as the in-place ops of the composed update would
        continue;
      }
      Tensor g = o.maximize ? -p.grad() : p.grad();
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      s.square_avg.mul_(o.rho).add_(g * g, 1 - o.rho);
      Tensor std = s.square_avg.add(o.eps);
      std.sqrt_();
      Tensor delta = s.acc_delta.add(o.eps);
      delta.sqrt_().div_(std).mul_(g);
      s.acc_delta.mul_(o.rho).add_(delta * delta, 1 - o.rho);
      p.add_(delta, -o.lr);
    }
  }
}

}  // namespace nabla::optim
