#!/usr/bin/env python3
"""Generation with the KV cache in nabla next to llama.cpp on the same GPT-2-shaped model, interleaved.

    /usr/bin/python3 bench/llama_compare.py [--nabla build/bench/gpt_generate]
                                            [--modules .deps/llama-cpp/node_modules] [--rounds 3]

bench/gpt_generate builds the model (random weights; 4 layers of width 256, 4 heads, a vocabulary of
8192, as the KV-cache row of bench/RESULTS.md), generates 512 tokens greedily from a 16-token prompt
with the cache, and writes the model as GGUF (nn::save_gpt2_gguf, float32); bench/llama_generate.mjs
runs the same greedy generation in llama.cpp (npm's node-llama-cpp 3.21.1, its prebuilt CPU build;
float16 KV cache, its default). Both are timed from the prompt's evaluation to the last token, at 1
and 2 threads, each run its own process, the contenders interleaved over the rounds; best tokens/s of
each. Also reported: how many of the 512 tokens llama.cpp generates are nabla's (greedy decoding of
the same model: equal unless float16 rounding flips a near tie).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nabla", default=os.path.join(ROOT, "build", "bench", "gpt_generate"))
    ap.add_argument("--modules", default=os.path.join(ROOT, ".deps", "llama-cpp", "node_modules"))
    ap.add_argument("--node", default="node")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--new", type=int, default=512)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.modules, "node-llama-cpp", "package.json")):
        sys.exit(f"llama_compare: node-llama-cpp not found in {a.modules} (scripts/test.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="nabla_llama_compare_")
    gguf = os.path.join(tmp, "gpt.gguf")
    best = {}
    agree = None
    for rnd in range(a.rounds):
        runs = [("nabla", t) for t in (1, 2)] + [("llama.cpp", t) for t in (1, 2)]
        if rnd % 2:
            runs.reverse()
        for who, threads in runs:
            if who == "nabla":
                env = dict(os.environ, NABLA_NUM_THREADS=str(threads))
                subprocess.run([a.nabla, "--rounds", "1", "--cached-only", "--new", str(a.new), "--gguf", gguf],
                               check=True, env=env, stdout=subprocess.DEVNULL)
                with open(gguf + ".json") as f:
                    ref = json.load(f)
                seconds = ref["nabla_seconds"]
            else:
                if not os.path.exists(gguf + ".json"):
                    continue  # the first round's order: nabla writes the model first
                out = subprocess.run([a.node, os.path.join(HERE, "llama_generate.mjs"), a.modules, gguf, gguf + ".json",
                                      str(a.new), str(threads)], check=True, stdout=subprocess.PIPE, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                seconds = r["seconds"]
                with open(gguf + ".json") as f:
                    ref = json.load(f)
                agree = sum(x == y for x, y in zip(r["tokens"], ref["nabla"]))
            print(f"round {rnd + 1} {who} {threads} thread(s): {seconds:.3f} s, {a.new / seconds:.0f} tokens/s", flush=True)
            key = (who, threads)
            best[key] = min(best.get(key, 1e30), seconds)
    print("| contender | threads | best s | tokens/s |")
    print("|---|---:|---:|---:|")
    for (who, threads), s in sorted(best.items()):
        print(f"| {who} | {threads} | {s:.3f} | {a.new / s:.0f} |")
    n = min(v for k, v in best.items() if k[0] == "nabla")
    l = min(v for k, v in best.items() if k[0] == "llama.cpp")
    print(f"best nabla / best llama.cpp time: {n / l:.2f}; llama.cpp generated {agree} of nabla's {a.new} tokens")


if __name__ == "__main__":
    main()
