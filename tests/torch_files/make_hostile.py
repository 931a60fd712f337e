#!/usr/bin/env python3
"""Writes tests/hostile/torch/: PyTorch files that must give a clear error (or load, for the two
valid ones that check this script's own file builder), each FILE with FILE.expect in the format of
tests/hostile/README.md (the files of shared subtrees, nested zip records, expanded views,
come from fuzz/torch_hostile.h through fuzz_make_corpus instead):

    error IOError               <- or "loads"
    refusing GLOBAL posix.system  <- one line per text the message must contain

Python's standard library only (no PyTorch): the pickles and archives are built byte by byte.
Run it after changing it:  python3 tests/torch_files/make_hostile.py [DIR]
"""
import os
import pickle
import warnings
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "hostile", "torch")
MARKER = "/tmp/nabla_torch_hostile_ran"  # what the os.system files would create (tests check it is absent)

# ---- pickle pieces (protocol 2) -------------------------------------------------------------------
PROTO = b"\x80\x02"


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def s(text):
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def i(v):
    if -2**31 <= v < 2**31:
        return b"J" + struct.pack("<i", v)
    b = v.to_bytes(9, "little", signed=True)
    return b"\x8a" + bytes([len(b)]) + b


def tup(*items):
    return b"(" + b"".join(items) + b"t"


ORDERED_DICT = glob("collections", "OrderedDict") + b")R"


def storage(key, numel, type_="FloatStorage"):
    return tup(s("storage"), glob("torch", type_), s(key), s("cpu"), i(numel)) + b"Q"


def legacy_storage(key, numel, type_="FloatStorage"):
    return tup(s("storage"), glob("torch", type_), s(key), s("cpu"), i(numel), b"N") + b"Q"


def rebuild(stor, offset, size, stride):
    return (glob("torch._utils", "_rebuild_tensor_v2") +
            tup(stor, i(offset), tup(*map(i, size)), tup(*map(i, stride)), b"\x89", ORDERED_DICT) + b"R")


def state_dict(items):
    return ORDERED_DICT + b"(" + b"".join(s(k) + v for k, v in items) + b"u"


def floats(*xs):
    return struct.pack(f"<{len(xs)}f", *xs)


VALID_PKL = PROTO + state_dict([("w", rebuild(storage("0", 4), 0, [2, 2], [2, 1]))]) + b"."


# ---- archives --------------------------------------------------------------------------------------
def archive(entries, deflate=()):
    """A zip of (name, bytes) pairs; names in `deflate` are compressed."""
    import io
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name in deflate else zipfile.ZIP_STORED
            z.writestr(info, data)
    return bytearray(buf.getvalue())


def torch_archive(pkl, storages=(("0", floats(1, 2, 3, 4)),), deflate_pkl=False, extra=()):
    entries = [("archive/data.pkl", pkl)] + [("archive/data/" + k, d) for k, d in storages]
    entries += list(extra) + [("archive/version", b"3\n")]
    return archive(entries, deflate={"archive/data.pkl"} if deflate_pkl else ())


def central_entry(data, name):
    """Offset of the central directory entry of `name`."""
    pos = 0
    while True:
        pos = data.index(b"PK\x01\x02", pos)
        n = struct.unpack_from("<H", data, pos + 28)[0]
        if bytes(data[pos + 46:pos + 46 + n]) == name.encode():
            return pos
        pos += 4


def legacy(main_pickle, keys, storages):
    magic = PROTO + b"\x8a\x0a" + (0x1950a86a20f9469cfc6c).to_bytes(10, "little") + b"."
    version = PROTO + b"M\xe9\x03."
    info = pickle.dumps({"protocol_version": 1001, "little_endian": True,
                         "type_sizes": {"short": 2, "int": 4, "long": 4}}, protocol=2)
    out = magic + version + info + main_pickle + pickle.dumps(keys, protocol=2)
    for numel, data in storages:
        out += struct.pack("<q", numel) + data
    return bytearray(out)


VALID_LEGACY_MAIN = PROTO + state_dict([("w", rebuild(legacy_storage("7", 4), 0, [2, 2], [2, 1]))]) + b"."


def cases():
    c = {}

    def add(name, data, expect):
        c[name] = (bytes(data), expect)

    add("valid_minimal.pt", torch_archive(VALID_PKL), ["loads"])
    add("valid_minimal_legacy.pt", legacy(VALID_LEGACY_MAIN, ["7"], [(4, floats(1, 2, 3, 4))]), ["loads"])

    # Code execution: refused at the GLOBAL, before anything could be called.
    shell = PROTO + glob("posix", "system") + s("touch " + MARKER) + b"\x85R."
    add("os_system.pt", torch_archive(shell), ["error IOError", "refusing GLOBAL posix.system", "nothing was called"])
    add("os_system_legacy.pt", legacy(shell, [], []),
        ["error IOError", "refusing GLOBAL posix.system", "nothing was called"])
    add("builtins_eval.pt", torch_archive(PROTO + glob("builtins", "eval") + s("print(1)") + b"\x85R."),
        ["error IOError", "refusing GLOBAL builtins.eval"])
    add("python2_builtin_getattr.pt", torch_archive(PROTO + glob("__builtin__", "getattr") + b"N" + s("x") + b"\x86R."),
        ["error IOError", "refusing GLOBAL builtins.getattr"])
    add("unknown_class.pt", torch_archive(PROTO + glob("__main__", "Net") + b")\x81."),
        ["error IOError", "refusing GLOBAL __main__.Net", "model.state_dict()"])
    add("torchscript.pt", torch_archive(PROTO + glob("__torch__.model", "Net") + b")\x81.",
                                        extra=[("archive/constants.pkl", PROTO + b")."), ("archive/code/x.py", b"")]),
        ["error IOError", "refusing GLOBAL __torch__.model.Net", "TorchScript"])
    add("inst_opcode.pt", torch_archive(PROTO + b"(i__main__\nEvil\n."),
        ["error IOError", "creates arbitrary objects"])
    add("sparse.pt", torch_archive(PROTO + glob("torch._utils", "_rebuild_sparse_tensor") + b")R."),
        ["error IOError", "sparse tensors are not supported by nabla"])

    # The container.
    valid = torch_archive(VALID_PKL)
    add("truncated.pt", valid[:len(valid) // 2], ["error IOError", "not a zip archive"])
    add("truncated_end_record.pt", valid[:-10], ["error IOError", "not a zip archive"])
    big = bytearray(valid)
    at = central_entry(big, "archive/data/0")
    struct.pack_into("<II", big, at + 20, 0x7fff0000, 0x7fff0000)
    add("entry_larger_than_file.pt", big, ["error IOError", "entry 'archive/data/0' claims 2147418112 bytes",
                                           "past the end of the archive"])
    bad = bytearray(valid)
    pos = bad.index(floats(1, 2, 3, 4))
    bad[pos] ^= 0x40
    add("bad_crc.pt", bad, ["error IOError", "entry 'archive/data/0' fails its CRC-32 check"])
    bomb = torch_archive(PROTO + b"N" * 100000 + b".", deflate_pkl=True)
    at = central_entry(bomb, "archive/data.pkl")
    struct.pack_into("<I", bomb, at + 24, 0xfffffff0)
    add("zip_bomb.pt", bomb, ["error IOError", "more than deflate can"])
    add("duplicate_entry.pt", archive([("archive/data.pkl", VALID_PKL), ("archive/data.pkl", VALID_PKL)]),
        ["error IOError", "duplicate entry 'archive/data.pkl'"])
    add("no_data_pkl.pt", archive([("archive/version", b"3\n")]), ["error IOError", "no 'archive/data.pkl'"])
    add("not_in_a_folder.pt", archive([("data.pkl", VALID_PKL)]), ["error IOError", "not in a folder"])
    add("bad_byteorder.pt", torch_archive(VALID_PKL, extra=[("archive/byteorder", b"middle")]),
        ["error IOError", "byteorder record says 'middle'"])
    add("not_pytorch.pt", b"hello, world\n" * 8, ["error IOError", "not a PyTorch file"])
    add("legacy_truncated.pt", legacy(VALID_LEGACY_MAIN, ["7"], [(4, floats(1, 2, 3, 4))])[:-6],
        ["error IOError", "reading storage '7'", "run past the end of the file"])
    add("legacy_wrong_count.pt", legacy(VALID_LEGACY_MAIN, ["7"], [(5, floats(1, 2, 3, 4, 5))]),
        ["error IOError", "storage '7' holds 5 elements in the file but the pickle says 4"])
    add("legacy_huge_storage.pt", legacy(PROTO + state_dict([("w", rebuild(legacy_storage("7", 2**40), 0, [2], [1]))]) + b".",
                                         ["7"], []),
        ["error IOError", "needs more bytes than the file holds"])

    # Storages and tensors.
    add("short_storage.pt", torch_archive(PROTO + state_dict([("w", rebuild(storage("0", 4), 0, [10], [1]))]) + b"."),
        ["error IOError", "the storage is shorter than the tensor needs"])
    add("storage_record_mismatch.pt", torch_archive(VALID_PKL, storages=[("0", floats(1, 2, 3))]),
        ["error IOError", "record 'archive/data/0' holds 12 bytes but its storage of 4 float32 needs 16"])
    add("huge_numel.pt", torch_archive(PROTO + state_dict([("w", rebuild(storage("0", 2**60), 0, [1], [1]))]) + b"."),
        ["error IOError", "too large"])
    add("stride_outside.pt", torch_archive(PROTO + state_dict([("w", rebuild(storage("0", 4), 0, [2, 2], [10, 1]))]) + b"."),
        ["error IOError", "reaches element 11 of a storage of 4"])
    add("negative_stride.pt", torch_archive(PROTO + state_dict([("w", rebuild(storage("0", 4), 3, [4], [-1]))]) + b"."),
        ["error IOError", "negative value -1"])
    add("missing_record.pt", torch_archive(PROTO + state_dict([("w", rebuild(storage("9", 4), 0, [4], [1]))]) + b"."),
        ["error IOError", "storage '9' has no record 'archive/data/9'"])
    add("not_a_storage_pid.pt", torch_archive(PROTO + tup(s("module"), s("x")) + b"Q."),
        ["error IOError", "only storages may be persistent ids"])

    # The pickle machine.
    # A million lists on the stack take more memory than a 2 KB file may; 1001 nested
    # ones are deeper than a file may nest.
    add("deep_lists.pt", torch_archive(PROTO + b"]" * 10**6 + b"a" * (10**6 - 1) + b".", deflate_pkl=True),
        ["error IOError", "the pickle's values take more than", "LoadOptions::max_value_bytes"])
    add("nested_1001_lists.pt", torch_archive(PROTO + b"]" * 1001 + b"a" * 1000 + b".", deflate_pkl=True),
        ["error IOError", "nested more than 1000 levels deep"])
    add("deep_marks.pt", torch_archive(PROTO + b"(" * 10**6 + b".", deflate_pkl=True),
        ["error IOError", "MARKs nested more than 1000 levels deep"])
    add("memo_out_of_range.pt", torch_archive(PROTO + b"Nq\x00h\x05."), ["error IOError", "memo index 5 was never stored"])
    add("memo_out_of_range_empty_stack.pt", torch_archive(PROTO + b"q\x00."), ["error IOError", "empty stack"])
    add("self_append.pt", torch_archive(PROTO + b"]q\x00h\x00a."), ["error IOError", "contains itself"])
    add("big_int.pt", torch_archive(PROTO + b"\x8a\x09" + (2**64).to_bytes(9, "little") + b"."),
        ["error IOError", "does not fit in 64 bits"])
    add("truncated_pickle.pt", torch_archive(VALID_PKL[:40]), ["error IOError", "archive/data.pkl", "ends early"])
    add("setitem_on_none.pt", torch_archive(PROTO + b"N" + s("a") + s("b") + b"s."),
        ["error IOError", "SETITEM needs a dict but finds a None"])
    add("string_past_end.pt", torch_archive(PROTO + b"X\xff\xff\xff\x7f" + b"abc"), ["error IOError", "ends early"])
    return c


def main():
    warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it is asked to write
    os.makedirs(OUT, exist_ok=True)
    # (Only its own files: fuzz/make_corpus.cpp writes the hostile PyTorch files here too.)
    for name in cases():
        for old in (name, name + ".expect"):
            if os.path.exists(os.path.join(OUT, old)):
                os.remove(os.path.join(OUT, old))
    total = 0
    for name, (data, expect) in sorted(cases().items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        with open(os.path.join(OUT, name + ".expect"), "w") as f:
            f.write("\n".join(expect) + "\n")
        total += len(data)
    print(f"wrote {len(cases())} files to {os.path.normpath(OUT)} ({total} bytes)")


if __name__ == "__main__":
    main()
