// The ATen functions libtorch exposes at namespace scope (torch::relu, torch::cat, torch::nll_loss,
// ...), mapped to nabla's.
//
//   torch::Tensor loss = torch::nll_loss(torch::log_softmax(logits, 1), target, {}, torch::Reduction::Sum);
//   torch::Tensor h = torch::dropout(torch::relu(x), /*p=*/0.5, /*train=*/is_training());
//
// Where nabla's function has libtorch's signature it is re-exported (a using-declaration names the
// same function, so an unqualified call under `using namespace torch;` that finds nabla's by
// argument-dependent lookup is not ambiguous); where libtorch's differs (losses take the reduction
// as an int64_t, torch::Reduction::Mean), the torch:: overload converts and calls nabla's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "../core/indexing_ops.h"
#include "../core/math_ops.h"
#include "../core/ops.h"
#include "../nn/functional.h"
#include "types.h"

namespace torch {

// ATen's reduction codes, as the namespace-scope losses take them: torch::Reduction::Sum.
namespace Reduction {
enum Reduction { None, Mean, Sum, END };
}  // namespace Reduction

namespace detail {
// An ATen reduction code as nabla's enum; `op` names the loss in the error for another value.
nabla::nn::functional::Reduction to_reduction(int64_t reduction, const char* op);
}  // namespace detail

// ---- creation -----------------------------------------------------------------------------------
using nabla::arange;
using nabla::empty;
using nabla::empty_like;
using nabla::eye;
using nabla::from_blob;
using nabla::full;
using nabla::full_like;
using nabla::linspace;
using nabla::ones;
using nabla::ones_like;
using nabla::rand;
using nabla::rand_like;
using nabla::randint;
using nabla::randn;
using nabla::randn_like;
using nabla::randperm;
using nabla::scalar_tensor;
using nabla::tensor;
using nabla::zeros;
using nabla::zeros_like;
// arange(start, end, options): ATen's overload without a step.
inline Tensor arange(Scalar start, Scalar end, const TensorOptions& options) {
  return nabla::arange(start, end, 1, options);
}

// ---- elementwise, reductions, shapes ------------------------------------------------------------
using nabla::abs;
using nabla::add;
using nabla::addmm;
using nabla::allclose;
using nabla::argmax;
using nabla::argmin;
using nabla::bmm;
using nabla::cat;
using nabla::chunk;
using nabla::clamp;
using nabla::clamp_max;
using nabla::clamp_min;
using nabla::cos;
using nabla::div;
using nabla::eq;
using nabla::equal;
using nabla::exp;
using nabla::flatten;
using nabla::isclose;
using nabla::log;
using nabla::log1p;
using nabla::logsumexp;
using nabla::masked_fill;
using nabla::matmul;
using nabla::max;
using nabla::maximum;
using nabla::mean;
using nabla::min;
using nabla::minimum;
using nabla::mm;
using nabla::mul;
using nabla::neg;
using nabla::one_hot;
using nabla::permute;
using nabla::pow;
using nabla::prod;
using nabla::reshape;
using nabla::sin;
using nabla::split;
using nabla::sqrt;
using nabla::squeeze;
using nabla::stack;
using nabla::sub;
using nabla::sum;
using nabla::transpose;
using nabla::unsqueeze;
using nabla::var;
using nabla::where;

// ---- more of ATen's tensor functions ------------------------------------------------------------
using nabla::acos;
using nabla::acosh;
using nabla::addcdiv;
using nabla::addcmul;
using nabla::all;
using nabla::amax;
using nabla::amin;
using nabla::any;
using nabla::argsort;
using nabla::asin;
using nabla::asinh;
using nabla::atan;
using nabla::atan2;
using nabla::atanh;
using nabla::bernoulli;
using nabla::bincount;
using nabla::broadcast_tensors;
using nabla::bucketize;
using nabla::ceil;
using nabla::cosh;
using nabla::count_nonzero;
using nabla::cummax;
using nabla::cummin;
using nabla::cumprod;
using nabla::cumsum;
using nabla::diagonal;
using nabla::digamma;
using nabla::dot;
using nabla::einsum;
using nabla::erf;
using nabla::erfc;
using nabla::erfinv;
using nabla::exp2;
using nabla::expand;
using nabla::expm1;
using nabla::flip;
using nabla::floor;
using nabla::floor_divide;
using nabla::fmod;
using nabla::frac;
using nabla::gather;
using nabla::ge;
using nabla::gt;
using nabla::hardsigmoid;
using nabla::hardswish;
using nabla::hardtanh;
using nabla::histc;
using nabla::hypot;
using nabla::index_add;
using nabla::index_select;
using nabla::isfinite;
using nabla::isinf;
using nabla::isnan;
using nabla::kthvalue;
using nabla::le;
using nabla::lerp;
using nabla::lgamma;
using nabla::log10;
using nabla::log2;
using nabla::logaddexp;
using nabla::logcumsumexp;
using nabla::logical_and;
using nabla::logical_not;
using nabla::logical_or;
using nabla::logical_xor;
using nabla::logsigmoid;
using nabla::lt;
using nabla::masked_select;
using nabla::median;
using nabla::mish;
using nabla::movedim;
using nabla::multinomial;
using nabla::mv;
using nabla::nan_to_num;
using nabla::narrow;
using nabla::ne;
using nabla::nonzero;
using nabla::norm;
using nabla::outer;
using nabla::pad;
using nabla::quantile;
using nabla::reciprocal;
using nabla::relu6;
using nabla::remainder;
using nabla::repeat;
using nabla::repeat_interleave;
using nabla::roll;
using nabla::round;
using nabla::rsqrt;
using nabla::scatter;
using nabla::scatter_add;
using nabla::searchsorted;
using nabla::select;
using nabla::selu;
using nabla::sign;
using nabla::sinh;
using nabla::softplus;
using nabla::softsign;
using nabla::sort;
using nabla::square;
using nabla::take_along_dim;
using nabla::tan;
using nabla::topk;
using nabla::tril;
using nabla::triu;
using nabla::trunc;
using nabla::unbind;
using nabla::xlogy;

// ---- neural-network functions -------------------------------------------------------------------
using nabla::adaptive_avg_pool2d;
using nabla::adaptive_max_pool2d;
using nabla::avg_pool2d;
using nabla::batch_norm;
using nabla::conv1d;
using nabla::conv2d;
using nabla::conv_transpose2d;
using nabla::elu;
using nabla::gelu;
using nabla::leaky_relu;
using nabla::linear;
using nabla::log_softmax;
using nabla::max_pool2d;
using nabla::relu;
using nabla::sigmoid;
using nabla::silu;
using nabla::softmax;
using nabla::tanh;
// log_softmax(x, dim, dtype) / softmax(x, dim, dtype): x converted to dtype first (ATen's dtype argument).
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<ScalarType> dtype);

// dropout(input, p, train): zeroes each element with probability p and scales the rest by
// 1 / (1 - p) when train is true (nabla's default generator draws the mask).
Tensor dropout(const Tensor& input, double p, bool train);
Tensor feature_dropout(const Tensor& input, double p, bool train);  // whole channels (dropout2d)

// ---- losses, with ATen's argument order and int64_t reductions ----------------------------------
Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                int64_t reduction = Reduction::Mean, int64_t ignore_index = -100);
Tensor cross_entropy_loss(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                          int64_t reduction = Reduction::Mean, int64_t ignore_index = -100,
                          double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean);
Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean, double beta = 1.0);
Tensor huber_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean, double delta = 1.0);
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                            int64_t reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                                        const Tensor& pos_weight = {}, int64_t reduction = Reduction::Mean);

}  // namespace torch

// libtorch's at:: spellings of the same (at::Tensor, at::Reduction::Mean, at::zeros, at::kFloat).
namespace at {
using namespace ::torch;  // NOLINT(google-build-using-namespace)
}  // namespace at
