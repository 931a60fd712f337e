#!/usr/bin/env python3
"""A GPT training step in nabla next to PyTorch, interleaved in one run: tokens/s and model FLOP utilisation.

    /usr/bin/python3 bench/gpt_compare.py [--nabla build/bench/gpt_train] [--rounds 2] [--reps 2]
                                          [--rows ctx1024_b2,ctx256_b8] [--peak-gflops 232] [--markdown OUT.md]

Each row is one training step of a GPT-2-shaped model (4 blocks of width 768, 12 heads, GPT-2's
vocabulary of 50,257 tokens, the head tied to the token embedding) on random tokens: forward, the cross
entropy of the next tokens, backward, AdamW (weight decay on the matrices) and zero_grad, timed --reps
times after one warm-up step, each run in its own process. Contenders: nabla (bench/gpt_train:
nn::GPT2LMHeadModel, causal attention through the fused kernel) and PyTorch 1.13 (this file with
--torch-child: the same model in torch.nn, Hugging Face's GPT-2 written out, its attention the math path
as 1.13 has no fused CPU attention), at 1 and 2 threads, the better reported. The contenders of a row
are interleaved and their order alternates between rounds.

Model FLOPs per token: 72 L d^2 + 12 L T d + 6 d V (forward and backward of the blocks' products, the
attention scores and their weighted sum counted in full as nanoGPT's estimate_mfu counts them, and the
head); MFU = achieved model FLOP/s over the cores' float32 FMA peak (--peak-gflops: 2 cores x 116 on
this AMD EPYC, measured by build/bench/gemm_lowp).
"""
import argparse
import json
import math
import os
import sys
import time

from vision_compare import run_child  # one process per run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LAYERS, WIDTH, HEADS, VOCAB = 4, 768, 12, 50257
ROWS = {  # name: (context, batch)
    "ctx1024_b2": (1024, 2),
    "ctx256_b8": (256, 8),
}


def flops_per_token(context):
    return 72 * LAYERS * WIDTH**2 + 12 * LAYERS * context * WIDTH + 6 * WIDTH * VOCAB


def torch_child(context, batch, threads, reps):
    """The PyTorch step, in this process; prints gpt_train's JSON line."""
    import resource

    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn, F = torch.nn, torch.nn.functional
    d, hd = WIDTH, WIDTH // HEADS

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.full((context, context), float("-inf")).triu(1), persistent=False)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T, HEADS, hd).transpose(1, 2) for t in (q, k, v))
            s = q @ k.transpose(-2, -1) / math.sqrt(hd) + self.mask[:T, :T]
            a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, d)
            x = x + self.c_proj(a)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(context, d)
            self.h = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(d)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
            for b in self.h:
                x = b(x)
            return self.ln_f(x) @ self.wte.weight.t()

    model = GPT().train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, VOCAB, (batch, context + 1))
    x, y = tokens[:, :context].contiguous(), tokens[:, 1:].flatten()

    def step():
        loss = F.cross_entropy(model(x).flatten(0, 1), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    best = min(times)
    fpt = flops_per_token(context)
    print(json.dumps({"best_s": best, "times": times, "tokens_per_s": batch * context / best, "flops_per_token": fpt,
                      "gflops": fpt * batch * context / best / 1e9,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nabla", default=os.path.join(ROOT, "build", "bench", "gpt_train"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python that has PyTorch")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2, help="timed steps per run, after one warm-up step")
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated, of: " + ", ".join(ROWS))
    ap.add_argument("--peak-gflops", type=float, default=232.0, help="the cores' float32 FMA peak")
    ap.add_argument("--markdown", default="", help="also write the table here")
    ap.add_argument("--torch-child", nargs=4, type=int, metavar=("CONTEXT", "BATCH", "THREADS", "REPS"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        torch_child(*a.torch_child)
        return
    rows = a.rows.split(",")
    for r in rows:
        if r not in ROWS:
            sys.exit(f"gpt_compare: unknown row '{r}' (rows: {', '.join(ROWS)})")
    if not os.path.exists(a.nabla):
        sys.exit(f"gpt_compare: {a.nabla} is not built (cmake --build build --target gpt_train)")
    best = {}
    for rnd in range(a.rounds):
        for r in rows:
            context, batch = ROWS[r]
            contenders = {
                "nabla": [a.nabla, "--layers", str(LAYERS), "--width", str(WIDTH), "--heads", str(HEADS), "--context",
                          str(context), "--batch", str(batch), "--vocab", str(VOCAB), "--reps", str(a.reps)],
                "torch1": [a.python, __file__, "--torch-child", str(context), str(batch), "1", str(a.reps)],
                "torch2": [a.python, __file__, "--torch-child", str(context), str(batch), "2", str(a.reps)],
            }
            order = list(contenders) if rnd % 2 == 0 else list(reversed(contenders))
            for c in order:
                res = run_child(contenders[c])
                print(f"round {rnd + 1} {r} {c}: {res['best_s']:.3f} s, {res['tokens_per_s']:.0f} tokens/s, "
                      f"peak {res['peak_mb']:.0f} MB", flush=True)
                key = (r, c)
                if key not in best or res["best_s"] < best[key]["best_s"]:
                    best[key] = res
    lines = ["| row | nabla s | nabla tokens/s | nabla MFU | PyTorch s (threads) | PyTorch tokens/s | PyTorch MFU | "
             "nabla / PyTorch time | peak MB nabla | peak MB PyTorch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        context, batch = ROWS[r]
        n = best[(r, "nabla")]
        t = min((best[(r, c)] for c in ("torch1", "torch2")), key=lambda x: x["best_s"])
        threads = 1 if t is best[(r, "torch1")] else 2
        mfu = lambda x: 100 * x["gflops"] / a.peak_gflops
        lines.append(f"| context {context}, batch {batch} | {n['best_s']:.3f} | {n['tokens_per_s']:.0f} | "
                     f"{mfu(n):.0f}% | {t['best_s']:.3f} ({threads}) | {t['tokens_per_s']:.0f} | {mfu(t):.0f}% | "
                     f"{n['best_s'] / t['best_s']:.2f} | {n['peak_mb']:.0f} | {t['peak_mb']:.0f} |")
    table = "\n".join(lines)
    print(table)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
