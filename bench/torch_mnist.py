#!/usr/bin/env python3
"""PyTorch twin of `mnist train`: the same models, recipes and training loop, for side-by-side timing.

    python3 bench/torch_mnist.py --model cnn --epochs 3 --device cuda --data data/mnist
    python3 bench/torch_mnist.py --model lenet --epochs 1 --device cuda --summary-json out.json
    python3 bench/torch_mnist.py --model cnn --nabla-csv checkpoints/mnist-cnn.csv  # side by side
    python3 bench/torch_mnist.py --model cnn --device cuda --amp bf16   # as `mnist train --amp bf16`

It mirrors examples/mnist (models.cpp, train.cpp) step for step, so that the per-epoch seconds of
the two programs measure the same work:
  cnn    the default recipe: two conv3x3(no bias)-BatchNorm-ReLU-MaxPool2 blocks (32, 64
         channels), fc 3136->128, ReLU, fc 128->10; Adam lr 0.002, x0.2 per epoch, batch 64,
         shuffled; cross_entropy.
  lenet  libtorch's C++ MNIST example: SGD lr 0.01 momentum 0.5, batch 64, file order; nll_loss.
  mlp    784-256-10; Adam lr 0.001, x0.5 per epoch, batch 128, shuffled.
  fast   three conv3x3(no bias)-BatchNorm-ReLU-MaxPool2 blocks (16, 32, 64 channels), fc 576->10;
         Adam with a one-cycle lr (max 0.02, PyTorch's OneCycleLR defaults), batch 64, shuffled,
         cross_entropy with label smoothing 0.1, one epoch.
Each step moves the batch from host memory to the device, normalizes it there, and reads the loss
and the number of correct predictions back (as `mnist train` does for its progress line). The
math modes are nabla's defaults: no TF32 in matmuls or convolutions, cuDNN heuristics (no benchmark
mode). --amp bf16|fp16 runs each forward and its loss (and the test evaluation) under
torch.autocast(device, dtype), with a torch.cuda.amp.GradScaler for fp16, as `mnist train --amp`.
Data: the four IDX files, plain or .gz, read with numpy.
"""
import argparse
import csv
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.1307, 0.3081
RECIPES = {  # optimizer, lr, momentum, batch size, per-epoch lr factor (None: constant; "onecycle"), shuffle
    "cnn": ("adam", 2e-3, 0.9, 64, 0.2, True),
    "lenet": ("sgd", 0.01, 0.5, 64, None, False),
    "mlp": ("adam", 1e-3, 0.9, 128, 0.5, True),
    "fast": ("adam", 0.02, 0.9, 64, "onecycle", True),
}
DEFAULT_EPOCHS = {"fast": 1}  # else 3
LABEL_SMOOTHING = {"fast": 0.1}  # else 0


def read_idx(path):
    """An IDX file (plain or .gz) as a uint8 numpy array with its declared shape."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                raw = f.read()
            break
    else:
        sys.exit(f"torch_mnist.py: {path} (or .gz) not found; fetch MNIST with scripts/get-data.sh")
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        sys.exit(f"torch_mnist.py: {path} is not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(dims)


def load_split(root, train):
    prefix = "train" if train else "t10k"
    images = read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)  # (N, 1, 28, 28) in [0, 1]
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


class LeNet(nn.Module):  # libtorch's examples/cpp/mnist Net
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.relu(self.fc1(x.view(-1, 320)))
        x = F.dropout(x, 0.5, self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))


def make_model(name):
    if name == "lenet":
        return LeNet(), True
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)), False
    if name == "fast":
        return nn.Sequential(conv_block(1, 16), conv_block(16, 32), conv_block(32, 64), nn.Flatten(),
                             nn.Linear(64 * 3 * 3, 10)), False
    return nn.Sequential(conv_block(1, 32), conv_block(32, 64), nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                         nn.Linear(128, 10)), False


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(RECIPES), default="cnn")
    ap.add_argument("--epochs", type=int, default=0, help="0: the model's default (1 for fast, else 3)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--data", default="data/mnist", help="folder with the four IDX files (plain or .gz)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    ap.add_argument("--summary-json", default="", help="write per-epoch seconds and accuracy here")
    ap.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off",
                    help="the forward under torch.autocast to bfloat16 or float16 (fp16 with a GradScaler)")
    ap.add_argument("--nabla-csv", default="",
                    help="the metrics CSV of a `mnist train` run of the same recipe: print both per epoch")
    args = ap.parse_args()

    # nabla's defaults: exact float32 math, cuDNN's heuristics.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    opt_name, lr, momentum, batch_size, gamma, shuffle = RECIPES[args.model]
    if args.epochs <= 0:
        args.epochs = DEFAULT_EPOCHS.get(args.model, 3)
    train_x, train_y = load_split(args.data, True)
    test_x, test_y = load_split(args.data, False)
    model, log_probs = make_model(args.model)
    model.to(device)
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = train_x.shape[0]
    steps_per_epoch = (n + batch_size - 1) // batch_size
    per_batch = gamma == "onecycle"
    if per_batch:
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=args.epochs * steps_per_epoch)
    else:
        sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma) if gamma is not None else None
    smoothing = LABEL_SMOOTHING.get(args.model, 0.0)
    if log_probs:
        loss_fn = F.nll_loss
    else:
        def loss_fn(out, y):
            return F.cross_entropy(out, y, label_smoothing=smoothing)
    gen = torch.Generator().manual_seed(args.seed)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)

    def region():
        return torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)

    scaler = torch.cuda.amp.GradScaler() if args.amp == "fp16" else None

    where = f"{device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else
                           f" with {torch.get_num_threads()} thread{'s' if torch.get_num_threads() != 1 else ''}")
    print(f"PyTorch {torch.__version__}: {args.model} on MNIST, {where}, {opt_name} lr {lr}, batch {batch_size}, "
          f"{args.epochs} epochs" + (f", autocast {args.amp}" if amp_dtype is not None else ""), flush=True)
    epochs = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(n, generator=gen) if shuffle else None
        sync(device)
        t0 = time.perf_counter()
        total_loss, correct = 0.0, 0
        for start in range(0, n, batch_size):
            if order is None:
                xb, yb = train_x[start:start + batch_size], train_y[start:start + batch_size]
            else:
                idx = order[start:start + batch_size]
                xb, yb = train_x[idx], train_y[idx]
            x = (xb.to(device) - MEAN) / STD
            y = yb.to(device)
            with region():
                out = model(x)
                loss = loss_fn(out, y)
            opt.zero_grad()
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            if per_batch:
                sched.step()
            total_loss += loss.item() * y.numel()
            correct += (out.argmax(1) == y).sum().item()
        sync(device)
        seconds = time.perf_counter() - t0
        if sched is not None and not per_batch:
            sched.step()
        model.eval()
        test_correct = 0
        with torch.inference_mode(), region():
            for start in range(0, test_x.shape[0], 1000):
                x = (test_x[start:start + 1000].to(device) - MEAN) / STD
                test_correct += (model(x).argmax(1) == test_y[start:start + 1000].to(device)).sum().item()
        acc = test_correct / test_x.shape[0]
        epochs.append({"epoch": epoch, "seconds": seconds, "train_loss": total_loss / n, "train_acc": correct / n,
                       "test_acc": acc})
        print(f"epoch {epoch}/{args.epochs}  train loss {total_loss / n:.4f} acc {100 * correct / n:.2f}%  "
              f"test acc {100 * acc:.2f}%  {seconds:.2f} s  {n / seconds:,.0f} img/s", flush=True)
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump({"framework": f"pytorch {torch.__version__}", "model": args.model, "device": str(device),
                       "epochs": epochs, "test_acc": epochs[-1]["test_acc"],
                       "train_seconds": sum(e["seconds"] for e in epochs)}, f)
            f.write("\n")
    if args.nabla_csv:
        print_side_by_side(args.nabla_csv, epochs)


def print_side_by_side(nabla_csv, epochs):
    """Per-epoch training seconds and test accuracy of nabla (its CSV) and of this run."""
    with open(nabla_csv) as f:
        nabla = list(csv.DictReader(f))
    print("epoch   nabla s  test acc   PyTorch s  test acc   nabla / PyTorch")
    for n, t in zip(nabla, epochs):
        ns, ts = float(n["seconds"]), t["seconds"]
        print(f"{n['epoch']:>5}  {ns:8.2f}  {100 * float(n['test_acc']):7.2f}%  {ts:10.2f}  {100 * t['test_acc']:7.2f}%"
              f"   {ns / ts:6.2f}")


if __name__ == "__main__":
    main()
