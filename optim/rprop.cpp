#include "optim/rprop.h"

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::optim {

void RpropOptions::check() const {
  NABLA_CHECK(ValueError, lr >= 0, "Rprop: invalid learning rate ", lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, 0 < etas.first && etas.first < 1 && 1 < etas.second, "Rprop: invalid etas (", etas.first,
              ", ", etas.second, "): expected 0 < etaminus < 1 < etaplus");
  NABLA_CHECK(ValueError, 0 <= step_sizes.first && step_sizes.first <= step_sizes.second, "Rprop: invalid step_sizes (",
              step_sizes.first, ", ", step_sizes.second, "): expected 0 <= min <= max");
}

void Rprop::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const RpropOptions& o = options(gi);
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      RpropParamState& s = state(p);
      if (!s.prev.defined()) {
        s.prev = zeros_like(p);
        s.step_size = full_like(p, o.lr);
      }
      s.step += 1;
      Tensor g = o.maximize ? -p.grad() : p.grad();
      Tensor agree = g * s.prev;
      Tensor flipped = agree.lt(0);
      // The factor has the parameter's dtype: etaplus where the sign held, etaminus where it flipped.
      Tensor factor = where(agree.gt(0), o.etas.second, where(flipped, o.etas.first, ones_like(p)));
      s.step_size.copy_(clamp(s.step_size * factor, o.step_sizes.first, o.step_sizes.second));
      g = where(flipped, 0.0, g);  // no step, and no sign remembered, where the sign flipped
      p.add_(g.sign() * s.step_size, -1.0);
      s.prev.copy_(g);
    }
  }
}

}  // namespace nabla::optim
