#include "optim/adagrad.h"
#include "optim/fused.h"

#include "core/backend.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/ops.h"

namespace nabla::optim {

void AdagradOptions::check() const {
  NABLA_CHECK(ValueError, lr >= 0, "Adagrad: invalid learning rate ", lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, lr_decay >= 0, "Adagrad: invalid lr_decay ", lr_decay, " (must be >= 0)");
  NABLA_CHECK(ValueError, weight_decay >= 0, "Adagrad: invalid weight_decay ", weight_decay, " (must be >= 0)");
  NABLA_CHECK(ValueError, initial_accumulator_value >= 0, "Adagrad: invalid initial_accumulator_value ",
              initial_accumulator_value, " (must be >= 0)");
  NABLA_CHECK(ValueError, eps >= 0, "Adagrad: invalid eps ", eps, " (must be >= 0)");
}

void Adagrad::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const AdagradOptions& o = options(gi);
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      AdagradParamState& s = state(p);
      if (!s.sum.defined()) s.sum = full_like(p, o.initial_accumulator_value);
      s.step += 1;
      double clr = o.lr / (1 + static_cast<double>(s.step - 1) * o.lr_decay);
      // One fused pass where the backend has it (contiguous tensors), else the same update in Tensor ops.
      if (fused_steps(p.device()).adagrad_step(p, p.grad(), s.sum, {clr, o.eps, o.weight_decay, o.maximize})) {
        internal::bump_version(p);  // as the in-place ops of the composed update would
        continue;
      }
      Tensor g = o.maximize ? -p.grad() : p.grad();
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      s.sum.add_(g * g);
      Tensor std = s.sum.sqrt();
      std.add_(o.eps);
      p.add_(g / std, -clr);
    }
  }
}

}  // namespace nabla::optim
