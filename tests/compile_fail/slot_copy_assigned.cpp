// expect: discards qualifiers|no viable overloaded '='|expects an rvalue
// A container slot kept in a variable cannot be assigned: `auto m = seq[0]; m = ...;` would
// otherwise replace the container's child where Python code only rebinds a name.
#include "nn/activation.h"
#include "nn/container.h"
#include "nn/linear.h"

using namespace nabla;

int main() {
  nn::Sequential seq(nn::Linear(2, 3));
  auto m = seq[0];
  m = std::make_shared<nn::ReLU>();
}
