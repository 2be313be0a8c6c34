#!/usr/bin/env python3
"""Fails when a source includes a header of a library its target does not link, or an app
includes a detail/ header.

Usage: check-includes.py --build DIR [--no-configure] [--root DIR] [--apps-dir NAME]

The layout it checks: every public header lives under include/halo/<dir>/, and <dir> names the
library that implements it: include/halo/<dir>/... belongs to the CMake target halo_<dir>
(include/halo/core/csr.hpp -> halo_core, include/halo/kernels_host/... -> halo_kernels_host).

Nothing is copied by hand: the targets, their sources and their links come from CMake's file API
(codemodel v2). The script writes a query into the configured build directory DIR and re-runs
`cmake DIR` (seconds) so that CMake writes the reply; --no-configure reads a reply already there.
A target's links are the transitive closure of the codemodel's target dependencies (every
target_link_libraries edge, public or private).

Files checked: every source of every target in the codemodel that lies under --root (the
source directory CMake reports, by default), and every header those sources reach through the
include lines this configuration compiles (below): under include/halo/<dir>/ a header belongs to
halo_<dir>; a header in a directory holding sources of one target only belongs to that target. A
header no compiled source reaches (include/halo/comm/nccl_exchanger.hpp in a CPU build) is not
checked, so run it on a build configured with every option on (CI's CUDA build) to check all.
An include line under `#ifdef HALO_HAVE_X`, `#ifndef HALO_HAVE_X` or `#if [!]defined(HALO_HAVE_X)`
(with its #else) counts only where the owning target's compile definitions make it live; other
conditions count as live. For each `#include <halo/...>` or `#include "halo/..."` line in such a
file owned by target T:
  - the header must be under halo/<dir>/ with a target halo_<dir> in the codemodel;
  - halo_<dir> must be T itself or a target T links, directly or transitively;
  - when the file lies under --apps-dir (apps by default), no component of the included path may
    be detail (halo/<dir>/detail/... is a library's inside, not for the apps).
Other includes (the standard library, third parties, a directory's own "x.hpp") are not checked.

Exit code 0 when all pass, 1 on a violation (one line each on stderr), 2 on a usage or CMake
error. Only the standard library is used (run with /usr/bin/python3).
"""

import argparse
import json
import os
import re
import subprocess
import sys

CLIENT = "client-halo-check-includes"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
DIRECTIVE = re.compile(r"^\s*#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)$")
FEATURE = re.compile(r"^\s*(!?)\s*(?:defined\s*\(\s*(HALO_HAVE_\w+)\s*\)"
                     r"|defined\s+(HALO_HAVE_\w+))\s*$")
HEADER_EXTENSIONS = (".h", ".hh", ".hpp", ".cuh", ".inl", ".def")
SOURCE_EXTENSIONS = HEADER_EXTENSIONS + (".c", ".cc", ".cpp", ".cxx", ".cu")


class UsageError(Exception):
    pass


def query_codemodel(build, configure):
    """The codemodel reply of CMake's file API for the build directory BUILD."""
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        raise UsageError("%s is not a configured CMake build directory" % build)
    query_dir = os.path.join(build, ".cmake", "api", "v1", "query", CLIENT)
    reply_dir = os.path.join(build, ".cmake", "api", "v1", "reply")
    if configure:
        os.makedirs(query_dir, exist_ok=True)
        with open(os.path.join(query_dir, "query.json"), "w") as f:
            json.dump({"requests": [{"kind": "codemodel", "version": 2}]}, f)
        p = subprocess.run(["cmake", build], capture_output=True, text=True)
        if p.returncode != 0:
            raise UsageError("cmake %s failed:\n%s%s" % (build, p.stdout, p.stderr))
    indexes = sorted(n for n in os.listdir(reply_dir) if n.startswith("index-")) \
        if os.path.isdir(reply_dir) else []
    if not indexes:
        raise UsageError("no file API reply in %s (run without --no-configure)" % reply_dir)
    with open(os.path.join(reply_dir, indexes[-1])) as f:
        index = json.load(f)
    reply = index.get("reply", {}).get(CLIENT, {}).get("query.json", {}).get("responses", [])
    if not reply:
        reply = [o for o in index.get("objects", []) if o.get("kind") == "codemodel"]
    if not reply or "jsonFile" not in reply[0]:
        raise UsageError("the file API reply in %s has no codemodel" % reply_dir)
    with open(os.path.join(reply_dir, reply[0]["jsonFile"])) as f:
        codemodel = json.load(f)
    targets = {}
    for target in codemodel["configurations"][0]["targets"]:
        with open(os.path.join(reply_dir, target["jsonFile"])) as f:
            targets[target["id"]] = json.load(f)
    return codemodel, targets


def load_model(build, configure):
    """(source root, {target: set of linked targets, closure}, {abs source: set of targets},
    {target: set of macro names it compiles with, or None where it compiles nothing})"""
    codemodel, targets = query_codemodel(build, configure)
    root = codemodel["paths"]["source"]
    names = {tid: t["name"] for tid, t in targets.items()}
    direct = {t["name"]: {names[d["id"]] for d in t.get("dependencies", []) if d["id"] in names}
              for t in targets.values()}
    closure = {}
    for name in direct:
        seen, todo = set(), list(direct[name])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(direct.get(n, ()))
        closure[name] = seen
    owners, defines = {}, {}
    for t in targets.values():
        groups = t.get("compileGroups", [])
        defines[t["name"]] = {d["define"].split("=")[0] for g in groups
                              for d in g.get("defines", [])} if groups else None
        for s in t.get("sources", []):
            path = s["path"]
            path = os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
            if not s.get("isGenerated") and path.endswith(SOURCE_EXTENSIONS):
                owners.setdefault(path, set()).add(t["name"])
    return root, closure, owners, defines


def live_includes(text, defines):
    """(line number, '<' or '"', included path) of the include lines TEXT compiles with the
    macros DEFINES (None: every line). Only HALO_HAVE_* tests are evaluated; others are live."""
    stack = []  # per open #if: True, False or None (not evaluated)
    for number, line in enumerate(text.splitlines(), 1):
        d = DIRECTIVE.match(line)
        if d:
            kind, rest = d.group(1), d.group(2).split("//")[0].strip()
            if kind in ("ifdef", "ifndef", "if"):
                value = None
                if kind == "if":
                    m = FEATURE.match(rest)
                    if m and defines is not None:
                        value = ((m.group(2) or m.group(3)) in defines) != (m.group(1) == "!")
                elif rest.startswith("HALO_HAVE_") and defines is not None:
                    value = (rest.split()[0] in defines) == (kind == "ifdef")
                stack.append(value)
            elif kind == "else" and stack:
                stack[-1] = None if stack[-1] is None else not stack[-1]
            elif kind == "elif" and stack:
                stack[-1] = None
            elif kind == "endif" and stack:
                stack.pop()
            continue
        m = INCLUDE.match(line)
        if m and False not in stack:
            yield number, m.group(1), m.group(2)


def header_owner(root, path, dir_owner):
    """The targets a header belongs to: halo_<dir> under include/halo/<dir>/, else the one
    target whose sources share its directory, else none."""
    public = os.path.join(root, "include", "halo")
    if os.path.commonpath([public, path]) == public:
        rel = os.path.relpath(path, public).split(os.sep)
        return {"halo_" + rel[0]} if len(rel) > 1 else set()
    return set(dir_owner.get(os.path.dirname(path), set()))


def files_to_check(root, closure, owners, defines):
    """{absolute path: set of owning targets}: the targets' sources under ROOT and the headers
    they reach through live include lines."""
    checked = {p: set(o) for p, o in owners.items()
               if os.path.commonpath([root, p]) == root}
    dir_owner = {}
    for p, o in checked.items():
        dir_owner.setdefault(os.path.dirname(p), set()).update(o)
    dir_owner = {d: o for d, o in dir_owner.items() if len(o) == 1}
    todo = list(checked)
    while todo:
        path = todo.pop()
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for _, _, header in live_includes(text, file_defines(checked[path], defines)):
            for cand in (os.path.join(root, "include", header),
                         os.path.join(os.path.dirname(path), header)):
                cand = os.path.normpath(cand)
                if cand not in checked and os.path.isfile(cand) and \
                        os.path.commonpath([root, cand]) == root:
                    checked[cand] = header_owner(root, cand, dir_owner)
                    todo.append(cand)
    return checked


def file_defines(targets, defines):
    """The macros a file owned by TARGETS compiles with (None where unknown)."""
    known = [defines.get(t) for t in targets if defines.get(t) is not None]
    return set().union(*known) if known else None


def check(root, closure, defines, checked, apps_dir):
    problems = []
    apps = os.path.join(root, apps_dir)
    for path in sorted(checked):
        rel = os.path.relpath(path, root)
        if os.path.dirname(path) == os.path.join(root, "include", "halo"):
            problems.append("%s: not under include/halo/<library>/" % rel)
        in_apps = os.path.commonpath([apps, path]) == apps
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line, _, header in live_includes(text, file_defines(checked[path], defines)):
            parts = header.split("/")
            if parts[0] != "halo":
                continue
            where = "%s:%d: includes %s" % (rel, line, header)
            if in_apps and "detail" in parts[1:-1]:
                problems.append("%s, a detail/ header, from an app" % where)
            if len(parts) < 3:
                problems.append("%s, which is not under halo/<library>/" % where)
                continue
            library = "halo_" + parts[1]
            if library not in closure:
                problems.append("%s: no CMake target %s owns halo/%s/" % (where, library,
                                                                             parts[1]))
                continue
            for owner in sorted(checked[path]):
                if owner in closure and library != owner and library not in closure[owner]:
                    problems.append("%s (%s), which %s does not link" % (where, library, owner))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="a configured CMake build directory")
    ap.add_argument("--no-configure", action="store_true",
                    help="read the file API reply already in --build instead of re-running cmake")
    ap.add_argument("--root", help="the source tree (default: CMake's source directory)")
    ap.add_argument("--apps-dir", default="apps",
                    help="files under ROOT/APPS_DIR may not include detail/ headers")
    args = ap.parse_args()
    try:
        root, closure, owners, defines = load_model(os.path.abspath(args.build),
                                                    not args.no_configure)
    except (UsageError, OSError, KeyError, ValueError) as e:
        print("check-includes: %s" % e, file=sys.stderr)
        return 2
    root = os.path.normpath(os.path.abspath(args.root or root))
    problems = check(root, closure, defines, files_to_check(root, closure, owners, defines),
                     args.apps_dir)
    for p in problems:
        print("check-includes: %s" % p, file=sys.stderr)
    if problems:
        print("check-includes: %d problem(s)" % len(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
