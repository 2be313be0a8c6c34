#!/usr/bin/env python3
"""scripts/check-sizes.py on fixtures whose sizes are known by construction
(tests/scripts/check_sizes_fixtures/src): the functions it finds, their lengths, the limits at
their edges (150 passes, 151 fails; 600 lines passes, 601 fails), braces in comments, strings, raw
strings and character literals ignored (digit separators are not literals), member-initializer
braces not taken for bodies, the exceptions file, and a parse error (unbalanced braces) failing
with exit code 2."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "check-sizes.py")
ROOT = os.path.join(HERE, "check_sizes_fixtures")
failures = []


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, "--root", ROOT, *args], capture_output=True,
                       text=True)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    if not cond:
        failures.append(what)


rc, out, err = run("--exceptions", "", "--list-functions", "src/ok.cpp", "src/bad.cpp")
listed = set(out.splitlines())
for line in ["src/ok.cpp:6: exactly_150 150 lines", "src/ok.cpp:158: S 1 lines",
             "src/ok.cpp:160: member_149 149 lines", "src/bad.cpp:2: too_long 151 lines",
             "src/bad.cpp:155: C 150 lines", "src/bad.cpp:308: c_long 152 lines",
             "src/bad.cpp:461: lam 153 lines"]:
    expect(line in listed, "function list lacks %r (got %r)" % (line, sorted(listed)))
expect(len(listed) == 7, "expected 7 functions, got %d: %r" % (len(listed), sorted(listed)))

rc, out, err = run("--exceptions", "", "src/ok.cpp")
expect(rc == 0, "ok.cpp must pass (rc %d): %s" % (rc, err))

rc, out, err = run("--exceptions", "", "src/bad.cpp", "src/long_file.hpp")
expect(rc == 1, "bad.cpp + long_file.hpp must fail with 1, got %d" % rc)
problems = {l for l in err.splitlines() if "limit" in l}
want = {"check-sizes: src/bad.cpp: 614 lines (limit 600)",
        "check-sizes: src/bad.cpp:2: function too_long is 151 lines (limit 150)",
        "check-sizes: src/bad.cpp:308: function c_long is 152 lines (limit 150)",
        "check-sizes: src/bad.cpp:461: function lam is 153 lines (limit 150)",
        "check-sizes: src/long_file.hpp: 601 lines (limit 600)"}
expect(problems == want, "problems %r, expected %r" % (sorted(problems), sorted(want)))

rc, out, err = run("--exceptions", "", "--max-file-lines", "601", "src/long_file.hpp")
expect(rc == 0, "a 601-line file passes a 601-line limit (rc %d)" % rc)

rc, out, err = run("--exceptions", "", "src/unbalanced.cpp")
expect(rc == 2 and "src/unbalanced.cpp: cannot find its functions: unbalanced '}' on line 6"
       in err, "unbalanced braces: rc %d, %s" % (rc, err))

with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.write("# comment\nsrc/bad.cpp\nsrc/long_*.hpp  # pattern\nsrc/unbalanced.cpp\n")
rc, out, err = run("--exceptions", f.name)
os.unlink(f.name)
expect(rc == 0 and "1 files checked" in out, "exceptions: rc %d, %s%s" % (rc, out, err))

rc, out, err = run("--exceptions", "/nonexistent/exceptions.txt")
expect(rc != 0 and "/nonexistent/exceptions.txt" in err, "missing exceptions file: rc %d" % rc)

for f in failures:
    print("FAIL: " + f)
print("test_check_sizes: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
