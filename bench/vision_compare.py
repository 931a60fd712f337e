#!/usr/bin/env python3
"""torchvision architectures in nabla next to PyTorch, interleaved in one run.

    /usr/bin/python3 bench/vision_compare.py [--nabla build/bench/vision_speed] [--rounds 3]
                                             [--reps 3] [--rows resnet50_b1,...] [--markdown OUT.md]

Rows: ResNet-50 inference at batch 1 and 8, ResNet-18 and MobileNetV2 training steps (forward,
cross entropy, backward, SGD with momentum) at batch 32, ViT-B/16 inference at batch 1; 224x224
random images, random weights. The *_bf16 rows (not in the default set: --rows amp) run the forward
and the loss under CPU autocast to bfloat16 on both sides (torch.autocast("cpu", dtype=torch.bfloat16)),
next to the same step in float32: ResNet-18 training at batch 32, ResNet-50 training at batch 8 (whose
peak memory is the point), and a GPT-shaped training step (4 pre-norm layers of d 768, 12 heads,
context 256, vocabulary 8192, AdamW) at batch 4. Every run is its own process (so its peak memory is the row's):
nabla (build/bench/vision_speed, its default thread count) and PyTorch (this file with --torch-child:
torchvision's model, eager, oneDNN as Debian's PyTorch has it) with 1 and with 2 threads. In each
round every row runs once per contender, the contenders interleaved; each run times --reps
iterations after one warm-up. Reported per row: nabla's best seconds, PyTorch's best over both
thread settings (and which), the ratio (nabla / PyTorch; the target is <= 0.8), and each side's
peak resident memory (MB; the process's ru_maxrss, and in brackets what the row added to the
process as it was before the model was built: Python and libtorch weigh about 300 MB by themselves).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ROWS = {  # name: (model, mode, batch, amp)
    "resnet50_b1": ("resnet50", "infer", 1, "off"),
    "resnet50_b8": ("resnet50", "infer", 8, "off"),
    "resnet18_train_b32": ("resnet18", "train", 32, "off"),
    "mobilenet_v2_train_b32": ("mobilenet_v2", "train", 32, "off"),
    "vit_b_16_b1": ("vit_b_16", "infer", 1, "off"),
    "resnet18_train_b32_bf16": ("resnet18", "train", 32, "bf16"),
    "resnet50_train_b8": ("resnet50", "train", 8, "off"),
    "resnet50_train_b8_bf16": ("resnet50", "train", 8, "bf16"),
    "gpt_train_b4": ("gpt", "train", 4, "off"),
    "gpt_train_b4_bf16": ("gpt", "train", 4, "bf16"),
}
DEFAULT_ROWS = ["resnet50_b1", "resnet50_b8", "resnet18_train_b32", "mobilenet_v2_train_b32", "vit_b_16_b1"]
AMP_ROWS = ["resnet18_train_b32", "resnet18_train_b32_bf16", "resnet50_train_b8", "resnet50_train_b8_bf16",
            "gpt_train_b4", "gpt_train_b4_bf16"]
TITLES = {
    "resnet50_b1": "ResNet-50 inference, batch 1",
    "resnet50_b8": "ResNet-50 inference, batch 8",
    "resnet18_train_b32": "ResNet-18 training step, batch 32",
    "mobilenet_v2_train_b32": "MobileNetV2 training step, batch 32",
    "vit_b_16_b1": "ViT-B/16 inference, batch 1",
    "resnet18_train_b32_bf16": "ResNet-18 training step, batch 32, autocast bf16",
    "resnet50_train_b8": "ResNet-50 training step, batch 8",
    "resnet50_train_b8_bf16": "ResNet-50 training step, batch 8, autocast bf16",
    "gpt_train_b4": "GPT-shaped training step (d 768, 4 layers, context 256), batch 4",
    "gpt_train_b4_bf16": "GPT-shaped training step, batch 4, autocast bf16",
}


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def gpt_shaped(torch, layers=4, context=256, dim=768, heads=12, vocab=8192):
    """vision_speed's GptShaped in torch.nn."""
    nn = torch.nn

    class GptShaped(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(context, dim)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(dim, heads, 4 * dim, 0.0, "gelu", batch_first=True, norm_first=True)
                for _ in range(layers))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(context))

        def forward(self, tokens):
            h = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
            for b in self.blocks:
                h = b(h, src_mask=self.mask)
            return self.head(self.norm(h))

    return GptShaped()


def torch_child(model_name, mode, batch, threads, reps, amp):
    """One row in PyTorch, in this process; prints the same JSON line as vision_speed."""
    import contextlib

    import torch
    import torchvision

    def region():
        if amp == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    torch.set_num_threads(threads)
    rss_before = rss_mb()
    torch.manual_seed(0)
    gpt = model_name == "gpt"
    model = gpt_shaped(torch) if gpt else getattr(torchvision.models, model_name)()
    x = torch.randint(0, 8192, (batch, 256)) if gpt else torch.randn(batch, 3, 224, 224)
    y = torch.randint(0, 8192, (batch * 256,)) if gpt else torch.randint(0, 1000, (batch,))
    if mode == "train":
        model.train()
        if gpt:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def iteration():
            opt.zero_grad()
            with region():
                out = model(x)
                loss = torch.nn.functional.cross_entropy(out.flatten(0, 1) if gpt else out, y)
            loss.backward()
            opt.step()
    else:
        model.eval()

        def iteration():
            with torch.inference_mode(), region():
                model(x)

    iteration()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        iteration()
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    print(json.dumps({"framework": "pytorch " + torch.__version__, "model": model_name, "mode": mode, "batch": batch,
                      "amp": amp, "threads": threads, "best_s": min(times), "times_s": times, "peak_rss_mb": round(peak, 1),
                      "rss_before_model_mb": round(rss_before, 1)}))


def run_child(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nabla", default=os.path.join(ROOT, "build", "bench", "vision_speed"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python that has PyTorch and torchvision")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3, help="timed iterations per run, after one warm-up")
    ap.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                    help="comma-separated, of: " + ", ".join(ROWS) + "; or 'amp' for " + ", ".join(AMP_ROWS))
    ap.add_argument("--markdown", default="", help="also write the table here")
    ap.add_argument("--torch-child", nargs=6, metavar=("MODEL", "MODE", "BATCH", "THREADS", "REPS", "AMP"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_child:
        m, mode, b, t, r, amp = args.torch_child
        torch_child(m, mode, int(b), int(t), int(r), amp)
        return
    if not os.path.exists(args.nabla):
        sys.exit(f"vision_compare.py: {args.nabla} not found (build it: cmake --build build --target vision_speed)")
    rows = AMP_ROWS if args.rows == "amp" else [r for r in args.rows.split(",") if r]
    for r in rows:
        if r not in ROWS:
            sys.exit(f"vision_compare.py: unknown row '{r}'; the rows are {', '.join(ROWS)}")

    results = {r: [] for r in rows}
    for rnd in range(args.rounds):
        for r in rows:
            model, mode, batch, amp = ROWS[r]
            contenders = [("nabla", None), ("pytorch", 1), ("pytorch", 2)]
            if rnd % 2:  # alternate who goes first
                contenders.reverse()
            for who, threads in contenders:
                if who == "nabla":
                    cmd = [args.nabla, "--model", model, "--mode", mode, "--batch", str(batch), "--reps", str(args.reps),
                           "--amp", amp] + (["--size", "256"] if model == "gpt" else [])
                else:
                    cmd = [args.python, os.path.abspath(__file__), "--torch-child", model, mode, str(batch),
                           str(threads), str(args.reps), amp]
                res = run_child(cmd)
                results[r].append(res)
                print(f"round {rnd + 1} {r:24s} {res['framework']:18s} {res['threads']}t  best {res['best_s']:.4f} s"
                      f"  peak {res['peak_rss_mb']:.0f} MB", flush=True)

    lines = ["| row | nabla | PyTorch (best setting) | ratio | peak MB nabla [row] | peak MB PyTorch [row] |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        nab = [x for x in results[r] if x["framework"] == "nabla"]
        tor = [x for x in results[r] if x["framework"] != "nabla"]
        nb = min(nab, key=lambda x: x["best_s"])
        tb = min(tor, key=lambda x: x["best_s"])
        peak_n = max(x["peak_rss_mb"] for x in nab)
        peak_t = max(x["peak_rss_mb"] for x in tor if x["threads"] == tb["threads"])
        row_n = max(x["peak_rss_mb"] - x["rss_before_model_mb"] for x in nab)
        row_t = max(x["peak_rss_mb"] - x["rss_before_model_mb"] for x in tor if x["threads"] == tb["threads"])
        lines.append(f"| {TITLES[r]} | {nb['best_s']:.3f} s | {tb['best_s']:.3f} s ({tb['threads']} thread"
                     f"{'s' if tb['threads'] > 1 else ''}) | {nb['best_s'] / tb['best_s']:.2f} | "
                     f"{peak_n:.0f} [{row_n:.0f}] | {peak_t:.0f} [{row_t:.0f}] |")
    table = "\n".join(lines)
    print()
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
