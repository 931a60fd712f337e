// expect: held by value
// A module member held by value, registered by name, would be registered as a
// copy: eval() would miss the member that forward calls. It must not compile.
#include "nn/dropout.h"

using namespace nabla;

struct Net : nn::Module {
  Net() { (void)register_module("drop", drop_); }
  nn::Dropout drop_{0.5};
};

int main() { Net n; }
