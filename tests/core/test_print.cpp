// Printing, as PyTorch prints (its layout from torch/_tensor_str.py, with nabla's names:
// dtype=float64, size=[0, 3], grad_fn=<MulBackward0>).
#include <gtest/gtest.h>

#include <sstream>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// ---- printing --------------------------------------------------------------------------------------
TEST(Print, FloatMatrix) {
  EXPECT_EQ(str(tensor({{1.5, 2.25}, {-3.0, 4.0}})),
            "tensor([[ 1.5000,  2.2500],\n"
            "        [-3.0000,  4.0000]])");
  EXPECT_EQ(str(tensor({{1., 2.}, {3., 4.}})),
            "tensor([[1., 2.],\n"
            "        [3., 4.]])");
}

TEST(Print, IntBoolAndDtypes) {
  EXPECT_EQ(str(tensor({1, -20, 300})), "tensor([  1, -20, 300])");
  EXPECT_EQ(str(tensor({true, false})), "tensor([ True, False])");
  EXPECT_EQ(str(tensor({1.0, 2.5}, kFloat64)), "tensor([1.0000, 2.5000], dtype=float64)");
  EXPECT_EQ(str(tensor({1, 2}, kInt32)), "tensor([1, 2], dtype=int32)");
  EXPECT_EQ(str(tensor({7, 255}, kUInt8)), "tensor([  7, 255], dtype=uint8)");
  EXPECT_EQ(str(tensor({0.5, -1.0}, kFloat16)), "tensor([ 0.5000, -1.0000], dtype=float16)");
}

TEST(Print, ZeroDim) {
  EXPECT_EQ(str(tensor(3.5)), "tensor(3.5000)");
  EXPECT_EQ(str(tensor(7)), "tensor(7)");
  EXPECT_EQ(str(tensor(2.)), "tensor(2.)");
  EXPECT_EQ(str(tensor(0.)), "tensor(0.)");
  EXPECT_EQ(str(tensor(true)), "tensor(True)");
  EXPECT_EQ(str(tensor(1e-5)), "tensor(1.0000e-05)");
  EXPECT_EQ(str(scalar_tensor(-2.5, kFloat64)), "tensor(-2.5000, dtype=float64)");
}

TEST(Print, Empty) {
  EXPECT_EQ(str(zeros({0})), "tensor([])");
  EXPECT_EQ(str(zeros({0, 3})), "tensor([], size=[0, 3])");
  EXPECT_EQ(str(zeros({0}, kInt64)), "tensor([], dtype=int64)");  // an empty int64 tensor names its dtype
  EXPECT_EQ(str(zeros({2, 0}, kFloat64)), "tensor([], size=[2, 0], dtype=float64)");
}

TEST(Print, AutogradSuffixes) {
  Tensor x = tensor({1., 2.}, requires_grad());
  EXPECT_EQ(str(x), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ(str(x * 2), "tensor([2., 4.], grad_fn=<MulBackward0>)");
  EXPECT_EQ(str((x + 1).sum()), "tensor(5., grad_fn=<SumBackward0>)");
  EXPECT_EQ(str(x.detach()), "tensor([1., 2.])");
  EXPECT_EQ(str(tensor({1., 2.}, dtype(kFloat64).requires_grad(true))),
            "tensor([1., 2.], dtype=float64, requires_grad=True)");
}

TEST(Print, NestedDims) {
  EXPECT_EQ(str(arange(8).view({2, 2, 2})),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]])");
  EXPECT_EQ(str(arange(6).view({2, 3}).t()),
            "tensor([[0, 3],\n"
            "        [1, 4],\n"
            "        [2, 5]])");
}

TEST(Print, LongRowsWrapAtLinewidth) {
  EXPECT_EQ(str(arange(30)),
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
  // A suffix that does not fit on the last line goes on its own line.
  EXPECT_EQ(str(tensor({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, kFloat64)),
            "tensor([0.1000, 0.2000, 0.3000, 0.4000, 0.5000, 0.6000, 0.7000, 0.8000],\n"
            "       dtype=float64)");
  EXPECT_EQ(str(tensor({0.1, 0.2, 0.3, 0.4}, kFloat64)), "tensor([0.1000, 0.2000, 0.3000, 0.4000], dtype=float64)");
}

TEST(Print, SummarizesLargeTensors) {
  EXPECT_EQ(str(arange(1001)), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
  EXPECT_EQ(str(arange(1000)).find("..."), std::string::npos);  // at the threshold: printed in full
  EXPECT_EQ(str(arange(1200).view({40, 30})),
            "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n"
            "        [  30,   31,   32,  ...,   57,   58,   59],\n"
            "        [  60,   61,   62,  ...,   87,   88,   89],\n"
            "        ...,\n"
            "        [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n"
            "        [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n"
            "        [1170, 1171, 1172,  ..., 1197, 1198, 1199]])");
  EXPECT_EQ(str(ones({2000}) / 2), "tensor([0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000])");
}

TEST(Print, ScientificMode) {
  EXPECT_EQ(str(tensor({1e-5, 1.0})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(str(tensor({1., 10000.})), "tensor([1.0000e+00, 1.0000e+04])");  // integers spanning > 1000x
  EXPECT_EQ(str(tensor({1., 1000.})), "tensor([   1., 1000.])");             // exactly 1000x: not yet
  EXPECT_EQ(str(tensor(std::vector<double>{1e9, -1})), "tensor([ 1.0000e+09, -1.0000e+00], dtype=float64)");
  EXPECT_EQ(str(tensor({0.5, 123456789.0})), "tensor([5.0000e-01, 1.2346e+08])");
  EXPECT_EQ(str(tensor({0.0, 2e-5})), "tensor([0.0000e+00, 2.0000e-05])");
}

TEST(Print, NonFiniteValuesDoNotSetTheWidth) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  EXPECT_EQ(str(tensor(std::vector<double>{inf, 1}).to(kFloat32)), "tensor([inf, 1.])");
  EXPECT_EQ(str(tensor(std::vector<double>{nan, 1.5, -2}).to(kFloat32)), "tensor([    nan,  1.5000, -2.0000])");
  EXPECT_EQ(str(tensor(std::vector<double>{0, -inf}).to(kFloat32)), "tensor([0., -inf])");
  EXPECT_EQ(str(tensor(std::vector<double>{nan}).to(kFloat32)), "tensor([nan])");
}

TEST(Print, PrintOptions) {
  set_print_options(PrintOptions{.precision = 2, .threshold = 5, .edgeitems = 2});
  std::string a = str(tensor({1.12345, 2.5}));
  std::string b = str(arange(10));
  set_print_options(PrintOptions{});
  EXPECT_EQ(a, "tensor([1.12, 2.50])");
  EXPECT_EQ(b, "tensor([0, 1,  ..., 8, 9])");
  EXPECT_EQ(str(tensor({1.12345})), "tensor([1.1235])");
}

}  // namespace
}  // namespace nabla::testing
