// expect: compiles
// The spellings the failing files in this folder point to, which must compile.
#include "nn/container.h"
#include "nn/dropout.h"
#include "nn/linear.h"

using namespace nabla;

struct Net : nn::Module {
  Net() {
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
    drop2 = register_module("drop2", nn::Dropout(0.5));
    nn::Linear fc(2, 3);
    head = register_module("head", std::move(fc));
  }
  std::shared_ptr<nn::Dropout> drop, drop2;
  std::shared_ptr<nn::Linear> head;
};

int main() {
  nn::Linear fc(2, 3);
  nn::Sequential seq(std::move(fc), nn::Dropout(0.1));
  seq[1] = nn::Dropout(0.2);
  std::shared_ptr<nn::Module> m = seq[0];
  return m ? 0 : 1;
}
