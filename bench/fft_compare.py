#!/usr/bin/python3
"""FFT speed: nabla's fft::rfft / fft::fft / stft next to numpy's pocketfft and PyTorch, in one run,
and audio::transforms::MelSpectrogram of 1,000 one-second clips next to torchaudio's.

Each round times every contender once per case (interleaved, so that a noisy neighbour hurts them
alike); the table reports the best of the rounds and nabla's time as a ratio of PyTorch's and
numpy's. float32 (complex64) inputs of shape (batch, n), the transform over the last dim; numpy
computes in float64 (pocketfft has no float32 path in numpy 1.24), PyTorch 1.13 with its default
threads (2 here), nabla with its pool (2 threads).

    /usr/bin/python3 bench/fft_compare.py --build build --rounds 5
"""
import argparse
import json
import os
import platform
import subprocess
import time

import numpy as np
import torch
import torchaudio

CASES = [("rfft", 1, n) for n in (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20)] + \
        [("rfft", 64, n) for n in (1000, 1024, 4097, 10007)] + \
        [("fft", 64, n) for n in (1000, 1024, 4097, 10007)] + \
        [("fft", 1, 1 << 16), ("stft", 8, 16000), ("melspec", 1000, 16000)]


def best_time(f, min_seconds=0.05, batches=5):
    f()
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            break
        reps = max(reps + 1, int(reps * min_seconds * 1.2 / max(dt, 1e-9)))
    best = 1e30
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def python_contenders(kind, batch, n):
    x = np.random.default_rng(0).standard_normal((batch, n)).astype(np.float32)
    xc = x.astype(np.complex64)
    tx, txc = torch.from_numpy(x), torch.from_numpy(xc)
    win = torch.hann_window(400)
    if kind == "melspec":
        mel = torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=64)
        return {"torch": lambda: mel(tx)}
    if kind == "rfft":
        return {"numpy": lambda: np.fft.rfft(x), "torch": lambda: torch.fft.rfft(tx)}
    if kind == "fft":
        return {"numpy": lambda: np.fft.fft(xc), "torch": lambda: torch.fft.fft(txc)}
    return {"torch": lambda: torch.stft(tx, 400, hop_length=160, window=win, return_complex=True)}


def nabla_time(build, kind, batch, n, threads=None):
    env = dict(os.environ)
    if threads:
        env["NABLA_NUM_THREADS"] = str(threads)
    out = subprocess.run([f"{build}/bench/fft_speed", "--kind", kind, "--batch", str(batch), "--n", str(n),
                          "--batches", "5"], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_grad_enabled(False)  # as nabla's side, which times under NoGradGuard
    torch.set_num_threads(os.cpu_count() or 1)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"CPU: {cpu} ({os.cpu_count()} cores), {torch.get_num_threads()} torch threads; PyTorch {torch.__version__}, "
          f"torchaudio {torchaudio.__version__}, numpy {np.__version__}")
    best = {}
    for r in range(args.rounds):
        for case in CASES:
            kind, batch, n = case
            times = {"nabla": nabla_time(args.build, *case), "nabla1": nabla_time(args.build, *case, threads=1)}
            for name, f in python_contenders(*case).items():
                times[name] = best_time(f)
            for name, t in times.items():
                best[(case, name)] = min(best.get((case, name), 1e30), t)
    print("| transform | batch | n | nabla (ms) | nabla 1 thread (ms) | PyTorch (ms) | numpy (ms) | nabla / PyTorch "
          "| nabla 1 thread / PyTorch | nabla / numpy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in CASES:
        kind, batch, n = case
        tn, t1, tt = best[(case, "nabla")], best[(case, "nabla1")], best[(case, "torch")]
        tp = best.get((case, "numpy"))
        row = f"| {kind} | {batch} | {n} | {tn * 1e3:.4g} | {t1 * 1e3:.4g} | {tt * 1e3:.4g} | "
        row += f"{tp * 1e3:.4g} | " if tp else "- | "
        row += f"{tn / tt:.2f} | {t1 / tt:.2f} | " + (f"{tn / tp:.2f} |" if tp else "- |")
        print(row)


if __name__ == "__main__":
    main()
