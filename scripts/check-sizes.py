#!/usr/bin/env python3
"""Fails when a library or app source file is over 600 lines or a function in one is over 150.

Usage: check-sizes.py [--root DIR] [--exceptions FILE] [--max-file-lines N]
                      [--max-function-lines N] [--list-functions] [PATH ...]

PATHs default to the library and app folders (src include partition comm kernels apps) under
--root (the repository by default); tests are not checked. A function is a brace body opened at
namespace, class or extern "C" scope after a parameter list: free and member functions,
constructors (member-initializer braces are skipped), operators, and lambdas that initialize a
namespace-scope variable. Its length runs from the first line of its declaration (template
header included) to its closing brace. Comments, string and character literals (raw strings
too) and preprocessor lines are blanked first, so braces inside them do not count. A file whose
braces do not balance after that is reported as an error rather than guessed at.

--exceptions names a file of paths or fnmatch patterns relative to --root, one per line, '#'
comments; a matching file is skipped entirely (by default scripts/check-sizes-temporary-
exceptions.txt where it exists, for a split that lands over several merges; none is kept today:
every file passes). Exit code 0 when all pass, 1 on a violation, 2 on a
usage or parse error. Only the standard library is used (run with /usr/bin/python3).
"""

import argparse
import fnmatch
import os
import re
import sys

SOURCE_DIRS = ["src", "include", "partition", "comm", "kernels", "apps"]
EXTENSIONS = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".inl")
CONTAINER_KEYWORDS = re.compile(r"^(?:template\s*<.*>\s*)?(?:typedef\s+)?(class|struct|union|enum)\b",
                                re.S)
NAMESPACE = re.compile(r'(?:^|\s)(?:inline\s+)?namespace\b|^extern\s*"\s*"\s*$', re.S)

ACCESS = re.compile(r"^\s*(?:public|private|protected)\s*:(?!:)")


class ParseError(Exception):
    pass


def blank(text):
    """Comments, literals and preprocessor lines replaced by spaces; newlines kept, so
    offsets and line numbers match the original text."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                if text.startswith("/*", j):
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            wipe(i, j)
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ParseError("unterminated /* comment at offset %d" % i)
            wipe(i, j + 2)
            i = j + 2
            continue
        if c == '"':
            m = re.search(r"(?:\b|^)(?:u8|u|U|L)?R$", text[max(0, i - 3):i])
            if m:
                d = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
                if not d:
                    raise ParseError("bad raw string at offset %d" % i)
                close = ")" + d.group(1) + '"'
                j = text.find(close, i + len(d.group(0)))
                if j < 0:
                    raise ParseError("unterminated raw string at offset %d" % i)
                wipe(i + 1, j + len(close) - 1)
                i = j + len(close)
                continue
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    raise ParseError("newline in string literal at offset %d" % i)
                j += 1
            wipe(i + 1, j)
            i = j + 1
            continue
        if c == "'":
            k = i
            while k > 0 and (text[k - 1].isalnum() or text[k - 1] == "_"):
                k -= 1
            if k < i and text[k].isdigit():  # digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'":
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    raise ParseError("newline in character literal at offset %d" % i)
                j += 1
            wipe(i + 1, j)
            i = j + 1
            continue
        i += 1
    return "".join(out)


def skip_template_args_back(h, k):
    """h[k] is '>': index before the matching '<'."""
    depth = 0
    while k >= 0:
        if h[k] == ">":
            depth += 1
        elif h[k] == "<":
            depth -= 1
            if depth == 0:
                return k - 1
        k -= 1
    return k


def is_member_initializer(h):
    """Header `Foo() : a_(1), b_` (ends with a name after ':' or ',' following a ')'): the
    brace initializes a member, it is not the body."""
    s = h.rstrip()
    if ")" not in s or not s or not (s[-1].isalnum() or s[-1] in "_>"):
        return False
    k = len(s) - 1
    while k >= 0:
        if s[k] == ">":
            k = skip_template_args_back(s, k)
        elif s[k].isalnum() or s[k] == "_" or s[k] == ":" and k > 0 and s[k - 1] == ":":
            k -= 2 if s[k] == ":" else 1
        else:
            break
    while k >= 0 and s[k].isspace():
        k -= 1
    return k >= 0 and (s[k] == "," or (s[k] == ":" and (k == 0 or s[k - 1] != ":")))


def function_name(h):
    flat = " ".join(h.split())
    var = re.match(r"^[^(=]*?([A-Za-z_]\w*)\s*=[^=]", flat)
    if var and var.group(1) != "operator":  # a lambda initializing a variable: its name
        return var.group(1)
    flat = re.sub(r"^template\s*<[^{;]*?>\s*(?=[A-Za-z_])", "", flat)
    flat = re.sub(r"__launch_bounds__\s*\([^)]*\)|__attribute__\s*\(\(.*?\)\)|\[\[.*?\]\]", "",
                  flat)
    m = re.search(r"((?:\b[A-Za-z_]\w*::)*\boperator\b\s*(?:\(\)|\[\]|[^\s(]+))\s*\(", flat)
    if not m:
        m = re.search(r"(~?[A-Za-z_][\w:~]*)\s*\(", flat)
    return m.group(1).replace(" ", "") if m else flat[:40]


def classify(header):
    """'container' (namespace, class, extern "C"), 'function', or 'other' (initializer, enum
    values, a block we do not descend into)."""
    h = " ".join(header.split())
    if NAMESPACE.search(h) and "(" not in h:
        return "container"
    if CONTAINER_KEYWORDS.match(h):
        return "enum" if re.match(r"^(?:typedef\s+)?enum\b", h) else "container"
    if ")" in h and not h.endswith("=") and not h.endswith("]"):
        return "function"
    return "other"


def find_functions(text):
    """[(name, first_line, last_line)] of the functions at namespace or class scope."""
    b = blank(text)
    line_of = []
    ln = 1
    for ch in b:
        line_of.append(ln)
        if ch == "\n":
            ln += 1
    found = []
    stack = []  # 'container' or 'skip' scopes we are inside
    header_start = 0
    paren = 0
    i = 0
    n = len(b)
    while i < n:
        c = b[i]
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == ";" and paren == 0:
            header_start = i + 1
        elif c == "}" and paren == 0:
            if not stack:
                raise ParseError("unbalanced '}' on line %d" % line_of[i])
            stack.pop()
            header_start = i + 1
        elif c == "{" and paren == 0:
            header = b[header_start:i]
            kind = classify(header)
            if kind == "function" and is_member_initializer(header):
                i = match_brace(b, i, line_of) + 1
                continue
            if kind == "container":
                stack.append("container")
                header_start = i + 1
            else:
                end = match_brace(b, i, line_of)
                if kind == "function":
                    access = ACCESS.match(header)
                    skip = access.end() if access else 0
                    first = header_start + skip + (len(header[skip:]) - len(header[skip:].lstrip()))
                    found.append((function_name(header), line_of[first], line_of[end]))
                i = end + 1
                header_start = i
                continue
        i += 1
    if stack:
        raise ParseError("unclosed '{' at end of file")
    return found


def match_brace(b, i, line_of):
    depth = 0
    for j in range(i, len(b)):
        if b[j] == "{":
            depth += 1
        elif b[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    raise ParseError("'{' on line %d is never closed" % line_of[i])


def load_exceptions(path):
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise SystemExit("check-sizes: cannot read exceptions file %s: %s" % (path, e.strerror))
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def source_files(root, paths):
    for p in paths:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            yield os.path.relpath(full, root)
            continue
        if not os.path.isdir(full):
            raise SystemExit("check-sizes: no such file or folder: %s" % full)
        for d, dirs, files in os.walk(full):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(d, name), root)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--exceptions", default=None,
                    help="default: scripts/check-sizes-temporary-exceptions.txt under --root "
                         "when it exists; '' for none")
    ap.add_argument("--max-file-lines", type=int, default=600)
    ap.add_argument("--max-function-lines", type=int, default=150)
    ap.add_argument("--list-functions", action="store_true",
                    help="print every function found with its length (for checking the parser)")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args(argv)
    exc_path = args.exceptions
    if exc_path is None:
        default = os.path.join(args.root, "scripts", "check-sizes-temporary-exceptions.txt")
        exc_path = default if os.path.exists(default) else ""
    patterns = load_exceptions(exc_path)
    paths = args.paths or [d for d in SOURCE_DIRS if os.path.isdir(os.path.join(args.root, d))]

    problems = []
    errors = []
    checked = 0
    for rel in source_files(args.root, paths):
        rel = rel.replace(os.sep, "/")
        if any(fnmatch.fnmatchcase(rel, p) for p in patterns):
            continue
        checked += 1
        with open(os.path.join(args.root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > args.max_file_lines:
            problems.append("%s: %d lines (limit %d)" % (rel, lines, args.max_file_lines))
        try:
            functions = find_functions(text)
        except ParseError as e:
            errors.append("%s: cannot find its functions: %s" % (rel, e))
            continue
        for name, first, last in functions:
            length = last - first + 1
            if args.list_functions:
                print("%s:%d: %s %d lines" % (rel, first, name, length))
            if length > args.max_function_lines:
                problems.append("%s:%d: function %s is %d lines (limit %d)"
                                % (rel, first, name, length, args.max_function_lines))
    for p in problems + errors:
        print("check-sizes: " + p, file=sys.stderr)
    if errors:
        return 2
    if problems:
        print("check-sizes: %d problem(s) in %d files checked (exceptions: %s)"
              % (len(problems), checked, exc_path or "none"), file=sys.stderr)
        return 1
    print("check-sizes: %d files checked, none over %d lines, no function over %d (exceptions: %s)"
          % (checked, args.max_file_lines, args.max_function_lines, exc_path or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
