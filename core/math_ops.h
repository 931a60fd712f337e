// Statistics, scans and counting ops with PyTorch's semantics (torch.median, quantile, cummax,
// logcumsumexp, histc, bincount, searchsorted, unique, ...). Front-ends in core/stats.cpp.
//
// How they run: every op is written with other Tensor ops (sort, gather, cumsum, logaddexp) where
// that is natural, so it runs on any device and its gradient comes from the ops it is made of; the
// ops that pick elements by a rule that is a loop (median, kthvalue, mode, cummax/cummin) compute
// the int64 indices of the chosen elements on the host and take the values with gather, so their
// gradient is gather's (the gradient scattered to the chosen elements, as PyTorch's
// value_selecting_reduction_backward) and twice differentiable. The counting ops (histc, bincount,
// searchsorted, bucketize, unique) are host loops with no gradient. For a CUDA tensor the host loops
// copy the input to the host and the result back (one device synchronisation): correct, not fast.
//
// Ties: kthvalue/median/nanmedian pick the element of a stable sort (the first of equal values in
// their order along the dim); PyTorch's CPU kernel uses nth_element and documents no rule, so their
// indices can differ from PyTorch's where values repeat (the values never do). mode and
// cummax/cummin follow PyTorch's rules: mode gives the smallest of the most frequent values and the
// last index where it occurs; cummax/cummin take the latest of equal values, and a NaN, once seen,
// stays (with the index of the latest NaN).
#pragma once

#include <optional>
#include <string_view>
#include <tuple>

#include "tensor.h"

namespace nabla {

// ---- sorting-based reductions -------------------------------------------------------------------
// The lower median (element (n - 1) / 2 of the sorted values); NaN when the input (the line, for the
// dim form) holds a NaN, with the index of the first NaN. The whole-tensor forms return the value and
// spread the gradient evenly over the elements equal to it, as PyTorch's median()/nanmedian() do. An
// empty input is an error for the dim forms with an empty dim (PyTorch's too); median() of an empty
// tensor is NaN.
Tensor median(const Tensor& x);
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
// As median, ignoring NaN (NaN only where every element of the line is NaN).
Tensor nanmedian(const Tensor& x);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
// The k-th smallest element along dim (k from 1), NaN counted as the largest; values and indices.
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
// The most frequent value along dim (the smallest among equally frequent ones) and the last index
// where it occurs, as PyTorch's CPU kernel.
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);
// The q-quantiles of x (floating) along dim, or of all its elements (dim nullopt), with PyTorch's
// interpolation "linear" (default), "lower", "higher", "nearest" (half to even) or "midpoint". q is a
// number in [0, 1] or a 0-d / 1-D tensor of them (of x's dtype); a 1-D q puts its dim first in the
// result. A NaN in a line makes its quantiles NaN; nanquantile ignores NaNs (NaN where all are).
// keepdim keeps the reduced dim (all dims, size 1, when dim is nullopt). Gradient through sort and
// gather (the two neighbouring order statistics, weighted).
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                std::string_view interpolation = "linear");
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                std::string_view interpolation = "linear");
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                   std::string_view interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                   std::string_view interpolation = "linear");

// ---- scans --------------------------------------------------------------------------------------
// Running maximum / minimum along dim: values and the index where each was reached (ties: the latest;
// NaN propagates). Gradient: to the element each output took.
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);
// log(cumsum(exp(x))) along dim without overflow or underflow: a log-space scan of max(a, b) + log1p(exp(-|a - b|)) steps
// (log2(n) of them, each a Tensor op), so it is exact where terms differ by far more than exp's
// range, runs on any device and is differentiable to any order. Floating inputs only.
Tensor logcumsumexp(const Tensor& x, int64_t dim);

// ---- counting and searching (no gradient) -------------------------------------------------------
// A histogram of `bins` equal bins over [min, max] (both 0: the data's min and max; equal bounds are
// widened by 1 each way); elements outside, and NaN, are not counted; max falls in the last bin. The
// result has x's dtype (floating x only, as PyTorch's CPU kernel).
Tensor histc(const Tensor& x, int64_t bins = 100, double min = 0, double max = 0);
// Counts of each value of a 1-D non-negative integer tensor: length max(x) + 1 or minlength. With
// weights (x's size): their sums, float32 for float32 weights and float64 otherwise, as PyTorch.
Tensor bincount(const Tensor& x, const Tensor& weights = {}, int64_t minlength = 0);
// For each value, the index where it would be inserted into the sorted innermost dim of
// sorted_sequence (1-D, or with the leading dims of values) to keep it sorted: the first such index
// (side "left"), or the last (right = true, or side "right"). sorter: int64 indices that sort an
// unsorted sequence (argsort's). int64 results, int32 with out_int32.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false, bool right = false,
                    std::optional<std::string_view> side = std::nullopt, const Tensor& sorter = {});
Tensor searchsorted(const Tensor& sorted_sequence, Scalar value, bool out_int32 = false, bool right = false,
                    std::optional<std::string_view> side = std::nullopt, const Tensor& sorter = {});
// searchsorted(boundaries, x, out_int32, right): the bucket of each element of x (boundaries 1-D).
Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32 = false, bool right = false);

// The distinct values of x, flattened, in ascending order (NaNs last, each NaN distinct); when asked,
// the inverse indices (x's shape: where each element went) and the counts. Undefined tensors stand for
// the results not asked for. Always sorted: sorted = false gives the same sorted result, an order
// PyTorch's "unspecified order" allows (its CPU kernel returns hash order).
// With `dim` (torch.unique(..., dim=d)): the distinct slices of x along dim, in lexicographic order,
// stacked along dim; the inverse is 1-D (one entry per slice), the counts one per distinct slice. An
// empty x needs dim to be its only dim of size 0 (as PyTorch).
struct UniqueResult {
  Tensor values, inverse, counts;
};
UniqueResult unique(const Tensor& x, bool sorted = true, bool return_inverse = false, bool return_counts = false,
                    std::optional<int64_t> dim = std::nullopt);
// Collapses runs of equal consecutive elements of the flattened x, or with `dim` of equal
// consecutive slices along dim.
UniqueResult unique_consecutive(const Tensor& x, bool return_inverse = false, bool return_counts = false,
                                std::optional<int64_t> dim = std::nullopt);

}  // namespace nabla
