#include "optim/sgd.h"
#include "optim/fused.h"

#include "core/backend.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"

namespace nabla::optim {

void SGDOptions::check() const {
  NABLA_CHECK(ValueError, lr >= 0, "SGD: invalid learning rate ", lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, momentum >= 0, "SGD: invalid momentum ", momentum, " (must be >= 0)");
  NABLA_CHECK(ValueError, weight_decay >= 0, "SGD: invalid weight_decay ", weight_decay, " (must be >= 0)");
  NABLA_CHECK(ValueError, !nesterov || (momentum > 0 && dampening == 0),
              "SGD: Nesterov momentum requires a momentum > 0 and zero dampening");
}

void SGD::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const SGDOptions& o = options(gi);
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      Tensor* buf = o.momentum != 0 ? &state(p).momentum_buffer : nullptr;
      const bool first = buf && !buf->defined();
      if (first) *buf = empty_like(p);  // takes g on this step
      // One fused pass where the backend has it (contiguous tensors), else the same update in Tensor ops.
      if (fused_steps(p.device())
              .sgd_step(p, p.grad(), buf ? *buf : Tensor(),
                        {o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize, first})) {
        internal::bump_version(p);  // as the in-place ops of the composed update would
        continue;
      }
      Tensor g = o.maximize ? -p.grad() : p.grad();
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      if (buf) {
        if (first) buf->copy_(g);
        else buf->mul_(o.momentum).add_(g, 1 - o.dampening);
        g = o.nesterov ? g.add(*buf, o.momentum) : *buf;
      }
      p.add_(g, -o.lr);
    }
  }
}

}  // namespace nabla::optim
