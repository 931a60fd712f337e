#!/usr/bin/python3
"""The live round trip of tests/io/test_torch_file.cpp: PyTorch saves, nabla loads and saves, PyTorch loads.

  /usr/bin/python3 roundtrip.py save DIR    writes DIR/<name>.pt with torch.save (zip and legacy)
  /usr/bin/python3 roundtrip.py check DIR   loads each DIR/<name>.nabla.pt (and .zip64.pt) that nabla
                                            wrote with torch.load(weights_only=True) and compares it
                                            with DIR/<name>.pt: the same structure (dict, OrderedDict,
                                            list, tuple, numbers, strings), every tensor's dtype,
                                            shape, requires_grad, Parameter-ness and bytes, and which
                                            tensors share a storage; a state dict also loads into
                                            its model with load_state_dict(strict=True).
                                            Each file's data.pkl is also held to the rules of PyTorch
                                            2.x's weights_only reader (below), which 1.13 lacks.
PyTorch 1.13's weights_only reader has no BINFLOAT opcode, so a file holding Python floats (a loss, a
learning rate) cannot be read with weights_only=True there, PyTorch's own files included: on 1.x those
files are read with weights_only=False instead, and said so. Exit status 0 when everything matches.
"""
import collections
import os
import pickletools
import sys
import zipfile

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as fx  # noqa: E402


def objects():
    model = fx.small_model()
    sd = model.state_dict()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(2, 1, 4, 4)).sum().backward()
    opt.step()
    tied = torch.randn(3, 2)
    return {
        "dtypes": fx.every_dtype(),
        "state_dict": sd,
        "checkpoint": {"model": sd, "optimizer": opt.state_dict(), "epoch": 3, "loss": 0.25,
                       "args": {"name": "run", "layers": [4, 8], "flags": (True, None)}},
        "checkpoint_no_floats": {"model": sd, "epoch": 7, "tags": ["a", "b"], "ids": (1, 2, 3)},
        "tensor": torch.arange(10, dtype=torch.int64).reshape(2, 5)[:, 1:4],
        "tied": collections.OrderedDict([("embed.weight", tied), ("head.weight", tied), ("other", tied[1])]),
    }


def fail(msg):
    print("roundtrip.py: " + msg)
    sys.exit(1)


def storage_key(t):
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


def compare(a, b, path, shares):
    if type(a) is not type(b) and not (isinstance(a, nn.Parameter) and isinstance(b, nn.Parameter)):
        fail(f"{path}: {type(a).__name__} became {type(b).__name__}")
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape or a.requires_grad != b.requires_grad:
            fail(f"{path}: {a.dtype} {list(a.shape)} rg={a.requires_grad} became "
                 f"{b.dtype} {list(b.shape)} rg={b.requires_grad}")
        if fx.tensor_bytes(a) != fx.tensor_bytes(b):
            fail(f"{path}: the values differ")
        shares.append((path, storage_key(a), storage_key(b)))
    elif isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            fail(f"{path}: keys {list(a.keys())} became {list(b.keys())}")
        for k in a:
            compare(a[k], b[k], f"{path}.{k}", shares)
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            fail(f"{path}: length {len(a)} became {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}.{i}", shares)
    elif not (a == b or (a != a and b != b)):
        fail(f"{path}: {a!r} became {b!r}")


# What PyTorch 2.x's torch.load(weights_only=True) accepts (torch/_weights_only_unpickler.py, 2.0 to
# 2.9): these opcodes, and GLOBALs from its allowlist. Debian has PyTorch 1.13 only, so the files
# nabla writes are held to these rules here, and read by PyTorch 2.x itself wherever the tests run
# with one (NABLA_TEST_PYTHON; scripts/gpu-verify.sh does).
WEIGHTS_ONLY_2X_OPCODES = {
    "APPEND", "APPENDS", "BINFLOAT", "BINGET", "BININT", "BININT1", "BININT2", "BINPERSID", "BINPUT",
    "BINUNICODE", "BUILD", "EMPTY_DICT", "EMPTY_LIST", "EMPTY_SET", "EMPTY_TUPLE", "GLOBAL", "LONG1",
    "LONG_BINGET", "LONG_BINPUT", "MARK", "NEWFALSE", "NEWOBJ", "NEWTRUE", "NONE", "PROTO", "REDUCE",
    "SETITEM", "SETITEMS", "SHORT_BINSTRING", "STOP", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
}
WEIGHTS_ONLY_2X_GLOBALS = {
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter", "torch.Size",
    "torch.Tensor", "torch.device", "_codecs.encode", "builtins.bytearray", "builtins.set",
    "builtins.complex", "torch._tensor._rebuild_from_type_v2",
} | {f"torch._utils.{f}" for f in (
    "_rebuild_parameter", "_rebuild_parameter_with_state", "_rebuild_tensor", "_rebuild_tensor_v2",
    "_rebuild_tensor_v3")} | {f"torch.{t}Storage" for t in (
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool",
    "ComplexFloat", "ComplexDouble")} | {f"torch.{t}" for t in (
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")}


def check_pytorch2_rules(path):
    """Fails unless every opcode and GLOBAL of the file's pickle is one PyTorch 2.x's weights_only
    reader accepts, and the archive has the records its reader looks for."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        prefix = names[0].split("/")[0]
        for rec in ("data.pkl", "version"):  # byteorder is optional (PyTorch < 2.1 writes none)
            if f"{prefix}/{rec}" not in names:
                fail(f"{path}: no {prefix}/{rec} record")
        pkl = z.read(f"{prefix}/data.pkl")
    proto = None
    for op, arg, _ in pickletools.genops(pkl):
        if op.name not in WEIGHTS_ONLY_2X_OPCODES:
            fail(f"{path}: opcode {op.name}, which PyTorch 2.x's weights_only reader refuses")
        if op.name == "PROTO":
            proto = arg
        if op.name == "GLOBAL":
            name = arg.replace(" ", ".")
            if name not in WEIGHTS_ONLY_2X_GLOBALS:
                fail(f"{path}: GLOBAL {name}, which PyTorch 2.x's weights_only reader refuses")
    if proto != 2:
        fail(f"{path}: pickle protocol {proto}, not torch.save's 2")


def load_weights_only(path):
    try:
        return torch.load(path, weights_only=True), "weights_only=True"
    except Exception as e:  # noqa: BLE001
        if torch.__version__.startswith("1.") and "Unsupported operand 71" in str(e):
            return torch.load(path), "weights_only=False (PyTorch 1.x's weights_only cannot read floats)"
        fail(f"{path}: torch.load(weights_only=True) failed: {e}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("save", "check"):
        fail("usage: roundtrip.py save|check DIR")
    out = sys.argv[2]
    torch.manual_seed(0)
    objs = objects()
    if sys.argv[1] == "save":
        os.makedirs(out, exist_ok=True)
        for name, obj in objs.items():
            torch.save(obj, os.path.join(out, name + ".pt"))
            torch.save(obj, os.path.join(out, name + "_legacy.pt"), _use_new_zipfile_serialization=False)
        return
    checked = 0
    for name, obj in objs.items():
        for variant in ("", "_legacy"):
            for kind in ("nabla", "zip64"):
                path = os.path.join(out, f"{name}{variant}.{kind}.pt")
                if not os.path.exists(path):
                    fail(f"{path} is missing")
                check_pytorch2_rules(path)
                back, how = load_weights_only(path)
                shares = []
                compare(obj, back, name, shares)
                # Tensors that shared a storage share one again, and only those.
                for i in range(len(shares)):
                    for j in range(i + 1, len(shares)):
                        if (shares[i][1] == shares[j][1]) != (shares[i][2] == shares[j][2]):
                            fail(f"{shares[i][0]} and {shares[j][0]}: sharing a storage changed")
                if name == "state_dict":
                    fx.small_model().load_state_dict(back, strict=True)
                print(f"ok {os.path.basename(path)} ({len(shares)} tensors, {how})")
                checked += 1
    print(f"roundtrip.py: {checked} files match (PyTorch {torch.__version__}); every pickle within "
          "PyTorch 2.x's weights_only opcodes and globals")


if __name__ == "__main__":
    main()
