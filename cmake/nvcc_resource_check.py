#!/usr/bin/env python3
"""The CUDA backend's compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER, cuda/CMakeLists.txt): runs
nvcc, which is given --resource-usage, reads ptxas's report for each kernel and fails the compile
when a kernel spills registers to local memory or uses more than 48 KiB of static shared memory
(the most a kernel may declare statically; more needs dynamic shared memory and an opt-in). The
report is kept next to the object (OBJECT.resources: kernel, registers, stack, shared memory) and
left out of the build's output; everything else nvcc prints passes through.

  nvcc_resource_check.py NVCC ARGS...               (as CMake calls a launcher)
  nvcc_resource_check.py --self-test                 (the parser on a report with known answers)
"""
import os
import re
import subprocess
import sys

SMEM_LIMIT = 48 * 1024

ENTRY = re.compile(r"^ptxas info\s*: (?:Compiling entry function|Function properties for) '?([^' ]+)'?")
SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"^ptxas info\s*: Used (\d+) registers(.*)$")
SMEM = re.compile(r"(\d+) bytes smem")


def parse(report):
    """Returns (kernels, problems, other lines): kernels maps a name to its figures."""
    kernels, problems, other = {}, [], []
    current = None
    for line in report.splitlines():
        m = ENTRY.match(line)
        if m:
            current = m.group(1)
            kernels.setdefault(current, {"registers": 0, "stack": 0, "smem": 0})
            continue
        m = SPILLS.search(line)
        if m and current:
            stack, stores, loads = map(int, m.groups())
            kernels[current]["stack"] = stack
            if stores or loads:
                problems.append(f"{current}: spills registers ({stores} bytes of stores, {loads} bytes of loads "
                                "to local memory): simplify the kernel or give it fewer threads per block")
            continue
        m = USED.match(line)
        if m and current:
            kernels[current]["registers"] = int(m.group(1))
            s = SMEM.search(m.group(2))
            if s:
                kernels[current]["smem"] = int(s.group(1))
                if int(s.group(1)) > SMEM_LIMIT:
                    problems.append(f"{current}: {s.group(1)} bytes of static shared memory (at most {SMEM_LIMIT})")
            continue
        if line.startswith("ptxas info") or line.startswith("    ") and "bytes stack frame" in line:
            continue
        other.append(line)
    return kernels, problems, other


SELF_TEST_REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4goodPf' for 'sm_90'
ptxas info    : Function properties for _Z4goodPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compiling entry function '_Z6spillsPf' for 'sm_90'
ptxas info    : Function properties for _Z6spillsPf
    48 bytes stack frame, 40 bytes spill stores, 40 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z7bigsmemPf' for 'sm_90'
ptxas info    : Function properties for _Z7bigsmemPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 1 barriers, 65536 bytes smem
binary.cu(12): warning: something else
"""


def self_test():
    kernels, problems, other = parse(SELF_TEST_REPORT)
    ok = (sorted(kernels) == ["_Z4goodPf", "_Z6spillsPf", "_Z7bigsmemPf"] and kernels["_Z4goodPf"]["smem"] == 4096
          and kernels["_Z6spillsPf"]["registers"] == 255 and len(problems) == 2
          and problems[0].startswith("_Z6spillsPf: spills") and problems[1].startswith("_Z7bigsmemPf: 65536")
          and other == ["binary.cu(12): warning: something else"])
    print("\n".join(problems))
    print("nvcc_resource_check self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    out_path = None
    for i, a in enumerate(argv):
        if a == "-o" and i + 1 < len(argv):
            out_path = argv[i + 1]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    kernels, problems, other = parse(proc.stdout)
    text = "\n".join(other).strip()
    if text:
        print(text, file=sys.stderr)
    if proc.returncode != 0:
        return proc.returncode
    if out_path:
        with open(out_path + ".resources", "w", encoding="utf-8") as f:
            f.write("kernel registers stack_bytes static_smem_bytes\n")
            for name in sorted(kernels):
                k = kernels[name]
                f.write(f"{name} {k['registers']} {k['stack']} {k['smem']}\n")
    if problems:
        if out_path:
            try:
                os.remove(out_path)
            except OSError:
                pass
        print(f"error: {out_path or 'nvcc'}: " + "\n  ".join(["kernel resource limits exceeded:"] + problems),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
