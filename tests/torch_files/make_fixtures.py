#!/usr/bin/python3
"""Writes the PyTorch files nabla's tests read (tests/io/test_torch_file.cpp), with Debian's python3-torch.

  /usr/bin/python3 tests/torch_files/make_fixtures.py [DIR]     (default: this script's folder)

Files (each a few KB), and manifest.json: {"files": {file: object}, "objects": {object: ...}}
describing every tensor of each object (dotted path as torch_io::Value::flatten names it, file
dtype, shape, stride, storage offset, which storage it shares, requires_grad, and its values as the
little-endian bytes of its elements in order), and every other leaf as its Python repr:
  dtypes.pt             every storage dtype (special values: NaN, +-inf, -0, subnormals, extremes),
                        0-d and empty tensors, transposed / stepped / offset / expanded views, views
                        sharing one storage, nn.Parameter, requires_grad
  dtypes_legacy.pt      the same, _use_new_zipfile_serialization=False
  dtypes_protocol4.pt   the same, pickle_protocol=4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL)
  dtypes_big_endian.pt  the same as a big-endian machine writes it with PyTorch 2.x: a 'byteorder'
                        record saying 'big' and byte-swapped storages (crafted from dtypes.pt)
  dtypes_legacy_big_endian_host.pt  the legacy file of a big-endian machine: its system info says
                        little_endian=False; PyTorch wrote legacy storages little-endian regardless
  state_dict.pt         a small model's state dict (conv, batch norm, linear), and state_dict_io.pt
                        with an input and the model's output in eval mode
  checkpoint.pt         {'model', 'optimizer' (SGD with momentum), 'epoch', 'loss', 'args': {...}}
  tensor.pt, list.pt    a single tensor; a list holding a tensor and a tuple of two
  resume.pt             a 4-8-3 MLP trained 5 steps with Adam, AdamW (amsgrad) and SGD (nesterov):
                        the model and optimizer state after 5 steps and the parameters after 10 more
"""
import copy
import io
import json
import math
import os
import pickle
import sys
import zipfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))

STORAGE_DTYPE = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
}
ELEMENT_SIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1}


def dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def tensor_bytes(t):
    """The elements of t in order as little-endian bytes of its dtype."""
    c = t.detach().contiguous()
    if c.dtype == torch.bfloat16:
        return c.view(torch.int16).numpy().astype("<i2").tobytes()
    return c.numpy().astype(c.numpy().dtype.newbyteorder("<")).tobytes()


def flatten(value, prefix, out):
    """Leaves by dotted path, as torch_io::Value::flatten names them."""
    def join(p, part):
        return part if not p else p + "." + part

    if isinstance(value, dict) and value:
        for k, v in value.items():
            flatten(v, join(prefix, k if isinstance(k, str) else str(k) if isinstance(k, int) else repr(k)), out)
    elif isinstance(value, (list, tuple)) and value:
        for i, v in enumerate(value):
            flatten(v, join(prefix, str(i)), out)
    else:
        out.append((prefix, value))


def describe(obj):
    leaves = []
    flatten(obj, "", leaves)
    storages = {}
    tensors, scalars = [], {}
    for path, v in leaves:
        if isinstance(v, torch.Tensor):
            key = v.untyped_storage().data_ptr() if hasattr(v, "untyped_storage") else v.storage().data_ptr()
            if key == 0:  # empty storages have no memory: each is its own
                key = ("empty", path)
            sid = storages.setdefault(key, len(storages))
            tensors.append({
                "path": path, "dtype": dtype_name(v), "shape": list(v.shape), "stride": list(v.stride()),
                "offset": v.storage_offset(), "storage": sid, "requires_grad": v.requires_grad,
                "parameter": isinstance(v, nn.Parameter), "hex": tensor_bytes(v).hex(),
            })
        elif isinstance(v, float):
            scalars[path] = repr(v)
        else:
            scalars[path] = repr(v)
    return {"tensors": tensors, "scalars": scalars}


def every_dtype():
    torch.manual_seed(0)
    f = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e-40, 3.0e38]
    d = {
        "f32": torch.tensor(f, dtype=torch.float32),
        "f64": torch.tensor(f + [1e-310, 1.7e308], dtype=torch.float64),
        "f16": torch.tensor([0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 6e-8, 65504.0], dtype=torch.float16),
        "bf16": torch.tensor([0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e-39, 3.0e38], dtype=torch.bfloat16),
        "i64": torch.tensor([0, -1, 2**63 - 1, -2**63, 123456789012], dtype=torch.int64),
        "i32": torch.tensor([0, -1, 2**31 - 1, -2**31, 77], dtype=torch.int32),
        "i16": torch.tensor([0, -1, 32767, -32768, 300], dtype=torch.int16),
        "i8": torch.tensor([0, -1, 127, -128, 5], dtype=torch.int8),
        "u8": torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, False, True], dtype=torch.bool),
        "scalar": torch.tensor(3.25),
        "scalar_i64": torch.tensor(-9, dtype=torch.int64),
        "empty": torch.zeros(0, 3),
        "empty_i8": torch.zeros(2, 0, dtype=torch.int8),
    }
    m = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.5 - 3
    d["transposed"] = m.t()
    d["stepped"] = m[:, ::2]
    d["offset"] = m[1:3, 2:]
    d["expanded"] = torch.arange(3, dtype=torch.float64).expand(4, 3)
    base = torch.arange(12, dtype=torch.int16)
    d["shared"] = {"whole": base.view(3, 4), "part": base[2:8], "row": base.view(3, 4)[1]}
    d["param"] = nn.Parameter(torch.linspace(-1, 1, 6).reshape(2, 3))
    d["frozen_param"] = nn.Parameter(torch.ones(2), requires_grad=False)
    d["grad"] = torch.ones(3, requires_grad=True)
    d["nested"] = [torch.tensor([1, 2], dtype=torch.int32), (torch.tensor([True]), torch.eye(2, dtype=torch.float16))]
    return d


def small_model():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3))
    # Non-trivial batch-norm statistics.
    with torch.no_grad():
        model(torch.randn(5, 1, 4, 4))
    return model


def save(obj, name, **kw):
    torch.save(obj, os.path.join(OUT, name), **kw)


def storage_types(pkl):
    """storage key -> dtype name, from a data.pkl (our own file: a normal unpickler with stubs)."""
    found = {}

    class U(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "torch._utils":
                return lambda *a: None
            return super().find_class(module, name)

        def persistent_load(self, pid):
            found[pid[2]] = STORAGE_DTYPE[pid[1].__name__]
            return None

    U(io.BytesIO(pkl)).load()
    return found


def big_endian_copy(src, dst):
    """A zip torch file rewritten as a big-endian machine writes it with PyTorch 2.x."""
    zin = zipfile.ZipFile(src)
    names = zin.namelist()
    prefix = names[0].split("/")[0] + "/"
    types = storage_types(zin.read(prefix + "data.pkl"))
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for n in names:
            data = zin.read(n)
            if n.startswith(prefix + "data/"):
                dt = types[n[len(prefix + "data/"):]]
                size = ELEMENT_SIZE[dt]
                if size > 1:
                    data = np.frombuffer(data, dtype=f"<u{size}").astype(f">u{size}").tobytes()
            if n == prefix + "byteorder":
                continue
            zout.writestr(n, data)
        zout.writestr(prefix + "byteorder", b"big")


def legacy_with_big_endian_sysinfo(src, dst):
    """The legacy stream with its system info saying little_endian=False (the rest unchanged)."""
    data = open(src, "rb").read()
    f = io.BytesIO(data)
    pickle.load(f)  # magic
    pickle.load(f)  # protocol version
    start = f.tell()
    info = pickle.load(f)
    end = f.tell()
    info["little_endian"] = False
    new = pickle.dumps(info, protocol=2)
    open(dst, "wb").write(data[:start] + new + data[end:])


def resume_runs():
    torch.manual_seed(0)
    x = torch.randn(16, 4)
    y = torch.randint(0, 3, (16,))
    runs = {}
    configs = [
        ("adam", lambda p: torch.optim.Adam(p, lr=1e-2)),
        ("adamw_amsgrad", lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, amsgrad=True)),
        ("sgd_nesterov", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ]
    for name, make in configs:
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = make(model.parameters())

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()

        for _ in range(5):
            step()
        run = {"model": copy.deepcopy(model.state_dict()), "optimizer": copy.deepcopy(opt.state_dict())}
        for _ in range(10):
            step()
        run["expected"] = copy.deepcopy(model.state_dict())
        runs[name] = run
    return {"x": x, "y": y, "runs": runs}


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"files": {}, "objects": {}}

    def record(file, name, value):
        manifest["files"][file] = name
        manifest["objects"][name] = describe(value)

    obj = every_dtype()
    save(obj, "dtypes.pt")
    save(obj, "dtypes_legacy.pt", _use_new_zipfile_serialization=False)
    save(obj, "dtypes_protocol4.pt", pickle_protocol=4)
    big_endian_copy(os.path.join(OUT, "dtypes.pt"), os.path.join(OUT, "dtypes_big_endian.pt"))
    legacy_with_big_endian_sysinfo(os.path.join(OUT, "dtypes_legacy.pt"),
                                   os.path.join(OUT, "dtypes_legacy_big_endian_host.pt"))
    for name in ["dtypes.pt", "dtypes_legacy.pt", "dtypes_protocol4.pt", "dtypes_big_endian.pt",
                 "dtypes_legacy_big_endian_host.pt"]:
        record(name, "dtypes", obj)

    model = small_model()
    sd = model.state_dict()
    save(sd, "state_dict.pt")
    record("state_dict.pt", "state_dict", sd)
    model.eval()
    torch.manual_seed(4)
    x = torch.randn(2, 1, 4, 4)
    io_obj = {"x": x, "y": model(x).detach()}
    save(io_obj, "state_dict_io.pt")
    record("state_dict_io.pt", "state_dict_io", io_obj)

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    F.mse_loss(model(x), torch.zeros(2, 3)).backward()
    opt.step()
    ck = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "loss": 0.1,
          "args": {"lr": 0.01, "name": "run-1", "layers": [64, 32], "flags": (True, False), "none": None,
                   "big": 2**40, "neg": -7, "unicode": "gr\u00fc\u00dfe"}}
    save(ck, "checkpoint.pt")
    record("checkpoint.pt", "checkpoint", ck)

    t = torch.arange(6, dtype=torch.float64).reshape(2, 3) / 7
    save(t, "tensor.pt")
    record("tensor.pt", "tensor", t)
    lst = [torch.tensor([1.0, 2.0]), (torch.tensor([3], dtype=torch.int64), torch.zeros(2, 2, dtype=torch.uint8))]
    save(lst, "list.pt")
    record("list.pt", "list", lst)

    save(resume_runs(), "resume.pt")

    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT) if n.endswith((".pt", ".json")))
    print(f"wrote {len(manifest['files']) + 1} files and manifest.json to {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
