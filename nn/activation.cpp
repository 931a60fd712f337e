#include "nn/activation.h"

namespace nabla::nn {

GELU::GELU(std::string a) : approximate(std::move(a)) {
  NABLA_CHECK(ValueError, approximate == "none" || approximate == "tanh",
              "GELU: approximate must be 'none' or 'tanh', got '", approximate, "'");
}

Hardtanh::Hardtanh(double lo, double hi) : min_val(lo), max_val(hi) {
  NABLA_CHECK(ValueError, max_val > min_val, "Hardtanh: max_val (", max_val, ") must be greater than min_val (",
              min_val, ")");
}

PReLU::PReLU(int64_t n, double init) : num_parameters(n) {
  NABLA_CHECK(ValueError, n > 0, "PReLU: num_parameters must be positive, got ", n);
  weight = register_parameter("weight", full({n}, init));
}

}  // namespace nabla::nn
