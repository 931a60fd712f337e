#include "optim/asgd.h"

#include <algorithm>
#include <cmath>

#include "core/graph.h"
#include "core/ops.h"

namespace nabla::optim {

void ASGDOptions::check() const {
  NABLA_CHECK(ValueError, lr >= 0, "ASGD: invalid learning rate ", lr, " (must be >= 0)");
  NABLA_CHECK(ValueError, weight_decay >= 0, "ASGD: invalid weight_decay ", weight_decay, " (must be >= 0)");
  NABLA_CHECK(ValueError, lambd >= 0, "ASGD: invalid lambd ", lambd, " (must be >= 0)");
}

void ASGD::step() {
  autograd::NoGradGuard ng;
  for (size_t gi = 0; gi < num_param_groups(); ++gi) {
    const ASGDOptions& o = options(gi);
    for (Tensor& p : mutable_params(gi)) {
      if (!p.grad().defined()) continue;
      ASGDParamState& s = state(p);
      if (!s.ax.defined()) {
        s.ax = zeros_like(p);
        s.eta = static_cast<float>(o.lr);
        s.mu = 1;
      }
      s.step += 1;
      Tensor g = o.maximize ? -p.grad() : p.grad();
      if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
      p.mul_(1 - o.lambd * s.eta);
      p.add_(g, -s.eta);
      if (s.mu != 1) {
        s.ax.add_((p - s.ax) * s.mu);
      } else {
        s.ax.copy_(p);
      }
      const double t = static_cast<double>(s.step);
      s.eta = static_cast<float>(o.lr / std::pow(1 + o.lambd * o.lr * t, o.alpha));
      s.mu = static_cast<float>(1 / std::max(1.0, t - o.t0));
    }
  }
}

}  // namespace nabla::optim
