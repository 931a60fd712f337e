#include "nn/dropout.h"

#include "nn/functional.h"

namespace nabla::nn {

Dropout::Dropout(double p) : p(p) {
  NABLA_CHECK(ValueError, p >= 0 && p <= 1, "Dropout: probability must be in [0, 1], got ", p);
}
Tensor Dropout::forward(Tensor x) { return F::dropout(x, p, training_); }
std::string Dropout::extra_repr() const { return "p=" + repr_double(p) + ", inplace=False"; }

Dropout2d::Dropout2d(double p) : p(p) {
  NABLA_CHECK(ValueError, p >= 0 && p <= 1, "Dropout2d: probability must be in [0, 1], got ", p);
}
Tensor Dropout2d::forward(Tensor x) { return F::dropout2d(x, p, training_); }
std::string Dropout2d::extra_repr() const { return "p=" + repr_double(p) + ", inplace=False"; }

}  // namespace nabla::nn
