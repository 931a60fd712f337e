#!/usr/bin/env python3
"""Fused attention next to the math path and PyTorch, interleaved in one run.

    /usr/bin/python3 bench/attention_compare.py [--nabla build/bench/attention_speed] [--rounds 3]
                                                [--reps 3] [--rows causal_4096,...] [--markdown OUT.md]

Each row is one forward and backward of scaled_dot_product_attention on (batch, heads, seq, dim)
random inputs (the gradient of the output random too), timed --reps times after one warm-up, in
its own process so that the peak resident memory is the row's. Contenders: nabla's fused kernel
(attention_speed --path flash), nabla's math path (--path math: matmul, softmax, matmul, the
(seq, seq) weights kept for backward) and PyTorch 1.13 (this file with --torch-child, 2 threads:
the same three ops, as Debian's PyTorch has no fused attention on the CPU). The contenders of a row
are interleaved and their order alternates between rounds. Reported: the best seconds, the FLOP
rate of the math path's six (seq x seq x dim) products (half under causal masking), the peak
resident memory above the inputs (MB), and the fused time over the math path's. Rows whose math
path would need tens of GB (causal_16384) run the fused kernel alone.
"""
import argparse
import json
import os
import resource
import sys
import time

from vision_compare import rss_mb, run_child  # one process per run, its peak memory the run's

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ROWS = {  # name: (batch, heads, seq, dim, causal, dtype, contenders)
    "causal_4096": (1, 8, 4096, 64, True, "f32", ["flash", "math", "torch"]),
    "full_1024_b4": (4, 8, 1024, 64, False, "f32", ["flash", "math", "torch"]),
    "causal_4096_bf16": (1, 8, 4096, 64, True, "bf16", ["flash", "math"]),
    "causal_16384": (1, 8, 16384, 64, True, "f32", ["flash"]),
}
DEFAULT_ROWS = list(ROWS)


def torch_child(batch, heads, seq, dim, causal, reps):
    """The math path in PyTorch, in this process; prints attention_speed's JSON line."""
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, heads, seq, dim, requires_grad=True) for _ in range(3))
    g = torch.randn(batch, heads, seq, dim)
    mask = torch.full((seq, seq), float("-inf")).triu(1) if causal else None
    rss_inputs = rss_mb()

    def step():
        q.grad = k.grad = v.grad = None
        s = q @ k.transpose(-2, -1) / dim**0.5
        if mask is not None:
            s = s + mask
        out = torch.softmax(s, -1) @ v
        out.backward(g)

    step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    best = min(times)
    flop = 12.0 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
    print(json.dumps({"path": "torch", "best_s": best, "times": times, "gflops": flop / best / 1e9,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
                      "rss_inputs_mb": rss_inputs, "cpu": "", "threads": 2}))


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nabla", default=os.path.join(ROOT, "build", "bench", "attention_speed"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python that has PyTorch")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3, help="timed iterations per run, after one warm-up")
    ap.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated, of: " + ", ".join(ROWS))
    ap.add_argument("--markdown", default="", help="also write the table here")
    ap.add_argument("--torch-child", nargs=6, type=int, metavar=("B", "H", "SEQ", "DIM", "CAUSAL", "REPS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_child:
        b, h, s, d, c, r = args.torch_child
        torch_child(b, h, s, d, bool(c), r)
        return
    if not os.path.exists(args.nabla):
        sys.exit(f"attention_compare.py: {args.nabla} not found (build it: cmake --build build --target attention_speed)")
    rows = [r for r in args.rows.split(",") if r]
    for r in rows:
        if r not in ROWS:
            sys.exit(f"attention_compare.py: unknown row '{r}'; the rows are {', '.join(ROWS)}")

    results = {r: {} for r in rows}
    for rnd in range(args.rounds):
        for r in rows:
            b, h, s, d, causal, dt, contenders = ROWS[r]
            order = list(reversed(contenders)) if rnd % 2 else contenders
            for who in order:
                if who == "torch":
                    cmd = [args.python, os.path.abspath(__file__), "--torch-child", str(b), str(h), str(s), str(d),
                           str(int(causal)), str(args.reps)]
                else:
                    cmd = [args.nabla, "--path", who, "--seq", str(s), "--heads", str(h), "--dim", str(d), "--batch",
                           str(b), "--dtype", dt, "--reps", str(args.reps)] + (["--causal"] if causal else [])
                res = run_child(cmd)
                results[r].setdefault(who, []).append(res)
                print(f"round {rnd + 1} {r:18s} {who:6s} best {res['best_s']:.4f} s  "
                      f"peak {res['peak_rss_mb'] - res['rss_inputs_mb']:.0f} MB above inputs", flush=True)

    lines = [f"CPU: {cpu_model()}, {os.cpu_count()} cores; best of {args.rounds} rounds x {args.reps} reps",
             "", "| row | contender | best s | GFLOP/s | peak MB above inputs | time / math path |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        b, h, s, d, causal, dt, contenders = ROWS[r]
        best = {who: min(results[r][who], key=lambda x: x["best_s"]) for who in contenders}
        peak = {who: max(x["peak_rss_mb"] - x["rss_inputs_mb"] for x in results[r][who]) for who in contenders}
        title = f"{r} (B {b}, H {h}, T {s}, d {d}{', causal' if causal else ''}, {dt})"
        for who in contenders:
            ratio = f"{best[who]['best_s'] / best['math']['best_s']:.2f}" if "math" in best else "-"
            name = {"flash": "nabla fused", "math": "nabla math", "torch": "PyTorch 1.13 math"}[who]
            lines.append(f"| {title} | {name} | {best[who]['best_s']:.4f} | {best[who]['gflops']:.1f} | "
                         f"{peak[who]:.0f} | {ratio} |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
