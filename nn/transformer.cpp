#include "nn/transformer.h"

#include <limits>

#include "core/generator.h"

#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

TransformerActivation::TransformerActivation(const std::string& name) : name_(name) {
  if (name == "relu") fn_ = [](const Tensor& x) { return relu(x); };
  else if (name == "gelu") fn_ = [](const Tensor& x) { return gelu(x); };
  else throw ValueError("Transformer: activation should be \"relu\" or \"gelu\" (or a function), got \"" + name + "\"");
}

namespace {

void check_layer_args(const char* op, int64_t d_model, int64_t nhead, const TransformerLayerOptions& o) {
  NABLA_CHECK(ValueError, d_model > 0 && nhead > 0 && o.dim_feedforward > 0, op,
              ": d_model, nhead and dim_feedforward must be positive, got ", d_model, ", ", nhead, " and ",
              o.dim_feedforward);
  NABLA_CHECK(ValueError, d_model % nhead == 0, op, ": d_model (", d_model, ") must be divisible by nhead (", nhead,
              ")");
}

MultiheadAttentionOptions attention_options(const TransformerLayerOptions& o) {
  return {.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first};
}

std::shared_ptr<LayerNorm> new_norm(int64_t d_model, const TransformerLayerOptions& o) {
  return std::make_shared<LayerNorm>(std::vector<int64_t>{d_model},
                                     LayerNormOptions{.eps = o.layer_norm_eps, .bias = o.bias});
}

std::shared_ptr<Linear> new_linear(int64_t in, int64_t out, const TransformerLayerOptions& o) {
  return std::make_shared<Linear>(in, out, LinearOptions{o.bias});
}

// An attention block of a layer, without the weights: out_dropout(attn(x, memory, memory)).
// Self-attention passes x as memory (the packed-projection path).
Tensor attention_block(MultiheadAttention& attn, Dropout& out_dropout, const Tensor& x, const Tensor& memory,
                       const Tensor& key_padding_mask, const Tensor& mask, bool is_causal) {
  MultiheadAttentionForwardOptions a{
      .key_padding_mask = key_padding_mask, .need_weights = false, .attn_mask = mask, .is_causal = is_causal};
  return out_dropout.forward(attn.forward_attention(x, memory, memory, a).output);
}

// The feed-forward block: out_dropout(linear2(dropout(activation(linear1(x))))).
Tensor feed_forward_block(Linear& linear1, Dropout& dropout, Linear& linear2, Dropout& out_dropout,
                          const TransformerActivation& activation, const Tensor& x) {
  return out_dropout.forward(linear2.forward(dropout.forward(activation(linear1.forward(x)))));
}

// A new module from make() with `src`'s dtype, device, parameter values and mode. As PyTorch's
// deepcopy, it draws no random numbers: the new module's initialization is overwritten anyway, so
// the generator's state is put back.
template <class M, class Make>
std::shared_ptr<M> copy_of(const M& src, Make make, const Tensor& any_param) {
  Generator& gen = default_generator(kCPU);
  Generator::State state = gen.get_state();
  std::shared_ptr<M> copy = make();
  gen.set_state(state);
  copy->to(any_param.device(), any_param.dtype());
  copy->load_state_dict(src.state_dict());
  copy->train(src.is_training());
  return copy;
}

// The layers of a TransformerEncoder/Decoder: num_layers clones of `layer`.
template <class Layer>
std::shared_ptr<ModuleList> clones(const Layer& layer, int64_t num_layers, const char* op) {
  NABLA_CHECK(ValueError, num_layers >= 0, op, ": num_layers must be non-negative, got ", num_layers);
  auto list = std::make_shared<ModuleList>();
  for (int64_t i = 0; i < num_layers; ++i) list->push_back(layer.clone());
  return list;
}

}  // namespace

// ---- TransformerEncoderLayer ------------------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model_, int64_t nhead_, TransformerEncoderLayerOptions o)
    : d_model(d_model_), nhead(nhead_), options(std::move(o)) {
  check_layer_args("TransformerEncoderLayer", d_model, nhead, options);
  // PyTorch's registration order: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, attention_options(options)));
  linear1 = register_module("linear1", new_linear(d_model, options.dim_feedforward, options));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 = register_module("linear2", new_linear(options.dim_feedforward, d_model, options));
  norm1 = register_module("norm1", new_norm(d_model, options));
  norm2 = register_module("norm2", new_norm(d_model, options));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerEncoderLayer::forward(Tensor src) { return forward(src, TransformerEncoderForwardOptions{}); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const TransformerEncoderForwardOptions& o) {
  auto sa = [&](const Tensor& x) {
    return attention_block(*self_attn, *dropout1, x, x, o.src_key_padding_mask, o.src_mask, o.is_causal);
  };
  auto ff = [&](const Tensor& x) {
    return feed_forward_block(*linear1, *dropout, *linear2, *dropout2, options.activation, x);
  };
  Tensor x = src;
  if (options.norm_first) {
    x = x + sa(norm1->forward(x));
    x = x + ff(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa(x));
    x = norm2->forward(x + ff(x));
  }
  return x;
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  return copy_of(
      *this, [&] { return std::make_shared<TransformerEncoderLayer>(d_model, nhead, options); }, linear1->weight);
}

// ---- TransformerDecoderLayer ------------------------------------------------------------------------

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d_model_, int64_t nhead_, TransformerDecoderLayerOptions o)
    : d_model(d_model_), nhead(nhead_), options(std::move(o)) {
  check_layer_args("TransformerDecoderLayer", d_model, nhead, options);
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, attention_options(options)));
  multihead_attn = register_module("multihead_attn",
                                   std::make_shared<MultiheadAttention>(d_model, nhead, attention_options(options)));
  linear1 = register_module("linear1", new_linear(d_model, options.dim_feedforward, options));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 = register_module("linear2", new_linear(options.dim_feedforward, d_model, options));
  norm1 = register_module("norm1", new_norm(d_model, options));
  norm2 = register_module("norm2", new_norm(d_model, options));
  norm3 = register_module("norm3", new_norm(d_model, options));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(options.dropout));
}

Tensor TransformerDecoderLayer::forward(Tensor tgt, Tensor memory) {
  return forward(tgt, memory, TransformerDecoderForwardOptions{});
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const TransformerDecoderForwardOptions& o) {
  auto sa = [&](const Tensor& x) {
    return attention_block(*self_attn, *dropout1, x, x, o.tgt_key_padding_mask, o.tgt_mask, o.tgt_is_causal);
  };
  auto mha = [&](const Tensor& x) {
    return attention_block(*multihead_attn, *dropout2, x, memory, o.memory_key_padding_mask, o.memory_mask,
                           o.memory_is_causal);
  };
  auto ff = [&](const Tensor& x) {
    return feed_forward_block(*linear1, *dropout, *linear2, *dropout3, options.activation, x);
  };
  Tensor x = tgt;
  if (options.norm_first) {
    x = x + sa(norm1->forward(x));
    x = x + mha(norm2->forward(x));
    x = x + ff(norm3->forward(x));
  } else {
    x = norm1->forward(x + sa(x));
    x = norm2->forward(x + mha(x));
    x = norm3->forward(x + ff(x));
  }
  return x;
}

std::shared_ptr<TransformerDecoderLayer> TransformerDecoderLayer::clone() const {
  return copy_of(
      *this, [&] { return std::make_shared<TransformerDecoderLayer>(d_model, nhead, options); }, linear1->weight);
}

// ---- TransformerEncoder / TransformerDecoder --------------------------------------------------------

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, int64_t n, std::shared_ptr<Module> norm_)
    : num_layers(n) {
  layers = register_module("layers", clones(layer, n, "TransformerEncoder"));
  if (norm_) norm = register_module("norm", std::move(norm_));
}

Tensor TransformerEncoder::forward(Tensor src) { return forward(src, TransformerEncoderForwardOptions{}); }

Tensor TransformerEncoder::forward(const Tensor& src, const TransformerEncoderForwardOptions& o) {
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i) x = layers->at<TransformerEncoderLayer>(i)->forward(x, o);
  return norm ? norm->forward(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& layer, int64_t n, std::shared_ptr<Module> norm_)
    : num_layers(n) {
  layers = register_module("layers", clones(layer, n, "TransformerDecoder"));
  if (norm_) norm = register_module("norm", std::move(norm_));
}

Tensor TransformerDecoder::forward(Tensor tgt, Tensor memory) {
  return forward(tgt, memory, TransformerDecoderForwardOptions{});
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const TransformerDecoderForwardOptions& o) {
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i) x = layers->at<TransformerDecoderLayer>(i)->forward(x, memory, o);
  return norm ? norm->forward(x) : x;
}

// ---- Transformer ------------------------------------------------------------------------------------

Transformer::Transformer(TransformerOptions o) : options(std::move(o)) {
  TransformerLayerOptions lo{.dim_feedforward = options.dim_feedforward,
                             .dropout = options.dropout,
                             .activation = options.activation,
                             .layer_norm_eps = options.layer_norm_eps,
                             .batch_first = options.batch_first,
                             .norm_first = options.norm_first,
                             .bias = options.bias};
  std::vector<int64_t> shape{options.d_model};
  LayerNormOptions no{.eps = options.layer_norm_eps, .bias = options.bias};
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(
                                           TransformerEncoderLayer(options.d_model, options.nhead, lo),
                                           options.num_encoder_layers, std::make_shared<LayerNorm>(shape, no)));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(
                                           TransformerDecoderLayer(options.d_model, options.nhead, lo),
                                           options.num_decoder_layers, std::make_shared<LayerNorm>(shape, no)));
  reset_parameters();
}

void Transformer::reset_parameters() {
  for (Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::forward(Tensor src, Tensor tgt) { return forward(src, tgt, TransformerForwardOptions{}); }

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const TransformerForwardOptions& o) {
  NABLA_CHECK(ShapeError,
              src.defined() && tgt.defined() && src.dim() == tgt.dim() && (src.dim() == 2 || src.dim() == 3),
              "Transformer: expected src and tgt with 3 dims (or 2 unbatched), got src ",
              src.defined() ? internal::str(src.sizes()) : "undefined", " tgt ",
              tgt.defined() ? internal::str(tgt.sizes()) : "undefined");
  int64_t bdim = options.batch_first ? 0 : 1;
  NABLA_CHECK(ShapeError, src.dim() == 2 || src.size(bdim) == tgt.size(bdim),
              "Transformer: the batch number of src and tgt must be equal, got src ", src.sizes(), " tgt ",
              tgt.sizes());
  NABLA_CHECK(ShapeError, src.size(-1) == options.d_model && tgt.size(-1) == options.d_model,
              "Transformer: the feature number of src and tgt must be equal to d_model (", options.d_model,
              "), got src ", src.sizes(), " tgt ", tgt.sizes());
  Tensor memory = encoder->forward(
      src, {.src_mask = o.src_mask, .src_key_padding_mask = o.src_key_padding_mask, .is_causal = o.src_is_causal});
  return decoder->forward(tgt, memory,
                          {.tgt_mask = o.tgt_mask,
                           .memory_mask = o.memory_mask,
                           .tgt_key_padding_mask = o.tgt_key_padding_mask,
                           .memory_key_padding_mask = o.memory_key_padding_mask,
                           .tgt_is_causal = o.tgt_is_causal,
                           .memory_is_causal = o.memory_is_causal});
}

Tensor generate_square_subsequent_mask(int64_t size, const TensorOptions& options) {
  NABLA_CHECK(ValueError, size >= 0, "generate_square_subsequent_mask: size must be non-negative, got ", size);
  return full({size, size}, -std::numeric_limits<double>::infinity(), options).triu(1);
}

}  // namespace nabla::nn
