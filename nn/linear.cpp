#include "nn/linear.h"

#include <cmath>

#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

Linear::Linear(int64_t in, int64_t out, LinearOptions opts) : in_features(in), out_features(out), options(opts) {
  NABLA_CHECK(ValueError, in >= 0 && out >= 0, "Linear: in_features and out_features must be non-negative, got ", in,
              " and ", out);
  weight = register_parameter("weight", empty({out, in}));
  if (options.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the bias uses the same bound.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() >= 1 && x.size(-1) == in_features, "Linear: expected input with last dim ",
              in_features, ", got ", x.sizes());
  return F::linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
  return internal::str("in_features=", in_features, ", out_features=", out_features,
                       ", bias=", repr_bool(bias.defined()));
}

Bilinear::Bilinear(int64_t in1, int64_t in2, int64_t out, LinearOptions opts)
    : in1_features(in1), in2_features(in2), out_features(out), options(opts) {
  NABLA_CHECK(ValueError, in1 >= 0 && in2 >= 0 && out >= 0, "Bilinear: feature counts must be non-negative");
  weight = register_parameter("weight", empty({out, in1, in2}));
  if (options.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Bilinear::reset_parameters() {
  double bound = in1_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in1_features)) : 0.0;
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor Bilinear::forward(Tensor x1, Tensor x2) { return F::bilinear(x1, x2, weight, bias); }

std::string Bilinear::extra_repr() const {
  return internal::str("in1_features=", in1_features, ", in2_features=", in2_features, ", out_features=", out_features,
                       ", bias=", repr_bool(bias.defined()));
}

std::string Flatten::extra_repr() const { return internal::str("start_dim=", start_dim, ", end_dim=", end_dim); }

std::string Unflatten::extra_repr() const {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return internal::str("dim=", dim, ", unflattened_size=", s, sizes.size() == 1 ? ",)" : ")");
}

}  // namespace nabla::nn
