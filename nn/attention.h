// Attention: functional scaled_dot_product_attention and the MultiheadAttention module, with
// PyTorch 2.x semantics, parameter names, shapes and initialization (a PyTorch state_dict loads 1:1).
//
//   namespace F = nabla::nn::functional;
//   Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
//
//   auto mha = std::make_shared<nn::MultiheadAttention>(64, 8, nn::MultiheadAttentionOptions{.batch_first = true});
//   Tensor out = (*mha)(x);                                          // self-attention, (N, L, 64)
//   auto [out2, weights] = mha->forward_attention(q, mem, mem, {.key_padding_mask = pad});
//
// Two mask conventions, as in PyTorch (they are opposite for bool masks):
//   scaled_dot_product_attention's attn_mask: bool true = MAY attend (false positions get -inf);
//   MultiheadAttention's attn_mask and key_padding_mask: bool true = NOT allowed / ignore.
// Floating masks are added to the scores in both (use -inf to forbid a position).
// A query row whose every key is masked out has attention weights NaN (softmax over nothing), as
// in PyTorch's MultiheadAttention.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "linear.h"
#include "module.h"

namespace nabla::nn::functional {

struct ScaledDotProductAttentionOptions {
  // Broadcast to (..., L, S). bool: true = may attend; floating: added to the scores (converted to
  // the query's dtype). Undefined: no mask.
  Tensor attn_mask{};
  double dropout_p = 0.0;         // dropout on the attention weights, applied whenever > 0 (as PyTorch)
  bool is_causal = false;         // query i attends to keys j <= i (top-left aligned); not with attn_mask
  std::optional<double> scale{};  // default 1 / sqrt(E)
  // Grouped-query attention: query (..., Hq, L, E) with key/value (..., Hkv, S, E), Hq a multiple
  // of Hkv; query head h attends with key/value head h / (Hq / Hkv).
  bool enable_gqa = false;
};

// softmax(q k^T * scale + mask) v, as torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x).
// q: (..., L, E), k: (..., S, E), v: (..., S, Ev) -> (..., L, Ev); the batch dims broadcast.
//
// Two implementations, chosen per call as PyTorch chooses among its backends (sdpa_kernel below
// overrides the choice):
// - flash: nabla::flash_attention (core/ops.h), FlashAttention-2's tiled kernel with an online
//   softmax. Memory beyond the inputs and output is one log-sum-exp per query row, never (L, S);
//   causal attention skips the tiles above the diagonal. Used where the device has it (the CPU, for
//   float32, float64, bfloat16 and float16), unless an ONNX export is tracing or attn_mask requires
//   grad. float16/bfloat16 are computed in float32 throughout and rounded once (PyTorch's math path
//   rounds the scores and the weights to the input's dtype on the way: a difference below the
//   16-bit dtypes' precision, in nabla's favour).
// - math: matmul, softmax and matmul (the (L, S) weights stored), on every device.
// Both differentiate to any order; both draw the same dropout mask from the same generator state.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options = {});

// The implementations scaled_dot_product_attention may use, as torch.nn.attention.SDPBackend.
enum class SdpBackend : uint8_t {
  automatic,  // flash where it applies, else math
  math,       // always the math path
  flash,      // always flash: a call it does not apply to throws NotImplemented saying why
};
// Sets the backend for this thread until the guard goes out of scope (as PyTorch's
// `with torch.nn.attention.sdpa_kernel(SDPBackend.MATH):`); guards nest. MultiheadAttention and
// the Transformer layers follow it too.
//   { auto g = F::sdpa_kernel(F::SdpBackend::math); y = F::scaled_dot_product_attention(q, k, v); }
class [[nodiscard]] SdpaKernelGuard {
 public:
  explicit SdpaKernelGuard(SdpBackend backend);
  ~SdpaKernelGuard();
  SdpaKernelGuard(const SdpaKernelGuard&) = delete;
  SdpaKernelGuard& operator=(const SdpaKernelGuard&) = delete;

 private:
  SdpBackend prev_;
};
inline SdpaKernelGuard sdpa_kernel(SdpBackend backend) { return SdpaKernelGuard(backend); }
SdpBackend current_sdp_backend();

struct RotaryEmbeddingOptions {
  double theta = 10000.0;    // the base of the frequencies theta^(-2i/D)
  bool interleaved = false;  // pairs (2i, 2i + 1) (GPT-J, Meta's LLaMA) instead of (i, i + D/2) (GPT-NeoX, HF LLaMA)
  int64_t offset = 0;        // the position of x's first row (a KV cache's length when decoding)
  // Positions of the rows, an integer tensor (..., T) broadcast against x's leading dims (for x
  // (N, H, T, D) and prompts of different lengths: (N, 1, T)); undefined: offset, offset + 1, ...
  Tensor positions{};
};

// Rotary position embeddings (RoPE, Su et al. 2021): x (..., T, D), D even, the T rows at positions
// p; feature pair i of row p is rotated by the angle p * theta^(-2i/D):
//   (a, b) -> (a cos - b sin, a sin + b cos)
// so that the dot product of two rotated rows depends on their positions only through p - p'.
// Applied to the queries and keys (per head) before attention. cos and sin are computed in
// float32 (float64 for float64 x) and rounded to x's dtype, as Hugging Face's implementations do.
// Differentiable in x. PyTorch has no such function; torchtune's RotaryPositionalEmbeddings is the
// half-split layout with offset via input_pos.
Tensor rotary_embedding(const Tensor& x, const RotaryEmbeddingOptions& options = {});

}  // namespace nabla::nn::functional

namespace nabla::nn {

// The keys and values of the positions a decoder has already seen, for incremental decoding: each
// step projects only its new tokens and attends over the cached positions and its own. One cache
// per attention layer; the tensors are (B, H, capacity, head_dim), pre-allocated and doubled when an
// append does not fit. What is cached carries no autograd graph (decoding runs under NoGrad).
//
//   std::vector<nn::KVCache> caches;  // one per layer
//   for (int l = 0; l < layers; ++l) caches.emplace_back(B, H, head_dim, /*capacity=*/1024);
//   out = mha->forward_attention(x, x, x, {.need_weights = false, .is_causal = true, .kv_cache = &caches[l]});
//
// Prompts of different lengths in one batch are left-padded to the same length and the cache told
// how much padding each row has (set_left_padding): the padded keys are masked for every query, and
// positions() gives each new token its position in its own sequence (for position embeddings and
// rotary_embedding's `positions`). A padded query attends to itself alone, so that its (unused)
// output stays finite.
class KVCache {
 public:
  KVCache() = default;
  KVCache(int64_t batch, int64_t heads, int64_t head_dim, int64_t capacity = 256, DType dtype = DType::f32,
          Device device = kCPU);
  // Move-only: a copy would share the tensors it writes into.
  KVCache(KVCache&&) = default;
  KVCache& operator=(KVCache&&) = default;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  // Writes k and v (B, H, T, head_dim) at positions length() .. length() + T - 1 and returns the
  // cached keys and values of every position so far, (B, H, length(), head_dim), views of the cache.
  std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v);
  // Row b's first pad[b] positions are padding. Set before the first append (pad.size() == batch).
  void set_left_padding(std::vector<int64_t> pad);
  // The additive mask (B, 1, T, length()) of the T newest positions as queries (after their
  // append): -inf on padding and, when causal, on the keys after each query; undefined when nothing
  // is masked.
  Tensor attention_bias(int64_t queries, bool causal, DType dtype) const;
  // The positions of the next T tokens in their own sequences, (B, T) int64: length() + t - pad[b].
  Tensor positions(int64_t tokens) const;
  void reset();  // forgets every position and the padding; keeps the memory

  int64_t length() const { return length_; }
  int64_t capacity() const { return k_.defined() ? k_.size(2) : 0; }
  int64_t batch() const { return batch_; }

 private:
  Tensor k_, v_;  // (B, H, capacity, head_dim)
  int64_t batch_ = 0, heads_ = 0, head_dim_ = 0, length_ = 0;
  std::vector<int64_t> pad_;
};

struct MultiheadAttentionOptions {
  double dropout = 0.0;                   // on the attention weights, in training only
  bool bias = true;                       // in_proj_bias and out_proj.bias
  bool add_bias_kv = false;               // bias_k, bias_v (1, 1, E): one extra key/value position
  bool add_zero_attn = false;             // one extra all-zero key/value position per head
  std::optional<int64_t> kdim{}, vdim{};  // feature sizes of key and value (default embed_dim)
  bool batch_first = false;               // inputs and output (N, L, E) instead of (L, N, E)
};

struct MultiheadAttentionForwardOptions {
  // (N, S) or, unbatched, (S). bool: true = ignore this key; floating: added to the scores.
  Tensor key_padding_mask{};
  bool need_weights = true;  // return the attention weights
  // (L, S) or (N * num_heads, L, S) ((num_heads, L, S) unbatched). bool: true = NOT allowed
  // (PyTorch's MultiheadAttention convention, the opposite of scaled_dot_product_attention's);
  // floating: added to the scores.
  Tensor attn_mask{};
  bool average_attn_weights = true;  // weights averaged over heads (N, L, S), else (N, H, L, S)
  // Query i attends to keys j <= i. With attn_mask it is a hint, as in PyTorch (attn_mask should
  // then be the causal mask, and is what is used); without one, nabla builds the causal mask
  // (PyTorch requires the mask as well).
  bool is_causal = false;
  // Incremental decoding (self-attention): the keys and values of the new tokens are appended to the
  // cache and every query attends over all its positions; is_causal then masks the keys after each
  // query (the new tokens are the last ones) and the cache's padding is masked. Not with attn_mask,
  // key_padding_mask, add_bias_kv or add_zero_attn.
  KVCache* kv_cache = nullptr;
};

// What forward_attention returns: `auto [out, weights] = mha->forward_attention(q, k, v);`
struct AttentionOutput {
  Tensor output;        // (L, N, E), (N, L, E) with batch_first, or (L, E) unbatched
  Tensor attn_weights;  // (N, L, S) averaged or (N, H, L, S); undefined when !need_weights
};

// Multi-head attention (torch.nn.MultiheadAttention): the query, key and value are projected to
// embed_dim, split into num_heads heads of embed_dim / num_heads, attended per head with scale
// 1/sqrt(head_dim) and the heads' outputs concatenated and projected by out_proj.
//
// Parameters (PyTorch's names and order): in_proj_weight (3E, E) when kdim == vdim == embed_dim,
// else q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim); in_proj_bias (3E)
// when bias; bias_k, bias_v (1, 1, E) when add_bias_kv; child out_proj (Linear(E, E)). Initialized
// as PyTorch's _reset_parameters: xavier_uniform_ in-projection weights, zero in_proj_bias and
// out_proj.bias, xavier_normal_ bias_k/bias_v, out_proj.weight as Linear's.
//
// Inputs: query (L, N, E), key (S, N, kdim), value (S, N, vdim) (batch first: (N, L, E), ...), or
// unbatched (L, E), (S, kdim), (S, vdim). Self-attention (query, key and value the same tensor)
// projects with one packed matmul; heads are batched, never looped over.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});

  // Self-attention forward_attention(x, x, x, {.need_weights = false}).output, so that (*m)(x)
  // and forward hooks work.
  Tensor forward(Tensor x) override;
  // The full call, with masks and the attention weights.
  AttentionOutput forward_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const MultiheadAttentionForwardOptions& options = {});
  void reset_parameters() override;

  int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  MultiheadAttentionOptions options;
  // in_proj_weight when kdim == vdim == embed_dim, else the three separate weights.
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight;
  Tensor in_proj_bias, bias_k, bias_v;
  std::shared_ptr<Linear> out_proj;

  bool qkv_same_embed_dim() const { return kdim == embed_dim && vdim == embed_dim; }
};

}  // namespace nabla::nn
