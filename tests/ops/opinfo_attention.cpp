// Registry entries for attention and the Transformer layers (see opinfo.h). MultiheadAttention and
// TransformerEncoderLayer are called with their parameter members replaced by the sample's inputs,
// so gradcheck differentiates with respect to the inputs and the weights; the decoder layer (and
// the small encoder samples) use seeded parameters and differentiate with respect to the inputs.
// Masks enter as fixed, non-differentiable inputs.
#include <gtest/gtest.h>

#include <limits>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;
namespace F = nn::functional;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- scaled_dot_product_attention -------------------------------------------------------------------
// x: q, k, v[, attn_mask]. Without a mask: the default, a custom scale and causal forms.
Outputs sdpa(I x) {
  if (x.size() == 4) return {F::scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = x[3]})};
  return {F::scaled_dot_product_attention(x[0], x[1], x[2]),
          F::scaled_dot_product_attention(x[0], x[1], x[2], {.scale = 0.7}),
          F::scaled_dot_product_attention(x[0], x[1], x[2], {.is_causal = true})};
}

// ---- flash_attention --------------------------------------------------------------------------------
// x: q (B, Hq, L, E), k, v (B, Hkv, S, .)[, bias]: two scales, the second causal. `math` runs the
// same calls through scaled_dot_product_attention's math path (the reference suite compares them).
Outputs flash(I x, bool math) {
  const Tensor bias = x.size() > 3 ? x[3] : Tensor();
  if (math) {
    auto g = F::sdpa_kernel(F::SdpBackend::math);
    auto sdpa_math = [&](double scale, bool causal) {
      return F::scaled_dot_product_attention(
          x[0], x[1], x[2], {.attn_mask = bias, .is_causal = causal, .scale = scale, .enable_gqa = true});
    };
    return {sdpa_math(0.5, false), sdpa_math(0.8, !bias.defined())};
  }
  return {flash_attention(x[0], x[1], x[2], bias, {.scale = 0.5}),
          flash_attention(x[0], x[1], x[2], bias, {.scale = 0.8, .causal = !bias.defined()})};
}

// ---- MultiheadAttention -----------------------------------------------------------------------------
// Packed weights, 2 heads. x: q, in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias
// (self-attention: the packed in-projection), or q, k, v, the four parameters[, key_padding_mask
// [, attn_mask]]. Outputs: the output, the averaged and the per-head weights.
Outputs mha(I x) {
  const bool self = x.size() == 5;
  const size_t p = self ? 1 : 3;
  nn::MultiheadAttention m(x[p].size(1), 2);
  m.in_proj_weight = x[p];
  m.in_proj_bias = x[p + 1];
  m.out_proj->weight = x[p + 2];
  m.out_proj->bias = x[p + 3];
  const Tensor &q = x[0], &k = self ? x[0] : x[1], &v = self ? x[0] : x[2];
  nn::MultiheadAttentionForwardOptions o;
  if (x.size() > 7) o.key_padding_mask = x[7];
  if (x.size() > 8) o.attn_mask = x[8];
  auto [out, w] = m.forward_attention(q, k, v, o);
  o.average_attn_weights = false;
  return {out, w, m.forward_attention(q, k, v, o).attn_weights};
}

// Separate projections (kdim, vdim), bias_k/bias_v, a zero position, batch first.
// x: q, k, v, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, bias_k, bias_v,
// out_proj.weight, out_proj.bias.
Outputs mha_kdim_vdim(I x) {
  nn::MultiheadAttention m(
      x[3].size(0), x[3].size(0) % 2 ? 1 : 2,
      {.add_bias_kv = true, .add_zero_attn = true, .kdim = x[4].size(1), .vdim = x[5].size(1), .batch_first = true});
  m.q_proj_weight = x[3];
  m.k_proj_weight = x[4];
  m.v_proj_weight = x[5];
  m.in_proj_bias = x[6];
  m.bias_k = x[7];
  m.bias_v = x[8];
  m.out_proj->weight = x[9];
  m.out_proj->bias = x[10];
  auto [out, w] = m.forward_attention(x[0], x[1], x[2], {.average_attn_weights = false});
  return {out, w};
}

// ---- Transformer layers -----------------------------------------------------------------------------
// Eval mode (dropout off). Post-norm relu and pre-norm gelu, both with the same parameters.
nn::TransformerLayerOptions layer_options(bool pre_gelu, int64_t dim_ff) {
  return {.dim_feedforward = dim_ff, .dropout = 0.0, .activation = pre_gelu ? "gelu" : "relu", .norm_first = pre_gelu};
}

// x: src (params seeded)[, src_key_padding_mask, src_mask], or src and the 12 parameters in
// state_dict order[, src_key_padding_mask, src_mask].
Outputs encoder_layer(I x) {
  const bool params = x.size() >= 13;
  const int64_t d = x[0].size(-1), dim_ff = params ? x[5].size(0) : 6;
  Outputs outs;
  for (bool pre_gelu : {false, true}) {
    manual_seed(31);
    nn::TransformerEncoderLayer l(d, 2, layer_options(pre_gelu, dim_ff));
    l.eval();
    l.to(x[0].device(), x[0].dtype());
    if (params) {
      l.self_attn->in_proj_weight = x[1];
      l.self_attn->in_proj_bias = x[2];
      l.self_attn->out_proj->weight = x[3];
      l.self_attn->out_proj->bias = x[4];
      l.linear1->weight = x[5];
      l.linear1->bias = x[6];
      l.linear2->weight = x[7];
      l.linear2->bias = x[8];
      l.norm1->weight = x[9];
      l.norm1->bias = x[10];
      l.norm2->weight = x[11];
      l.norm2->bias = x[12];
    }
    size_t m = params ? 13 : 1;
    nn::TransformerEncoderForwardOptions o;
    if (x.size() > m) o.src_key_padding_mask = x[m];
    if (x.size() > m + 1) o.src_mask = x[m + 1];
    outs.push_back(l.forward(x[0], o));
  }
  return outs;
}

// x: tgt, memory[, tgt_mask, memory_key_padding_mask] (params seeded).
Outputs decoder_layer(I x) {
  Outputs outs;
  for (bool pre_gelu : {false, true}) {
    manual_seed(32);
    nn::TransformerDecoderLayer l(x[0].size(-1), 2, layer_options(pre_gelu, 6));
    l.eval();
    l.to(x[0].device(), x[0].dtype());
    nn::TransformerDecoderForwardOptions o;
    if (x.size() > 2) o.tgt_mask = x[2];
    if (x.size() > 3) o.memory_key_padding_mask = x[3];
    outs.push_back(l.forward(x[0], x[1], o));
    o.tgt_mask = Tensor();
    o.tgt_is_causal = true;
    outs.push_back(l.forward(x[0], x[1], o));
  }
  return outs;
}

// The encoder layer's 12 parameters for d_model d and dim_feedforward f, in state_dict order.
std::vector<ArgSpec> encoder_params(int64_t d, int64_t f) {
  return {arg({3 * d, d}), arg({3 * d}), arg({d, d}),        arg({d}), arg({f, d}),        arg({f}),
          arg({d, f}),     arg({d}),     arg({d}, 0.5, 1.5), arg({d}), arg({d}, 0.5, 1.5), arg({d})};
}
std::vector<ArgSpec> concat(std::vector<ArgSpec> a, const std::vector<ArgSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<OpInfo> attention_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "nn.scaled_dot_product_attention",
                 .torch = "T.sdpa(x)",
                 .fn = sdpa,
                 .samples = {{{arg({2, 3, 4}), arg({2, 5, 4}), arg({2, 5, 3})}, "3d"},
                             {{arg({1, 2, 2}), arg({1, 3, 2}), arg({1, 3, 2})}, "small"},
                             {{arg({2, 1, 2, 3}), arg({3, 4, 3}), arg({1, 3, 4, 2})}, "broadcast_batch"},
                             {{arg_t({4, 3}), arg_t({3, 3}), arg({3, 2})}, "noncontiguous_unbatched"},
                             {{arg({2, 3, 4}), arg({2, 4, 4}), arg({2, 4, 2}),
                               fixed_mask({3, 4}, {1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1})},
                              "bool_mask"},
                             {{arg({1, 2, 2}), arg({1, 3, 2}), arg({1, 3, 1}), fixed_mask({2, 3}, {1, 0, 1, 0, 1, 1})},
                              "small_bool_mask"},
                             {{arg({2, 3, 2}), arg({2, 4, 2}), arg({2, 4, 3}),
                               fixed_arg({2, 1, 4}, {0.5, -kInf, 0, 1, -1, 0, 0.25, -kInf}, false)},
                              "float_mask_broadcast"}}});
  // The fused kernel itself: grouped-query heads, L != S both ways, an additive bias with -inf.
  ops.push_back({.name = "flash_attention",
                 .torch = "T.flash(x)",
                 .fn = [](I x) { return flash(x, false); },
                 .samples = {{{arg({1, 2, 2, 2}), arg({1, 1, 3, 2}), arg({1, 1, 3, 2})}, "small_gqa"},
                             {{arg({2, 4, 5, 3}), arg({2, 2, 3, 3}), arg({2, 2, 3, 4})}, "gqa_longer_queries"},
                             {{arg({1, 2, 3, 4}), arg({1, 2, 6, 4}), arg({1, 2, 6, 2})}, "longer_keys"},
                             {{arg({1, 2, 3, 2}), arg({1, 2, 4, 2}), arg({1, 2, 4, 3}),
                               fixed_arg({1, 1, 3, 4}, {0, -kInf, 0.5, 1, -1, 0, 0, 0.25, 2, 0, -kInf, 0}, false)},
                              "bias"}},
                 .ref = [](I x) { return flash(x, true); }});
  ops.push_back(
      {.name = "nn.scaled_dot_product_attention_gqa",
       .ops = {OpId::scaled_dot_product_attention},
       .torch = "T.sdpa_gqa(x)",
       .fn = [](I x) { return Outputs{F::scaled_dot_product_attention(x[0], x[1], x[2], {.enable_gqa = true})}; },
       .samples = {{{arg({2, 4, 3, 2}), arg({2, 2, 4, 2}), arg({2, 2, 4, 3})}, "4_on_2_heads"},
                   {{arg({1, 3, 2, 2}), arg({1, 1, 3, 2}), arg({1, 1, 3, 2})}, "small"}}});
  // Rotary embeddings: half-split and interleaved pairs, a decoding offset, per-sequence positions.
  ops.push_back({.name = "nn.rotary_embedding",
                 .torch = "T.rotary(x[0])",
                 .fn = [](I x) { return Outputs{F::rotary_embedding(x[0])}; },
                 .samples = {{{arg({2, 3, 5, 4})}, "4d"}, {{arg_t({6, 4})}, "noncontiguous"}}});
  ops.push_back(
      {.name = "nn.rotary_embedding_interleaved_offset",
       .torch = "T.rotary(x[0], True, 7, theta=500.0)",
       .fn = [](I x) { return Outputs{F::rotary_embedding(x[0], {.theta = 500.0, .interleaved = true, .offset = 7})}; },
       .samples = {{{arg({2, 3, 6})}, "3d"}}});
  ops.push_back({.name = "nn.rotary_embedding_positions",
                 .torch = "T.rotary(x[0], positions=x[1])",
                 .fn = [](I x) { return Outputs{F::rotary_embedding(x[0], {.positions = x[1]})}; },
                 .samples = {{{arg({2, 1, 3, 4}), fixed_index({2, 1, 3}, {0, 1, 2, 5, 6, 7})}, "left_padded"}}});
  // Dropout on the weights: a fixed seed per call, so every evaluation draws the same mask.
  ops.push_back({.name = "nn.scaled_dot_product_attention_dropout",
                 .ops = {OpId::scaled_dot_product_attention},
                 .no_torch = "random: nabla's generator draws other dropout masks than PyTorch's",
                 .fn =
                     [](I x) {
                       manual_seed(1234);
                       return Outputs{F::scaled_dot_product_attention(x[0], x[1], x[2], {.dropout_p = 0.3})};
                     },
                 .samples = {{{arg({2, 3, 4}), arg({2, 4, 4}), arg({2, 4, 3})}, "3d"},
                             {{arg({1, 2, 2}), arg({1, 3, 2}), arg({1, 3, 2})}, "small"}}});
  ops.push_back(
      {.name = "nn.MultiheadAttention",
       .torch = "T.mha(x)",
       .fn = mha,
       .samples = {
           {{arg({2, 1, 2}), arg({6, 2}), arg({6}), arg({2, 2}), arg({2})}, "small_self_attention"},
           {{arg({3, 2, 4}), arg({12, 4}), arg({12}), arg({4, 4}), arg({4})}, "self_attention"},
           {{arg({3, 2, 4}), arg({4, 2, 4}), arg({4, 2, 4}), arg({12, 4}), arg({12}), arg({4, 4}), arg({4}),
             fixed_mask({2, 4}, {0, 0, 1, 0, 1, 0, 0, 1}), fixed_mask({3, 4}, {0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0})},
            "cross_attention_bool_masks"},
           {{arg({2, 4}), arg({3, 4}), arg({3, 4}), arg({12, 4}), arg({12}), arg({4, 4}), arg({4}),
             fixed_arg({3}, {0, -kInf, 0.5}, false),
             fixed_arg({2, 2, 3}, {0, 1, -1, 0.5, 0, 0, -kInf, 0, 0, 0, 0, 2}, false)},
            "unbatched_float_masks_per_head"},
           {{arg_t({2, 3, 4}), arg({3, 3, 4}), arg({3, 3, 4}), arg_t({12, 4}), arg({12}), arg_t({4, 4}), arg({4})},
            "noncontiguous"}}});
  ops.push_back({.name = "nn.MultiheadAttention_kdim_vdim_bias_kv",
                 .torch = "T.mha_kdim_vdim(x)",
                 .fn = mha_kdim_vdim,
                 .samples = {{{arg({2, 3, 4}), arg({2, 2, 3}), arg({2, 2, 5}), arg({4, 4}), arg({4, 3}), arg({4, 5}),
                               arg({12}), arg({1, 1, 4}), arg({1, 1, 4}), arg({4, 4}), arg({4})},
                              "batch_first"},
                             {{arg({1, 1, 2}), arg({1, 1, 1}), arg({1, 1, 1}), arg({2, 2}), arg({2, 1}), arg({2, 1}),
                               arg({6}), arg({1, 1, 2}), arg({1, 1, 2}), arg({2, 2}), arg({2})},
                              "small"},
                             {{arg({1, 2, 3}), arg({1, 2, 2}), arg({1, 2, 1}), arg({3, 3}), arg({3, 2}), arg({3, 1}),
                               arg({9}), arg({1, 1, 3}), arg({1, 1, 3}), arg({3, 3}), arg({3})},
                              "one_head"}}});
  ops.push_back(
      {.name = "nn.TransformerEncoderLayer",
       .torch = "T.encoder_layer(x)",
       .fn = encoder_layer,
       .samples = {{{arg({2, 1, 4})}, "small"},
                   {{arg({3, 2, 4}), fixed_mask({2, 3}, {0, 0, 1, 0, 0, 0}),
                     fixed_arg({3, 3}, {0, -kInf, -kInf, 0, 0, -kInf, 0, 0, 0}, false)},
                    "masks"},
                   {concat({arg({3, 2, 4})}, encoder_params(4, 6)), "all_parameters"},
                   {concat(concat({arg({2, 3, 4})}, encoder_params(4, 5)), {fixed_mask({3, 2}, {0, 0, 0, 1, 1, 0})}),
                    "all_parameters_padding"}}});
  ops.push_back(
      {.name = "nn.TransformerDecoderLayer",
       .no_torch = "its parameters come from nabla's generator; nn.TransformerEncoderLayer's all_parameters samples "
                   "compare the shared attention and feed-forward blocks with PyTorch",
       .fn = decoder_layer,
       .samples = {{{arg({2, 1, 4}), arg({3, 1, 4})}, "small"},
                   {{arg({3, 2, 4}), arg({4, 2, 4}), fixed_arg({3, 3}, {0, -kInf, -kInf, 0, 0, -kInf, 0, 0, 0}, false),
                     fixed_mask({2, 4}, {0, 0, 0, 1, 1, 0, 0, 0})},
                    "masks"},
                   {{arg({2, 4}), arg({3, 4})}, "unbatched"}}});
  return ops;
}

Registrar attention_registrar(attention_ops());

}  // namespace
}  // namespace nabla::testing
