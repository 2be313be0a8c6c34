#!/usr/bin/env python3
"""scripts/check-includes.py on a small CMake project (tests/scripts/check_includes_fixtures:
halo_c links halo_b PUBLIC, halo_b links halo_a PRIVATE, halo_d links nothing, the app links
halo_c, halo_a compiles with HALO_HAVE_A), configured here into a temporary build directory: the
link graph and the sources come from CMake. Transitive and private links pass, a library's own
detail/ headers pass. These fail: an include of an unlinked library from a source, from a public
header under include/halo/<dir>/, from a private header beside a library's sources and under
#ifdef HALO_HAVE_A in a target compiled with it; a detail/ header from an app; a header outside
halo/<library>/; a halo/<dir>/ no target owns; a header directly in include/halo/. Lines in the
dead branch of a HALO_HAVE_ test, and a header only they reach, are not checked. A copy with the
failing lines removed passes; --no-configure reads the reply already written; a directory that is
not a build directory is exit code 2."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "check-includes.py")
FIXTURE = os.path.join(HERE, "check_includes_fixtures")
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def configure(src, build):
    p = subprocess.run(["cmake", "-S", src, "-B", build], capture_output=True, text=True)
    if p.returncode != 0:
        print("cmake failed:\n%s%s" % (p.stdout, p.stderr))
        sys.exit(1)


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


with tempfile.TemporaryDirectory() as tmp:
    build = os.path.join(tmp, "build")
    configure(FIXTURE, build)
    want = {
        "check-includes: apps/app.cpp:4: includes halo/a/detail/inside.hpp, a detail/ header, "
        "from an app",
        "check-includes: include/halo/d/d.hpp:3: includes halo/c/c.hpp (halo_c), which halo_d "
        "does not link",
        "check-includes: include/halo/flat.hpp: not under include/halo/<library>/",
        "check-includes: src/a/private.hpp:3: includes halo/b/b.hpp (halo_b), which halo_a does "
        "not link",
        "check-includes: src/a/a.cpp:6: includes halo/c/c.hpp (halo_c), which halo_a does not "
        "link",
        "check-includes: src/c/c.cpp:5: includes halo/x/x.hpp: no CMake target halo_x owns "
        "halo/x/",
        "check-includes: src/c/c.cpp:7: includes halo/flat.hpp, which is not under "
        "halo/<library>/",
        "check-includes: src/d/d.cpp:2: includes halo/b/b.hpp (halo_b), which halo_d does not "
        "link",
        "check-includes: 8 problem(s)",
    }
    for args in [("--build", build), ("--build", build, "--no-configure")]:
        rc, out, err = run(*args)
        got = set(err.splitlines())
        expect(rc == 1, "%s: exit code %d, expected 1" % (args, rc))
        expect(got == want, "%s: missing %r, unexpected %r" % (args, sorted(want - got),
                                                             sorted(got - want)))

    # The same project with the failing lines removed passes.
    clean = os.path.join(tmp, "clean")
    shutil.copytree(FIXTURE, clean)
    os.remove(os.path.join(clean, "include", "halo", "flat.hpp"))
    for rel, bad in [("include/halo/d/d.hpp", "halo/c/"), ("src/a/private.hpp", "halo/b/"),
                     ("src/c/c.cpp", "halo/x/"), ("src/c/c.cpp", "halo/flat"),
                     ("src/d/d.cpp", "halo/b/"), ("src/a/a.cpp", "halo/c/"),
                     ("apps/app.cpp", "detail/")]:
        path = os.path.join(clean, rel)
        with open(path) as f:
            lines = [l for l in f if bad not in l]
        with open(path, "w") as f:
            f.writelines(lines)
    clean_build = os.path.join(tmp, "clean-build")
    configure(clean, clean_build)
    rc, out, err = run("--build", clean_build)
    expect(rc == 0 and err == "", "the cleaned fixture must pass (rc %d): %s" % (rc, err))

    rc, out, err = run("--build", tmp)
    expect(rc == 2 and "is not a configured CMake build directory" in err,
           "not a build directory: rc %d, %s" % (rc, err))

for f in failures:
    print("FAIL:", f)
print("test_check_includes: %s" % ("FAILED" if failures else "passed"))
sys.exit(1 if failures else 0)
