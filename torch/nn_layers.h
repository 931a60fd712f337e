// libtorch's layer handles and their builder options, over nabla's layers.
//
//   torch::nn::Conv2d conv(torch::nn::Conv2dOptions(1, 10, 5).stride(2).bias(false));
//   torch::nn::Linear fc(784, 10);                         // or LinearOptions(784, 10).bias(false)
//   torch::nn::BatchNorm2d bn(torch::nn::BatchNorm2dOptions(10).momentum(0.01));
//
// Each `XImpl` derives from nabla's layer (torch::nn::LinearImpl is an nabla::nn::Linear, with its
// members weight, bias, ...) and keeps the options it was made from in `options` (libtorch's
// member; it hides nabla's nabla::nn::X::options, which the layer itself reads). `X` is the handle
// (TORCH_MODULE). An options object converts to nabla's aggregate field by field; a layer prints
// with nabla's (PyTorch's) format.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "../nn/activation.h"
#include "../nn/conv.h"
#include "../nn/dropout.h"
#include "../nn/embedding.h"
#include "../nn/linear.h"
#include "../nn/normalization.h"
#include "../nn/pooling.h"
#include "arg.h"
#include "enum.h"
#include "nn_holder.h"
#include "types.h"

namespace torch::nn {

// ---- Linear, Flatten, Identity ----------------------------------------------------------------------
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(bool, bias) = true;
};
class LinearImpl : public nabla::nn::Linear {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& o)
      : nabla::nn::Linear(o.in_features(), o.out_features(), {.bias = o.bias()}), options(o) {}
  LinearOptions options;
};
TORCH_MODULE(Linear);

struct FlattenOptions {
  TORCH_ARG(int64_t, start_dim) = 1;
  TORCH_ARG(int64_t, end_dim) = -1;
};
class FlattenImpl : public nabla::nn::Flatten {
 public:
  explicit FlattenImpl(const FlattenOptions& o = {}) : nabla::nn::Flatten(o.start_dim(), o.end_dim()), options(o) {}
  FlattenOptions options;
};
TORCH_MODULE(Flatten);

class IdentityImpl : public nabla::nn::Identity {};
TORCH_MODULE(Identity);

// ---- convolutions -----------------------------------------------------------------------------------
template <size_t D>
struct ConvOptions {
  ConvOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(ExpandingArray<D>, kernel_size);
  TORCH_ARG(ExpandingArray<D>, stride) = 1;
  TORCH_ARG(ExpandingArray<D>, padding) = 0;
  TORCH_ARG(ExpandingArray<D>, dilation) = 1;
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(enumtype::padding_mode_t, padding_mode) = torch::kZeros;
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;
using Conv3dOptions = ConvOptions<3>;

namespace detail {
// nabla's options of a 2-d or 3-d convolution (N: nabla::nn::Conv2dOptions, Conv3dOptions).
template <class N, size_t D>
N conv_options(const ConvOptions<D>& o) {
  return N{.in_channels = o.in_channels(),
           .out_channels = o.out_channels(),
           .kernel_size = o.kernel_size(),
           .stride = o.stride(),
           .padding = o.padding(),
           .dilation = o.dilation(),
           .groups = o.groups(),
           .bias = o.bias(),
           .padding_mode = enumtype::to_nabla(o.padding_mode())};
}
}  // namespace detail

class Conv1dImpl : public nabla::nn::Conv1d {
 public:
  Conv1dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size)
      : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv1dImpl(const Conv1dOptions& o)
      : nabla::nn::Conv1d(nabla::nn::Conv1dOptions{.in_channels = o.in_channels(),
                                                   .out_channels = o.out_channels(),
                                                   .kernel_size = o.kernel_size()[0],
                                                   .stride = o.stride()[0],
                                                   .padding = o.padding()[0],
                                                   .dilation = o.dilation()[0],
                                                   .groups = o.groups(),
                                                   .bias = o.bias(),
                                                   .padding_mode = enumtype::to_nabla(o.padding_mode())}),
        options(o) {}
  Conv1dOptions options;
};
TORCH_MODULE(Conv1d);

class Conv2dImpl : public nabla::nn::Conv2d {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(const Conv2dOptions& o)
      : nabla::nn::Conv2d(detail::conv_options<nabla::nn::Conv2dOptions>(o)), options(o) {}
  Conv2dOptions options;
};
TORCH_MODULE(Conv2d);

template <size_t D>
struct ConvTransposeOptions {
  ConvTransposeOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(ExpandingArray<D>, kernel_size);
  TORCH_ARG(ExpandingArray<D>, stride) = 1;
  TORCH_ARG(ExpandingArray<D>, padding) = 0;
  TORCH_ARG(ExpandingArray<D>, output_padding) = 0;
  TORCH_ARG(int64_t, groups) = 1;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose2dOptions = ConvTransposeOptions<2>;

class ConvTranspose2dImpl : public nabla::nn::ConvTranspose2d {
 public:
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& o)
      : nabla::nn::ConvTranspose2d(nabla::nn::ConvTranspose2dOptions{.in_channels = o.in_channels(),
                                                                     .out_channels = o.out_channels(),
                                                                     .kernel_size = o.kernel_size(),
                                                                     .stride = o.stride(),
                                                                     .padding = o.padding(),
                                                                     .output_padding = o.output_padding(),
                                                                     .dilation = o.dilation(),
                                                                     .groups = o.groups(),
                                                                     .bias = o.bias()}),
        options(o) {}
  ConvTranspose2dOptions options;
};
TORCH_MODULE(ConvTranspose2d);

// ---- normalization ----------------------------------------------------------------------------------
struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT: BatchNorm2d(64)
  TORCH_ARG(int64_t, num_features);
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(std::optional<double>, momentum) = 0.1;
  TORCH_ARG(bool, affine) = true;
  TORCH_ARG(bool, track_running_stats) = true;

 public:
  nabla::nn::BatchNormOptions to_nabla() const {
    return {.eps = eps(), .momentum = momentum(), .affine = affine(), .track_running_stats = track_running_stats()};
  }
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;

class BatchNorm1dImpl : public nabla::nn::BatchNorm1d {
 public:
  explicit BatchNorm1dImpl(const BatchNormOptions& o)
      : nabla::nn::BatchNorm1d(o.num_features(), o.to_nabla()), options(o) {}
  BatchNormOptions options;
};
TORCH_MODULE(BatchNorm1d);
class BatchNorm2dImpl : public nabla::nn::BatchNorm2d {
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& o)
      : nabla::nn::BatchNorm2d(o.num_features(), o.to_nabla()), options(o) {}
  BatchNormOptions options;
};
TORCH_MODULE(BatchNorm2d);

struct LayerNormOptions {
  LayerNormOptions(std::vector<int64_t> normalized_shape)  // NOLINT(google-explicit-constructor)
      : normalized_shape_(std::move(normalized_shape)) {}
  TORCH_ARG(std::vector<int64_t>, normalized_shape);
  TORCH_ARG(double, eps) = 1e-5;
  TORCH_ARG(bool, elementwise_affine) = true;
};
class LayerNormImpl : public nabla::nn::LayerNorm {
 public:
  explicit LayerNormImpl(std::vector<int64_t> normalized_shape)
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))) {}
  explicit LayerNormImpl(const LayerNormOptions& o)
      : nabla::nn::LayerNorm(o.normalized_shape(), {.eps = o.eps(), .elementwise_affine = o.elementwise_affine()}),
        options(o) {}
  LayerNormOptions options;
};
TORCH_MODULE(LayerNorm);

// ---- dropout, embedding -----------------------------------------------------------------------------
struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT(google-explicit-constructor): Dropout(0.2)
  TORCH_ARG(double, p);
  TORCH_ARG(bool, inplace) = false;  // accepted; the result is the same out of place
};
using Dropout2dOptions = DropoutOptions;
class DropoutImpl : public nabla::nn::Dropout {
 public:
  explicit DropoutImpl(const DropoutOptions& o = {}) : nabla::nn::Dropout(o.p()), options(o) {}
  DropoutOptions options;
};
TORCH_MODULE(Dropout);
class Dropout2dImpl : public nabla::nn::Dropout2d {
 public:
  explicit Dropout2dImpl(const DropoutOptions& o = {}) : nabla::nn::Dropout2d(o.p()), options(o) {}
  DropoutOptions options;
};
TORCH_MODULE(Dropout2d);

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  TORCH_ARG(int64_t, num_embeddings);
  TORCH_ARG(int64_t, embedding_dim);
  TORCH_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
};
class EmbeddingImpl : public nabla::nn::Embedding {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& o)
      : nabla::nn::Embedding(o.num_embeddings(), o.embedding_dim(), {.padding_idx = o.padding_idx()}), options(o) {}
  EmbeddingOptions options;
};
struct EmbeddingFromPretrainedOptions {
  TORCH_ARG(bool, freeze) = true;  // the weight gets no gradient
  TORCH_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
};
// The handle, as TORCH_MODULE would make it, with libtorch's Embedding::from_pretrained.
class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  Embedding(const nabla::nn::ModuleHolder<EmbeddingImpl>& h) : ModuleHolder<EmbeddingImpl>(h) {}  // NOLINT
  // An embedding whose weight is a copy of `embeddings` (num_embeddings, embedding_dim).
  static Embedding from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& o = {}) {
    TORCH_CHECK(embeddings.dim() == 2, "Embedding::from_pretrained: embeddings must be 2-D, got ", embeddings.sizes());
    Embedding e(EmbeddingOptions(embeddings.size(0), embeddings.size(1)).padding_idx(o.padding_idx()));
    {
      NoGradGuard no_grad;
      e->weight.copy_(embeddings);
    }
    e->weight.requires_grad_(!o.freeze());
    return e;
  }
};

// ---- pooling ----------------------------------------------------------------------------------------
struct MaxPool2dOptions {
  MaxPool2dOptions(ExpandingArray<2> kernel_size)  // NOLINT(google-explicit-constructor): MaxPool2d(2)
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  TORCH_ARG(ExpandingArray<2>, kernel_size);
  TORCH_ARG(ExpandingArray<2>, stride);
  TORCH_ARG(ExpandingArray<2>, padding) = 0;
  TORCH_ARG(ExpandingArray<2>, dilation) = 1;
  TORCH_ARG(bool, ceil_mode) = false;
};
class MaxPool2dImpl : public nabla::nn::MaxPool2d {
 public:
  explicit MaxPool2dImpl(ExpandingArray<2> kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  explicit MaxPool2dImpl(const MaxPool2dOptions& o)
      : nabla::nn::MaxPool2d(
            o.kernel_size(),
            nabla::nn::MaxPool2dOptions{
                .stride = o.stride(), .padding = o.padding(), .dilation = o.dilation(), .ceil_mode = o.ceil_mode()}),
        options(o) {}
  MaxPool2dOptions options;
};
TORCH_MODULE(MaxPool2d);

struct AvgPool2dOptions {
  AvgPool2dOptions(ExpandingArray<2> kernel_size)  // NOLINT(google-explicit-constructor): AvgPool2d(2)
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  TORCH_ARG(ExpandingArray<2>, kernel_size);
  TORCH_ARG(ExpandingArray<2>, stride);
  TORCH_ARG(ExpandingArray<2>, padding) = 0;
  TORCH_ARG(bool, ceil_mode) = false;
  TORCH_ARG(bool, count_include_pad) = true;
};
class AvgPool2dImpl : public nabla::nn::AvgPool2d {
 public:
  explicit AvgPool2dImpl(ExpandingArray<2> kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  explicit AvgPool2dImpl(const AvgPool2dOptions& o)
      : nabla::nn::AvgPool2d(o.kernel_size(), nabla::nn::AvgPool2dOptions{.stride = o.stride(),
                                                                          .padding = o.padding(),
                                                                          .ceil_mode = o.ceil_mode(),
                                                                          .count_include_pad = o.count_include_pad()}),
        options(o) {}
  AvgPool2dOptions options;
};
TORCH_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public nabla::nn::AdaptiveAvgPool2d {
 public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray<2> output_size) : nabla::nn::AdaptiveAvgPool2d(output_size) {}
};
TORCH_MODULE(AdaptiveAvgPool2d);

// ---- activations ------------------------------------------------------------------------------------
struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT(google-explicit-constructor)
  TORCH_ARG(bool, inplace);                                 // accepted; the result is the same out of place
};
class ReLUImpl : public nabla::nn::ReLU {
 public:
  explicit ReLUImpl(const ReLUOptions& o = {}) : options(o) {}
  ReLUOptions options;
};
TORCH_MODULE(ReLU);

struct LeakyReLUOptions {
  TORCH_ARG(double, negative_slope) = 1e-2;
  TORCH_ARG(bool, inplace) = false;
};
class LeakyReLUImpl : public nabla::nn::LeakyReLU {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& o = {}) : nabla::nn::LeakyReLU(o.negative_slope()), options(o) {}
  LeakyReLUOptions options;
};
TORCH_MODULE(LeakyReLU);

class TanhImpl : public nabla::nn::Tanh {};
TORCH_MODULE(Tanh);
class SigmoidImpl : public nabla::nn::Sigmoid {};
TORCH_MODULE(Sigmoid);

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor): Softmax(1)
  TORCH_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;
class SoftmaxImpl : public nabla::nn::Softmax {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& o) : nabla::nn::Softmax(o.dim()), options(o) {}
  SoftmaxOptions options;
};
TORCH_MODULE(Softmax);
class LogSoftmaxImpl : public nabla::nn::LogSoftmax {
 public:
  explicit LogSoftmaxImpl(const SoftmaxOptions& o) : nabla::nn::LogSoftmax(o.dim()), options(o) {}
  SoftmaxOptions options;
};
TORCH_MODULE(LogSoftmax);

// Functional(f, args...): a module calling f(x, args...) (libtorch binds the arguments after the
// input): Functional(torch::relu), Functional(torch::leaky_relu, 0.2).
class FunctionalImpl : public Module {
 public:
  using Function = std::function<Tensor(Tensor)>;
  explicit FunctionalImpl(Function function) : function_(std::move(function)) {}
  template <class F, class A, class... Args>
  explicit FunctionalImpl(F function, A&& a, Args&&... args)
      : function_([function, a = std::forward<A>(a), ... args = std::forward<Args>(args)](Tensor x) {
          return function(std::move(x), a, args...);
        }) {}
  Tensor forward(Tensor x) override { return function_(std::move(x)); }

 private:
  Function function_;
};
TORCH_MODULE(Functional);

}  // namespace torch::nn
