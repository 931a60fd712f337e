#!/usr/bin/env python3
"""Checks that the C++ sources keep the style of .clang-format (clang-format 14, Debian 12's).

Every .h, .cpp, .cu and .cuh file of the repository (not the build folders, not
tests/compile_fail/, whose files must fail to compile in exact ways) is run through
`clang-format --dry-run -Werror`; a file clang-format would change is a failure, with the first
lines it would change. Fix with `clang-format -i FILE` (or the editor's format-on-save).

Run by ctest (source.format). Exits 77 (ctest: skipped) when clang-format 14 is not installed:
another version formats differently; scripts/test.sh installs Debian's.
  /usr/bin/python3 tests/format_check.py [ROOT]
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

SOURCES = (".h", ".cpp", ".cu", ".cuh")
SKIP_DIRS = {".git", ".deps", ".gtest", ".gpu", "node_modules", "checkpoints"}
SKIP_PREFIXES = ("build", "tests/compile_fail")


def files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and
                             not os.path.join(rel, d).lstrip("./").startswith(SKIP_PREFIXES))
        for name in sorted(filenames):
            if name.endswith(SOURCES):
                yield os.path.join(dirpath, name)


def check(exe, path):
    r = subprocess.run([exe, "--dry-run", "-Werror", "--style=file", path], capture_output=True, text=True)
    return path, r.returncode, r.stderr


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    exe = shutil.which("clang-format") or shutil.which("clang-format-14")
    if not exe:
        print("clang-format is not installed (apt-get install clang-format): skipped")
        return 77
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)", version)
    if not m or m.group(1) != "14":
        print(f"{version.strip()}: the style is clang-format 14's (Debian 12): skipped")
        return 77
    paths = list(files(root))
    bad = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for path, rc, err in pool.map(lambda p: check(exe, p), paths):
            if rc != 0:
                bad.append((os.path.relpath(path, root), err))
    for rel, err in bad:
        first = "\n".join(err.splitlines()[:3])
        print(f"{rel}: not in .clang-format's style (clang-format -i {rel})\n{first}")
    if bad:
        print(f"{len(bad)} of {len(paths)} files not formatted")
        return 1
    print(f"format: {len(paths)} files in .clang-format's style")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
