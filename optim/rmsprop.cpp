#include "optim/rmsprop.h"
#include "optim/fused.h"

#include "core/backend.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"

namespace nabla::optim {

void RMSpropOptions::check() const {
  NABLA_CHECK(ValueError, lr >= 0, "RMSprop: invalid learning rate ", lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, eps >= 0, "RMSprop: invalid eps ", eps, " (must be >= 0)");
  NABLA_CHECK(ValueError, alpha >= 0, "RMSprop: invalid alpha ", alpha, " (must be >= 0)");
  NABLA_CHECK(ValueError, momentum >= 0, "RMSprop: invalid momentum ", momentum, " (must be >= 0)");
  NABLA_CHECK(ValueError, weight_decay >= 0, "RMSprop: invalid weight_decay ", weight_decay, " (must be >= 0)");
}

void RMSprop::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const RMSpropOptions& o = options(gi);
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      RMSpropParamState& s = state(p);
      if (!s.square_avg.defined()) s.square_avg = zeros_like(p);
      if (o.momentum > 0 && !s.momentum_buffer.defined()) s.momentum_buffer = zeros_like(p);
      if (o.centered && !s.grad_avg.defined()) s.grad_avg = zeros_like(p);
      s.step += 1;
      // One fused pass where the backend has it (contiguous tensors), else the same update in Tensor ops.
      if (fused_steps(p.device())
              .rmsprop_step(p, p.grad(), s.square_avg, s.grad_avg, s.momentum_buffer,
                            {o.lr, o.alpha, o.eps, o.weight_decay, o.momentum, o.centered, o.maximize})) {
        internal::bump_version(p);  // as the in-place ops of the composed update would
        continue;
      }
      Tensor g = o.maximize ? -p.grad() : p.grad();
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      s.square_avg.mul_(o.alpha).add_(g * g, 1 - o.alpha);
      Tensor avg;
      if (o.centered) {
        s.grad_avg.mul_(o.alpha).add_(g, 1 - o.alpha);
        avg = s.square_avg - s.grad_avg * s.grad_avg;
        avg.sqrt_();
      } else {
        avg = s.square_avg.sqrt();
      }
      avg.add_(o.eps);
      if (o.momentum > 0) {
        s.momentum_buffer.mul_(o.momentum).add_(g / avg);
        p.add_(s.momentum_buffer, -o.lr);
      } else {
        p.add_(g / avg, -o.lr);
      }
    }
  }
}

}  // namespace nabla::optim
