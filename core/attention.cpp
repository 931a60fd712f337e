// flash_attention's front-end: checks, outputs, the device kernel and the autograd node (the
// kernels: core/cpu/attention.cpp). nn::functional::scaled_dot_product_attention chooses it.
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/generator.h"
#include "core/impl.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;
using autograd::save;
using autograd::save_output;

namespace {

constexpr const char* kOp = "flash_attention";

// k or v with its Hkv heads repeated to Hq (grouped-query attention), and the reverse for a gradient.
Tensor repeat_heads(const Tensor& t, int64_t group) { return group == 1 ? t : t.repeat_interleave(group, 1); }
Tensor sum_heads(const Tensor& g, int64_t group) {
  return group == 1 ? g : g.unflatten(1, {g.size(1) / group, group}).sum({2});
}

// The dropout multipliers of the (B, Hq, L, S) weights for the counters in p, in dt: the mask the
// fused kernels regenerate, drawn as Tensor::bernoulli_ draws it.
Tensor dropout_multipliers(const AttentionParams& p, IntArrayRef shape, DType dt, Device dev) {
  Generator gen(p.seed);
  gen.set_state({p.seed, p.offset});
  Tensor mask = internal::make_empty(shape, DType::f32, dev);
  backend_for(dev).random(RandomOp::bernoulli, mask, 1.0 - p.dropout_p, 0.0, gen);
  return mask.to(dt) / (1.0 - p.dropout_p);
}

// The scores q k^T * scale + bias (+ the causal mask), with differentiable ops: (B, Hq, L, S).
Tensor scores(const Tensor& q, const Tensor& kr, const Tensor& bias, const AttentionParams& p) {
  Tensor s = matmul(q, kr.transpose(-2, -1)) * p.scale;
  if (bias.defined()) s = s + bias;
  if (p.causal) {
    const int64_t L = q.size(2), S = kr.size(2);
    s = s + full({L, S}, -std::numeric_limits<double>::infinity(), dtype(s.dtype()).device(s.device())).triu(1);
  }
  return s;
}

// What the kernels compute, written with differentiable ops (a tracer records them; create_graph
// differentiates the backward below).
Tensor math_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias, const AttentionParams& p) {
  const int64_t group = q.size(1) / k.size(1);
  Tensor w = softmax(scores(q, repeat_heads(k, group), bias, p), -1);
  if (p.dropout_p > 0) w = w * dropout_multipliers(p, w.sizes(), w.dtype(), w.device());
  return matmul(w, repeat_heads(v, group));
}

// The gradients with differentiable ops of q, k, v and grad_out, recomputing the weights (as
// FlashAttention-2's backward does, without tiles): a graph for create_graph.
GradList math_backward(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                       const AttentionParams& p) {
  const int64_t group = q.size(1) / k.size(1);
  Tensor kr = repeat_heads(k, group), vr = repeat_heads(v, group);
  Tensor w = softmax(scores(q, kr, bias, p), -1);  // (B, Hq, L, S)
  Tensor mult = p.dropout_p > 0 ? dropout_multipliers(p, w.sizes(), w.dtype(), w.device()) : Tensor();
  Tensor wd = mult.defined() ? w * mult : w;
  Tensor dv = matmul(wd.transpose(-2, -1), gout);  // (B, Hq, S, Ev)
  Tensor dw = matmul(gout, vr.transpose(-2, -1));  // (B, Hq, L, S)
  if (mult.defined()) dw = dw * mult;
  Tensor ds = w * (dw - (dw * w).sum({-1}, true));
  Tensor dq = matmul(ds, kr) * p.scale, dk = matmul(ds.transpose(-2, -1), q) * p.scale;
  return {dq, sum_heads(dk, group), sum_heads(dv, group)};
}

// t itself when its last dim is contiguous, else a contiguous copy (what the kernels take).
Tensor rows_contiguous(const Tensor& t) { return t.stride(-1) == 1 || t.size(-1) <= 1 ? t : t.contiguous(); }

}  // namespace

bool has_flash_attention(const Tensor& q) {
  return q.defined() && is_floating(q.dtype()) && backend_for(q.device()).has_flash_attention(q);
}

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias_in, AttentionParams p) {
  if (auto ac = autocast_internal::cast<OpId::flash_attention>(q, k, v)) [[unlikely]]
    return flash_attention(ac[0], ac[1], ac[2], bias_in, p);
  NABLA_CHECK(ValueError, q.defined() && k.defined() && v.defined(), kOp, ": query, key and value must be defined");
  NABLA_CHECK(ShapeError, q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOp,
              ": expected query (B, Hq, L, E), key (B, Hkv, S, E) and value (B, Hkv, S, Ev), got query ", q.sizes(),
              " key ", k.sizes(), " value ", v.sizes());
  NABLA_CHECK(DTypeError, is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), kOp,
              ": query, key and value must have the same floating dtype, got ", q.dtype(), ", ", k.dtype(), " and ",
              v.dtype());
  internal::check_same_device(kOp, {&q, &k, &v, &bias_in});
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), E = q.size(3), Hkv = k.size(1), S = k.size(2);
  NABLA_CHECK(ShapeError,
              k.size(0) == B && v.size(0) == B && v.size(1) == Hkv && v.size(2) == S && k.size(3) == E && Hkv > 0 &&
                  Hq % Hkv == 0,
              kOp,
              ": expected query (B, Hq, L, E), key (B, Hkv, S, E) and value (B, Hkv, S, Ev) with Hq a multiple of "
              "Hkv, got query ",
              q.sizes(), " key ", k.sizes(), " value ", v.sizes());
  NABLA_CHECK(ValueError, p.dropout_p >= 0 && p.dropout_p < 1, kOp, ": dropout_p must be in [0, 1), got ", p.dropout_p);
  NABLA_CHECK(ValueError, std::isfinite(p.scale), kOp, ": scale must be finite, got ", p.scale);
  const DType compute = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor bias;
  if (bias_in.defined()) {
    NABLA_CHECK(DTypeError, is_floating(bias_in.dtype()), kOp, ": bias must be floating (an additive mask), got ",
                bias_in.dtype());
    Shape full_shape{B, Hq, L, S};
    auto b = try_broadcast_shapes(bias_in.sizes(), full_shape);
    NABLA_CHECK(ShapeError, b.has_value() && *b == full_shape, kOp, ": bias of shape ", bias_in.sizes(),
                " does not broadcast to the scores' shape (B, Hq, L, S) = ", full_shape);
    bias = bias_in.detach().to(compute).expand(full_shape);
  }
  // Dropout's counters: as many as bernoulli_ on the float32 weights (B, Hq, L, S) would take.
  if (p.dropout_p > 0) {
    const auto range = default_generator(q.device()).reserve(static_cast<uint64_t>((B * Hq * L * S + 3) / 4));
    p.seed = range.first;
    p.offset = range.second;
  }
  // A tracer records the math formulation, and a device without the fused kernel (CUDA today)
  // computes it: the same results, the (L, S) weights stored.
  Backend& be = backend_for(q.device());
  if (trace::active() || !be.has_flash_attention(q)) [[unlikely]]
    return math_forward(q, k, v, bias, p);

  Tensor qc = rows_contiguous(q), kc = rows_contiguous(k), vc = rows_contiguous(v);
  Tensor out = internal::make_empty({B, Hq, L, v.size(3)}, q.dtype(), q.device());
  Tensor lse = internal::make_empty({B, Hq, L}, compute, q.device());
  {
    autograd::NoGradGuard ng;
    be.flash_attention(qc, kc, vc, bias, p, out, lse);
  }
  if (autograd::needs_grad(q, k, v))
    autograd::record(
        "FlashAttentionBackward", {&q, &k, &v}, {&out},
        [sq = save(q), sk = save(k), sv = save(v), so = save_output(out), lse, bias, p](Node& n, GradList& grads) {
          Tensor qv = sq.unpack(n), kv = sk.unpack(n), vv = sv.unpack(n);
          if (autograd::GradMode::is_enabled())  // create_graph: a differentiable backward
            return math_backward(grads[0], qv, kv, vv, bias, p);
          Tensor gq = internal::make_empty(qv.sizes(), qv.dtype(), qv.device());
          Tensor gk = internal::make_empty(kv.sizes(), kv.dtype(), kv.device());
          Tensor gv = internal::make_empty(vv.sizes(), vv.dtype(), vv.device());
          backend_for(qv.device())
              .flash_attention_backward(rows_contiguous(grads[0]), rows_contiguous(qv), rows_contiguous(kv),
                                        rows_contiguous(vv), bias, so.unpack(n), lse, p, gq, gk, gv);
          return GradList{gq, gk, gv};
        });
  return out;
}

}  // namespace nabla
