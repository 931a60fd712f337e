// libtorch's attention and Transformer encoder handles, over nabla's.
//
//   torch::nn::MultiheadAttention mha(torch::nn::MultiheadAttentionOptions(16, 4).dropout(0.1));
//   auto [out, weights] = mha(q, k, v);                      // (L, N, E), (N, L, S)
//   torch::nn::TransformerEncoder encoder(
//       torch::nn::TransformerEncoderOptions(torch::nn::TransformerEncoderLayerOptions(16, 4).dim_feedforward(32), 2));
//   torch::Tensor y = encoder(src, /*src_mask=*/mask);      // (S, N, E)
//
// Inputs are sequence-first (L, N, E), as libtorch's (which has no batch_first option).
// TransformerEncoderOptions' `norm` (an AnyModule in libtorch) is not offered: add a LayerNorm after
// the encoder instead.
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>
#include <utility>
#include <variant>

#include "../nn/attention.h"
#include "../nn/transformer.h"
#include "arg.h"
#include "enum.h"
#include "nn_holder.h"
#include "types.h"

// Some XImpl classes give forward libtorch's signature (LSTM's tuple, GRU's state argument), which
// hides nabla's virtual forward(Tensor) on purpose: a Sequential still reaches that one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverloaded-virtual"

namespace torch::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads), kdim_(embed_dim), vdim_(embed_dim) {}
  TORCH_ARG(int64_t, embed_dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(double, dropout) = 0.0;
  TORCH_ARG(bool, bias) = true;
  TORCH_ARG(bool, add_bias_kv) = false;
  TORCH_ARG(bool, add_zero_attn) = false;
  TORCH_ARG(int64_t, kdim);
  TORCH_ARG(int64_t, vdim);
};
class MultiheadAttentionImpl : public nabla::nn::MultiheadAttention {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& o)
      : nabla::nn::MultiheadAttention(o.embed_dim(), o.num_heads(),
                                      {.dropout = o.dropout(),
                                       .bias = o.bias(),
                                       .add_bias_kv = o.add_bias_kv(),
                                       .add_zero_attn = o.add_zero_attn(),
                                       .kdim = o.kdim(),
                                       .vdim = o.vdim()}),
        options(o) {}
  // (attn_output (L, N, E), attn_weights (N, L, S), undefined without need_weights).
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true) {
    nabla::nn::AttentionOutput r = forward_attention(query, key, value,
                                                     {.key_padding_mask = key_padding_mask,
                                                      .need_weights = need_weights,
                                                      .attn_mask = attn_mask,
                                                      .average_attn_weights = average_attn_weights});
    return {r.output, r.attn_weights};
  }
  MultiheadAttentionOptions options;
};
TORCH_MODULE(MultiheadAttention);

struct TransformerEncoderLayerOptions {
  using activation_t = std::variant<enumtype::kReLU, enumtype::kGELU, std::function<Tensor(const Tensor&)>>;
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead)  // NOLINT(google-explicit-constructor)
      : d_model_(d_model), nhead_(nhead) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, nhead);
  TORCH_ARG(int64_t, dim_feedforward) = 2048;
  TORCH_ARG(double, dropout) = 0.1;
  TORCH_ARG(activation_t, activation) = torch::kReLU;

 public:
  nabla::nn::TransformerEncoderLayerOptions to_nabla() const {
    nabla::nn::TransformerActivation act = "relu";
    if (activation().index() == 1) act = "gelu";
    if (activation().index() == 2) act = nabla::nn::TransformerActivation(std::get<2>(activation()));
    return {.dim_feedforward = dim_feedforward(), .dropout = dropout(), .activation = act};
  }
};
class TransformerEncoderLayerImpl : public nabla::nn::TransformerEncoderLayer {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& o)
      : nabla::nn::TransformerEncoderLayer(o.d_model(), o.nhead(), o.to_nabla()), options(o) {}
  // src (S, N, E); src_mask (S, S); src_key_padding_mask (N, S).
  Tensor forward(const Tensor& src, const Tensor& src_mask = {}, const Tensor& src_key_padding_mask = {}) {
    return nabla::nn::TransformerEncoderLayer::forward(
        src, {.src_mask = src_mask, .src_key_padding_mask = src_key_padding_mask});
  }
  TransformerEncoderLayerOptions options;
};
TORCH_MODULE(TransformerEncoderLayer);

struct TransformerEncoderOptions {
  // num_layers copies of encoder_layer (its options and parameter values, as libtorch's clones).
  TransformerEncoderOptions(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : encoder_layer_(std::move(encoder_layer)), num_layers_(num_layers) {}
  // num_layers new layers made from the options.
  TransformerEncoderOptions(const TransformerEncoderLayerOptions& layer_options, int64_t num_layers)
      : encoder_layer_(TransformerEncoderLayer(layer_options)), num_layers_(num_layers) {}
  TORCH_ARG(TransformerEncoderLayer, encoder_layer);
  TORCH_ARG(int64_t, num_layers);
};
class TransformerEncoderImpl : public nabla::nn::TransformerEncoder {
 public:
  TransformerEncoderImpl(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : TransformerEncoderImpl(TransformerEncoderOptions(std::move(encoder_layer), num_layers)) {}
  explicit TransformerEncoderImpl(const TransformerEncoderOptions& o)
      : nabla::nn::TransformerEncoder(*o.encoder_layer(), o.num_layers()), options(o) {}
  Tensor forward(const Tensor& src, const Tensor& src_mask = {}, const Tensor& src_key_padding_mask = {}) {
    return nabla::nn::TransformerEncoder::forward(src,
                                                  {.src_mask = src_mask, .src_key_padding_mask = src_key_padding_mask});
  }
  TransformerEncoderOptions options;
};
TORCH_MODULE(TransformerEncoder);

}  // namespace torch::nn

#pragma GCC diagnostic pop
