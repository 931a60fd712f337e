#include "nn/activation.h"

namespace nabla::nn {

GELU::GELU(std::string a) : approximate(std::move(a)) {
  check<ValueError>(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
                    approximate, "'");
}

}  // namespace nabla::nn
