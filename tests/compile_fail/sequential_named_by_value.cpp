// expect: held by value
// The containers take modules by value only as temporaries; a named one would
// be copied, and the object the caller keeps would not be the one the container calls.
#include "nn/container.h"
#include "nn/linear.h"

using namespace nabla;

int main() {
  nn::Linear fc(2, 3);
  nn::Sequential seq(fc);
}
