#!/usr/bin/python3
"""Debian package descriptions labelled by their archive section, as AG_NEWS-style CSV files.

Reads the package lists apt already has (`apt-cache dumpavail`; on a machine whose lists are empty,
run `apt-get update` as root first) and writes, into OUT:

  train.csv, test.csv   "label","title","text" rows (RFC 4180, every field quoted, as AG_NEWS):
                        label 1..6 (the line of classes.txt), title the short description, text the
                        long description (empty where apt holds none)
  classes.txt           the sections, one a line: label 1 is the first line

Which packages: those of the sections below (a "contrib/" or "non-free/" prefix is dropped), one
record per package name (the first apt lists), and one per text: a text that two sections both
claim is left out, a text one section has twice is kept once. Binary packages built from the same
source (0ad and 0ad-data, a library and its -dev package) go to the same file, train or test, so a
test description is never a near-copy of a training one. The order (and so the split) comes from a
SHA-256 of the seed and the source's name: the same apt lists give the same files on any machine.

Long descriptions: Debian's Packages files hold only the short description; the long ones are in
the Translation-en lists, which apt downloads unless told not to (Docker's Debian images set
Acquire::Languages "none"; then every text is empty and the title alone is the example). This
script uses them when apt has them (`apt-get indextargets`, read with apt-helper cat-file).

  /usr/bin/python3 examples/text_classify/make_data.py debian_sections            # everything
  /usr/bin/python3 examples/text_classify/make_data.py small --max 600            # 600 a section
"""
import argparse
import collections
import csv
import hashlib
import os
import re
import subprocess
import sys

# Six sections of distinct subjects, each over 600 packages in bookworm (main).
SECTIONS = ["admin", "games", "graphics", "net", "science", "sound"]


def records(text):
    """The fields of each apt record (blank-line separated; continuation lines kept, joined by \\n)."""
    for block in text.split("\n\n"):
        fields, last = {}, None
        for line in block.split("\n"):
            if not line:
                continue
            if line[0] in " \t" and last:
                fields[last] += "\n" + line
            elif ":" in line:
                last, value = line.split(":", 1)
                fields[last] = value.strip()
        if fields:
            yield fields


def clean_long(lines):
    """A long description's lines (each starting with a space) as one line of text: ' .' marks a
    blank line between paragraphs, and white space is collapsed."""
    words = []
    for line in lines.split("\n"):
        line = line.strip()
        if line == ".":
            continue
        words.extend(line.split())
    return " ".join(words)


def run(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, errors="replace").stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"make_data: {' '.join(cmd)} failed: {e}")


def long_descriptions():
    """Description-md5 -> long description, from the Translation-en lists apt has (none: {})."""
    try:
        # English whatever the machine's Acquire::Languages says: only the files apt has are read.
        files = run(["apt-get", "indextargets", "-o", "Acquire::Languages=en", "--format", "$(FILENAME)",
                     "Created-By: Translations", "Language: en"]).split()
    except SystemExit:
        return {}
    found = {}
    for path in sorted(set(files)):
        if not os.path.exists(path):
            continue
        for r in records(run(["/usr/lib/apt/apt-helper", "cat-file", path])):
            md5, desc = r.get("Description-md5"), r.get("Description-en", "")
            if md5 and "\n" in desc:
                found.setdefault(md5, clean_long(desc.split("\n", 1)[1]))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the folder to write train.csv, test.csv and classes.txt into")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--max", type=int, default=0, metavar="N",
                    help="at most N examples a section, train and test together (default: all)")
    ap.add_argument("--test-fraction", type=float, default=0.15, help="of the sources (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="the order and the split (default: %(default)s)")
    args = ap.parse_args()
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if len(set(sections)) != len(sections) or len(sections) < 2:
        sys.exit("make_data: --sections needs at least two distinct names")

    dump = run(["apt-cache", "dumpavail"])
    packages = {}  # name -> (source, section, short, long); the first record of each name
    for r in records(dump):
        name = r.get("Package")
        if not name or name in packages or "Description" not in r or "Section" not in r:
            continue
        section = r["Section"].rsplit("/", 1)[-1]  # "contrib/games" -> "games"
        short, _, rest = r["Description"].partition("\n")
        source = r.get("Source", name).split()[0]  # "Source: foo (1.2-3)" -> "foo"
        packages[name] = (source, section, short.strip(), clean_long(rest) if rest else None, r.get("Description-md5"))
    if not packages:
        sys.exit("make_data: `apt-cache dumpavail` lists no packages: run `apt-get update` (as root) first")
    translations = long_descriptions()

    # One example per text; a text claimed by two sections is dropped.
    by_text = collections.defaultdict(set)
    chosen = {}
    for name in sorted(packages):
        source, section, short, long, md5 = packages[name]
        if section not in sections:
            continue
        if long is None:
            long = translations.get(md5, "")
        key = (short + " " + long).strip().lower()
        by_text[key].add(section)
        chosen.setdefault(key, (source, section, short, long))
    groups = collections.defaultdict(list)  # source -> its examples
    for key, (source, section, short, long) in chosen.items():
        if len(by_text[key]) == 1:
            groups[source].append((section, short, long))

    order = sorted(groups, key=lambda s: hashlib.sha256(f"{args.seed}:{s}".encode()).hexdigest())
    rows = {"train": [], "test": []}
    taken = collections.Counter()
    for i, source in enumerate(order):
        # Spread the test sources evenly over the order: exactly test_fraction of them.
        part = "test" if int((i + 1) * args.test_fraction) > int(i * args.test_fraction) else "train"
        for section, short, long in sorted(groups[source]):
            if args.max and taken[section] >= args.max:
                continue
            taken[section] += 1
            rows[part].append((sections.index(section) + 1, short, long))

    os.makedirs(args.out, exist_ok=True)
    for part, part_rows in rows.items():
        with open(os.path.join(args.out, part + ".csv"), "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
            for label, short, long in part_rows:
                w.writerow([label, short, long])
    with open(os.path.join(args.out, "classes.txt"), "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in sections))

    with_long = sum(1 for part in rows.values() for r in part if r[2])
    for label, section in enumerate(sections, 1):
        n_train = sum(1 for r in rows["train"] if r[0] == label)
        n_test = sum(1 for r in rows["test"] if r[0] == label)
        print(f"{label} {section:12s} {n_train:6d} train {n_test:6d} test")
    total = len(rows["train"]) + len(rows["test"])
    print(f"{len(rows['train'])} train, {len(rows['test'])} test examples in {args.out}; "
          f"{with_long} of {total} with a long description")


if __name__ == "__main__":
    main()
