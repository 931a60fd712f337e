// libtorch's loss modules and torch::nn::functional (F::), with their builder options.
//
//   namespace F = torch::nn::functional;
//   x = F::dropout(x, F::DropoutFuncOptions().p(0.5).training(is_training()));
//   torch::Tensor loss = F::nll_loss(F::log_softmax(x, 1), target, F::NLLLossFuncOptions().reduction(torch::kSum));
//   torch::nn::CrossEntropyLoss criterion(torch::nn::CrossEntropyLossOptions().label_smoothing(0.1));
#pragma once

#include <cstdint>
#include <optional>

#include "../nn/functional.h"
#include "../nn/loss.h"
#include "arg.h"
#include "enum.h"
#include "nn_holder.h"
#include "nn_layers.h"
#include "types.h"

namespace torch::nn {

// ---- loss options and modules -----------------------------------------------------------------------
struct CrossEntropyLossOptions {
  TORCH_ARG(Tensor, weight) = {};
  TORCH_ARG(int64_t, ignore_index) = -100;
  TORCH_ARG(enumtype::reduction_t, reduction) = torch::kMean;
  TORCH_ARG(double, label_smoothing) = 0.0;

 public:
  nabla::nn::functional::CrossEntropyOptions to_nabla() const {
    return {.weight = weight(),
            .ignore_index = ignore_index(),
            .reduction = enumtype::to_nabla(reduction()),
            .label_smoothing = label_smoothing()};
  }
};
struct NLLLossOptions {
  TORCH_ARG(Tensor, weight) = {};
  TORCH_ARG(int64_t, ignore_index) = -100;
  TORCH_ARG(enumtype::reduction_t, reduction) = torch::kMean;

 public:
  nabla::nn::functional::NLLLossOptions to_nabla() const {
    return {.weight = weight(), .ignore_index = ignore_index(), .reduction = enumtype::to_nabla(reduction())};
  }
};
// MSELossOptions(torch::kSum), L1LossOptions(...).
struct MSELossOptions {
  MSELossOptions(enumtype::reduction_t reduction = torch::kMean) : reduction_(reduction) {}  // NOLINT
  TORCH_ARG(enumtype::reduction_t, reduction);
};
using L1LossOptions = MSELossOptions;
struct SmoothL1LossOptions {
  SmoothL1LossOptions(enumtype::reduction_t reduction = torch::kMean) : reduction_(reduction) {}  // NOLINT
  TORCH_ARG(enumtype::reduction_t, reduction);
  TORCH_ARG(double, beta) = 1.0;
};
struct BCELossOptions {
  TORCH_ARG(Tensor, weight) = {};
  TORCH_ARG(enumtype::reduction_t, reduction) = torch::kMean;
};
struct BCEWithLogitsLossOptions {
  TORCH_ARG(Tensor, weight) = {};
  TORCH_ARG(enumtype::reduction_t, reduction) = torch::kMean;
  TORCH_ARG(Tensor, pos_weight) = {};
};

class CrossEntropyLossImpl : public nabla::nn::CrossEntropyLoss {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& o = {})
      : nabla::nn::CrossEntropyLoss(o.to_nabla()), options(o) {}
  CrossEntropyLossOptions options;
};
TORCH_MODULE(CrossEntropyLoss);
class NLLLossImpl : public nabla::nn::NLLLoss {
 public:
  explicit NLLLossImpl(const NLLLossOptions& o = {}) : nabla::nn::NLLLoss(o.to_nabla()), options(o) {}
  NLLLossOptions options;
};
TORCH_MODULE(NLLLoss);
class MSELossImpl : public nabla::nn::MSELoss {
 public:
  explicit MSELossImpl(const MSELossOptions& o = {})
      : nabla::nn::MSELoss(enumtype::to_nabla(o.reduction())), options(o) {}
  MSELossOptions options;
};
TORCH_MODULE(MSELoss);
class L1LossImpl : public nabla::nn::L1Loss {
 public:
  explicit L1LossImpl(const L1LossOptions& o = {}) : nabla::nn::L1Loss(enumtype::to_nabla(o.reduction())), options(o) {}
  L1LossOptions options;
};
TORCH_MODULE(L1Loss);
class SmoothL1LossImpl : public nabla::nn::SmoothL1Loss {
 public:
  explicit SmoothL1LossImpl(const SmoothL1LossOptions& o = {})
      : nabla::nn::SmoothL1Loss({.reduction = enumtype::to_nabla(o.reduction()), .beta = o.beta()}), options(o) {}
  SmoothL1LossOptions options;
};
TORCH_MODULE(SmoothL1Loss);
class BCELossImpl : public nabla::nn::BCELoss {
 public:
  explicit BCELossImpl(const BCELossOptions& o = {})
      : nabla::nn::BCELoss({.weight = o.weight(), .reduction = enumtype::to_nabla(o.reduction())}), options(o) {}
  BCELossOptions options;
};
TORCH_MODULE(BCELoss);
class BCEWithLogitsLossImpl : public nabla::nn::BCEWithLogitsLoss {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& o = {})
      : nabla::nn::BCEWithLogitsLoss(
            {.weight = o.weight(), .pos_weight = o.pos_weight(), .reduction = enumtype::to_nabla(o.reduction())}),
        options(o) {}
  BCEWithLogitsLossOptions options;
};
TORCH_MODULE(BCEWithLogitsLoss);

// ---- torch::nn::functional ----------------------------------------------------------------------------
namespace functional {

using nabla::elu;
using nabla::gelu;
using nabla::leaky_relu;
using nabla::linear;
using nabla::relu;
using nabla::sigmoid;
using nabla::silu;
using nabla::tanh;

struct DropoutFuncOptions {
  TORCH_ARG(double, p) = 0.5;
  TORCH_ARG(bool, training) = true;
  TORCH_ARG(bool, inplace) = false;  // accepted; the result is the same out of place
};
using Dropout2dFuncOptions = DropoutFuncOptions;
inline Tensor dropout(const Tensor& input, const DropoutFuncOptions& o = {}) {
  return nabla::nn::functional::dropout(input, o.p(), o.training());
}
inline Tensor dropout2d(const Tensor& input, const DropoutFuncOptions& o = {}) {
  return nabla::nn::functional::dropout2d(input, o.p(), o.training());
}

struct SoftmaxFuncOptions {
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor): F::softmax(x, 1)
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(std::optional<ScalarType>, dtype) = std::nullopt;
};
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
inline Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& o) {
  return nabla::softmax(o.dtype() ? input.to(*o.dtype()) : input, o.dim());
}
inline Tensor log_softmax(const Tensor& input, const SoftmaxFuncOptions& o) {
  return nabla::log_softmax(o.dtype() ? input.to(*o.dtype()) : input, o.dim());
}

using MaxPool2dFuncOptions = MaxPool2dOptions;
using AvgPool2dFuncOptions = AvgPool2dOptions;
inline Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& o) {
  return nabla::max_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode());
}
inline Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& o) {
  return nabla::avg_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad());
}

using CrossEntropyFuncOptions = CrossEntropyLossOptions;
using NLLLossFuncOptions = NLLLossOptions;
using MSELossFuncOptions = MSELossOptions;
using L1LossFuncOptions = L1LossOptions;
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
using BinaryCrossEntropyFuncOptions = BCELossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o = {}) {
  return nabla::nn::functional::cross_entropy(input, target, o.to_nabla());
}
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o = {}) {
  return nabla::nn::functional::nll_loss(input, target, o.to_nabla());
}
inline Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o = {}) {
  return nabla::nn::functional::mse_loss(input, target, enumtype::to_nabla(o.reduction()));
}
inline Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o = {}) {
  return nabla::nn::functional::l1_loss(input, target, enumtype::to_nabla(o.reduction()));
}
inline Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o = {}) {
  return nabla::nn::functional::smooth_l1_loss(input, target,
                                               {.reduction = enumtype::to_nabla(o.reduction()), .beta = o.beta()});
}
inline Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                                   const BinaryCrossEntropyFuncOptions& o = {}) {
  return nabla::nn::functional::binary_cross_entropy(
      input, target, {.weight = o.weight(), .reduction = enumtype::to_nabla(o.reduction())});
}
inline Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                               const BinaryCrossEntropyWithLogitsFuncOptions& o = {}) {
  return nabla::nn::functional::binary_cross_entropy_with_logits(
      input, target,
      {.weight = o.weight(), .pos_weight = o.pos_weight(), .reduction = enumtype::to_nabla(o.reduction())});
}

// ---- convolution, padding, normalization, embedding, resampling ------------------------------------
template <size_t D>
struct ConvFuncOptions {
  TORCH_ARG(Tensor, bias) = {};
  TORCH_ARG(ExpandingArray<D>, stride) = 1;
  TORCH_ARG(ExpandingArray<D>, padding) = 0;
  TORCH_ARG(ExpandingArray<D>, dilation) = 1;
  TORCH_ARG(int64_t, groups) = 1;
};
using Conv1dFuncOptions = ConvFuncOptions<1>;
using Conv2dFuncOptions = ConvFuncOptions<2>;
inline Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& o = {}) {
  return nabla::conv1d(input, weight, o.bias(), o.stride()[0], o.padding()[0], o.dilation()[0], o.groups());
}
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o = {}) {
  return nabla::conv2d(input, weight, o.bias(), o.stride(), o.padding(), o.dilation(), o.groups());
}

struct PadFuncOptions {
  PadFuncOptions(std::vector<int64_t> pad) : pad_(std::move(pad)) {}  // NOLINT(google-explicit-constructor)
  TORCH_ARG(std::vector<int64_t>, pad);
  TORCH_ARG(enumtype::pad_mode_t, mode) = torch::kConstant;
  TORCH_ARG(double, value) = 0;
};
inline Tensor pad(const Tensor& input, const PadFuncOptions& o) {
  return nabla::nn::functional::pad(input, o.pad(), enumtype::to_nabla(o.mode()), o.value());
}

struct NormalizeFuncOptions {
  TORCH_ARG(double, p) = 2.0;
  TORCH_ARG(int64_t, dim) = 1;
  TORCH_ARG(double, eps) = 1e-12;
};
inline Tensor normalize(const Tensor& input, const NormalizeFuncOptions& o = {}) {
  return nabla::nn::functional::normalize(input, o.p(), o.dim(), o.eps());
}

struct LayerNormFuncOptions {
  LayerNormFuncOptions(std::vector<int64_t> normalized_shape)  // NOLINT(google-explicit-constructor)
      : normalized_shape_(std::move(normalized_shape)) {}
  TORCH_ARG(std::vector<int64_t>, normalized_shape);
  TORCH_ARG(Tensor, weight) = {};
  TORCH_ARG(Tensor, bias) = {};
  TORCH_ARG(double, eps) = 1e-5;
};
inline Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& o) {
  return nabla::nn::functional::layer_norm(input, o.normalized_shape(), o.weight(), o.bias(), o.eps());
}

struct EmbeddingFuncOptions {
  TORCH_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
};
// input: indices; weight (num_embeddings, embedding_dim) (libtorch's argument order).
inline Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& o = {}) {
  return nabla::embedding(weight, input, o.padding_idx());
}
using nabla::one_hot;

struct InterpolateFuncOptions {
  TORCH_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  TORCH_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  TORCH_ARG(enumtype::interpolate_mode_t, mode) = torch::kNearest;
  TORCH_ARG(std::optional<bool>, align_corners) = std::nullopt;
};
inline Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& o = {}) {
  return nabla::nn::functional::interpolate(input, {.size = o.size().value_or(std::vector<int64_t>{}),
                                                    .scale_factor = o.scale_factor().value_or(std::vector<double>{}),
                                                    .mode = enumtype::to_nabla(o.mode()),
                                                    .align_corners = o.align_corners()});
}

}  // namespace functional
}  // namespace torch::nn
