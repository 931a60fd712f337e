#!/usr/bin/env python3
"""GoogleTest filters from ctest labels: which cases of a test program carry some labels.

scripts/gpu-verify.sh runs the CUDA tests under compute-sanitizer, one process per program, so it
needs a --gtest_filter rather than ctest's -L; this turns the labels of tests/labels.cmake into one.

  ctest --test-dir build --show-only=json-v1 > tests.json       (or gzipped: tests.json.gz)
  scripts/test_filter.py tests.json --label gpu --exclude slow,sanitizer_skip
      prints one line per program holding such cases: "<program> <gtest filter>"
  scripts/test_filter.py tests.json --label gpu --program nabla_cuda_tests
      prints that program's filter alone (nothing when it has no such case)

--label takes one or more labels (comma-separated; a case needs all of them), --exclude drops the
cases with any of its labels. A suite whose every case carries the labels becomes "Suite.*" (less
the excluded cases, "-a:b"); other cases are named one by one.
"""
import argparse
import collections
import gzip
import json
import os
import sys


def cases(listing):
    """(program basename, gtest name, labels) of every GoogleTest case in a ctest json-v1 listing."""
    for test in listing.get("tests", []):
        command = test.get("command") or []
        name = next((a[len("--gtest_filter="):] for a in command if a.startswith("--gtest_filter=")), None)
        if not command or name is None:
            continue  # not a discovered GoogleTest case (a script, a shard)
        labels = set()
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels.update(prop.get("value") or [])
        yield os.path.basename(command[0]), name, labels


def suite_of(name):
    """"Ops/CudaParity" of "Ops/CudaParity.Float32MatchesCpu/add"."""
    return name.split(".", 1)[0]


def filters(listing, want, exclude):
    by_program = collections.defaultdict(list)
    for program, name, labels in cases(listing):
        by_program[program].append((name, labels))
    out = {}
    for program, entries in sorted(by_program.items()):
        if not any(want <= l and not (l & exclude) for _, l in entries):
            continue
        suites = collections.OrderedDict()
        for name, labels in entries:
            suites.setdefault(suite_of(name), []).append((name, labels))
        positive, negative = [], []
        for suite, members in suites.items():
            wanted = [(n, l) for n, l in members if want <= l]
            if not wanted:
                continue
            if len(wanted) == len(members):  # the whole suite: one pattern, less the excluded cases
                positive.append(suite + ".*")
                negative += [n for n, l in wanted if l & exclude]
            else:
                positive += [n for n, l in wanted if not (l & exclude)]
        out[program] = ":".join(positive) + ("-" + ":".join(negative) if negative else "")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("listing", help="the output of ctest --show-only=json-v1")
    ap.add_argument("--label", required=True, help="labels a case must carry (comma-separated)")
    ap.add_argument("--exclude", default="", help="labels that drop a case (comma-separated)")
    ap.add_argument("--program", help="print only this program's filter")
    args = ap.parse_args(argv[1:])
    try:
        opener = gzip.open if args.listing.endswith(".gz") else open
        with opener(args.listing, "rt", encoding="utf-8") as f:
            listing = json.load(f)
    except (OSError, ValueError) as e:
        print(f"test_filter.py: cannot read the ctest listing {args.listing}: {e}", file=sys.stderr)
        return 2
    want = {l for l in args.label.split(",") if l}
    exclude = {l for l in args.exclude.split(",") if l}
    result = filters(listing, want, exclude)
    if args.program:
        if args.program in result:
            print(result[args.program])
        return 0
    for program, f in result.items():
        print(program, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
