#!/usr/bin/env bash
# docs/KERNELS.md's kernel registry block against the registry (`halo-inspect --kernels`,
# scripts/kernel-docs.py; docs/KERNELS.md, "Adding a kernel"):
#   1. the block in the repository is what the registry prints;
#   2. on a copy whose block lost a line, the check fails and names the command that regenerates
#      it, and after that command the copy passes again.
# Usage: test_kernel_docs.sh HALO_INSPECT REPO_ROOT. Needs python3 (standard library only).
set -u
inspect=$1
root=$2
script="$root/scripts/kernel-docs.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
if ! python3 "$script" --inspect "$inspect" --docs "$root/docs/KERNELS.md" --check; then
    echo "FAIL - docs/KERNELS.md's kernel registry block is not the registry (above)"
    status=1
fi
# The copy: the block's third line (the first kernel's row) removed.
awk -v begin="$(grep -m1 '^<!-- BEGIN kernel registry' "$root/docs/KERNELS.md")" '
    $0 == begin { n = 1; print; next }
    n > 0 { n++; if (n == 4) next }
    { print }' "$root/docs/KERNELS.md" >"$tmp/KERNELS.md"
if python3 "$script" --inspect "$inspect" --docs "$tmp/KERNELS.md" --check >"$tmp/out" 2>&1; then
    echo "FAIL - the check passed a block without its first kernel"
    status=1
elif ! grep -q "regenerate it: python3 scripts/kernel-docs.py" "$tmp/out"; then
    echo "FAIL - the failed check does not say how to regenerate the block:"
    cat "$tmp/out"
    status=1
else
    echo "pass - a stale block fails the check with the command that regenerates it"
fi
python3 "$script" --inspect "$inspect" --docs "$tmp/KERNELS.md" >/dev/null || status=1
if python3 "$script" --inspect "$inspect" --docs "$tmp/KERNELS.md" --check >/dev/null; then
    echo "pass - the regenerated block passes"
else
    echo "FAIL - the block written by kernel-docs.py does not pass its own check"
    status=1
fi
exit $status
