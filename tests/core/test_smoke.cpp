#include <gtest/gtest.h>

#include "nabla.h"

using namespace nabla;

TEST(Smoke, AddAndSum) {
  Tensor a = tensor({{1., 2.}, {3., 4.}});
  Tensor b = tensor({10., 20.});
  Tensor c = a + b;
  EXPECT_EQ(c.sizes(), (Shape{2, 2}));
  EXPECT_DOUBLE_EQ(c.sum().item<double>(), 1 + 2 + 3 + 4 + 60);
}
