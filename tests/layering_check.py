#!/usr/bin/env python3
"""Checks that the library's folders include only the folders below them.

Every folder of the library is a layer; a source file (.h, .cpp, .cu, .cuh) may include only
headers of its own folder and of the folders LAYERS lists for it. Three more rules:

1. One spelling per kind of file. Sources (.cpp, .cu) and everything outside the library (tests,
   examples, bench, tools, fuzz) include by paths from the repository root ("core/tensor.h").
   Library headers (.h, .cuh) include by paths relative to themselves ("../core/tensor.h",
   "ops.h"): they are installed, and a quoted path from the root would be looked up in the user's
   include directories first (tests/install's shadow check), so a user's own core/tensor.h could
   replace nabla's.
2. Nothing in the tree includes a forwarding header (a header whose first lines carry the marker
   "nabla: forwarding header"): those keep the include paths of nabla 0.1 working for users' code
   for one release and then go away. A line may opt out with the comment
   "layering: old path on purpose".
3. Forwarding headers themselves are exempt from the layer rule (nn/models/resnet.h forwards to
   vision/resnet.h, above nn).

Run by ctest (source.layering, and source.layering_self_test on files with known answers):
  /usr/bin/python3 tests/layering_check.py [ROOT]
  /usr/bin/python3 tests/layering_check.py --self-test
Prints each violation as FILE:LINE: message and exits 1 when there is one.
"""
import os
import re
import sys
import tempfile

# The folders each library folder may include besides itself, lowest layer first.
LAYERS = {
    "core": [],
    "io": ["core"],
    "autograd": ["core"],
    "metrics": ["core"],
    "data": ["core", "io"],
    "nn": ["core", "autograd", "io"],
    "optim": ["core", "autograd", "io", "data", "nn"],
    "vision": ["core", "autograd", "io", "data", "nn"],
    "audio": ["core", "autograd", "io", "data", "nn"],
    "onnx": ["core", "autograd", "io", "nn"],
    # nabla::compile: the tracer's records (core), replayed through the ops' front-ends (nn's
    # functional ones too); the module it captures (nn).
    "compiler": ["core", "autograd", "io", "nn"],
    "tensorboard": ["core", "io", "data"],
    # text/ (torchtext): tokenizers on the standard library; Vocab, Vectors (an nn::Embedding for a
    # vocabulary), the vectorizers and the collate helpers make tensors.
    "text": ["core", "io", "nn"],
    "distributed": ["core", "autograd", "io", "nn", "optim"],
    # libtorch's C++ API over nabla (namespace torch): above nn/optim/data/io, below the programs.
    "torch": ["core", "autograd", "io", "data", "nn", "optim"],
    # The CUDA backend implements core's device tables and optim's fused steps (optim/fused_math.h
    # holds the update formulas both devices share).
    "cuda": ["core", "optim"],
}
# Folders outside the library: they may include any layer, but rules 1 and 2 hold there too.
CLIENTS = ["examples", "bench", "tools", "fuzz", "tests"]
SOURCES = (".h", ".cpp", ".cu", ".cuh")
MARKER = "nabla: forwarding header"
OPT_OUT = "layering: old path on purpose"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"(.*)$')


def is_forwarding(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(2000)
    except OSError:
        return False
    return MARKER in head and head.count("#include") <= 4


def source_files(root, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("build", ".")))
        for name in sorted(filenames):
            if name.endswith(SOURCES):
                yield os.path.join(dirpath, name)


def check_file(root, path, layer, violations):
    rel = os.path.relpath(path, root)
    forwarding = is_forwarding(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        inc, rest = m.group(1), m.group(2)
        where = f"{rel}:{number}"
        header = path.endswith((".h", ".cuh")) and layer is not None
        if header:
            target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            if not os.path.isfile(target):
                violations.append(f'{where}: #include "{inc}" is not a path relative to this header '
                                  "(installed headers include each other by relative paths)")
                continue
        else:
            target = os.path.join(root, inc)
            if not os.path.isfile(target):
                # Clients may include their own folder's files by a bare name (tests/ops/opinfo.h).
                local = os.path.join(os.path.dirname(path), inc)
                if layer is None and "/" not in inc and os.path.isfile(local):
                    target = local
                else:
                    violations.append(f'{where}: #include "{inc}" is not a path from the repository root')
                    continue
        if is_forwarding(target) and OPT_OUT not in rest:
            violations.append(f'{where}: #include "{inc}" names a forwarding header (an old path); '
                              "include the header it forwards to")
        if layer is None or forwarding:
            continue
        top = os.path.relpath(target, root).split(os.sep)[0]
        if top != layer and top not in LAYERS[layer]:
            allowed = ", ".join([layer] + LAYERS[layer])
            violations.append(f'{where}: {layer}/ includes "{inc}" ({top}/); {layer}/ may include only {allowed}')


def check(root):
    violations = []
    for layer in LAYERS:
        for path in source_files(root, layer):
            check_file(root, path, layer, violations)
    for client in CLIENTS:
        for path in source_files(root, client):
            if os.sep + "compile_fail" + os.sep in path:
                continue  # sources that must fail to compile, built on purpose with odd includes
            check_file(root, path, None, violations)
    return violations


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    """Runs the checker on a tree with known violations and one clean file of each kind."""
    with tempfile.TemporaryDirectory() as root:
        write(root, "core/tensor.h", "#pragma once\n")
        write(root, "core/ops.h", '#include "tensor.h"\n')                              # fine
        write(root, "core/ops.cpp", '#include "core/tensor.h"\n')                       # fine
        write(root, "core/bad_up.cpp", '#include "nn/module.h"\n')                      # layer
        write(root, "core/bad_rel.cpp", '#include "tensor.h"\n')                        # not from the root
        write(root, "core/bad_rooted.h", '#include "core/tensor.h"\n')                  # not relative
        write(root, "nn/module.h", '#include "../core/tensor.h"\n#include "../io/file.h"\n')  # fine
        write(root, "io/file.h", '#include "../core/tensor.h"\n')
        write(root, "io/bad_up.h", '#include "../nn/module.h"\n')                       # layer
        write(root, "vision/resnet.h", '#include "../nn/module.h"\n')
        write(root, "nn/models/resnet.h",
              f'#pragma once\n// {MARKER}\n#include "../../vision/resnet.h"\n')        # exempt
        write(root, "nn/bad_old.cpp", '#include "nn/models/resnet.h"\n')               # old path
        write(root, "tests/helper.h", "#pragma once\n")
        write(root, "tests/test_a.cpp",
              '#include "helper.h"\n#include "vision/resnet.h"\n'                      # fine
              f'#include "nn/models/resnet.h"  // {OPT_OUT}\n')                        # fine
        write(root, "tests/test_b.cpp", '#include "nn/models/resnet.h"\n')             # old path
        got = sorted(v.split(":")[0] for v in check(root))
    want = sorted(["core/bad_up.cpp", "core/bad_rel.cpp", "core/bad_rooted.h", "io/bad_up.h", "nn/bad_old.cpp",
                   "tests/test_b.cpp"])
    if got != want:
        print(f"self-test failed: violations in {got}, expected {want}")
        return 1
    print("self-test passed")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    violations = check(os.path.abspath(root))
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} layering violation(s); the allowed includes are LAYERS in {__file__}")
        return 1
    print("layering: every include is spelled for its kind of file, within its layer and not a forwarding header")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
