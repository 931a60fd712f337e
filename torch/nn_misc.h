// More handles: Conv3d, 1-d and adaptive pooling, Unflatten, Upsample, EmbeddingBag, KLDivLoss and
// HuberLoss.
//
//   torch::nn::Upsample up(torch::nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kBilinear));
//   auto emb = torch::nn::Embedding::from_pretrained(vectors, torch::nn::EmbeddingFromPretrainedOptions().freeze(true));
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "../nn/conv.h"
#include "../nn/embedding.h"
#include "../nn/linear.h"
#include "../nn/loss.h"
#include "../nn/pooling.h"
#include "../nn/upsample.h"
#include "arg.h"
#include "enum.h"
#include "nn_holder.h"
#include "nn_layers.h"
#include "types.h"

// Some XImpl classes give forward libtorch's signature (LSTM's tuple, GRU's state argument), which
// hides nabla's virtual forward(Tensor) on purpose: a Sequential still reaches that one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverloaded-virtual"

namespace torch::nn {

class Conv3dImpl : public nabla::nn::Conv3d {
 public:
  Conv3dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<3> kernel_size)
      : Conv3dImpl(Conv3dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv3dImpl(const Conv3dOptions& o)
      : nabla::nn::Conv3d(detail::conv_options<nabla::nn::Conv3dOptions>(o)), options(o) {}
  Conv3dOptions options;
};
TORCH_MODULE(Conv3d);

// ---- 1-d and adaptive pooling -------------------------------------------------------------------------
struct MaxPool1dOptions {
  MaxPool1dOptions(int64_t kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride);
  TORCH_ARG(int64_t, padding) = 0;
  TORCH_ARG(int64_t, dilation) = 1;
  TORCH_ARG(bool, ceil_mode) = false;
};
class MaxPool1dImpl : public nabla::nn::MaxPool1d {
 public:
  explicit MaxPool1dImpl(const MaxPool1dOptions& o)
      : nabla::nn::MaxPool1d(
            o.kernel_size(),
            {.stride = o.stride(), .padding = o.padding(), .dilation = o.dilation(), .ceil_mode = o.ceil_mode()}),
        options(o) {}
  MaxPool1dOptions options;
};
TORCH_MODULE(MaxPool1d);

struct AvgPool1dOptions {
  AvgPool1dOptions(int64_t kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  TORCH_ARG(int64_t, kernel_size);
  TORCH_ARG(int64_t, stride);
  TORCH_ARG(int64_t, padding) = 0;
  TORCH_ARG(bool, ceil_mode) = false;
  TORCH_ARG(bool, count_include_pad) = true;
};
class AvgPool1dImpl : public nabla::nn::AvgPool1d {
 public:
  explicit AvgPool1dImpl(const AvgPool1dOptions& o)
      : nabla::nn::AvgPool1d(o.kernel_size(), {.stride = o.stride(),
                                               .padding = o.padding(),
                                               .ceil_mode = o.ceil_mode(),
                                               .count_include_pad = o.count_include_pad()}),
        options(o) {}
  AvgPool1dOptions options;
};
TORCH_MODULE(AvgPool1d);

class AdaptiveMaxPool2dImpl : public nabla::nn::AdaptiveMaxPool2d {
 public:
  explicit AdaptiveMaxPool2dImpl(ExpandingArray<2> output_size) : nabla::nn::AdaptiveMaxPool2d(output_size) {}
};
TORCH_MODULE(AdaptiveMaxPool2d);
class AdaptiveAvgPool1dImpl : public nabla::nn::AdaptiveAvgPool1d {
 public:
  explicit AdaptiveAvgPool1dImpl(int64_t output_size) : nabla::nn::AdaptiveAvgPool1d(output_size) {}
};
TORCH_MODULE(AdaptiveAvgPool1d);

// ---- Unflatten, Upsample ----------------------------------------------------------------------------
struct UnflattenOptions {
  UnflattenOptions(int64_t dim, std::vector<int64_t> sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(std::vector<int64_t>, sizes);
};
class UnflattenImpl : public nabla::nn::Unflatten {
 public:
  UnflattenImpl(int64_t dim, std::vector<int64_t> sizes) : UnflattenImpl(UnflattenOptions(dim, std::move(sizes))) {}
  explicit UnflattenImpl(const UnflattenOptions& o) : nabla::nn::Unflatten(o.dim(), o.sizes()), options(o) {}
  UnflattenOptions options;
};
TORCH_MODULE(Unflatten);

struct UpsampleOptions {
  TORCH_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  TORCH_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  TORCH_ARG(enumtype::interpolate_mode_t, mode) = torch::kNearest;
  TORCH_ARG(std::optional<bool>, align_corners) = std::nullopt;

 public:
  nabla::nn::functional::InterpolateOptions to_nabla() const {
    return {.size = size().value_or(std::vector<int64_t>{}),
            .scale_factor = scale_factor().value_or(std::vector<double>{}),
            .mode = enumtype::to_nabla(mode()),
            .align_corners = align_corners()};
  }
};
class UpsampleImpl : public nabla::nn::Upsample {
 public:
  explicit UpsampleImpl(const UpsampleOptions& o = {}) : nabla::nn::Upsample(o.to_nabla()), options(o) {}
  UpsampleOptions options;
};
TORCH_MODULE(Upsample);

// ---- EmbeddingBag -----------------------------------------------------------------------------------
struct EmbeddingBagOptions {
  EmbeddingBagOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TORCH_ARG(int64_t, num_embeddings);
  TORCH_ARG(int64_t, embedding_dim);
  TORCH_ARG(enumtype::embedding_bag_mode_t, mode) = torch::kMean;
  TORCH_ARG(bool, include_last_offset) = false;
  TORCH_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
};
class EmbeddingBagImpl : public nabla::nn::EmbeddingBag {
 public:
  EmbeddingBagImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingBagImpl(EmbeddingBagOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingBagImpl(const EmbeddingBagOptions& o)
      : nabla::nn::EmbeddingBag(o.num_embeddings(), o.embedding_dim(),
                                {.mode = enumtype::to_nabla(o.mode()),
                                 .include_last_offset = o.include_last_offset(),
                                 .padding_idx = o.padding_idx()}),
        options(o) {}
  // input: (B, N) bags, or 1-D indices with offsets (the bags' starts).
  Tensor forward(const Tensor& input, const Tensor& offsets = {}, const Tensor& per_sample_weights = {}) {
    return nabla::nn::EmbeddingBag::forward(input, offsets, per_sample_weights);
  }
  EmbeddingBagOptions options;
};
TORCH_MODULE(EmbeddingBag);

// ---- losses -----------------------------------------------------------------------------------------
struct KLDivLossOptions {
  KLDivLossOptions(enumtype::kldiv_reduction_t reduction = torch::kMean) : reduction_(reduction) {}  // NOLINT
  TORCH_ARG(enumtype::kldiv_reduction_t, reduction);
  TORCH_ARG(bool, log_target) = false;
};
class KLDivLossImpl : public nabla::nn::KLDivLoss {
 public:
  explicit KLDivLossImpl(const KLDivLossOptions& o = {})
      : nabla::nn::KLDivLoss({.reduction = enumtype::to_nabla(o.reduction()), .log_target = o.log_target()}),
        options(o) {}
  KLDivLossOptions options;
};
TORCH_MODULE(KLDivLoss);

struct HuberLossOptions {
  HuberLossOptions(enumtype::reduction_t reduction = torch::kMean) : reduction_(reduction) {}  // NOLINT
  TORCH_ARG(enumtype::reduction_t, reduction);
  TORCH_ARG(double, delta) = 1.0;
};
class HuberLossImpl : public nabla::nn::HuberLoss {
 public:
  explicit HuberLossImpl(const HuberLossOptions& o = {})
      : nabla::nn::HuberLoss({.reduction = enumtype::to_nabla(o.reduction()), .delta = o.delta()}), options(o) {}
  HuberLossOptions options;
};
TORCH_MODULE(HuberLoss);

}  // namespace torch::nn

#pragma GCC diagnostic pop
