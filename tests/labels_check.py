#!/usr/bin/env python3
"""Checks that every test case that asks for a GPU, PyTorch or ONNX Runtime carries that label.

A test case declares what it needs in its body: NABLA_REQUIRE_CUDA() (gpu),
NABLA_NEEDS_PYTHON_MODULES[_IN](..."torch"...) (torch), NABLA_NEEDS_ORT() (ort). ctest gives the
labels by name, from the rules of tests/labels.cmake; this script finds each such case in
tests/**/*.cpp and fails when no rule of its label matches its name, so that `ctest -L gpu` (and
scripts/gpu-verify.sh, which runs by labels) can never miss a new GPU test.

Run by ctest (source.test_labels, and source.test_labels_self_test on files with known answers):
  /usr/bin/python3 tests/labels_check.py [ROOT]
  /usr/bin/python3 tests/labels_check.py --self-test
Prints each case without its label as FILE:LINE: message and exits 1 when there is one.
"""
import os
import re
import sys
import tempfile

NEEDS = {
    "gpu": re.compile(r"\bNABLA_REQUIRE_CUDA\(\)"),
    "torch": re.compile(r"\bNABLA_NEEDS_PYTHON_MODULES(?:_IN)?\([^;]*\b(?:torch|sklearn)\b"),
    "ort": re.compile(r"\bNABLA_NEEDS_ORT\(\)"),
}
TEST = re.compile(r"^(TEST|TEST_F|TEST_P)\((\w+),\s*(\w+)\)\s*\{", re.M)
INSTANTIATE = re.compile(r"^INSTANTIATE_TEST_SUITE_P\(\s*(\w*)\s*,\s*(\w+)", re.M)
RULE = re.compile(r'^\s*"(\w+)=(.*)"\s*(?:#.*)?$')


def read_rules(labels_cmake):
    """The label rules of labels.cmake: label -> [compiled regex]."""
    rules = {}
    with open(labels_cmake, encoding="utf-8") as f:
        for line in f:
            m = RULE.match(line)
            if m:
                # CMake's string escapes: "\\." in the file is the regex \.
                regex = m.group(2).replace("\\\\", "\\")
                rules.setdefault(m.group(1), []).append(re.compile(regex))
    return rules


def body_end(text, start):
    depth, i = 1, start
    while depth and i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
        i += 1
    return i


def cases_needing(path):
    """(line, names, label) for each test case of the file whose body asks for a label."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    prefixes = {}
    for m in INSTANTIATE.finditer(text):
        prefixes.setdefault(m.group(2), []).append(m.group(1))
    for m in TEST.finditer(text):
        body = text[m.end():body_end(text, m.end())]
        kind, suite, case = m.groups()
        if kind == "TEST_P":
            names = [(p + "/" if p else "") + f"{suite}.{case}/param" for p in prefixes.get(suite, [""])]
        else:
            names = [f"{suite}.{case}"]
        line = text.count("\n", 0, m.start()) + 1
        for label, need in NEEDS.items():
            if need.search(body):
                yield line, names, label


def check(root):
    rules = read_rules(os.path.join(root, "tests", "labels.cmake"))
    violations = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "tests")):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".cpp"):
                continue
            path = os.path.join(dirpath, name)
            for line, names, label in cases_needing(path):
                for n in names:
                    if not any(r.search(n) for r in rules.get(label, [])):
                        rel = os.path.relpath(path, root)
                        violations.append(f"{rel}:{line}: {n} needs '{label}' but no {label}= rule of "
                                          "tests/labels.cmake matches it")
    return violations


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "tests", "cuda"))
        with open(os.path.join(root, "tests", "labels.cmake"), "w") as f:
            f.write('set(NABLA_TEST_LABEL_RULES\n  "gpu=^CudaThing\\\\."  # comment\n  "gpu=^Ops/Par\\\\."\n)\n')
        with open(os.path.join(root, "tests", "cuda", "test_x.cpp"), "w") as f:
            f.write("TEST(CudaThing, A) {\n  NABLA_REQUIRE_CUDA();\n}\n"           # labelled
                    "TEST(Other, B) {\n  NABLA_REQUIRE_CUDA();\n}\n"               # missing
                    "TEST(Other, C) {\n  int x = 0;\n}\n"                          # needs nothing
                    "TEST_P(Par, D) {\n  NABLA_REQUIRE_CUDA();\n}\n"               # labelled
                    "INSTANTIATE_TEST_SUITE_P(Ops, Par, ::testing::Values(1));\n"
                    "TEST(Other, E) {\n  NABLA_NEEDS_ORT();\n}\n")                 # missing (ort)
        got = sorted(v.split(": ")[1].split(" ")[0] for v in check(root))
    want = ["Other.B", "Other.E"]
    if got != want:
        print(f"self-test failed: {got}, expected {want}")
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
        print(f"{len(violations)} test case(s) without the label they need")
        return 1
    print("labels: every case that needs a GPU, PyTorch or ONNX Runtime carries the label")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
