// Indexing ops beyond core/ops.h's: index_put with several index tensors and accumulation,
// take_along_dim, repeat_interleave and scatter_reduce (torch's). x.index({i, j}) with several tensor indices is
// Tensor::index (core/tensor.h).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "ops.h"
#include "tensor.h"

namespace nabla {

// torch.index_put: a copy of x with x[indices] = values (values broadcast to the indexed shape), or
// x[indices] += values with accumulate, where duplicate positions all add up (without accumulate the
// last write to a duplicate position wins, which PyTorch leaves undefined). indices has one entry
// per leading dim of x: an int64 tensor, a bool mask (its true positions), or nullopt for the whole
// dim; the index tensors broadcast together, and their shape replaces the indexed dims where these
// are adjacent, else goes first (PyTorch's advanced-indexing rule). Negative indices count from the
// end. Differentiable with respect to x and values.
Tensor index_put(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                 bool accumulate = false);
// The in-place form: writes into x (also when x is a view) and returns it.
Tensor& index_put_(Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                   bool accumulate = false);

// Picks values along `dim` at `indices` (torch.take_along_dim): x and indices broadcast in every other
// dim, then gather. Without dim, x and indices are flattened.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);

// Repeats each element (each slice along dim) `repeats` times in place: [a, b] -> [a, a, b, b].
// repeats is a number, or an int64 tensor with one count per slice (or one for all). Without dim, x
// is flattened first. output_size, when given, must equal the result's length (as PyTorch's).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
// repeat_interleave(repeats): each i in [0, n) repeated repeats[i] times (int64).
Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size = std::nullopt);

// torch.scatter_reduce: a copy of x where each src[i][j] (dim 1; any dim alike) is combined into
// position [i][index[i][j]] with reduce "sum", "prod", "mean", "amax" or "amin"; include_self: x's
// own value takes part, else only the scattered values do (positions nothing is scattered to keep x).
// "mean" on integers rounds down, as PyTorch's. Gradients as PyTorch's (amax/amin share the gradient
// evenly among the elements that equal the result; prod handles zeros exactly). "sum" and "mean" are
// scatter_add compositions; "prod", "amax" and "amin" combine on the host (CUDA tensors copy over and
// back). Differs from PyTorch: float16/bfloat16 "prod" multiplies in float32 and rounds once (PyTorch's
// CPU rounds after every multiply).
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self = true);

}  // namespace nabla
