// Transformer layers with PyTorch 2.x semantics and children names (a PyTorch state_dict loads 1:1):
// TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and
// Transformer, and generate_square_subsequent_mask.
//
//   nn::TransformerEncoderLayer layer(64, 4, {.dim_feedforward = 256, .dropout = 0.1, .batch_first = true});
//   auto enc = std::make_shared<nn::TransformerEncoder>(layer, 2,
//   std::make_shared<nn::LayerNorm>(std::vector<int64_t>{64})); Tensor h = enc->forward(x, {.src_key_padding_mask =
//   pad});   // x: (N, L, 64), pad: (N, L) bool, true = padding
//
// Masks follow MultiheadAttention's convention: bool true = NOT allowed, floating = added to the
// scores (generate_square_subsequent_mask gives the causal one).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "attention.h"
#include "container.h"
#include "dropout.h"
#include "linear.h"
#include "normalization.h"

namespace nabla::nn {

// The feed-forward activation: "relu", "gelu" (erf form), or any Tensor -> Tensor function.
class TransformerActivation {
 public:
  TransformerActivation(const char* name) : TransformerActivation(std::string(name)) {}
  TransformerActivation(const std::string& name);
  template <class Fn>
  requires(std::is_invocable_r_v<Tensor, Fn, const Tensor&> && !std::is_convertible_v<Fn, std::string>)
      TransformerActivation(Fn fn)
      : name_("custom"), fn_(std::move(fn)) {}
  Tensor operator()(const Tensor& x) const { return fn_(x); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::function<Tensor(const Tensor&)> fn_;
};

// The options of both layer kinds (PyTorch's constructor arguments after d_model and nhead).
struct TransformerLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;  // on the attention weights, after attention, inside and after the feed-forward block
  TransformerActivation activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;  // (N, L, E) instead of (L, N, E)
  bool norm_first = false;   // pre-norm (x + f(norm(x))) instead of post-norm (norm(x + f(x)))
  bool bias = true;          // in the linear layers, the attention and the layer norms
};
using TransformerEncoderLayerOptions = TransformerLayerOptions;
using TransformerDecoderLayerOptions = TransformerLayerOptions;

struct TransformerEncoderForwardOptions {
  Tensor src_mask{};              // (L, L) or (N * nhead, L, L); bool true = not allowed, or floating added
  Tensor src_key_padding_mask{};  // (N, L) (unbatched: (L)); bool true = padding, or floating added
  bool is_causal = false;         // see MultiheadAttentionForwardOptions::is_causal
};

struct TransformerDecoderForwardOptions {
  Tensor tgt_mask{};                 // (T, T) or (N * nhead, T, T)
  Tensor memory_mask{};              // (T, S) or (N * nhead, T, S)
  Tensor tgt_key_padding_mask{};     // (N, T)
  Tensor memory_key_padding_mask{};  // (N, S)
  bool tgt_is_causal = false;
  bool memory_is_causal = false;
};

// Self-attention and a feed-forward block, each with a residual connection and a LayerNorm:
//   post-norm: x = norm1(x + sa(x)); x = norm2(x + ff(x))
//   pre-norm:  x = x + sa(norm1(x)); x = x + ff(norm2(x))
// with sa(x) = dropout1(self_attn(x, x, x)) and ff(x) = dropout2(linear2(dropout(act(linear1(x))))).
// src: (L, N, d_model), (N, L, d_model) with batch_first, or (L, d_model).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions options = {});
  Tensor forward(Tensor src) override;
  Tensor forward(const Tensor& src, const TransformerEncoderForwardOptions& options);
  // A new layer with the same options, copies of this one's parameter values (same dtype and
  // device) and training mode: what PyTorch's copy.deepcopy gives TransformerEncoder (and, like
  // it, drawing no random numbers). Children replaced by other module types are not carried over.
  std::shared_ptr<TransformerEncoderLayer> clone() const;

  int64_t d_model, nhead;
  TransformerEncoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
};

// Self-attention, cross-attention over `memory` and a feed-forward block:
//   post-norm: x = norm1(x + sa(x)); x = norm2(x + mha(x, memory)); x = norm3(x + ff(x))
//   pre-norm:  x = x + sa(norm1(x)); x = x + mha(norm2(x), memory); x = x + ff(norm3(x))
// tgt: (T, N, d_model), memory: (S, N, d_model) (batch first: (N, T, d_model), ...), or unbatched.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerDecoderLayerOptions options = {});
  Tensor forward(Tensor tgt, Tensor memory) override;
  Tensor forward(const Tensor& tgt, const Tensor& memory, const TransformerDecoderForwardOptions& options);
  std::shared_ptr<TransformerDecoderLayer> clone() const;

  int64_t d_model, nhead;
  TransformerDecoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
};

// num_layers copies of `layer` (each with its own parameters, all starting from layer's values, as
// PyTorch's deepcopy), children layers.0, layers.1, ..., then an optional final `norm`.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers, std::shared_ptr<Module> norm = nullptr);
  Tensor forward(Tensor src) override;
  Tensor forward(const Tensor& src, const TransformerEncoderForwardOptions& options);

  int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<Module> norm;  // null when there is none
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayer& layer, int64_t num_layers, std::shared_ptr<Module> norm = nullptr);
  Tensor forward(Tensor tgt, Tensor memory) override;
  Tensor forward(const Tensor& tgt, const Tensor& memory, const TransformerDecoderForwardOptions& options);

  int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<Module> norm;
};

struct TransformerOptions {
  int64_t d_model = 512, nhead = 8, num_encoder_layers = 6, num_decoder_layers = 6, dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivation activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false, norm_first = false, bias = true;
};

struct TransformerForwardOptions {
  Tensor src_mask{}, tgt_mask{}, memory_mask{};
  Tensor src_key_padding_mask{}, tgt_key_padding_mask{}, memory_key_padding_mask{};
  bool src_is_causal = false, tgt_is_causal = false, memory_is_causal = false;
};

// torch.nn.Transformer: encoder (with a final LayerNorm) and decoder (with a final LayerNorm);
// every parameter of 2 or more dims re-initialized with xavier_uniform_, as PyTorch does.
// src: (S, N, E), tgt: (T, N, E) (batch first: (N, S, E), (N, T, E)) -> (T, N, E).
class Transformer : public Module {
 public:
  explicit Transformer(TransformerOptions options = {});
  Tensor forward(Tensor src, Tensor tgt) override;
  Tensor forward(const Tensor& src, const Tensor& tgt, const TransformerForwardOptions& options);
  void reset_parameters() override;

  TransformerOptions options;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
};

// The causal mask (size, size): 0 on and below the diagonal, -inf above (PyTorch's
// Transformer.generate_square_subsequent_mask), for tgt_mask / src_mask.
Tensor generate_square_subsequent_mask(int64_t size, const TensorOptions& options = {});

}  // namespace nabla::nn
