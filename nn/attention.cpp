#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/trace.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The dims before the last `n` (the batch dims of a (..., L, E) operand, for n = 2).
IntArrayRef leading_dims(const Tensor& t, int64_t n) {
  return IntArrayRef(t.sizes().data(), static_cast<size_t>(t.dim() - n));
}

// A mask as an additive bias of `dt`: bool masks give -inf where `forbidden_value` and 0 elsewhere,
// floating masks are converted to `dt`. Anything else is a DTypeError naming `what`.
Tensor mask_to_bias(const Tensor& mask, bool forbidden_value, DType dt, const char* op, const char* what) {
  if (mask.dtype() == DType::boolean) {
    Tensor forbid = forbidden_value ? mask : logical_not(mask);
    return zeros(mask.sizes(), dtype(dt).device(mask.device())).masked_fill(forbid, kNegInf);
  }
  NABLA_CHECK(DTypeError, is_floating(mask.dtype()), op, ": ", what, " must be a bool or floating tensor, got ",
              mask.dtype(), " of shape ", mask.sizes());
  return mask.to(dt);
}

// The causal bias (L, S): -inf where key j comes after query i (j > i), 0 elsewhere.
Tensor causal_bias(int64_t L, int64_t S, DType dt, Device dev) {
  return full({L, S}, kNegInf, dtype(dt).device(dev)).triu(1);
}

// softmax(q_scaled k^T + bias) v and the attention weights (after dropout, as PyTorch returns them).
// q_scaled: (..., L, E), k: (..., S, E), v: (..., S, Ev); bias undefined or broadcast to (..., L, S).
std::pair<Tensor, Tensor> attend(const Tensor& q_scaled, const Tensor& k, const Tensor& v, const Tensor& bias,
                                 double dropout_p) {
  Tensor scores = matmul(q_scaled, k.transpose(-2, -1));  // (..., L, S)
  if (bias.defined()) scores = scores + bias;
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0) weights = F::dropout(weights, dropout_p, /*training=*/true);
  return {matmul(weights, v), weights};  // (..., L, Ev), (..., L, S)
}

thread_local F::SdpBackend tl_sdp_backend = F::SdpBackend::automatic;

// Why the fused kernel cannot take this call (empty: it can).
std::string flash_unavailable(const Tensor& q, std::initializer_list<const Tensor*> masks, double dropout_p) {
  if (!has_flash_attention(q))
    return internal::str("there is no fused attention kernel for ", q.dtype(), " on ", q.device());
  if (trace::active()) return "an ONNX export is tracing the call (it records the math path)";
  for (const Tensor* m : masks)
    if (m->defined() && m->requires_grad()) return "a mask requires grad (the fused kernel does not differentiate it)";
  if (dropout_p >= 1) return "dropout_p is 1 (every weight dropped)";
  return {};
}

// Whether this call takes the fused kernel: the thread's SdpBackend, and whether it applies.
bool use_flash(const Tensor& q, std::initializer_list<const Tensor*> masks, double dropout_p, const char* op) {
  if (tl_sdp_backend == F::SdpBackend::math) return false;
  std::string why = flash_unavailable(q, masks, dropout_p);
  NABLA_CHECK(NotImplemented, why.empty() || tl_sdp_backend != F::SdpBackend::flash, op,
              ": sdpa_kernel(SdpBackend::flash) is set but the fused kernel cannot take this call: ", why);
  return why.empty();
}

// t (lead..., rows, cols) as (B, H, rows, cols) for flash_attention: lead is broadcast first, then
// its last dim becomes H and the others are merged into B (a view where the strides allow).
Tensor as_bhrc(const Tensor& t, const Shape& lead) {
  Shape full = lead;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  const int64_t H = lead.empty() ? 1 : lead.back();
  int64_t B = 1;
  for (size_t i = 0; i + 1 < lead.size(); ++i) B *= lead[i];
  return t.expand(full).reshape({B, H, t.size(-2), t.size(-1)});
}

}  // namespace

F::SdpaKernelGuard::SdpaKernelGuard(SdpBackend backend) : prev_(tl_sdp_backend) { tl_sdp_backend = backend; }
F::SdpaKernelGuard::~SdpaKernelGuard() { tl_sdp_backend = prev_; }
F::SdpBackend F::current_sdp_backend() { return tl_sdp_backend; }

// ---- scaled_dot_product_attention -------------------------------------------------------------------

Tensor functional::scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const ScaledDotProductAttentionOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::scaled_dot_product_attention>(q, k, v, o.attn_mask)) [[unlikely]] {
    ScaledDotProductAttentionOptions cast_o = o;
    cast_o.attn_mask = ac[3];
    return scaled_dot_product_attention(ac[0], ac[1], ac[2], cast_o);
  }
  const char* op = "scaled_dot_product_attention";
  NABLA_CHECK(ValueError, q.defined() && k.defined() && v.defined(), op, ": query, key and value must be defined");
  NABLA_CHECK(DTypeError, is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), op,
              ": query, key and value must have the same floating dtype, got ", q.dtype(), ", ", k.dtype(), " and ",
              v.dtype());
  NABLA_CHECK(ShapeError, q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
              ": expected query (..., L, E), key (..., S, E) and value (..., S, Ev), got query ", q.sizes(), " key ",
              k.sizes(), " value ", v.sizes());
  NABLA_CHECK(ShapeError, q.size(-1) == k.size(-1), op, ": query and key must have the same last dim E, got query ",
              q.sizes(), " key ", k.sizes());
  NABLA_CHECK(ShapeError, k.size(-2) == v.size(-2), op,
              ": key and value must have the same length S (dim -2), got key ", k.sizes(), " value ", v.sizes());
  // The batch dims (under GQA: those before the head dim, -3) broadcast.
  const int64_t lead_n = o.enable_gqa ? 3 : 2;
  if (o.enable_gqa) {
    NABLA_CHECK(ShapeError, q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3, op,
                ": enable_gqa expects query (..., Hq, L, E), key (..., Hkv, S, E) and value (..., Hkv, S, Ev), got "
                "query ",
                q.sizes(), " key ", k.sizes(), " value ", v.sizes());
    NABLA_CHECK(ShapeError, k.size(-3) == v.size(-3) && k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0, op,
                ": enable_gqa needs key and value with the same number of heads Hkv (dim -3), dividing the query's Hq, "
                "got query ",
                q.sizes(), " key ", k.sizes(), " value ", v.sizes());
  }
  auto qk = try_broadcast_shapes(leading_dims(q, lead_n), leading_dims(k, lead_n));
  auto batch = qk ? try_broadcast_shapes(*qk, leading_dims(v, lead_n)) : std::nullopt;
  NABLA_CHECK(ShapeError, batch.has_value(), op, ": the batch dims of query ", q.sizes(), ", key ", k.sizes(),
              " and value ", v.sizes(), " do not broadcast");
  NABLA_CHECK(ValueError, o.dropout_p >= 0 && o.dropout_p <= 1, op, ": dropout_p must be in [0, 1], got ", o.dropout_p);
  NABLA_CHECK(ValueError, !(o.is_causal && o.attn_mask.defined()), op,
              ": is_causal and attn_mask cannot both be set (attn_mask ",
              o.attn_mask.defined() ? internal::str(o.attn_mask.sizes()) : "", ")");

  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1);
  // The query's lead dims (its batch dims, with the head dim last under GQA), and key/value's.
  Shape lead_q = *batch, lead_kv = *batch;
  if (o.enable_gqa) {
    lead_q.push_back(q.size(-3));
    lead_kv.push_back(k.size(-3));
  }
  Shape scores_shape = lead_q;
  scores_shape.push_back(L);
  scores_shape.push_back(S);
  Tensor bias;
  bool mask_widens = false;  // a mask with more batch dims than the operands: the math path broadcasts them
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    auto b = try_broadcast_shapes(m.sizes(), scores_shape);
    mask_widens = b.has_value() && *b != scores_shape;
    NABLA_CHECK(ShapeError,
                m.dim() >= 1 && b.has_value() && b->size() >= 2 && (*b)[b->size() - 2] == L && (*b)[b->size() - 1] == S,
                op, ": attn_mask of shape ", m.sizes(),
                " does not broadcast to the scores' shape (..., L, S) = ", scores_shape, " (query ", q.sizes(),
                ", key ", k.sizes(), ")");
    bias = mask_to_bias(m, /*forbidden_value=*/false, q.dtype(), op, "attn_mask");
  }
  const double scale = o.scale.value_or(E > 0 ? 1.0 / std::sqrt(static_cast<double>(E)) : 1.0);

  if (!mask_widens && use_flash(q, {&o.attn_mask}, o.dropout_p, op)) {
    Tensor bias4;
    if (bias.defined()) bias4 = as_bhrc(bias.dim() >= 2 ? bias : bias.unsqueeze(0).expand({L, S}), lead_q);
    Tensor out = flash_attention(as_bhrc(q, lead_q), as_bhrc(k, lead_kv), as_bhrc(v, lead_kv), bias4,
                                 {.scale = scale, .causal = o.is_causal, .dropout_p = o.dropout_p});
    Shape out_shape = lead_q;
    out_shape.push_back(L);
    out_shape.push_back(v.size(-1));
    return out.reshape(out_shape);
  }
  if (o.is_causal) bias = causal_bias(L, S, q.dtype(), q.device());
  Tensor kk = k, vv = v;
  if (o.enable_gqa && q.size(-3) != k.size(-3)) {
    const int64_t group = q.size(-3) / k.size(-3);
    kk = k.repeat_interleave(group, -3);
    vv = v.repeat_interleave(group, -3);
  }
  return attend(q * scale, kk, vv, bias, o.dropout_p).first;
}

// ---- rotary_embedding -------------------------------------------------------------------------------

Tensor functional::rotary_embedding(const Tensor& x, const RotaryEmbeddingOptions& o) {
  const char* op = "rotary_embedding";
  NABLA_CHECK(DTypeError, x.defined() && is_floating(x.dtype()), op, ": expected a floating x (..., T, D), got ",
              x.defined() ? nabla::internal::describe(x) : std::string("an undefined tensor"));
  NABLA_CHECK(ShapeError, x.dim() >= 2 && x.size(-1) % 2 == 0, op,
              ": expected x of shape (..., T, D) with D even, got ", x.sizes());
  NABLA_CHECK(ValueError, o.theta > 0, op, ": theta must be positive, got ", o.theta);
  const int64_t T = x.size(-2), D = x.size(-1), half = D / 2;
  const DType wide = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor pos;
  if (o.positions.defined()) {
    NABLA_CHECK(DTypeError, is_integral(o.positions.dtype()), op, ": positions must be an integer tensor, got ",
                nabla::internal::describe(o.positions));
    NABLA_CHECK(ShapeError, o.positions.dim() >= 1 && o.positions.size(-1) == T, op,
                ": positions must be (..., T) with T = ", T, " (x ", x.sizes(), "), got ", o.positions.sizes());
    pos = o.positions.to(x.device(), wide);
  } else {
    pos = arange(o.offset, o.offset + T, 1, dtype(wide).device(x.device()));
  }
  // inv_freq[i] = theta^(-2i/D); angles (..., T, D/2)
  Tensor inv_freq = pow(o.theta, arange(0, D, 2, dtype(wide).device(x.device())) * (-1.0 / static_cast<double>(D)));
  Tensor angles = pos.unsqueeze(-1) * inv_freq;
  Tensor c = angles.cos().to(x.dtype()), s = angles.sin().to(x.dtype());
  if (o.interleaved) {
    Tensor pairs = x.unflatten(-1, {half, 2});
    Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
    return stack({a * c - b * s, a * s + b * c}, -1).flatten(-2);
  }
  Tensor a = x.narrow(-1, 0, half), b = x.narrow(-1, half, half);
  return cat({a * c - b * s, a * s + b * c}, -1);
}

// ---- MultiheadAttention -----------------------------------------------------------------------------

MultiheadAttention::MultiheadAttention(int64_t embed_dim_, int64_t num_heads_, MultiheadAttentionOptions opts)
    : embed_dim(embed_dim_), num_heads(num_heads_), options(opts) {
  NABLA_CHECK(ValueError, embed_dim > 0 && num_heads > 0,
              "MultiheadAttention: embed_dim and num_heads must be positive, got ", embed_dim, " and ", num_heads);
  NABLA_CHECK(ValueError, embed_dim % num_heads == 0, "MultiheadAttention: embed_dim (", embed_dim,
              ") must be divisible by num_heads (", num_heads, ")");
  head_dim = embed_dim / num_heads;
  kdim = options.kdim.value_or(embed_dim);
  vdim = options.vdim.value_or(embed_dim);
  NABLA_CHECK(ValueError, kdim > 0 && vdim > 0, "MultiheadAttention: kdim and vdim must be positive, got ", kdim,
              " and ", vdim);
  NABLA_CHECK(ValueError, options.dropout >= 0 && options.dropout <= 1,
              "MultiheadAttention: dropout must be in [0, 1], got ", options.dropout);
  // PyTorch's registration order (and so state_dict order): in-projection, in_proj_bias, bias_k/v, out_proj.
  if (qkv_same_embed_dim()) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({embed_dim, embed_dim}));
    k_proj_weight = register_parameter("k_proj_weight", empty({embed_dim, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({embed_dim, vdim}));
  }
  if (options.bias) in_proj_bias = register_parameter("in_proj_bias", empty({3 * embed_dim}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, LinearOptions{options.bias}));
  if (options.add_bias_kv) {
    bias_k = register_parameter("bias_k", empty({1, 1, embed_dim}));
    bias_v = register_parameter("bias_v", empty({1, 1, embed_dim}));
  }
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  // PyTorch's _reset_parameters (out_proj.weight keeps Linear's initialization).
  if (in_proj_weight.defined()) {
    init::xavier_uniform_(in_proj_weight);
  } else {
    init::xavier_uniform_(q_proj_weight);
    init::xavier_uniform_(k_proj_weight);
    init::xavier_uniform_(v_proj_weight);
  }
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
  if (bias_k.defined()) init::xavier_normal_(bias_k);
  if (bias_v.defined()) init::xavier_normal_(bias_v);
}

// ---- KVCache -----------------------------------------------------------------------------------------

KVCache::KVCache(int64_t batch, int64_t heads, int64_t head_dim, int64_t capacity, DType dt, Device device)
    : batch_(batch), heads_(heads), head_dim_(head_dim), pad_(static_cast<size_t>(std::max<int64_t>(batch, 0)), 0) {
  NABLA_CHECK(ValueError, batch > 0 && heads > 0 && head_dim > 0 && capacity > 0, "KVCache",
              ": batch, heads, head_dim and capacity must be positive, got ", batch, ", ", heads, ", ", head_dim,
              " and ", capacity);
  NABLA_CHECK(DTypeError, is_floating(dt), "KVCache: the cache must be floating, got ", dt);
  k_ = empty({batch, heads, capacity, head_dim}, dtype(dt).device(device));
  v_ = empty({batch, heads, capacity, head_dim}, dtype(dt).device(device));
}

std::pair<Tensor, Tensor> KVCache::append(const Tensor& k, const Tensor& v) {
  const char* op = "KVCache::append";
  NABLA_CHECK(ValueError, k_.defined(), op, ": the cache was default-constructed (give it batch, heads and head_dim)");
  const Shape want{batch_, heads_, k.dim() == 4 ? k.size(2) : 0, head_dim_};
  NABLA_CHECK(ShapeError, k.dim() == 4 && k.sizes() == IntArrayRef(want) && v.sizes() == k.sizes(), op,
              ": expected key and value (B, H, T, head_dim) with (B, H, head_dim) = (", batch_, ", ", heads_, ", ",
              head_dim_, "), got key ", k.sizes(), " value ", v.sizes());
  NABLA_CHECK(DTypeError, k.dtype() == k_.dtype() && v.dtype() == k_.dtype() && k.device() == k_.device(), op,
              ": the cache holds ", k_.dtype(), " on ", k_.device(), ", got key ", k.dtype(), " on ", k.device());
  const int64_t T = k.size(2), need = length_ + T;
  autograd::NoGradGuard ng;
  if (need > capacity()) {  // double (at least to what is needed), keeping what is cached
    const int64_t cap = std::max(need, 2 * capacity());
    Tensor k2 = empty({batch_, heads_, cap, head_dim_}, dtype(k_.dtype()).device(k_.device()));
    Tensor v2 = empty({batch_, heads_, cap, head_dim_}, dtype(k_.dtype()).device(k_.device()));
    k2.narrow(2, 0, length_).copy_(k_.narrow(2, 0, length_));
    v2.narrow(2, 0, length_).copy_(v_.narrow(2, 0, length_));
    k_ = k2, v_ = v2;
  }
  k_.narrow(2, length_, T).copy_(k);
  v_.narrow(2, length_, T).copy_(v);
  length_ = need;
  return {k_.narrow(2, 0, length_), v_.narrow(2, 0, length_)};
}

void KVCache::set_left_padding(std::vector<int64_t> pad) {
  const char* op = "KVCache::set_left_padding";
  NABLA_CHECK(ValueError, length_ == 0, op, ": set the padding before the first append (the cache holds ", length_,
              " positions)");
  NABLA_CHECK(ShapeError, static_cast<int64_t>(pad.size()) == batch_, op, ": expected one padding length per row (",
              batch_, "), got ", pad.size());
  for (int64_t p : pad) NABLA_CHECK(ValueError, p >= 0, op, ": padding lengths must be >= 0, got ", p);
  pad_ = std::move(pad);
}

Tensor KVCache::attention_bias(int64_t queries, bool causal, DType dt) const {
  const char* op = "KVCache::attention_bias";
  NABLA_CHECK(ValueError, queries >= 0 && queries <= length_, op, ": ", queries, " queries, but the cache holds only ",
              length_, " positions");
  const bool padded = std::any_of(pad_.begin(), pad_.end(), [](int64_t p) { return p > 0; });
  if (!padded && (!causal || queries <= 1)) return {};
  // key j is masked for query i (at position first + i) of row b when j < pad[b] (unless j is the
  // query itself) or, under causal, j > first + i.
  const int64_t first = length_ - queries;
  Tensor j = arange(0, length_, 1, dtype(DType::i64)).view({1, 1, 1, length_});
  Tensor i = arange(first, length_, 1, dtype(DType::i64)).view({1, 1, queries, 1});
  Tensor pad = tensor(pad_, dtype(DType::i64)).view({batch_, 1, 1, 1});
  Tensor masked = logical_and(lt(j, pad), ne(j, i));
  if (causal) masked = logical_or(masked, gt(j, i));
  return zeros({batch_, 1, queries, length_}, dtype(dt)).masked_fill(masked, kNegInf).to(k_.device());
}

Tensor KVCache::positions(int64_t tokens) const {
  NABLA_CHECK(ValueError, tokens >= 0, "KVCache::positions: tokens must be >= 0, got ", tokens);
  Tensor t = arange(length_, length_ + tokens, 1, dtype(DType::i64)).view({1, tokens});
  return (t - tensor(pad_, dtype(DType::i64)).view({batch_, 1})).clamp_min(0).to(k_.device());
}

void KVCache::reset() {
  length_ = 0;
  std::fill(pad_.begin(), pad_.end(), 0);
}

// ---- MultiheadAttention -------------------------------------------------------------------------------

Tensor MultiheadAttention::forward(Tensor x) { return forward_attention(x, x, x, {.need_weights = false}).output; }

AttentionOutput MultiheadAttention::forward_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const MultiheadAttentionForwardOptions& o) {
  const char* op = "MultiheadAttention";
  const int64_t E = embed_dim, H = num_heads, hd = head_dim;
  NABLA_CHECK(ValueError, query.defined() && key.defined() && value.defined(), op,
              ": query, key and value must be defined");
  const char* layout = options.batch_first ? "(N, L, E)" : "(L, N, E)";
  NABLA_CHECK(ShapeError,
              (query.dim() == 2 || query.dim() == 3) && key.dim() == query.dim() && value.dim() == query.dim(), op,
              ": expected query, key and value of 3 dims ", layout, " or 2 dims (L, E) (unbatched), got query ",
              query.sizes(), " key ", key.sizes(), " value ", value.sizes());
  NABLA_CHECK(DTypeError, is_floating(query.dtype()) && key.dtype() == query.dtype() && value.dtype() == query.dtype(),
              op, ": query, key and value must have the same floating dtype, got ", query.dtype(), ", ", key.dtype(),
              " and ", value.dtype());
  NABLA_CHECK(ShapeError, query.size(-1) == E, op, ": expected query with embed_dim ", E,
              " features (last dim), got query ", query.sizes());
  NABLA_CHECK(ShapeError, key.size(-1) == kdim && value.size(-1) == vdim, op, ": expected key with kdim ", kdim,
              " and value with vdim ", vdim, " features (last dim), got key ", key.sizes(), " value ", value.sizes());
  const bool batched = query.dim() == 3;
  // Inputs keep their layout (unbatched ones get N = 1 in front): seq first (L, N, E) or batch
  // first (N, L, E). The projections run on that layout; the heads are split into (N, H, L, hd).
  const bool seq_first = batched && !options.batch_first;
  const int64_t seq_dim = seq_first ? 0 : 1, batch_dim = seq_first ? 1 : 0;
  auto in = [&](const Tensor& t) { return batched ? t : t.unsqueeze(0); };
  const int64_t N = in(query).size(batch_dim), L = in(query).size(seq_dim), S = in(key).size(seq_dim);
  NABLA_CHECK(ShapeError, leading_dims(key, 1) == leading_dims(value, 1) && in(key).size(batch_dim) == N, op,
              ": key and value must have the same length S and batch size N as query, got query ", query.sizes(),
              " key ", key.sizes(), " value ", value.sizes());

  // Masks as additive biases: attn (1 or N, 1 or H, L, S), padding (N, 1, 1, S).
  const DType dt = query.dtype();
  Tensor attn_bias, pad_bias;
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    bool ok2 = m.dim() == 2 && m.size(0) == L && m.size(1) == S;
    bool ok3 = m.dim() == 3 && m.size(0) == N * H && m.size(1) == L && m.size(2) == S;
    NABLA_CHECK(ShapeError, ok2 || ok3, op, ": expected attn_mask of shape (L, S) = ", Shape{L, S},
                " or (N * num_heads, L, S) = ", Shape{N * H, L, S}, ", got ", m.sizes(), " (query ", query.sizes(),
                ", key ", key.sizes(), ")");
    attn_bias = mask_to_bias(m, /*forbidden_value=*/true, dt, op, "attn_mask");
    attn_bias = ok2 ? attn_bias.reshape({1, 1, L, S}) : attn_bias.reshape({N, H, L, S});
  }
  NABLA_CHECK(ValueError,
              !o.kv_cache || (!o.attn_mask.defined() && !o.key_padding_mask.defined() && !bias_k.defined() &&
                              !options.add_zero_attn),
              op, ": kv_cache does not go with attn_mask, key_padding_mask, add_bias_kv or add_zero_attn (the cache ",
              "masks its padding and, with is_causal, the keys after each query)");
  // Causal without a mask: the fused kernel's causal flag, or a causal bias (built below).
  const bool causal = o.is_causal && !o.attn_mask.defined() && !o.kv_cache;
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    bool ok = batched ? (m.dim() == 2 && m.size(0) == N && m.size(1) == S) : (m.dim() == 1 && m.size(0) == S);
    NABLA_CHECK(ShapeError, ok, op, ": expected key_padding_mask of shape ",
                batched ? "(N, S) = " : "(S) = ", batched ? Shape{N, S} : Shape{S}, ", got ", m.sizes(), " (query ",
                query.sizes(), ", key ", key.sizes(), ")");
    pad_bias = mask_to_bias(m, /*forbidden_value=*/true, dt, op, "key_padding_mask").reshape({N, 1, 1, S});
  }

  // In-projection, (..., E_in) -> (..., E) in the input's layout: one packed matmul for
  // self-attention, one for key and value when they are the same tensor, else one each.
  auto bias_part = [&](int64_t i, int64_t n) {
    return in_proj_bias.defined() ? in_proj_bias.narrow(0, i * E, n * E) : Tensor();
  };
  Tensor q, k, v;
  if (qkv_same_embed_dim()) {
    if (query.is_same(key) && key.is_same(value)) {
      auto qkv = F::linear(in(query), in_proj_weight, in_proj_bias).chunk(3, -1);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      q = F::linear(in(query), in_proj_weight.narrow(0, 0, E), bias_part(0, 1));
      if (key.is_same(value)) {
        auto kv = F::linear(in(key), in_proj_weight.narrow(0, E, 2 * E), bias_part(1, 2)).chunk(2, -1);
        k = kv[0], v = kv[1];
      } else {
        k = F::linear(in(key), in_proj_weight.narrow(0, E, E), bias_part(1, 1));
        v = F::linear(in(value), in_proj_weight.narrow(0, 2 * E, E), bias_part(2, 1));
      }
    }
  } else {
    q = F::linear(in(query), q_proj_weight, bias_part(0, 1));
    k = F::linear(in(key), k_proj_weight, bias_part(1, 1));
    v = F::linear(in(value), v_proj_weight, bias_part(2, 1));
  }
  // Split heads: (L, N, E) or (N, L, E) -> (N, H, L, hd).
  auto heads = [&](const Tensor& t) {
    return seq_first ? t.reshape({t.size(0), N, H, hd}).permute({1, 2, 0, 3})
                     : t.reshape({N, t.size(1), H, hd}).transpose(1, 2);
  };
  q = heads(q), k = heads(k), v = heads(v);
  if (o.kv_cache) {  // the keys and values of every position so far, and the cache's mask
    std::tie(k, v) = o.kv_cache->append(k, v);
    attn_bias = o.kv_cache->attention_bias(L, o.is_causal, dt);
  }

  // Extra key/value positions, allowed for every query: bias_k/bias_v, then a zero one. (Under
  // causal masking they are not in the kernel's triangle: the causal bias is built for them.)
  const bool extra_positions = bias_k.defined() || options.add_zero_attn;
  double p = training_ ? options.dropout : 0.0;
  const bool flash = !o.need_weights && use_flash(q, {&o.attn_mask, &o.key_padding_mask}, p, op);
  if (causal && (!flash || extra_positions)) attn_bias = causal_bias(L, S, dt, query.device()).view({1, 1, L, S});
  auto append = [&](const Tensor& kv_extra_k, const Tensor& kv_extra_v) {
    k = cat({k, kv_extra_k}, 2);
    v = cat({v, kv_extra_v}, 2);
    if (attn_bias.defined()) attn_bias = pad(attn_bias, {0, 1});
    if (pad_bias.defined()) pad_bias = pad(pad_bias, {0, 1});
  };
  if (bias_k.defined())
    append(bias_k.reshape({1, H, 1, hd}).expand({N, H, 1, hd}), bias_v.reshape({1, H, 1, hd}).expand({N, H, 1, hd}));
  if (options.add_zero_attn) {
    Tensor z = zeros({N, H, 1, hd}, dtype(q.dtype()).device(q.device()));
    append(z, z);
  }
  Tensor bias = attn_bias.defined() && pad_bias.defined() ? attn_bias + pad_bias
                : attn_bias.defined()                     ? attn_bias
                                                          : pad_bias;

  // Attention per head, batched over (N, H): (N, H, L, hd), weights (N, H, L, S + extra positions).
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  Tensor attn, weights;
  if (flash) {
    attn = flash_attention(q, k, v, bias, {.scale = scale, .causal = causal && !extra_positions, .dropout_p = p});
  } else {
    std::tie(attn, weights) = attend(q * scale, k, v, bias, p);
  }

  // Merge heads into the input's layout and project: (N, H, L, hd) -> (L, N, E) or (N, L, E).
  Tensor merged = seq_first ? attn.permute({2, 0, 1, 3}).reshape({L, N, E}) : attn.transpose(1, 2).reshape({N, L, E});
  Tensor out = out_proj->forward(merged);
  if (!batched) out = out.squeeze(0);
  AttentionOutput res{out, Tensor()};
  if (o.need_weights) {
    Tensor w = o.average_attn_weights ? weights.mean({1}) : weights;  // (N, L, S) or (N, H, L, S)
    res.attn_weights = batched ? w : w.squeeze(0);
  }
  return res;
}

}  // namespace nabla::nn
