// expect: held by value
// Replace_module takes a module by value only as a temporary.
#include "nn/container.h"
#include "nn/linear.h"

using namespace nabla;

int main() {
  nn::Sequential seq(nn::Linear(2, 3));
  nn::Linear head(2, 4);
  seq.replace_module("0", head);
}
