#!/usr/bin/env python3
"""A GPT-2-shaped checkpoint with Hugging Face's parameter names and its logits, for tests/nn/test_gpt2.cpp.

    /usr/bin/python3 tests/nn/gpt2_reference.py OUTDIR

Writes, from seeded random weights (a small config: vocabulary 101, 40 positions, width 48, 3 blocks of
4 heads):
  gpt2_hf.bin        torch.save of GPT2LMHeadModel's state dict as Hugging Face names it: transformer.*,
                     lm_head.weight (the same tensor as transformer.wte.weight) and the causal-mask buffers
                     attn.bias / attn.masked_bias that transformers 4.x before 4.31 saved
  gpt2_noprefix.bin  GPT2Model's state dict (no "transformer." prefix), as the original "gpt2" repository
  tokens.npy         (2, 33) int64
  logits.npy         (2, 33, 101) float64: Hugging Face's GPT2LMHeadModel forward (modeling_gpt2.py:
                     Conv1D projections, scaled causal attention, gelu_new, layer norms with eps 1e-5,
                     logits tied to wte) computed in float64 from the float32 weights
Debian's python3-torch suffices (the transformers package is not needed: the forward is written out).
"""
import math
import os
import sys

import numpy as np
import torch

V, P, D, LAYERS, HEADS = 101, 40, 48, 3, 4


def weights():
    g = torch.Generator().manual_seed(0)

    def rn(*shape, std):
        return torch.randn(*shape, generator=g) * std

    sd = {"transformer.wte.weight": rn(V, D, std=0.3), "transformer.wpe.weight": rn(P, D, std=0.3)}
    for i in range(LAYERS):
        p = f"transformer.h.{i}."
        sd[p + "ln_1.weight"] = 1 + rn(D, std=0.1)
        sd[p + "ln_1.bias"] = rn(D, std=0.1)
        sd[p + "attn.bias"] = torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P)
        sd[p + "attn.masked_bias"] = torch.tensor(-1e4)
        sd[p + "attn.c_attn.weight"] = rn(D, 3 * D, std=0.25)
        sd[p + "attn.c_attn.bias"] = rn(3 * D, std=0.1)
        sd[p + "attn.c_proj.weight"] = rn(D, D, std=0.1)
        sd[p + "attn.c_proj.bias"] = rn(D, std=0.1)
        sd[p + "ln_2.weight"] = 1 + rn(D, std=0.1)
        sd[p + "ln_2.bias"] = rn(D, std=0.1)
        sd[p + "mlp.c_fc.weight"] = rn(D, 4 * D, std=0.15)
        sd[p + "mlp.c_fc.bias"] = rn(4 * D, std=0.1)
        sd[p + "mlp.c_proj.weight"] = rn(4 * D, D, std=0.07)
        sd[p + "mlp.c_proj.bias"] = rn(D, std=0.1)
    sd["transformer.ln_f.weight"] = 1 + rn(D, std=0.1)
    sd["transformer.ln_f.bias"] = rn(D, std=0.1)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def forward(sd, ids):
    w = {k: v.double() for k, v in sd.items() if v.is_floating_point()}
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (D,), w[n + ".weight"], w[n + ".bias"], 1e-5)
    conv1d = lambda x, n: x @ w[n + ".weight"] + w[n + ".bias"]
    B, T = ids.shape
    hd = D // HEADS
    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(T)]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(LAYERS):
        p = f"transformer.h.{i}."
        q, k, v = conv1d(ln(h, p + "ln_1"), p + "attn.c_attn").split(D, dim=2)
        q, k, v = (t.view(B, T, HEADS, hd).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        s = torch.where(causal, s, torch.tensor(torch.finfo(s.dtype).min, dtype=s.dtype))
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        h = h + conv1d(a, p + "attn.c_proj")
        h = h + conv1d(gelu_new(conv1d(ln(h, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(h, "transformer.ln_f") @ w["transformer.wte.weight"].t()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    sd = weights()
    torch.save(sd, os.path.join(out, "gpt2_hf.bin"))
    torch.save({k[len("transformer."):]: v for k, v in sd.items() if k.startswith("transformer.")},
               os.path.join(out, "gpt2_noprefix.bin"))
    ids = torch.randint(0, V, (2, 33), generator=torch.Generator().manual_seed(1))
    np.save(os.path.join(out, "tokens.npy"), ids.numpy())
    np.save(os.path.join(out, "logits.npy"), forward(sd, ids).numpy())


if __name__ == "__main__":
    main()
