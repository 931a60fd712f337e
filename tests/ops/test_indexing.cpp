// Copying shape ops and indexing ops: cat/stack/repeat/flip/roll, index_select/gather/scatter/
// scatter_add/index_add, masked_fill/masked_select/where, tril/triu, one_hot, pad, embedding, nonzero.
#include <gtest/gtest.h>

#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {

Tensor iota(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(n, kFloat64).view(shape);
}

// ---- cat / stack ----------------------------------------------------------------------------------
TEST(Cat, AlongEachDim) {
  Tensor a = iota({2, 2}), b = iota({2, 1}) + 10;
  EXPECT_TRUE(tensor_is(cat({a, b}, 1), {2, 3}, {0, 1, 10, 2, 3, 11}));
  EXPECT_TRUE(tensor_is(cat({a, b.t()}, 0), {3, 2}, {0, 1, 2, 3, 10, 11}));
  EXPECT_TRUE(tensor_is(cat({a, b}, -1), {2, 3}, {0, 1, 10, 2, 3, 11}));
  EXPECT_TRUE(tensor_is(cat({a}, 0), {2, 2}, {0, 1, 2, 3}));
  // Non-contiguous inputs and empty pieces.
  EXPECT_TRUE(tensor_is(cat({a.t(), zeros({0, 2}, kFloat64), a}, 0), {4, 2}, {0, 2, 1, 3, 0, 1, 2, 3}));
  // 1-D empty tensors are skipped (PyTorch's legacy rule).
  EXPECT_TRUE(tensor_is(cat({zeros({0}, kFloat64), a}, 0), {2, 2}, {0, 1, 2, 3}));
}

TEST(Cat, PromotesDtypes) {
  Tensor r = cat({tensor({1, 2}), tensor({0.5f})});
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_TRUE(tensor_is(r, {3}, {1, 2, 0.5}));
  EXPECT_EQ(cat({tensor({1}, kInt32), tensor({2})}).dtype(), kInt64);
}

TEST(Cat, Errors) {
  EXPECT_THROW(cat({}), ValueError);
  EXPECT_TRUE(throws_with<ShapeError>([] { cat({zeros({2, 3}), zeros({2, 4})}, 0); }, {"cat", "[2, 4]", "[2, 3]"}));
  EXPECT_THROW(cat({zeros({2, 3}), zeros({2, 3, 1})}, 0), ShapeError);
  EXPECT_THROW(cat({tensor(1.), tensor(2.)}), ShapeError);
  EXPECT_THROW(cat({zeros({2})}, 1), IndexError);
}

TEST(Stack, NewDim) {
  Tensor a = tensor({1., 2.}), b = tensor({3., 4.});
  EXPECT_TRUE(tensor_is(stack({a, b}), {2, 2}, {1, 2, 3, 4}));
  EXPECT_TRUE(tensor_is(stack({a, b}, 1), {2, 2}, {1, 3, 2, 4}));
  EXPECT_TRUE(tensor_is(stack({a, b}, -1), {2, 2}, {1, 3, 2, 4}));
  EXPECT_TRUE(tensor_is(stack({tensor(1.), tensor(2.)}), {2}, {1, 2}));
  EXPECT_THROW(stack({a, tensor({1., 2., 3.})}), ShapeError);
  EXPECT_THROW(stack({a, b}, 3), IndexError);
}

// ---- repeat / flip / roll -------------------------------------------------------------------------
TEST(Repeat, TilesAndAddsDims) {
  Tensor x = tensor({{1., 2.}, {3., 4.}});
  EXPECT_TRUE(tensor_is(x.repeat({1, 2}), {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(tensor_is(x.repeat({2, 1}), {4, 2}, {1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_TRUE(tensor_is(tensor({1., 2.}).repeat({2, 2}), {2, 4}, {1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_TRUE(tensor_is(x.t().repeat({1, 2}), {2, 4}, {1, 3, 1, 3, 2, 4, 2, 4}));
  EXPECT_EQ(shape_of(x.repeat({0, 3})), (std::vector<int64_t>{0, 6}));
  EXPECT_THROW(x.repeat({2}), ShapeError);
  EXPECT_THROW(x.repeat({-1, 1}), ValueError);
}

TEST(Flip, OneAndManyDims) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_is(x.flip({0}), {2, 3}, {3, 4, 5, 0, 1, 2}));
  EXPECT_TRUE(tensor_is(x.flip({1}), {2, 3}, {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(tensor_is(x.flip({0, -1}), {2, 3}, {5, 4, 3, 2, 1, 0}));
  EXPECT_TRUE(tensor_is(x.t().flip({0}), {3, 2}, {2, 5, 1, 4, 0, 3}));
  Tensor f = x.flip({});
  EXPECT_TRUE(tensor_is(f, {2, 3}, {0, 1, 2, 3, 4, 5}));
  f.fill_(0);  // a copy, as PyTorch
  EXPECT_DOUBLE_EQ(x.sum().item<double>(), 15);
  EXPECT_EQ(zeros({0, 2}).flip({0}).numel(), 0);
}

TEST(Roll, ShiftsAndDims) {
  Tensor v = iota({5});
  EXPECT_TRUE(tensor_is(v.roll({2}), {5}, {3, 4, 0, 1, 2}));
  EXPECT_TRUE(tensor_is(v.roll({-1}), {5}, {1, 2, 3, 4, 0}));
  EXPECT_TRUE(tensor_is(v.roll({7}), {5}, {3, 4, 0, 1, 2}));
  EXPECT_TRUE(tensor_is(v.roll({5}), {5}, {0, 1, 2, 3, 4}));
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_is(x.roll({1}), {2, 3}, {5, 0, 1, 2, 3, 4}));  // no dims: flattened
  EXPECT_TRUE(tensor_is(x.roll({1}, {1}), {2, 3}, {2, 0, 1, 5, 3, 4}));
  EXPECT_TRUE(tensor_is(x.roll({1, -1}, {0, 1}), {2, 3}, {4, 5, 3, 1, 2, 0}));
  EXPECT_THROW(x.roll({1, 2}), ValueError);
  EXPECT_THROW(x.roll({1}, {0, 1}), ValueError);
}

// ---- index_select / index_add ---------------------------------------------------------------------
TEST(IndexSelect, RowsColumnsAndRepeats) {
  Tensor x = iota({3, 4});
  EXPECT_TRUE(tensor_is(x.index_select(0, tensor({2, 0})), {2, 4}, {8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_TRUE(tensor_is(x.index_select(1, tensor({3, 3, 1})), {3, 3}, {3, 3, 1, 7, 7, 5, 11, 11, 9}));
  EXPECT_TRUE(tensor_is(x.t().index_select(0, tensor({1})), {1, 3}, {1, 5, 9}));
  EXPECT_TRUE(tensor_is(x.index_select(0, tensor(1)), {1, 4}, {4, 5, 6, 7}));
  EXPECT_EQ(shape_of(x.index_select(1, zeros({0}, kInt64))), (std::vector<int64_t>{3, 0}));
  EXPECT_TRUE(tensor_is(x.index_select(0, tensor({1}, kInt32)), {1, 4}, {4, 5, 6, 7}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.index_select(0, tensor({3})); }, {"index_select", "3", "size 3"}));
  EXPECT_THROW(x.index_select(0, tensor({1.0})), DTypeError);
  EXPECT_THROW(x.index_select(0, tensor({{0}})), ShapeError);
}

TEST(IndexAdd, AccumulatesDuplicates) {
  Tensor x = zeros({3, 2}, kFloat64);
  Tensor r = index_add(x, 0, tensor({0, 2, 0}), tensor({{1., 2.}, {3., 4.}, {5., 6.}}, kFloat64));
  EXPECT_TRUE(tensor_is(r, {3, 2}, {6, 8, 0, 0, 3, 4}));
  EXPECT_TRUE(tensor_is(x, {3, 2}, {0, 0, 0, 0, 0, 0}));  // out of place
  x.index_add_(1, tensor({1, 1}), ones({3, 2}, kFloat64));
  EXPECT_TRUE(tensor_is(x, {3, 2}, {0, 2, 0, 2, 0, 2}));
  EXPECT_THROW(index_add(x, 0, tensor({0}), ones({2, 2}, kFloat64)), ShapeError);
  EXPECT_THROW(index_add(x, 0, tensor({0}), ones({1, 2})), DTypeError);
  EXPECT_THROW(index_add(x, 0, tensor({5}), ones({1, 2}, kFloat64)), IndexError);
}

// ---- gather / scatter -----------------------------------------------------------------------------
TEST(Gather, AlongDims) {
  Tensor x = tensor({{1., 2.}, {3., 4.}});
  EXPECT_TRUE(tensor_is(x.gather(1, tensor({{0, 0}, {1, 0}})), {2, 2}, {1, 1, 4, 3}));
  EXPECT_TRUE(tensor_is(x.gather(0, tensor({{1, 0}})), {1, 2}, {3, 2}));
  EXPECT_TRUE(tensor_is(x.t().gather(1, tensor({{1}, {0}})), {2, 1}, {3, 2}));
  EXPECT_TRUE(tensor_is(x.gather(1, tensor({{-1}, {-2}})), {2, 1}, {2, 3}));
  EXPECT_THROW(x.gather(1, tensor({{2}, {0}})), IndexError);
  EXPECT_THROW(x.gather(1, tensor({0, 1})), ShapeError);
  EXPECT_THROW(x.gather(1, tensor({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}})), ShapeError);
  // Large enough to run on several threads: the error still surfaces as an exception.
  Tensor big = zeros({64, 1024});
  Tensor idx = zeros({64, 1024}, kInt64);
  idx[40][7].fill_(5000);
  EXPECT_THROW(big.gather(1, idx), IndexError);
}

TEST(Scatter, OverwriteValueAndAdd) {
  Tensor x = zeros({2, 4});
  Tensor src = tensor({{1., 2., 3.}, {4., 5., 6.}});
  Tensor idx = tensor({{0, 2, 3}, {1, 1, 0}});
  EXPECT_TRUE(tensor_is(x.scatter(1, idx, src), {2, 4}, {1, 0, 2, 3, 6, 5, 0, 0}));  // duplicates: last write wins
  EXPECT_TRUE(tensor_is(x.scatter_add(1, idx, src), {2, 4}, {1, 0, 2, 3, 6, 9, 0, 0}));
  EXPECT_TRUE(tensor_is(x.scatter(1, idx, 7.5), {2, 4}, {7.5, 0, 7.5, 7.5, 7.5, 7.5, 0, 0}));
  // src may be larger than index: only its leading corner is read.
  EXPECT_TRUE(tensor_is(zeros({3}).scatter(0, tensor({2, 0}), tensor({1.f, 2.f, 3.f})), {3}, {2, 0, 1}));
  EXPECT_TRUE(tensor_is(x, {2, 4}, {0, 0, 0, 0, 0, 0, 0, 0}));
  x.scatter_(0, tensor({{1, 0, 1, 0}}), ones({1, 4}));
  x.scatter_add_(0, tensor({{1, 1, 1, 1}}), ones({1, 4}));
  EXPECT_TRUE(tensor_is(x, {2, 4}, {0, 1, 0, 1, 2, 1, 2, 1}));
  EXPECT_THROW(x.scatter(1, tensor({{4}}), ones({1, 1})), IndexError);
  EXPECT_THROW(x.scatter(1, idx, src.to(kFloat64)), DTypeError);
}

TEST(Scatter, GatherInvertsScatterOfAPermutation) {
  Tensor x = lcg_tensor({4, 6}, 3);
  Tensor perm = tensor({{5, 0, 3, 1, 4, 2}}).expand({4, 6}).contiguous();
  Tensor s = zeros_like(x).scatter(1, perm, x);
  EXPECT_TRUE(tensor_near(s.gather(1, perm), x, 0));
}

// ---- masks ---------------------------------------------------------------------------------------
TEST(Mask, MaskedFillBroadcastsMask) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_is(x.masked_fill(x > 2.5, -1.0), {2, 3}, {0, 1, 2, -1, -1, -1}));
  EXPECT_TRUE(tensor_is(x.masked_fill(tensor({true, false, true}), 9.0), {2, 3}, {9, 1, 9, 9, 4, 9}));
  EXPECT_TRUE(tensor_is(x.masked_fill(tensor({{false}, {true}}), tensor(0.5)), {2, 3}, {0, 1, 2, 0.5, 0.5, 0.5}));
  Tensor i = tensor({1, 2, 3});
  EXPECT_EQ(int_values(i.masked_fill(i == 2, 2.7)), (std::vector<int64_t>{1, 2, 3}));  // cast to int64
  EXPECT_EQ(i.masked_fill(i == 2, 2.7).dtype(), kInt64);
  EXPECT_THROW(x.masked_fill(zeros({2, 3}), 1.0), DTypeError);
  EXPECT_THROW(tensor({1., 2.}).masked_fill(zeros({2, 2}, kBool), 1.0), ShapeError);  // mask would grow x
  x.masked_fill_(x < 1.5, 100.0);
  EXPECT_TRUE(tensor_is(x, {2, 3}, {100, 100, 2, 3, 4, 5}));
}

TEST(Mask, MaskedSelectAndNonzero) {
  Tensor x = iota({2, 3});
  EXPECT_TRUE(tensor_is(x.masked_select(x > 1.5), {4}, {2, 3, 4, 5}));
  EXPECT_TRUE(tensor_is(x.masked_select(tensor({true, false, true})), {4}, {0, 2, 3, 5}));
  EXPECT_TRUE(tensor_is(x.t().masked_select(x.t() > 3.5), {2}, {4, 5}));
  EXPECT_EQ(x.masked_select(zeros({2, 3}, kBool)).numel(), 0);
  Tensor nz = nonzero(tensor({{0, 3, 0}, {5, 0, 6}}));
  EXPECT_EQ(nz.dtype(), kInt64);
  EXPECT_TRUE(tensor_is(nz, {3, 2}, {0, 1, 1, 0, 1, 2}));
  EXPECT_TRUE(tensor_is(nonzero(tensor({0., -0.5, 0., 2.})), {2, 1}, {1, 3}));
  EXPECT_EQ(shape_of(nonzero(zeros({2, 2}))), (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(tensor_is(nonzero(iota({2, 2}).t()), {3, 2}, {0, 1, 1, 0, 1, 1}));
}

TEST(Mask, TrilTriu) {
  Tensor x = iota({3, 4}) + 1;
  EXPECT_TRUE(tensor_is(x.tril(), {3, 4}, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_TRUE(tensor_is(x.tril(1), {3, 4}, {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}));
  EXPECT_TRUE(tensor_is(x.tril(-1), {3, 4}, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  EXPECT_TRUE(tensor_is(x.triu(), {3, 4}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_TRUE(tensor_is(x.triu(2), {3, 4}, {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0}));
  Tensor b = stack({x, -x}).narrow(2, 0, 3);  // batched (2, 3, 3)
  EXPECT_TRUE(tensor_is(b.triu(), {2, 3, 3}, {1, 2, 3, 0, 6, 7, 0, 0, 11, -1, -2, -3, 0, -6, -7, 0, 0, -11}));
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).tril().dtype(), kInt64);
  EXPECT_THROW(tensor({1., 2.}).tril(), ShapeError);
}

// ---- one_hot / pad / embedding -------------------------------------------------------------------
TEST(OneHot, ClassesAndShape) {
  Tensor oh = one_hot(tensor({0, 2, 1}));
  EXPECT_EQ(oh.dtype(), kInt64);
  EXPECT_TRUE(tensor_is(oh, {3, 3}, {1, 0, 0, 0, 0, 1, 0, 1, 0}));
  EXPECT_TRUE(tensor_is(one_hot(tensor({{1}, {0}}), 4), {2, 1, 4}, {0, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(shape_of(one_hot(zeros({0}, kInt64), 3)), (std::vector<int64_t>{0, 3}));
  EXPECT_THROW(one_hot(tensor({0, 3}), 3), IndexError);
  EXPECT_THROW(one_hot(tensor({-1})), IndexError);
  EXPECT_THROW(one_hot(tensor({0.})), DTypeError);
  EXPECT_THROW(one_hot(zeros({0}, kInt64)), ValueError);
}

TEST(Pad, ConstantPaddingLastDimsFirst) {
  Tensor x = tensor({{1., 2.}, {3., 4.}});
  EXPECT_TRUE(tensor_is(pad(x, {1, 2}), {2, 5}, {0, 1, 2, 0, 0, 0, 3, 4, 0, 0}));
  EXPECT_TRUE(tensor_is(pad(x, {0, 0, 1, 0}, -1), {3, 2}, {-1, -1, 1, 2, 3, 4}));
  EXPECT_TRUE(tensor_is(pad(x, {1, 1, 1, 1}), {4, 4}, {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(tensor_is(pad(x, {-1, 1}), {2, 2}, {2, 0, 4, 0}));  // negative padding crops
  EXPECT_TRUE(tensor_is(pad(x.t(), {1, 0}), {2, 3}, {0, 1, 3, 0, 2, 4}));
  EXPECT_EQ(pad(tensor({1, 2}), {1, 1}, 9).dtype(), kInt64);
  EXPECT_EQ(int_values(pad(tensor({1, 2}), {1, 1}, 9)), (std::vector<int64_t>{9, 1, 2, 9}));
  EXPECT_THROW(pad(x, {1}), ValueError);
  EXPECT_THROW(pad(x, {1, 1, 1, 1, 1, 1}), ValueError);
  EXPECT_THROW(pad(x, {-2, -1}), ShapeError);
}

TEST(Embedding, LooksUpRows) {
  Tensor w = iota({4, 3});
  Tensor e = embedding(w, tensor({{0, 3}, {3, 1}}));
  EXPECT_TRUE(tensor_is(e, {2, 2, 3}, {0, 1, 2, 9, 10, 11, 9, 10, 11, 3, 4, 5}));
  EXPECT_TRUE(tensor_is(embedding(w, tensor(2)), {3}, {6, 7, 8}));
  EXPECT_TRUE(tensor_is(embedding(w, tensor({1}), 1), {1, 3}, {3, 4, 5}));  // padding_idx only affects gradients
  EXPECT_THROW(embedding(w, tensor({4})), IndexError);
  EXPECT_THROW(embedding(w, tensor({0.})), DTypeError);
  EXPECT_THROW(embedding(iota({4}), tensor({0})), ShapeError);
}

TEST(Embedding, PaddingRowGetsNoGradient) {
  Tensor w = iota({3, 2}).requires_grad_();
  Tensor e = embedding(w, tensor({0, 2, 2, 1}), 2);
  e.sum().backward();
  EXPECT_TRUE(tensor_is(w.grad(), {3, 2}, {1, 1, 1, 1, 0, 0}));
  Tensor w2 = iota({3, 2}).requires_grad_();
  embedding(w2, tensor({2, 2, 0})).sum().backward();
  EXPECT_TRUE(tensor_is(w2.grad(), {3, 2}, {1, 1, 0, 0, 2, 2}));
}

// ---- several tensor indices, index_put, take_along_dim, repeat_interleave ---------------------------
TEST(AdvancedIndexing, PlacesTheBroadcastDimsAsPyTorch) {
  using indexing::Slice;
  Tensor x = iota({3, 4, 5});
  Tensor i = tensor({0, 2}), j = tensor({1, 3});
  EXPECT_TRUE(tensor_is(x.index({i, j}), {2, 5}, {5, 6, 7, 8, 9, 55, 56, 57, 58, 59}));
  EXPECT_EQ(shape_of(x.index({Slice(), i, j})), (std::vector<int64_t>{3, 2}));  // adjacent: in place
  EXPECT_EQ(shape_of(x.index({i, Slice(), j})), (std::vector<int64_t>{2, 4}));  // apart: first
  EXPECT_EQ(shape_of(x.index({0, Slice(), i})), (std::vector<int64_t>{4, 2}));  // an int is a plain select
  EXPECT_EQ(shape_of(x.index({i.view({2, 1}), Slice(), tensor({0, 1, 2})})), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(tensor_is(x.index({tensor({-1}), tensor({-1}), tensor({-1})}), {1}, {59}));
  EXPECT_TRUE(throws_with<IndexError>([&] { x.index({i, tensor({4, 0})}); }, {"index 4", "dim 1", "size 4"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { x.index({i, tensor({0, 1, 2})}); }, {"[2]", "[3]"}));
}

TEST(AdvancedIndexing, IndexPutWritesAndAccumulates) {
  using indexing::Slice;
  Tensor x = zeros({2, 3}, kFloat64);
  Tensor r = tensor({0, 1, 1}), c = tensor({2, 0, 0});
  EXPECT_TRUE(tensor_is(index_put(x, {r, c}, tensor({1., 2., 3.}), true), {2, 3}, {0, 0, 1, 5, 0, 0}));
  EXPECT_TRUE(tensor_is(index_put(x, {std::nullopt, tensor({1})}, tensor({7.})), {2, 3}, {0, 7, 0, 0, 7, 0}));
  Tensor y = zeros({2, 3}, kFloat64);
  y.index_put_({Slice(), tensor({0, 2})}, tensor({{1., 2.}, {3., 4.}}));
  EXPECT_TRUE(tensor_is(y, {2, 3}, {1, 0, 2, 3, 0, 4}));
  index_put_(y, {tensor({1})}, tensor({9.}), /*accumulate=*/true);
  EXPECT_TRUE(tensor_is(y, {2, 3}, {1, 0, 2, 12, 9, 13}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { index_put(x, {r, c}, tensor({1., 2.})); }, {"index_put", "[2]", "[3]"}));
}

TEST(AdvancedIndexing, TakeAlongDimAndRepeatInterleave) {
  Tensor x = iota({2, 3});
  Tensor order = argsort(-x, 1);
  EXPECT_TRUE(tensor_is(take_along_dim(x, order, 1), {2, 3}, {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(tensor_is(take_along_dim(x, tensor({5, 0})), {2}, {5, 0}));
  EXPECT_TRUE(tensor_is(repeat_interleave(x, tensor({2, 0, 1}), 1), {2, 3}, {0, 0, 2, 3, 3, 5}));
  EXPECT_TRUE(tensor_is(repeat_interleave(tensor({1., 2.}), 3), {6}, {1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(int_values(repeat_interleave(tensor({1, 0, 2}))), (std::vector<int64_t>{0, 2, 2}));
  EXPECT_TRUE(throws_with<ValueError>([&] { repeat_interleave(x, tensor({1, -1, 1}), 1); }, {"non-negative", "-1"}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { repeat_interleave(x, tensor({1, 2}), 1); }, {"one per slice (3)"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { repeat_interleave(x, 2, 0, 5); }, {"output_size 5"}));
}

TEST(AdvancedIndexing, ScatterReduce) {
  Tensor x = tensor({1., 2., 3.});
  Tensor idx = tensor({0, 0, 2}), src = tensor({5., -1., 4.});
  EXPECT_TRUE(tensor_is(scatter_reduce(x, 0, idx, src, "sum"), {3}, {5, 2, 7}));
  EXPECT_TRUE(tensor_is(scatter_reduce(x, 0, idx, src, "sum", false), {3}, {4, 2, 4}));
  EXPECT_TRUE(tensor_is(scatter_reduce(x, 0, idx, src, "prod"), {3}, {-5, 2, 12}));
  EXPECT_TRUE(tensor_is(scatter_reduce(x, 0, idx, src, "mean"), {3}, {5.0 / 3, 2, 3.5}));
  EXPECT_TRUE(tensor_is(scatter_reduce(x, 0, idx, src, "amax", false), {3}, {5, 2, 4}));
  EXPECT_TRUE(tensor_is(scatter_reduce(x, 0, idx, src, "amin"), {3}, {-1, 2, 3}));
  Tensor xi = tensor({10, 20}), si = tensor({1, 2, 4});
  EXPECT_EQ(int_values(scatter_reduce(xi, 0, tensor({0, 0, 1}), si, "mean")), (std::vector<int64_t>{4, 12}));
  EXPECT_TRUE(throws_with<ValueError>([&] { scatter_reduce(x, 0, idx, src, "max"); }, {"'max'", "amax"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { scatter_reduce(x, 0, tensor({3}), tensor({1.}), "amax"); }, {"index 3"}));
}

// index_put_ with a bool mask, against values: a mask over the leading dims writes whole rows (as
// x.index({mask}) reads them, and as in PyTorch), and a 0-d value that requires grad gets the
// gradient of every element it fills.
TEST(IndexPut, BoolMaskWritesRowsAndPassesTheValueGradient) {
  Tensor rows = tensor({1., 0., 1.}) != 0.0;
  Tensor v = full({}, 2.0, dtype(kFloat64)).requires_grad_();
  Tensor y = zeros({3, 3}, dtype(kFloat64));
  y.index_put_({rows}, v);
  EXPECT_TRUE(equal(y, tensor({2., 2., 2., 0., 0., 0., 2., 2., 2.}).view({3, 3}))) << y;
  EXPECT_TRUE(equal(y.index({rows}), full({2, 3}, 2.0, dtype(kFloat64)))) << y.index({rows});
  (y * arange(9, dtype(kFloat64)).view({3, 3})).sum().backward();
  ASSERT_TRUE(v.grad().defined());
  EXPECT_DOUBLE_EQ(v.grad().item<double>(), 0 + 1 + 2 + 6 + 7 + 8);

  Tensor z = zeros({2, 3, 2});
  z.index_put_({tensor({1., 0., 0., 0., 0., 1.}).view({2, 3}) != 0.0}, 5.0);  // 2-d mask: z[0, 0] and z[1, 2]
  Tensor expect = zeros({2, 3, 2});
  expect.index_put_({0, 0}, 5.0);
  expect.index_put_({1, 2}, 5.0);
  EXPECT_TRUE(equal(z, expect)) << z;
  EXPECT_THROW(zeros({3, 2}).index_put_({tensor({1., 0.}) != 0.0}, 1.0), ShapeError);  // mask (2) vs dim 0 (3)
}

}  // namespace
}  // namespace nabla::testing
