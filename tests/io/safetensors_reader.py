#!/usr/bin/env python3
"""An independent safetensors reader and writer for nabla's tests (json, struct and numpy only).

  safetensors_reader.py check FILE EXPECTED.json
      Parses FILE from the format's specification, validates its layout, and compares every tensor
      and the metadata with EXPECTED.json ({"metadata": {...}, "tensors": {name: {"dtype", "shape",
      "values"}}}). When the reference implementation is installed (safetensors with numpy or torch),
      FILE is also loaded with safetensors.numpy.load_file / safetensors.torch.load_file and compared.
  safetensors_reader.py write FILE
      Writes a file with known contents (see write()) for nabla to read back.
Exit status 0 when everything matches; the reason is printed otherwise.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1", "BOOL": "?",
          "BF16": "<u2"}


def fail(msg):
    print("safetensors_reader: " + msg)
    sys.exit(1)


def parse(path):
    data = open(path, "rb").read()
    if len(data) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if n > 100_000_000 or 8 + n > len(data):
        fail(f"bad header length {n}")
    header_bytes = data[8:8 + n]
    if header_bytes[:1] != b"{":
        fail("header does not start with '{'")
    if (8 + n) % 8 != 0:
        fail(f"the data does not start at a multiple of 8 (header length {n})")
    header = json.loads(header_bytes.decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    buf = data[8 + n:]
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"])
    pos = 0
    tensors = {}
    for name, info in entries:
        begin, end = info["data_offsets"]
        if begin != pos:
            fail(f"tensor {name} starts at {begin}, expected {pos}")
        dt = np.dtype(DTYPES[info["dtype"]])
        count = int(np.prod(info["shape"], dtype=np.int64))
        if count * dt.itemsize != end - begin:
            fail(f"tensor {name}: {end - begin} bytes for shape {info['shape']} and dtype {info['dtype']}")
        if begin % dt.itemsize != 0:
            fail(f"tensor {name} is not aligned to its element size")
        arr = np.frombuffer(buf, dtype=dt, count=count, offset=begin).reshape(info["shape"])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32).reshape(-1) << np.uint32(16)).view(np.float32).reshape(info["shape"])
        tensors[name] = (info["dtype"], arr)
        pos = end
    if pos != len(buf):
        fail(f"the tensors cover {pos} bytes of a {len(buf)}-byte buffer")
    return tensors, metadata


def compare(name, got, want_values, want_shape):
    want = np.array(want_values, dtype=np.float64).reshape(want_shape)
    got = np.asarray(got).astype(np.float64)
    if got.shape != want.shape:
        fail(f"tensor {name}: shape {got.shape}, expected {want.shape}")
    if not np.array_equal(got, want):
        fail(f"tensor {name}: values differ\n{got}\nexpected\n{want}")


def check(path, expected_path):
    expected = json.load(open(expected_path))
    tensors, metadata = parse(path)
    if metadata != expected["metadata"]:
        fail(f"metadata {metadata}, expected {expected['metadata']}")
    if set(tensors) != set(expected["tensors"]):
        fail(f"names {sorted(tensors)}, expected {sorted(expected['tensors'])}")
    for name, want in expected["tensors"].items():
        dtype, arr = tensors[name]
        if dtype != want["dtype"]:
            fail(f"tensor {name}: dtype {dtype}, expected {want['dtype']}")
        compare(name, arr, want["values"], want["shape"])
    print(f"independent reader: {len(tensors)} tensors match")

    try:
        import safetensors.torch as st_torch
        import torch
    except ImportError:
        st_torch = None
    if st_torch is not None:
        loaded = st_torch.load_file(path)
        for name, want in expected["tensors"].items():
            compare(name, loaded[name].to(torch.float64).numpy(), want["values"], want["shape"])
        print(f"safetensors.torch.load_file: {len(loaded)} tensors match")
    else:
        print("safetensors.torch.load_file: not installed here, skipped")


def write(path):
    """A file written the way the reference writer lays it out, for nabla to read back."""
    tensors = {
        "a.f32": np.arange(6, dtype="<f4").reshape(2, 3) / 4,
        "b.i64": np.array([-3, 0, 2 ** 40], dtype="<i8"),
        "c.f64": np.array(2.5, dtype="<f8"),
        "d.bool": np.array([True, False, True], dtype="?"),
        "e.f16": np.array([0.5, -2.0], dtype="<f2"),
        "f.empty": np.zeros((0, 4), dtype="<f4"),
    }
    names = {"<f4": "F32", "<i8": "I64", "<f8": "F64", "|b1": "BOOL", "<f2": "F16"}
    header = {"__metadata__": {"writer": "python"}}
    pos = 0
    blobs = []
    for name, arr in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": names[arr.dtype.str], "shape": list(arr.shape), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        fail(__doc__)
