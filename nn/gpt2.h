// GPT-2 (Radford et al., 2019) with Hugging Face's module layout and parameter names, so that a
// GPT2LMHeadModel checkpoint (pytorch_model.bin or model.safetensors) loads as is:
//
//   transformer.wte.weight (V, d)            transformer.wpe.weight (n_positions, d)
//   transformer.h.{i}.ln_1.{weight,bias}     transformer.h.{i}.attn.c_attn.{weight (d, 3d), bias}
//   transformer.h.{i}.attn.c_proj.{weight (d, d), bias}
//   transformer.h.{i}.ln_2.{weight,bias}     transformer.h.{i}.mlp.c_fc.{weight (d, 4d), bias}
//   transformer.h.{i}.mlp.c_proj.{weight (4d, d), bias}
//   transformer.ln_f.{weight,bias}           (lm_head.weight: tied to transformer.wte.weight)
//
// The projections are Hugging Face's Conv1D: weight (in, out), y = x W + b (the transpose of
// nn::Linear's layout). Each block: x + attn(ln_1(x)), then x + mlp(ln_2(x)), causal self-attention
// through scaled_dot_product_attention (the fused kernel where it applies), the MLP's activation the
// tanh approximation of GELU ("gelu_new"); logits = ln_f(h) wte^T.
//
//   nn::GPT2LMHeadModel gpt({.vocab_size = 50257, .n_layer = 12});
//   nn::load_gpt2_weights(gpt, "model.safetensors");
//   Tensor logits = gpt.forward(tokens);                        // (B, T) int64 -> (B, T, V)
//   auto caches = gpt.make_caches(B, 1024);                     // decoding: one KVCache per block
//   Tensor next = gpt.forward_cached(tokens.narrow(1, past, n), caches);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../io/gguf.h"
#include "attention.h"
#include "container.h"
#include "embedding.h"
#include "module.h"
#include "normalization.h"

namespace nabla::nn {

struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // the longest sequence (position embeddings)
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  double layer_norm_epsilon = 1e-5;
  // Hugging Face's embd_pdrop, attn_pdrop and resid_pdrop (0.1 there), one value; in training only.
  double dropout = 0.0;
};

// Hugging Face's Conv1D: weight (in, out), bias (out); y = x weight + bias.
class Conv1D : public Module {
 public:
  Conv1D(int64_t nf, int64_t nx);  // Hugging Face's argument order: out features, in features
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  int64_t nf, nx;
  Tensor weight, bias;
};

class GPT2Attention : public Module {
 public:
  explicit GPT2Attention(const GPT2Config& config);
  // x (B, T, d) -> (B, T, d); with a cache, x are the tokens after those it holds.
  Tensor forward_attention(const Tensor& x, KVCache* cache);
  Tensor forward(Tensor x) override { return forward_attention(x, nullptr); }
  int64_t n_head, head_dim;
  double dropout;
  std::shared_ptr<Conv1D> c_attn, c_proj;
};

class GPT2MLP : public Module {
 public:
  explicit GPT2MLP(const GPT2Config& config);
  Tensor forward(Tensor x) override;
  double dropout;
  std::shared_ptr<Conv1D> c_fc, c_proj;
};

class GPT2Block : public Module {
 public:
  explicit GPT2Block(const GPT2Config& config);
  Tensor forward_block(const Tensor& x, KVCache* cache);
  Tensor forward(Tensor x) override { return forward_block(x, nullptr); }
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<GPT2Attention> attn;
  std::shared_ptr<GPT2MLP> mlp;
};

// Hugging Face's GPT2Model: the embeddings, the blocks and the final norm; forward gives the last
// hidden states (B, T, d).
class GPT2Model : public Module {
 public:
  explicit GPT2Model(const GPT2Config& config);
  // tokens (B, T) int64 at positions (B, T) (undefined: 0 .. T - 1, or the caches' positions).
  Tensor forward_hidden(const Tensor& tokens, const Tensor& positions, std::vector<KVCache>* caches);
  Tensor forward(Tensor tokens) override { return forward_hidden(tokens, {}, nullptr); }
  GPT2Config config;
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<ModuleList> h;
  std::shared_ptr<LayerNorm> ln_f;
  std::vector<std::shared_ptr<GPT2Block>> blocks;  // h's blocks, typed
};

class GPT2LMHeadModel : public Module {
 public:
  explicit GPT2LMHeadModel(const GPT2Config& config = {});
  // tokens (B, T) int64 -> logits (B, T, vocab_size), positions 0 .. T - 1.
  Tensor forward(Tensor tokens) override;
  // The tokens after those the caches hold (every cache has the same length) -> their logits.
  Tensor forward_cached(const Tensor& tokens, std::vector<KVCache>& caches);
  // One KVCache per block, in the parameters' dtype and device.
  std::vector<KVCache> make_caches(int64_t batch, int64_t capacity = 256) const;
  // Hugging Face's initialization: weights N(0, 0.02) (the residual projections c_proj N(0, 0.02 /
  // sqrt(2 n_layer))), biases 0, layer norms 1 and 0.
  void reset_parameters() override;

  const GPT2Config& config() const { return transformer->config; }
  std::shared_ptr<GPT2Model> transformer;
};

// Loads a Hugging Face GPT-2 checkpoint: safetensors, or a file torch.save wrote (pytorch_model.bin),
// with the names above, with or without the "transformer." prefix (GPT2Model's own checkpoints,
// such as the original "gpt2" repository's, have none). lm_head.weight (tied) and the causal-mask
// buffers older versions saved (attn.bias, attn.masked_bias) are skipped; any other extra or missing
// tensor is an error naming it, as is a shape that differs from the config's.
void load_gpt2_weights(GPT2LMHeadModel& model, const std::string& path);

// Writes the model as a GGUF file llama.cpp runs (architecture "gpt2", float32): llama.cpp's tensor
// names (token_embd, position_embd, blk.N.attn_norm / attn_qkv / attn_output / ffn_norm / ffn_up /
// ffn_down, output_norm, output), the projections transposed to (out, in), the tied head written
// out as output.weight, and `vocab` as its tokenizer (text::BytePairTokenizer::gguf_vocab()).
// Atomically. Throws ValueError when the vocabulary's size is not the model's.
//   nn::save_gpt2_gguf(gpt, tok.gguf_vocab(), "model.gguf");   // then: llama-cli -m model.gguf
void save_gpt2_gguf(const GPT2LMHeadModel& model, const gguf::BpeVocab& vocab, const std::string& path);

}  // namespace nabla::nn
