#!/usr/bin/env python3
"""Holds the library's sources to two size limits, read as text (no compiler needed).

1. No library source file over MAX_FILE_LINES (1,000) lines.
2. No function over MAX_FUNCTION_LINES (150) lines, counted from the first line of its declaration
   (template header included) to its closing brace; lambdas and local classes count as part of the
   function that holds them.

The library is every top-level folder of the repository but the programs, tests and build support
around it (NOT_LIBRARY), plus the headers at the top (nabla.h); its sources are the .h, .hpp, .cpp,
.cc, .cu and .cuh files there. A file or function that is over a limit today and waits for its
split is listed in FILE_EXCEPTIONS or FUNCTION_EXCEPTIONS with the reason; an entry that is no
longer over its limit (or no longer exists) is an error too, so the lists only shrink.

Run by ctest (source.size_limits, and source.size_limits_self_test on inputs with known answers):
  /usr/bin/python3 tests/source_size_check.py [ROOT]
  /usr/bin/python3 tests/source_size_check.py --self-test
Prints each violation as FILE:LINE: message and exits 1 when there is one.
"""
import os
import re
import sys

MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 150

# Top-level folders that are not the library: programs, tests, benchmarks, fuzzers, build support.
NOT_LIBRARY = {"bench", "cmake", "examples", "fuzz", "scripts", "tests", "tools", "docs", "shared", "third_party"}
SOURCE_EXTENSIONS = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")

# Files over MAX_FILE_LINES waiting for their split: path -> reason.
FILE_EXCEPTIONS = {}
# Functions over MAX_FUNCTION_LINES waiting for their split: (path, function name) -> reason.
FUNCTION_EXCEPTIONS = {}


def strip_code(text):
    """Blanks out comments, string/char literals (raw strings included) and preprocessor lines,
    keeping every line break, so that offsets still map to lines and no brace in them counts."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # A directive and its continuation lines.
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if k > 0 and text[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:k]))
            i = k
            continue
        at_line_start = False
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(j - i - 2, 0) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_template_header(head):
    """head without its leading `template <...>` clauses."""
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            return head
        depth, j = 1, m.end()
        while j < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[j], 0)
            j += 1
        head = head[j:]


def without_parens(head):
    out, depth = [], 0
    for ch in head:
        if ch == "(":
            depth += 1
            out.append("(")
        elif ch == ")":
            depth = max(depth - 1, 0)
            out.append(")")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


ASSIGN = re.compile(r"(?<![=!<>+\-*/%&|^])=(?![=])")


def classify(head):
    """What a `{` opens outside any function, from the text since the previous statement: a
    namespace (or extern "C"), a class, a function body, or an initializer (ignored)."""
    h = strip_template_header(head).strip()
    if re.match(r"^(inline\s+)?namespace\b", h) or re.match(r'^extern\s*""\s*$', h):
        return "namespace"
    flat = without_parens(h)
    flat_no_op = re.sub(r"\boperator\s*(==|!=|<=|>=|=|\(\))", "operator", flat)
    if ASSIGN.search(flat_no_op):
        return "init"
    if re.match(r"^(\[\[[^\]]*\]\]\s*)*(alignas\s*\([^)]*\)\s*)?(class|struct|union|enum)\b", h):
        return "class"
    if "(" in h:
        return "function"
    return "class"  # a brace with no parameters before it: treat its inside as declarations


def function_name(head):
    h = strip_template_header(head)
    flat = without_parens(h)
    idx = flat.find("(")
    if idx < 0:
        return "?"
    m = re.search(r"(operator\s*\S+|~?[A-Za-z_]\w*)\s*(<[^()]*>)?\s*$", flat[:idx])
    return m.group(1).strip() if m else "?"


def long_functions(text, limit=MAX_FUNCTION_LINES):
    """[(start line, lines, name)] of the functions of `text` longer than `limit` lines."""
    code = strip_code(text)
    line_of = []
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == "\n":
            line += 1
    found = []
    stack = []  # (kind, start offset of its head)
    heads = {}  # start offset -> the head's text
    head_start = 0
    paren = 0
    i, n = 0, len(code)
    inside = 0  # how many of the open scopes are function bodies or initializers
    while i < n:
        ch = code[i]
        in_function = inside > 0
        if ch == "(":
            paren += 1
        elif ch == ")":
            paren = max(paren - 1, 0)
        elif ch == ";" and not in_function and paren == 0:
            head_start = i + 1
        elif ch == "{":
            if in_function:
                stack.append(("block", None))
            else:
                head = code[head_start:i]
                # A brace inside parentheses (a default argument) or after a constructor's member
                # name in its initializer list (`: x_{0} {`) belongs to the declaration's head.
                ctor_init = re.search(r"\)\s*(noexcept\s*)?:(?!:)", head) is not None
                member_init = (ctor_init and re.search(r"[A-Za-z_]\w*\s*(<[^<>]*>)?\s*$", head) is not None and
                               not re.search(r"\b(const|noexcept|override|final|mutable)\s*$", head))
                if paren > 0 or member_init:
                    stack.append(("headbrace", None))
                else:
                    kind = classify(head)
                    start = head_start + (len(head) - len(head.lstrip()))
                    heads[start] = head
                    stack.append((kind, start))
                    inside += kind in ("function", "init")
                    head_start = i + 1
        elif ch == "}":
            if stack:
                kind, start = stack.pop()
                inside -= kind in ("function", "init")
                if kind == "function":
                    first = line_of[min(start, n - 1)]
                    lines = line_of[i] - first + 1
                    if lines > limit:
                        found.append((first, lines, function_name(heads[start])))
                if kind in ("function", "namespace", "class", "init") and inside == 0:
                    head_start = i + 1
        i += 1
    return found


def library_files(root):
    files = []
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        if os.path.isfile(path) and entry.endswith(SOURCE_EXTENSIONS):
            files.append(entry)
        if not os.path.isdir(path) or entry.startswith(".") or entry.startswith("build") or entry in NOT_LIBRARY:
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in sorted(filenames):
                if f.endswith(SOURCE_EXTENSIONS):
                    files.append(os.path.relpath(os.path.join(dirpath, f), root))
    return files


def check(root, file_exceptions=None, function_exceptions=None):
    """The violations (strings) of the library under root."""
    file_exceptions = FILE_EXCEPTIONS if file_exceptions is None else file_exceptions
    function_exceptions = FUNCTION_EXCEPTIONS if function_exceptions is None else function_exceptions
    problems = []
    seen_files, seen_functions = set(), set()
    for rel in library_files(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            if rel in file_exceptions:
                seen_files.add(rel)
            else:
                problems.append(f"{rel}:1: {lines} lines, over the limit of {MAX_FILE_LINES}: split the file")
        for start, length, name in long_functions(text):
            if (rel, name) in function_exceptions:
                seen_functions.add((rel, name))
            else:
                problems.append(f"{rel}:{start}: function {name} has {length} lines, over the limit of "
                                f"{MAX_FUNCTION_LINES}: split it")
    for rel in sorted(set(file_exceptions) - seen_files):
        problems.append(f"{rel}:1: listed in FILE_EXCEPTIONS but not over {MAX_FILE_LINES} lines (or gone): "
                        "remove it from the list")
    for rel, name in sorted(set(function_exceptions) - seen_functions):
        problems.append(f"{rel}:1: function {name} listed in FUNCTION_EXCEPTIONS but not over "
                        f"{MAX_FUNCTION_LINES} lines (or gone): remove it from the list")
    return problems


def self_test():
    import tempfile
    body = lambda k: "".join(f"  x += {i};\n" for i in range(k))
    cases = {
        # name: (source, expected [(line, name)] with limit 10)
        "short": ("int f(int x) {\n" + body(5) + "  return x;\n}\n", []),
        "long": ("int f(int x) {\n" + body(12) + "  return x;\n}\n", [(1, "f")]),
        "signature over two lines counts": ("int g(int x,\n      int y) {\n" + body(8) + "  return x;\n}\n", [(1, "g")]),
        "member in namespace and class": ("namespace a {\nstruct S {\n  template <class T>\n  void h(T t) const {\n" +
                                          body(9) + "  }\n};\n}  // namespace a\n", [(3, "h")]),
        "braces in comments and strings": ("void k() {\n  // }\n  const char* s = \"}{\";\n  char c = '}';\n" +
                                           "  /* } */\n" + body(3) + "}\nvoid l() {\n" + body(11) + "}\n",
                                           [(10, "l")]),
        "raw string": ('void m() {\n  auto s = R"x(}}})x";\n' + body(3) + "}\n", []),
        "lambdas are part of the function": ("void n() {\n  auto f = [] {\n" + body(6) + "  };\n" + body(4) + "}\n",
                                             [(1, "n")]),
        "initializers are not functions": ("const int table[] = {\n" + "".join(f"  {i},\n" for i in range(20)) +
                                           "};\n", []),
        "constructor with brace member init": ("struct T {\n  T(int a) : a_{a}, b_(a) {\n" + body(10) +
                                               "  }\n  int a_, b_;\n};\n", [(2, "T")]),
        "preprocessor lines ignored": ("#define OPEN {\n#define CLOSE \\\n  }\nvoid p() {\n" + body(3) + "}\n", []),
        "extern C": ('extern "C" {\nvoid q() {\n' + body(12) + "}\n}\n", [(2, "q")]),
        "operator": ("struct U {\n  bool operator==(const U&) const {\n" + body(12) + "    return true;\n  }\n};\n",
                     [(2, "operator==")]),
    }
    failures = 0
    for name, (src, expected) in cases.items():
        got = [(line, fn) for line, _, fn in long_functions(src, limit=10)]
        if got != expected:
            print(f"self-test {name!r}: expected {expected}, got {got}")
            failures += 1
    # The whole check on a small tree: a file over the limit, an exception that is stale.
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "core"))
        os.makedirs(os.path.join(root, "tests"))
        with open(os.path.join(root, "core", "big.cpp"), "w") as f:
            f.write("int x;\n" * (MAX_FILE_LINES + 1))
        with open(os.path.join(root, "tests", "big_test.cpp"), "w") as f:
            f.write("int y;\n" * (MAX_FILE_LINES + 1))  # not library: not checked
        got = check(root, file_exceptions={"core/gone.cpp": "stale"}, function_exceptions={})
        want = ["core/big.cpp:1: 1001 lines, over the limit of 1000: split the file",
                "core/gone.cpp:1: listed in FILE_EXCEPTIONS but not over 1000 lines (or gone): remove it from the list"]
        if got != want:
            print(f"self-test tree: expected {want}, got {got}")
            failures += 1
    print("self-test:", "failed" if failures else "passed")
    return 1 if failures else 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    print(f"{len(library_files(root))} library sources checked: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
