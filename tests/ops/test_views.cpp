// View ops: layouts, storage sharing (writes through a view reach the base and back), view vs
// reshape copy semantics, indexing with integers/slices/None/Ellipsis/tensors/masks, index_put_,
// split/chunk/unbind, diagonal, as_strided and unfold.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

using indexing::Ellipsis;
using indexing::None;
using indexing::Slice;

// 0..n-1 as float64 of `shape`.
Tensor iota(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(n, kFloat64).view(shape);
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage.get() == b.impl()->storage.get(); }

// ---- view vs reshape -------------------------------------------------------------------------------
TEST(View, ViewSharesStorageBothWays) {
  Tensor base = iota({2, 6});
  Tensor v = base.view({3, 4});
  EXPECT_TRUE(shares_storage(base, v));
  EXPECT_TRUE(tensor_is(v, {3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  v[1][2].fill_(-1);  // element 6
  EXPECT_DOUBLE_EQ(base[1][0].item<double>(), -1);
  base[0][1].fill_(-2);
  EXPECT_DOUBLE_EQ(v[0][1].item<double>(), -2);
  EXPECT_TRUE(tensor_is(base.view({-1}), {12}, values(base)));
  EXPECT_TRUE(tensor_is(base.view({2, -1, 2}), {2, 3, 2}, values(base)));
}

TEST(View, ViewOfNonContiguousThrowsReshapeCopies) {
  Tensor base = iota({2, 3});
  Tensor t = base.t();
  EXPECT_TRUE(throws_with<ShapeError>([&] { t.view({6}); }, {"view", "[3, 2]", "reshape"}));
  Tensor r = t.reshape({6});
  EXPECT_TRUE(tensor_is(r, {6}, {0, 3, 1, 4, 2, 5}));
  EXPECT_FALSE(shares_storage(r, base));  // a copy
  r.fill_(9);
  EXPECT_DOUBLE_EQ(base[0][0].item<double>(), 0);
  // reshape of a contiguous tensor is a view.
  Tensor rv = base.reshape({3, 2});
  EXPECT_TRUE(shares_storage(rv, base));
  rv[2][1].fill_(50);
  EXPECT_DOUBLE_EQ(base[1][2].item<double>(), 50);
}

TEST(View, ViewOfTransposedWhenStridesAllow) {
  Tensor base = iota({4, 6});
  Tensor t = base.t();           // (6, 4), strides (1, 6)
  Tensor v = t.view({6, 2, 2});  // splitting the strided dim is possible
  EXPECT_TRUE(shares_storage(v, base));
  EXPECT_EQ(v.strides(), (std::vector<int64_t>{1, 12, 6}));
  EXPECT_TRUE(tensor_near(v, t.contiguous().view({6, 2, 2}), 0));
  EXPECT_TRUE(tensor_near(t.view({6, 4, 1}), t.unsqueeze(2), 0));
  EXPECT_THROW(t.view({3, 8}), ShapeError);
  // A slice keeps row stride: merging rows is not possible, splitting columns is.
  Tensor s = base.slice(1, 0, 4);  // (4, 4) strides (6, 1)
  EXPECT_THROW(s.view({16}), ShapeError);
  EXPECT_TRUE(tensor_near(s.view({4, 2, 2}), s.contiguous().view({4, 2, 2}), 0));
}

TEST(View, BadShapes) {
  Tensor x = iota({2, 3});
  EXPECT_THROW(x.view({4}), ShapeError);
  EXPECT_THROW(x.view({-1, -1}), ShapeError);
  EXPECT_THROW(x.view({-1, 4}), ShapeError);
  EXPECT_THROW(x.reshape({5, -1}), ShapeError);
  EXPECT_THROW(x.view({-2, 3}), ShapeError);
  EXPECT_EQ(shape_of(zeros({0, 3}).view({3, 0})), (std::vector<int64_t>{3, 0}));
  EXPECT_THROW(zeros({0, 3}).reshape({0, -1, 3}), ShapeError);  // -1 is ambiguous with 0 elements, as PyTorch
  EXPECT_EQ(tensor(5.).view({1, 1}).dim(), 2);
  EXPECT_EQ(zeros({1, 1}).view({}).dim(), 0);
}

// ---- permute, transpose, t, mT -------------------------------------------------------------------
TEST(View, PermuteTransposeShareStorage) {
  Tensor base = iota({2, 3, 4});
  Tensor p = base.permute({2, 0, 1});
  EXPECT_EQ(shape_of(p), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(p.strides(), (std::vector<int64_t>{1, 12, 4}));
  EXPECT_DOUBLE_EQ(p[3][1][2].item<double>(), 1 * 12 + 2 * 4 + 3);
  p[0][0][0].fill_(-5);
  EXPECT_DOUBLE_EQ(base[0][0][0].item<double>(), -5);
  Tensor tr = base.transpose(0, 2);
  EXPECT_EQ(shape_of(tr), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_DOUBLE_EQ(tr[1][2][1].item<double>(), 1 * 12 + 2 * 4 + 1);
  EXPECT_TRUE(tensor_near(base.transpose(-1, 0), tr, 0));
  EXPECT_TRUE(tensor_near(base.mT(), base.transpose(1, 2), 0));
  EXPECT_TRUE(tensor_near(base.movedim(0, 2), base.permute({1, 2, 0}), 0));
  EXPECT_THROW(base.permute({0, 1}), ShapeError);
  EXPECT_THROW(base.permute({0, 1, 1}), ValueError);
  EXPECT_THROW(base.t(), ShapeError);
  EXPECT_THROW(iota({3}).mT(), ShapeError);
}

TEST(View, TOfVectorsAndMatrices) {
  Tensor v = iota({3});
  EXPECT_TRUE(tensor_is(v.t(), {3}, {0, 1, 2}));
  Tensor m = iota({2, 3});
  EXPECT_TRUE(tensor_is(m.t(), {3, 2}, {0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(tensor_near(m.t().t(), m, 0));
  EXPECT_TRUE(m.t().t().is_contiguous());
  EXPECT_EQ(tensor(1.).t().dim(), 0);
}

// ---- squeeze, unsqueeze, flatten, unflatten ------------------------------------------------------
TEST(View, SqueezeUnsqueeze) {
  Tensor x = zeros({1, 3, 1, 2});
  EXPECT_EQ(shape_of(x.squeeze()), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(shape_of(x.squeeze(0)), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(shape_of(x.squeeze(-2)), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(shape_of(x.squeeze(1)), (std::vector<int64_t>{1, 3, 1, 2}));  // not size 1: unchanged
  EXPECT_EQ(shape_of(x.unsqueeze(0)), (std::vector<int64_t>{1, 1, 3, 1, 2}));
  EXPECT_EQ(shape_of(x.unsqueeze(-1)), (std::vector<int64_t>{1, 3, 1, 2, 1}));
  EXPECT_EQ(shape_of(x.unsqueeze(2)), (std::vector<int64_t>{1, 3, 1, 1, 2}));
  EXPECT_EQ(tensor(1.).unsqueeze(0).dim(), 1);
  EXPECT_EQ(tensor(1.).squeeze().dim(), 0);
  EXPECT_THROW(x.unsqueeze(6), IndexError);
  EXPECT_THROW(x.squeeze(4), IndexError);
  // Views: writes go through.
  Tensor base = iota({1, 3});
  base.squeeze()[2].fill_(7);
  base.unsqueeze(0)[0][0][0].fill_(8);
  EXPECT_TRUE(tensor_is(base, {1, 3}, {8, 1, 7}));
  // Of a non-contiguous tensor.
  Tensor t = iota({3, 2}).t().unsqueeze(1);
  EXPECT_EQ(shape_of(t), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_TRUE(tensor_is(t, {2, 1, 3}, {0, 2, 4, 1, 3, 5}));
}

TEST(View, FlattenUnflatten) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(shape_of(x.flatten()), (std::vector<int64_t>{24}));
  EXPECT_EQ(shape_of(x.flatten(1)), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(shape_of(x.flatten(0, 1)), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(shape_of(x.flatten(-2, -1)), (std::vector<int64_t>{2, 12}));
  EXPECT_TRUE(shares_storage(x.flatten(1), x));
  EXPECT_TRUE(tensor_is(x.transpose(0, 1).flatten(1), {3, 8},
                        {0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(shape_of(tensor(3.).flatten()), (std::vector<int64_t>{1}));
  EXPECT_THROW(x.flatten(2, 1), ValueError);
  EXPECT_EQ(shape_of(x.unflatten(2, {2, 2})), (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(shape_of(x.unflatten(-1, {-1, 1})), (std::vector<int64_t>{2, 3, 4, 1}));
  EXPECT_TRUE(tensor_near(x.flatten(1).unflatten(1, {3, 4}), x, 0));
  EXPECT_THROW(x.unflatten(1, {2, 2}), ShapeError);
}

// ---- expand ----------------------------------------------------------------------------------------
TEST(View, ExpandUsesZeroStrides) {
  Tensor col = tensor({{1.}, {2.}, {3.}});
  Tensor e = col.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_TRUE(shares_storage(e, col));
  std::vector<double> want;
  for (int b = 0; b < 2; ++b)
    for (double v : {1., 2., 3.})
      for (int k = 0; k < 4; ++k) want.push_back(v);
  EXPECT_TRUE(tensor_is(e, {2, 3, 4}, want));
  EXPECT_EQ(shape_of(col.expand({-1, 2})), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(tensor_near(col.expand_as(zeros({3, 5})), col.expand({3, 5}), 0));
  col.fill_(0);  // the base changes: the expanded view sees it
  EXPECT_DOUBLE_EQ(e.sum().item<double>(), 0);
  EXPECT_TRUE(throws_with<ShapeError>([&] { col.expand({3, 2, 5}); }, {"expand", "[3, 1]"}));
  EXPECT_THROW(col.expand({4}), ShapeError);
  EXPECT_THROW(col.expand({-1, 3, 2}), ShapeError);
  EXPECT_EQ(shape_of(tensor(1.).expand({2, 2})), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(shape_of(zeros({1, 3}).expand({0, 3})), (std::vector<int64_t>{0, 3}));
}

// ---- narrow, slice, select -------------------------------------------------------------------------
TEST(View, NarrowSliceSelect) {
  Tensor x = iota({4, 5});
  EXPECT_TRUE(tensor_is(x.narrow(1, 1, 2), {4, 2}, {1, 2, 6, 7, 11, 12, 16, 17}));
  EXPECT_TRUE(tensor_is(x.narrow(0, -1, 1), {1, 5}, {15, 16, 17, 18, 19}));
  EXPECT_THROW(x.narrow(0, 3, 2), IndexError);
  EXPECT_TRUE(tensor_is(x.slice(1, 1, std::nullopt, 2), {4, 2}, {1, 3, 6, 8, 11, 13, 16, 18}));
  EXPECT_TRUE(tensor_is(x.slice(0, -2), {2, 5}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_TRUE(tensor_is(x.slice(1, -100, 100, 3), {4, 2}, {0, 3, 5, 8, 10, 13, 15, 18}));  // clamped
  EXPECT_EQ(shape_of(x.slice(0, 3, 1)), (std::vector<int64_t>{0, 5}));                     // empty
  EXPECT_EQ(x.slice(1, 0, std::nullopt, 2).strides(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(x.slice(0, 1).storage_offset(), 5);
  EXPECT_THROW(x.slice(0, 0, 2, 0), ValueError);
  EXPECT_THROW(x.slice(0, 2, 0, -1), ValueError);
  EXPECT_TRUE(tensor_is(x.select(1, -1), {4}, {4, 9, 14, 19}));
  EXPECT_TRUE(tensor_is(x[2], {5}, {10, 11, 12, 13, 14}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.select(0, 4); }, {"select", "4", "size 4"}));
  EXPECT_THROW(x.select(1, -6), IndexError);
  EXPECT_THROW(tensor(1.).select(0, 0), IndexError);
}

TEST(View, WritesThroughSlicesReachTheBase) {
  Tensor x = zeros({3, 4});
  x.slice(1, 1, 3).fill_(1);
  x.narrow(0, 2, 1).add_(10);
  x.select(1, 3).copy_(tensor({7., 8., 9.}));
  x.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2).mul_(-1);  // rows 0, 2; columns 0, 2
  EXPECT_TRUE(tensor_is(x, {3, 4}, {-0., 1, -1, 7, 0, 1, 1, 8, -10, 11, -11, 9}));
  // The other way: a base write shows in a strided view.
  Tensor v = x.slice(1, 1, std::nullopt, 2);
  x.fill_(3);
  EXPECT_TRUE(tensor_is(v, {3, 2}, {3, 3, 3, 3, 3, 3}));
}

// ---- index ---------------------------------------------------------------------------------------
TEST(Index, IntegersAndSlices) {
  Tensor x = iota({3, 4, 5});
  EXPECT_TRUE(tensor_near(x.index({1}), x[1], 0));
  EXPECT_DOUBLE_EQ(x.index({1, 2, 3}).item<double>(), 20 + 10 + 3);
  EXPECT_DOUBLE_EQ(x.index({-1, -1, -1}).item<double>(), 59);
  Tensor s = x.index({Slice(1, None), Slice(None, None, 2), 4});
  EXPECT_TRUE(tensor_is(s, {2, 2}, {24, 34, 44, 54}));
  EXPECT_TRUE(shares_storage(s, x));
  EXPECT_TRUE(tensor_near(x.index({Slice(), 0}), x.select(1, 0), 0));
  EXPECT_THROW(x.index({0, 0, 0, 0}), IndexError);
  EXPECT_THROW(x.index({3}), IndexError);
}

TEST(Index, NoneAndEllipsis) {
  Tensor x = iota({3, 4, 5});
  EXPECT_EQ(shape_of(x.index({None})), (std::vector<int64_t>{1, 3, 4, 5}));
  EXPECT_EQ(shape_of(x.index({Slice(), None, 1})), (std::vector<int64_t>{3, 1, 5}));
  EXPECT_EQ(shape_of(x.index({Ellipsis, None})), (std::vector<int64_t>{3, 4, 5, 1}));
  EXPECT_TRUE(tensor_near(x.index({Ellipsis, 2}), x.select(2, 2), 0));
  EXPECT_TRUE(tensor_near(x.index({0, Ellipsis, 2}), x[0].select(1, 2), 0));
  EXPECT_TRUE(tensor_near(x.index({Ellipsis, 1, Slice(0, 2)}), x.select(1, 1).slice(1, 0, 2), 0));
  EXPECT_TRUE(tensor_near(x.index({1, Ellipsis}), x[1], 0));
  EXPECT_TRUE(tensor_near(x.index({Ellipsis}), x, 0));
  EXPECT_THROW(x.index({Ellipsis, 0, Ellipsis}), IndexError);
  EXPECT_DOUBLE_EQ(tensor(4.).index({Ellipsis}).item<double>(), 4);
  EXPECT_EQ(shape_of(tensor(4.).index({None})), (std::vector<int64_t>{1}));
}

TEST(Index, TensorIndicesCopy) {
  Tensor x = iota({4, 3});
  Tensor rows = x.index({tensor({2, 0, 2})});
  EXPECT_TRUE(tensor_is(rows, {3, 3}, {6, 7, 8, 0, 1, 2, 6, 7, 8}));
  EXPECT_FALSE(shares_storage(rows, x));
  EXPECT_TRUE(tensor_is(x.index({Slice(), tensor({-1, 0})}), {4, 2}, {2, 0, 5, 3, 8, 6, 11, 9}));
  // A 2-D index tensor gives its own shape.
  EXPECT_TRUE(tensor_is(x.index({tensor({{0, 1}, {3, 3}})}), {2, 2, 3}, {0, 1, 2, 3, 4, 5, 9, 10, 11, 9, 10, 11}));
  EXPECT_TRUE(tensor_is(x.index({1, tensor({0, 2})}), {2}, {3, 5}));
  EXPECT_TRUE(tensor_is(x.index({tensor({1}, kInt32)}), {1, 3}, {3, 4, 5}));
  EXPECT_THROW(x.index({tensor({4})}), IndexError);
  EXPECT_THROW(x.index({tensor({0.5})}), IndexError);
}

TEST(Index, BoolMasks) {
  Tensor x = iota({3, 4});
  Tensor m = x > 6.5;
  EXPECT_TRUE(tensor_is(x.index({m}), {5}, {7, 8, 9, 10, 11}));
  EXPECT_TRUE(tensor_is(x.index({tensor({true, false, true})}), {2, 4}, {0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_TRUE(tensor_is(x.index({Slice(), tensor({false, true, true, false})}), {3, 2}, {1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(shape_of(x.index({tensor({false, false, false})})), (std::vector<int64_t>{0, 4}));
  EXPECT_THROW(x.index({tensor({true, false})}), ShapeError);
  // A mask over the leading dims of a higher-dim tensor selects along them.
  Tensor y = iota({2, 3, 2});
  Tensor m2 = tensor({{true, false, true}, {false, false, true}});
  EXPECT_TRUE(tensor_is(y.index({m2}), {3, 2}, {0, 1, 4, 5, 10, 11}));
}

TEST(Index, IndexPut) {
  Tensor x = zeros({3, 4});
  x.index_put_({1}, 5.0);
  x.index_put_({Slice(), 0}, tensor({1., 2., 3.}));
  x.index_put_({2, Slice(2, None)}, -1.0);
  EXPECT_TRUE(tensor_is(x, {3, 4}, {1, 0, 0, 0, 2, 5, 5, 5, 3, 0, -1, -1}));
  x.index_put_({Ellipsis, 3}, 9.0);
  EXPECT_TRUE(tensor_is(x.select(1, 3), {3}, {9, 9, 9}));
  // With a row-index tensor (value broadcast over the rows).
  Tensor y = zeros({3, 2});
  y.index_put_({tensor({0, 2})}, tensor({1., 2.}));
  EXPECT_TRUE(tensor_is(y, {3, 2}, {1, 2, 0, 0, 1, 2}));
  y.index_put_({tensor({1})}, 7.0);
  EXPECT_TRUE(tensor_is(y, {3, 2}, {1, 2, 7, 7, 1, 2}));
  // With a mask.
  Tensor z = iota({2, 3});
  z.index_put_({z > 2.5}, 0.0);
  EXPECT_TRUE(tensor_is(z, {2, 3}, {0, 1, 2, 0, 0, 0}));
  z.index_put_({z == 1}, tensor(-4.));
  EXPECT_TRUE(tensor_is(z, {2, 3}, {0, -4, 2, 0, 0, 0}));
}

// ---- split, chunk, unbind ------------------------------------------------------------------------
TEST(Split, SplitChunkUnbind) {
  Tensor x = iota({5, 2});
  std::vector<Tensor> s = x.split(2);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(tensor_is(s[0], {2, 2}, {0, 1, 2, 3}));
  EXPECT_TRUE(tensor_is(s[2], {1, 2}, {8, 9}));
  EXPECT_TRUE(shares_storage(s[1], x));
  std::vector<Tensor> w = x.split_with_sizes({1, 4});
  EXPECT_TRUE(tensor_is(w[1], {4, 2}, {2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_THROW(x.split_with_sizes({1, 3}), ShapeError);
  std::vector<Tensor> c = x.chunk(3);  // 5 rows in chunks of ceil(5/3) = 2
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(shape_of(c[2]), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(iota({6}).chunk(4).size(), 3u);  // sizes 2, 2, 2, as PyTorch
  EXPECT_EQ(iota({2}).chunk(5).size(), 2u);
  std::vector<Tensor> cols = x.split(1, 1);
  EXPECT_TRUE(tensor_is(cols[1], {5, 1}, {1, 3, 5, 7, 9}));
  std::vector<Tensor> u = x.unbind(1);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_TRUE(tensor_is(u[0], {5}, {0, 2, 4, 6, 8}));
  u[0].fill_(-1);  // views
  EXPECT_DOUBLE_EQ(x[3][0].item<double>(), -1);
  EXPECT_THROW(x.chunk(0), ValueError);
  EXPECT_THROW(x.split(0), ValueError);
}

// ---- diagonal, as_strided --------------------------------------------------------------------------
TEST(Diagonal, OffsetsAndDims) {
  Tensor x = iota({3, 4});
  EXPECT_TRUE(tensor_is(x.diagonal(), {3}, {0, 5, 10}));
  EXPECT_TRUE(tensor_is(x.diagonal(1), {3}, {1, 6, 11}));
  EXPECT_TRUE(tensor_is(x.diagonal(2), {2}, {2, 7}));
  EXPECT_TRUE(tensor_is(x.diagonal(-1), {2}, {4, 9}));
  EXPECT_EQ(x.diagonal(5).numel(), 0);
  EXPECT_EQ(x.diagonal(-3).numel(), 0);
  EXPECT_TRUE(tensor_is(x.t().diagonal(1), {2}, {4, 9}));
  Tensor y = iota({2, 3, 3});
  EXPECT_TRUE(tensor_is(y.diagonal(0, 1, 2), {2, 3}, {0, 4, 8, 9, 13, 17}));
  EXPECT_TRUE(tensor_is(y.diagonal(0, 0, 2), {3, 2}, {0, 10, 3, 13, 6, 16}));
  x.diagonal().fill_(-1);  // a view
  EXPECT_TRUE(tensor_is(x.diagonal(), {3}, {-1, -1, -1}));
  EXPECT_DOUBLE_EQ(x[0][1].item<double>(), 1);
  EXPECT_THROW(iota({3}).diagonal(), ShapeError);
  EXPECT_THROW(x.diagonal(0, 1, 1), ValueError);
}

TEST(AsStrided, WindowsAndBounds) {
  Tensor x = iota({6});
  Tensor win = x.as_strided({4, 3}, {1, 1});  // sliding windows of 3
  EXPECT_TRUE(tensor_is(win, {4, 3}, {0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5}));
  EXPECT_TRUE(tensor_is(x.as_strided({2, 2}, {3, 1}, 1), {2, 2}, {1, 2, 4, 5}));
  EXPECT_TRUE(tensor_is(x.as_strided({3}, {0}), {3}, {0, 0, 0}));
  Tensor v = x.slice(0, 2);
  EXPECT_TRUE(tensor_is(v.as_strided({2}, {2}), {2}, {2, 4}));  // offset defaults to the view's
  EXPECT_TRUE(throws_with<IndexError>([&] { x.as_strided({3, 3}, {3, 1}); }, {"as_strided", "outside"}));
  EXPECT_THROW(x.as_strided({2}, {1}, 5), IndexError);
  EXPECT_THROW(x.as_strided({2}, {1, 1}), ShapeError);
  x.as_strided({2}, {5}).fill_(-1);
  EXPECT_TRUE(tensor_is(x, {6}, {-1, 1, 2, 3, 4, -1}));
  // Elements a view reaches twice get both gradients (PyTorch 1.13: a.as_strided((2, 2), (1, 1))
  // of arange(3) gives a.grad [1, 2, 1]; nabla used to give [1, 1, 1]).
  Tensor a = iota({3}).requires_grad_();
  (a * 1).as_strided({2, 2}, {1, 1}).sum().backward();
  EXPECT_TRUE(tensor_is(a.grad(), {3}, {1, 2, 1}));
}

// ---- Tensor::unfold (torch.Tensor.unfold), checked against PyTorch 1.13 ----------------------------
TEST(Unfold, WindowsAreViewsWithPyTorchsStrides) {
  Tensor x = iota({7});
  Tensor w = x.unfold(0, 2, 3);  // step > size: [[0, 1], [3, 4]], strides (3, 1)
  EXPECT_TRUE(tensor_is(w, {2, 2}, {0, 1, 3, 4}));
  EXPECT_EQ(w.strides(), (Shape{3, 1}));
  EXPECT_TRUE(shares_storage(w, x));
  EXPECT_TRUE(tensor_is(x.unfold(0, 2, 1), {6, 2}, {0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6}));
  EXPECT_TRUE(tensor_is(x.unfold(-1, 3, 2), {3, 3}, {0, 1, 2, 2, 3, 4, 4, 5, 6}));
  EXPECT_TRUE(tensor_is(x.unfold(0, 7, 1), {1, 7}, {0, 1, 2, 3, 4, 5, 6}));  // size == the dim's length
  EXPECT_EQ(shape_of(x.unfold(0, 0, 1)), (std::vector<int64_t>{8, 0}));      // windows of size 0
  // A non-contiguous input: arange(24).view(2, 3, 4).transpose(0, 2).unfold(1, 2, 1) has shape
  // (4, 2, 2, 2) and strides (1, 4, 12, 4).
  Tensor y = iota({2, 3, 4}).transpose(0, 2);
  Tensor yu = y.unfold(1, 2, 1);
  EXPECT_EQ(yu.sizes(), (Shape{4, 2, 2, 2}));
  EXPECT_EQ(yu.strides(), (Shape{1, 4, 12, 4}));
  EXPECT_TRUE(tensor_is(yu.select(0, 1), {2, 2, 2}, {1, 5, 13, 17, 5, 9, 17, 21}));
  // 0-dim: unfolded as if it were (1), into (size).
  Tensor s = scalar_tensor(5.0, dtype(kFloat64));
  EXPECT_TRUE(tensor_is(s.unfold(0, 1, 1), {1}, {5}));
  EXPECT_TRUE(tensor_is(s.unfold(-1, 1, 2), {1}, {5}));
  EXPECT_EQ(shape_of(s.unfold(0, 0, 1)), (std::vector<int64_t>{0}));
  EXPECT_EQ(shape_of(zeros({2, 0}).unfold(1, 0, 1)), (std::vector<int64_t>{2, 1, 0}));
  // Writes through the base show in every window that holds the element.
  x.select(0, 3).fill_(-1);
  EXPECT_TRUE(tensor_is(x.unfold(0, 3, 2).select(1, 1), {3}, {1, -1, 5}));
}

TEST(Unfold, BadArgumentsNameTheShape) {
  Tensor x = iota({7});
  // PyTorch: "maximum size for tensor at dimension 0 is 7 but size is 8", "step is 0 but must be > 0",
  // "Dimension out of range (expected to be in range of [-1, 0], but got 1)".
  EXPECT_TRUE(
      throws_with<ShapeError>([&] { x.unfold(0, 8, 1); }, {"unfold", "dimension 0", "[7]", "is 7", "size is 8"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.unfold(0, 2, 0); }, {"unfold", "step", "0"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { x.unfold(0, -1, 1); }, {"unfold", "non-negative", "-1"}));
  EXPECT_THROW(x.unfold(1, 2, 1), IndexError);
  EXPECT_THROW(scalar_tensor(5.0).unfold(0, 2, 1), ShapeError);
  EXPECT_THROW(scalar_tensor(5.0).unfold(1, 1, 1), IndexError);
  EXPECT_THROW(zeros({2, 0}).unfold(1, 1, 1), ShapeError);
}

TEST(Unfold, OverlappingWindowsSumTheirGradients) {
  // PyTorch 1.13: a = arange(6.); (a.unfold(0, 3, 1) * arange(12.).view(4, 3)).sum().backward()
  // gives a.grad [0, 4, 12, 21, 18, 11]; its grad_fn is UnfoldBackward0.
  Tensor a = iota({6}).requires_grad_();
  Tensor u = a.unfold(0, 3, 1);
  EXPECT_EQ(u.grad_fn()->torch_name(), "UnfoldBackward0");
  (u * iota({4, 3})).sum().backward();
  EXPECT_TRUE(tensor_is(a.grad(), {6}, {0, 4, 12, 21, 18, 11}));
  // Second order: x = arange(5.); g = grad(x.unfold(0, 3, 1).pow(2).sum(), x, create_graph=True)
  // is [0, 4, 12, 12, 8], and grad(g.sum(), x) [2, 4, 6, 4, 2].
  Tensor x = iota({5}).requires_grad_();
  Tensor g = autograd::grad({x.unfold(0, 3, 1).pow(2).sum()}, {x}, {}, true, true)[0];
  EXPECT_TRUE(tensor_is(g, {5}, {0, 4, 12, 12, 8}));
  EXPECT_TRUE(tensor_is(autograd::grad({g.sum()}, {x})[0], {5}, {2, 4, 6, 4, 2}));
  // A view made before its base changed in place gets its history rebuilt from the base, with the
  // overlap still summed: y = x * 2; u = y.unfold(0, 2, 1); y.mul_(3); (u * [[1, 2], [3, 4], [5, 6]])
  // .sum().backward() gives x.grad [6, 30, 54, 36] (PyTorch's AsStridedBackward0).
  Tensor x4 = iota({4}).requires_grad_();
  Tensor y = x4 * 2;
  Tensor yu = y.unfold(0, 2, 1);
  y.mul_(3);
  (yu * f64({1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  EXPECT_TRUE(tensor_is(x4.grad(), {4}, {6, 30, 54, 36}));
  // Gradcheck through windows of windows (2-D patches), non-contiguous input.
  auto patches = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].unfold(0, 2, 1).unfold(1, 3, 2)};
  };
  EXPECT_TRUE(autograd::gradcheck(patches, {lcg_tensor({4, 5}, 3).t().requires_grad_()}));
}

}  // namespace
}  // namespace nabla::testing
