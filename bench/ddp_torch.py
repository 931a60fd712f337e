"""PyTorch's side of bench/ddp_speed: the same mnist CNN, optimizer, batches and contenders, in PyTorch.

    /usr/bin/python3 bench/ddp_torch.py [--rounds 5] [--steps 60] [--global-batch 128]

Runs, interleaved --rounds times (best of each reported):
  single  one process, torch.set_num_threads(2), batch = global batch
  ddp     2 processes x 1 thread under torch.nn.parallel.DistributedDataParallel (gloo, loopback),
          batch = global batch / 2 per process, launched through build/distributed/nabla-run
          (NABLA_RUN, default build/distributed/nabla-run: it sets torchrun's variables; Debian's
          torchrun does not start under Python 3.11)
The model is examples/mnist's "cnn" (two conv-batch-norm-relu-maxpool blocks, 3136 -> 128 -> 10),
Adam at 1e-3, random images and labels made before timing, 5 warm-up steps. Prints each round and
the best ms/step of each, and the DDP / single-process throughput ratio, as ddp_speed does for
nabla: the two programs' figures are comparable when run on the same machine one after the other.
"""
import argparse
import datetime
import os
import socket
import subprocess
import sys
import time


def worker(mode, steps, global_batch):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    ddp = mode == "ddp"
    torch.set_num_threads(1 if ddp else 2)
    if ddp:
        import torch.distributed as dist
        # Not PyTorch's 30 minutes: a rank left waiting fails within 2 minutes, naming the collective.
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(1)

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2))

    model = nn.Sequential(block(1, 32), block(32, 64), nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    net = torch.nn.parallel.DistributedDataParallel(model) if ddp else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = global_batch // 2 if ddp else global_batch
    torch.manual_seed(100 + rank)
    xs = [(torch.rand(batch, 1, 28, 28) - 0.1307) / 0.3081 for _ in range(8)]
    ys = [torch.randint(0, 10, (batch,)) for _ in range(8)]

    def step(i):
        loss = F.cross_entropy(net(xs[i % 8]), ys[i % 8])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for i in range(5):
        step(i)
    if ddp:
        dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    seconds = time.perf_counter() - t0
    if ddp:  # the slower rank's time
        t = torch.tensor([seconds])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        seconds = t.item()
        dist.destroy_process_group()
    if rank == 0:
        print(f"RESULT {seconds / steps:.9f}")


def free_port():
    """A port nobody listens on now (the kernel's pick), so that no other job on the machine meets ours."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def result_of(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:
        sys.exit(f"ddp_torch: {' '.join(cmd)} still ran after {e.timeout} s:\n{e.stdout or ''}{e.stderr or ''}")
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return float(line.split()[1])
    sys.exit(f"ddp_torch: {' '.join(cmd)} failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--global-batch", type=int, default=128)
    p.add_argument("--worker", choices=["single", "ddp"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker, a.steps, a.global_batch)
    if a.global_batch % 2 or a.rounds < 1 or a.steps < 1:
        sys.exit("ddp_torch: --global-batch must be even, --rounds and --steps positive")
    launcher = os.environ.get("NABLA_RUN", "build/distributed/nabla-run")
    if not os.access(launcher, os.X_OK):
        sys.exit(f"ddp_torch: no launcher at {launcher} (build nabla first, or set NABLA_RUN)")
    me = [sys.executable, os.path.abspath(__file__), "--steps", str(a.steps), "--global-batch", str(a.global_batch)]
    print(f"PyTorch, mnist CNN, global batch {a.global_batch}, {a.steps} timed steps (after 5 warm-up), "
          f"{a.rounds} interleaved rounds")
    best_single = best_ddp = float("inf")
    for r in range(a.rounds):
        s = result_of(me + ["--worker", "single"])
        # A fresh port each round; nabla-run's liveness check (60 s) ends a round whose rank is left waiting.
        d = result_of([launcher, "--nproc-per-node", "2", "--master-port", str(free_port())] + me + ["--worker", "ddp"])
        print(f"  round {r + 1}: 1 process x 2 threads {s * 1e3:.2f} ms/step   2 processes x 1 thread (DDP) "
              f"{d * 1e3:.2f} ms/step", flush=True)
        best_single, best_ddp = min(best_single, s), min(best_ddp, d)
    print(f"best: 1 process x 2 threads {best_single * 1e3:.2f} ms/step ({a.global_batch / best_single:.0f} img/s); "
          f"2 processes x 1 thread (DDP) {best_ddp * 1e3:.2f} ms/step ({a.global_batch / best_ddp:.0f} img/s)")
    print(f"DDP throughput / single-process throughput: {best_single / best_ddp:.3f}")


if __name__ == "__main__":
    main()
