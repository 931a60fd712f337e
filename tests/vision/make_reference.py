"""Reference outputs of torchvision's models for nabla's model-zoo tests (tests/vision/).

    /usr/bin/python3 tests/vision/make_reference.py --out DIR [MODEL ...]      (default: every model)

For each model, torchvision (weights=None: nothing is downloaded) builds the architecture, and every
floating tensor of its state dict is then replaced by deterministic pseudo-random values that nabla
can recompute exactly: value[i] = mean + half * (2 u(seed, i) - 1), with u the integer hash below,
mean the tensor's mean after torchvision's initialisation and half = sqrt(3) * its std (a constant
tensor, such as a BatchNorm weight, gets half = max(0.1 |mean|, 0.1) so that it is not constant).
Sending the recipe instead of the tensors keeps the fixtures a few kilobytes for models of 100M+
parameters (vgg16 alone would be 550 MB); integer buffers are sent as they are.

DIR/<model>.pt (torch.save) holds a dict:
  spec:       [[name, shape, mean, half, seed], ...] for the floating tensors, in state-dict order
  ints:       {name: tensor} for the integer buffers (num_batches_tracked, swin's position index)
  arch:       the torchvision builder (the name, or ARCH's entry for a second input size)
  names:      every state-dict key, in order
  num_params: sum of p.numel() over model.parameters()
  input:      the input, output: model.eval()(input)
DIR/<model>_state_dict.pth: for the models in STATE_DICT_FILES, torch.save(model.state_dict()) as
well (the same hash-filled values), as torchvision's weight files are written;
and, for the models listed in TRAIN, DIR/<model>_train.pt: the same, with the model in training mode
(BatchNorm on batch statistics, dropout 0), loss = (output * loss_weight).sum(), and
  grads: {parameter name: gradient}, buffers: {name: buffer after the step (running statistics)}.

Exits 0 with a message and writes nothing when torchvision cannot be imported.
"""
import argparse
import hashlib
import math
import os
import sys

import numpy as np

MASK = 0xFFFFFFFF


def hash_uniform(n, seed):
    """u(seed, i) for i in [0, n): the same integer hash as tests/vision/vision_reference.h."""
    out = np.empty(n, dtype=np.float64)
    chunk = 1 << 22
    s0 = np.uint64((seed * 2654435769) & MASK)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        x = np.arange(start, stop, dtype=np.uint64)
        x = (x * np.uint64(2654435761) + s0) & np.uint64(MASK)
        for _ in range(2):
            x ^= x >> np.uint64(16)
            x = (x * np.uint64(0x45D9F3B)) & np.uint64(MASK)
        x ^= x >> np.uint64(16)
        out[start:stop] = x.astype(np.float64) / 4294967296.0
    return out


def hash_tensor(shape, mean, half, seed):
    import torch
    n = int(np.prod(shape)) if len(shape) else 1
    u = hash_uniform(n, seed)
    v = (mean + half * (2.0 * u - 1.0)).astype(np.float32)
    return torch.from_numpy(v.reshape(shape))


# name: (builder keyword arguments, input shape (N, C, H, W))
MODELS = {
    "resnet18": ({}, (1, 3, 64, 64)),
    "resnet34": ({}, (1, 3, 64, 64)),
    "resnet50": ({}, (1, 3, 64, 64)),
    "resnet101": ({}, (1, 3, 64, 64)),
    "resnet152": ({}, (1, 3, 64, 64)),
    "resnext50_32x4d": ({}, (1, 3, 64, 64)),
    "wide_resnet50_2": ({}, (1, 3, 64, 64)),
    "vgg11": ({}, (1, 3, 32, 32)),
    "vgg11_bn": ({}, (1, 3, 32, 32)),
    "vgg16": ({}, (1, 3, 32, 32)),
    "vgg16_bn": ({}, (1, 3, 32, 32)),
    "alexnet": ({}, (1, 3, 64, 64)),
    "squeezenet1_1": ({}, (1, 3, 64, 64)),
    "densenet121": ({}, (1, 3, 64, 64)),
    "mobilenet_v2": ({}, (1, 3, 64, 64)),
    "mobilenet_v3_small": ({}, (1, 3, 64, 64)),
    "mobilenet_v3_large": ({}, (1, 3, 64, 64)),
    "efficientnet_b0": ({}, (1, 3, 64, 64)),
    "shufflenet_v2_x1_0": ({}, (1, 3, 64, 64)),
    "regnet_y_400mf": ({}, (1, 3, 64, 64)),
    "convnext_tiny": ({}, (1, 3, 64, 64)),
    # vit_b_16's full depth and width at 32x32 (2x2 patches + the class token): its image size is a
    # constructor argument, and the C++ test builds the model for the input's size.
    "vit_b_16": ({"image_size": 32}, (1, 3, 32, 32)),
    # swin_t at ImageNet's size (windows tile each stage exactly; the last stage's single window
    # turns the shift off) and at 64x64 (windows padded at the bottom and right, and shifted).
    "swin_t": ({}, (1, 3, 224, 224)),
    "swin_t_64": ({}, (1, 3, 64, 64)),
}
# Reference names that are another input size of an architecture: name -> torchvision builder.
ARCH = {"swin_t_64": "swin_t"}
# Training-mode forward + backward: (builder keyword arguments, input shape).
TRAIN = {
    "resnet18": ({}, (2, 3, 64, 64)),
    "mobilenet_v2": ({"dropout": 0.0}, (2, 3, 64, 64)),
}

# Models whose state dict is also written as a plain torch.save file (DIR/<model>_state_dict.pth),
# for the tests of load_weights.
STATE_DICT_FILES = {"resnet18"}


def spec_of(model):
    """Replaces the model's floating state in place by the hash values; returns the recipe."""
    import torch
    spec, ints = [], {}
    sd = model.state_dict()
    with torch.no_grad():
        for seed, (name, t) in enumerate(sd.items()):
            if not t.is_floating_point():
                ints[name] = t.clone()
                continue
            td = t.double()
            mean = float(td.mean()) if t.numel() else 0.0
            std = float(td.std()) if t.numel() > 1 else 0.0
            half = math.sqrt(3.0) * std if std > 1e-12 else max(0.1 * abs(mean), 0.1)
            t.copy_(hash_tensor(list(t.shape), mean, half, seed))
            spec.append([name, list(t.shape), mean, half, seed])
    return spec, ints, list(sd.keys())


def make(name, kwargs, shape, train, out_dir):
    import torch
    import torchvision
    torch.manual_seed(0)
    arch = ARCH.get(name, name)
    model = getattr(torchvision.models, arch)(weights=None, **kwargs)
    spec, ints, names = spec_of(model)
    x = hash_tensor(list(shape), 0.0, 1.0, 1000003)
    rec = {"spec": spec, "ints": ints, "names": names, "arch": arch,
           "num_params": sum(p.numel() for p in model.parameters()), "input": x}
    if not train:
        model.eval()
        with torch.no_grad():
            rec["output"] = model(x)
        torch.save(rec, os.path.join(out_dir, name + ".pt"))
        if name in STATE_DICT_FILES:  # the state dict itself, as torchvision's weight files are
            torch.save(model.state_dict(), os.path.join(out_dir, name + "_state_dict.pth"))
        return
    model.train()
    y = model(x)
    w = hash_tensor(list(y.shape), 0.0, 1.0, 1000033)
    (y * w).sum().backward()
    rec["output"] = y.detach()
    rec["loss_weight"] = w
    rec["grads"] = {n: p.grad for n, p in model.named_parameters()}
    rec["buffers"] = {n: b for n, b in model.named_buffers()}
    torch.save(rec, os.path.join(out_dir, name + "_train.pt"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"make_reference.py: no torchvision ({e}); nothing written")
        return 0
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    wanted = args.models or list(MODELS) + [m + "_train" for m in TRAIN]
    for m in wanted:
        train = m.endswith("_train")
        base = m[: -len("_train")] if train else m
        table = TRAIN if train else MODELS
        if base not in table:
            print(f"make_reference.py: unknown model {m}", file=sys.stderr)
            return 2
        kwargs, shape = table[base]
        make(base, kwargs, shape, train, args.out)
    if not args.models:  # every reference written: `complete` lets another build copy them (tests/CMakeLists.txt)
        with open(__file__, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        with open(os.path.join(args.out, "complete"), "w") as f:
            f.write(digest + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
