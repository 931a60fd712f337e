#!/usr/bin/env python3
"""Checks the CUDA backend's sources (cuda/) for two classes of defect no test without a GPU finds.

1. Every kernel launch (`kernel<<<grid, block, smem, stream>>>(args);`) is followed by
   NABLA_KERNEL_CHECK("name") before the next launch and before the end of the function's file:
   an unchecked launch turns a bad configuration into a later, unrelated error.
2. Every CUDA runtime, cuBLAS, cuDNN, cuSOLVER and NCCL call that returns a status has it checked: the call is
   the argument of a check macro (NABLA_CUDA_CHECK, NABLA_CUBLAS_CHECK, NABLA_CUDNN_CHECK, ...), or
   its status is assigned or tested (`cudaError_t e = cudaMalloc(...)`, `cudaFoo(...) != cudaSuccess`,
   `return cudaFoo(...)`), or it is deliberately ignored with a `(void)` cast (destructors, best
   effort clean-up). Calls to functions that return no status (cudaGetErrorString, ...) are exempt.

Run by ctest (cuda.source_checks, and cuda.source_checks_self_test on files with known answers) on
every build, with or without the CUDA toolkit:
  /usr/bin/python3 tests/cuda_source_check.py [ROOT]
  /usr/bin/python3 tests/cuda_source_check.py --self-test
Prints each violation as FILE:LINE: message and exits 1 when there is one.
"""
import os
import re
import sys

# Functions of these libraries that return no status to check.
NO_STATUS = {
    "cudaGetErrorString", "cudaGetErrorName", "cublasGetStatusString", "cublasGetStatusName",
    "cudnnGetErrorString", "ncclGetErrorString", "ncclGetLastError", "cudaGetLastError", "cudaPeekAtLastError",
    "cudnnGetVersion", "cudnnGetCudartVersion", "cublasLtGetVersion", "cudaLaunchKernel_ptsz",
}
CALL = re.compile(r"\b((?:cuda|cublas|cublasLt|cudnn|cusolverDn|nccl)[A-Z]\w*)\s*\(")
LAUNCH = re.compile(r"<<<")
KERNEL_CHECK = re.compile(r"\bNABLA_KERNEL_CHECK\s*\(")


def strip_comments_and_strings(text):
    """Blanks out comments and string/char literals, keeping line breaks (so offsets map to lines)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def compared_after(code, open_paren):
    """Whether the call whose '(' is at open_paren is followed by == or != (its status tested)."""
    depth = 0
    for i in range(open_paren, len(code)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return re.match(r"\s*(==|!=)", code[i + 1:]) is not None
    return False


def statement_head(code, pos):
    """The current statement's text before pos (back to the previous ';', '{' or '}')."""
    i = pos - 1
    depth = 0
    while i >= 0:
        ch = code[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
        elif ch in ";{}" and depth <= 0:
            break
        i -= 1
    return code[i + 1:pos]


def inside_check_macro(code, pos):
    depth = 0
    i = pos - 1
    while i >= 0:
        ch = code[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                k = i - 1
                while k >= 0 and code[k].isspace():
                    k -= 1
                e = k + 1
                while k >= 0 and (code[k].isalnum() or code[k] == "_"):
                    k -= 1
                if re.fullmatch(r"NABLA_\w*CHECK\w*|check\w*", code[k + 1:e]):
                    return True
            else:
                depth -= 1
        elif ch in ";{}" and depth <= 0:
            return False
        i -= 1
    return False


def check_file(path, rel, problems, counts):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    code = strip_comments_and_strings(text)

    # 1. launches
    launches = [m.start() for m in LAUNCH.finditer(code)]
    counts["launches"] += len(launches)
    checks = [m.start() for m in KERNEL_CHECK.finditer(code)]
    for idx, pos in enumerate(launches):
        nxt = launches[idx + 1] if idx + 1 < len(launches) else len(code)
        if not any(pos < c < nxt for c in checks):
            problems.append(f"{rel}:{line_of(code, pos)}: kernel launch without NABLA_KERNEL_CHECK before the next "
                            "launch (check each launch: a launch error would surface later, elsewhere)")

    # 2. library calls
    for m in CALL.finditer(code):
        name = m.group(1)
        if name in NO_STATUS:
            continue
        pos = m.start()
        counts["calls"] += 1
        # Declarations and definitions (a type before the name, or `name(` after `::`): not calls.
        before = code[max(0, pos - 2):pos]
        if before == "::":
            continue
        if inside_check_macro(code, pos) or compared_after(code, m.end() - 1):
            continue
        head = statement_head(code, pos).strip()
        if re.search(r"\(\s*void\s*\)\s*$", head):          # deliberately ignored
            continue
        if re.search(r"(=|return|==|!=)\s*$", head) or re.search(r"\bif\s*\(\s*$", head):
            continue
        if re.search(r"\b(cudaError_t|cublasStatus_t|cudnnStatus_t|cusolverStatus_t|ncclResult_t)\s+\w+\s*=\s*$", head):
            continue
        if re.match(r"^(\w+[\s*&]+)+$", head) and not head.startswith("return"):
            continue  # a declaration: `cudaError_t cudaFoo(` or `static void cudaThing(`
        problems.append(f"{rel}:{line_of(code, pos)}: the status of {name}(...) is not checked (wrap it in "
                        "NABLA_CUDA_CHECK / NABLA_CUBLAS_CHECK / NABLA_CUDNN_CHECK, or cast it to (void) where "
                        "ignoring it is deliberate)")


SELF_TEST = {
    "cuda/good.cu": """
void f(cudaStream_t s, float* p) {
  k<<<1, 32, 0, s>>>(p);
  NABLA_KERNEL_CHECK("k");
  NABLA_CUDA_CHECK(cudaMemsetAsync(p, 0, 4, s));
  NABLA_CUDNN_CHECK(cudnnSetStream(h, s));
  cudaError_t e = cudaMalloc(&p, 4);
  if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  (void)cudaStreamSynchronize(s);  // "cudaDeviceReset(" in a string or comment is not a call
}
""",
    "cuda/bad.cu": """
void g(cudaStream_t s, float* p) {
  k1<<<1, 32, 0, s>>>(p);
  k2<<<1, 32, 0, s>>>(p);
  NABLA_KERNEL_CHECK("k2");
  cudaMemsetAsync(p, 0, 4, s);
  cublasSetStream(h, s);
}
""",
}


def self_test():
    """The checker on files with known answers: 3 problems in bad.cu (k1's launch, two calls), none
    in good.cu."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for rel, text in SELF_TEST.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                f.write(text)
        problems = []
        counts = {"launches": 0, "calls": 0}
        for rel in SELF_TEST:
            check_file(os.path.join(d, rel), rel, problems, counts)
    want = ["cuda/bad.cu:3: kernel launch", "cuda/bad.cu:6: the status of cudaMemsetAsync",
            "cuda/bad.cu:7: the status of cublasSetStream"]
    ok = len(problems) == len(want) and all(p.startswith(w) for p, w in zip(sorted(problems), want))
    print("\n".join(problems))
    print("cuda_source_check self-test:", "ok" if ok else "FAILED (expected: " + "; ".join(want) + ")")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = []
    counts = {"launches": 0, "calls": 0}
    files = 0
    for folder in ("cuda", "distributed"):
        d = os.path.join(root, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".cu", ".cuh", ".cpp", ".h")):
                files += 1
                check_file(os.path.join(d, name), f"{folder}/{name}", problems, counts)
    for p in problems:
        print(p)
    print(f"cuda_source_check: {files} files, {counts['launches']} kernel launches, {counts['calls']} library calls "
          f"with a status, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
