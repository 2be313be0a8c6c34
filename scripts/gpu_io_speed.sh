#!/usr/bin/env bash
# On the GPU machine: the job's I/O (docs/NOTEBOOK.md, "The whole job") on R-MAT SCALE symmetrized, one rank: the dataset
# read warm and cold and per thread count, the result write synced and not, the whole halo-infer
# phase table, and halo-inspect --export; writes OUT/io.md and OUT/io.csv (docs/NOTEBOOK.md,
# "The whole job"). Stages, in the order given; each fits one 10-minute command on the H200
# machine, and WORK (local disk) keeps the build's dataset between commands:
#   build    configure BUILD (Release, sm_90) and build halo-partition, halo-infer, halo-inspect
#   dataset  halo-partition rmat:SCALE:16 --parts 1 --symmetrize into WORK, unless it exists
#            (about 4 minutes for SCALE 26, 43 GiB of host memory)
#   disk     the disk's ceilings: dd write with fdatasync, dd read of the dataset cold and warm
#   read     halo-inspect DATASET --part 0 (the read with every check, timed inside): cold, warm,
#            warm on 1, 2, 4, 8 threads, warm with HALO_SERIAL_IO=1 (HDF5's own pipeline)
#   infer    halo-infer with no options: cold cache, warm, warm --no-sync; phase tables
#   export   halo-inspect --export of the warm result to .h5 and .npy
#   report   OUT/io.md and OUT/io.csv from the logs of the stages run so far
# Usage: scripts/gpu_io_speed.sh BUILD WORK OUT STAGE... (SCALE=26 in the environment;
# BACKEND=cpu tries the stages on a CPU machine)
# Typical: source .gpu/setup.sh; scripts/gpu_io_speed.sh build-gpu /tmp/halo-io $OUT build
#          then ... dataset, then ... disk read infer export report (three commands).
set -uo pipefail
# shellcheck source=scripts/lib/gpu_build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_build.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/infer_flags.sh"
build=$1 work=$2 out=$3
shift 3
scale=${SCALE:-26}
ds=$work/rmat${scale}s.h5
bin=$build/apps
mpi=(mpirun -np 1 --allow-run-as-root --bind-to none)
mkdir -p "$work" "$out"
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$out/stages.txt"; }
drop_caches() {
  sync
  echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
}
cores=$(nproc)

# read TAG [env...]: halo-inspect's timed read of part 0; the line it prints is kept.
read_run() {
  local tag=$1
  shift
  env "$@" /usr/bin/time -f "wall %e s, peak rss %M KiB" "$bin/halo-inspect" "$ds" --part 0 \
    >"$out/read-$tag.log" 2>&1
  echo "-- read $tag: $(grep -E '^read ' "$out/read-$tag.log")"
}

# infer TAG [halo-infer args...]: one run with its log and manifest.
infer_run() {
  local tag=$1
  shift
  local res=$work/res-$tag
  rm -rf "$res"
  local flags
  mapfile -t flags < <(halo_infer_flags "$bin/halo-infer")
  /usr/bin/time -f "wall %e s, peak rss %M KiB" "${mpi[@]}" "$bin/halo-infer" "$ds" \
    "${flags[@]}" --random-model "${DIMS:-64,64,32}" --backend "${BACKEND:-cuda}" --out "$res" "$@" \
    >"$out/infer-$tag.log" 2>&1
  echo "-- infer $tag (exit $?)"
  cp "$res/manifest.json" "$out/manifest-$tag.json" 2>/dev/null
  sed -n '/^phase /,/^total/p' "$out/infer-$tag.log"
}

for stage in "$@"; do
  case $stage in
  build)
    log build
    if [ ! -f "$build/build.ninja" ]; then
      configure_or_exit "$build" "$out"
    fi
    build_or_exit "$build" "$out" "$cores" halo-partition halo-infer halo-inspect
    git rev-parse --short HEAD >"$out/commit.txt" 2>/dev/null
    ;;
  dataset)
    log "dataset (R-MAT $scale symmetrized)"
    if [ ! -f "$ds" ]; then
      /usr/bin/time -f "partition wall %e s, peak rss %M KiB" "$bin/halo-partition" \
        "rmat:$scale:16" --parts 1 --symmetrize -o "$ds" >"$out/partition-$scale.log" 2>&1
      tail -2 "$out/partition-$scale.log"
    fi
    ls -la "$ds"
    ;;
  disk)
    log disk
    dd if=/dev/zero of="$work/dd.bin" bs=64M count=128 conv=fdatasync 2>&1 | tail -1 |
      tee "$out/disk-write.txt"
    rm -f "$work/dd.bin"
    drop_caches
    dd if="$ds" of=/dev/null bs=64M 2>&1 | tail -1 | tee "$out/disk-read-cold.txt"
    dd if="$ds" of=/dev/null bs=64M 2>&1 | tail -1 | tee "$out/disk-read-warm.txt"
    ;;
  read)
    log read
    if drop_caches; then
      read_run cold
    else
      echo "cannot drop the page cache here (not root?): no cold read"
    fi
    for k in 1 2 3; do read_run "warm-$k"; done
    for t in 1 2 4 8; do read_run "threads-$t" OMP_NUM_THREADS=$t; done
    read_run serial-io HALO_SERIAL_IO=1
    ;;
  infer)
    log infer
    if drop_caches; then infer_run cold; fi
    infer_run warm
    infer_run warm-nosync --no-sync
    ;;
  export)
    log export
    for ext in h5 npy; do
      rm -f "$work/export.$ext"
      /usr/bin/time -f "export wall %e s, peak rss %M KiB" "$bin/halo-inspect" "$work/res-warm" \
        --export "$work/export.$ext" >"$out/export-$ext.log" 2>&1
      echo "-- export .$ext: $(grep -E '^exported|^export wall' "$out/export-$ext.log" | tr '\n' ' ')"
      rm -f "$work/export.$ext"
    done
    ;;
  report)
    log report
    [ -f "$out/commit.txt" ] || git rev-parse --short HEAD >"$out/commit.txt" 2>/dev/null
    python3 - "$out" "$cores" <<'PY'
import csv, glob, json, os, re, sys
out, cores = sys.argv[1], sys.argv[2]
rows = []  # (what, run, seconds, GB, GB/s, note)
def rate(line):
    m = re.search(r"([\d.]+) GB in ([\d.]+) s \(([\d.]+) GB/s", line or "")
    return (float(m.group(2)), float(m.group(1)), float(m.group(3))) if m else None
for path in sorted(glob.glob(f"{out}/read-*.log")):
    tag = os.path.basename(path)[5:-4]
    text = open(path).read()
    line = next((l for l in text.splitlines() if l.startswith("read ")), None)
    r = rate(line)
    if r:
        threads = tag.split("-")[1] if tag.startswith("threads-") else cores
        rows.append(("dataset read (halo-inspect)", tag, *r, f"{threads} threads"))
for path in sorted(glob.glob(f"{out}/manifest-*.json")):
    tag = os.path.basename(path)[9:-5]
    m = json.load(open(path))
    for p in m.get("phases", []):
        if p["name"] in ("dataset read", "result write", "download", "predictions", "total"):
            s = p["seconds"]["max"]
            b = p.get("bytes_per_rank", {}).get("max")
            g = p.get("gb_per_s_per_rank", {}).get("min")
            rows.append((f"halo-infer {p['name']}", tag, s, b / 1e9 if b else None, g,
                         p.get("note", "")))
for name in ("disk-write", "disk-read-cold", "disk-read-warm"):
    f = f"{out}/{name}.txt"
    if os.path.exists(f):
        t = open(f).read()
        m = re.search(r"(\d+) bytes.*copied, ([\d.]+) s, ([\d.]+) ([GM])B/s", t)
        if m:
            gbs = float(m.group(3)) / (1000 if m.group(4) == "M" else 1)
            rows.append(("dd " + name[5:], "", float(m.group(2)), int(m.group(1)) / 1e9, gbs, ""))
for path in sorted(glob.glob(f"{out}/export-*.log")):
    ext = re.search(r"export-(\w+)\.log$", path).group(1)
    t = open(path).read()
    m = re.search(r"export wall ([\d.]+) s", t)
    g = re.search(r"\(([\d.]+) GB of outputs", t)
    if m:
        gb = float(g.group(1)) if g else None
        s = float(m.group(1))
        rows.append((f"halo-inspect --export .{ext}", "", s, gb,
                     gb / s if gb else None, "whole command: read, order, write (synced)"))
fmt = lambda v, d=3: "" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))
with open(f"{out}/io.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["what", "run", "seconds", "GB", "GB/s", "note"])
    w.writerows(rows)
commit = open(f"{out}/commit.txt").read().strip() if os.path.exists(f"{out}/commit.txt") else "?"
with open(f"{out}/io.md", "w") as f:
    f.write(f"commit {commit}, {cores} cores\n\n| what | run | s | GB | GB/s | note |\n|---|---|---:|---:|---:|---|\n")
    for r in rows:
        f.write("| " + " | ".join([r[0], r[1], fmt(r[2]), fmt(r[3]), fmt(r[4], 2), r[5]]) + " |\n")
print(open(f"{out}/io.md").read())
PY
    ;;
  *)
    echo "unknown stage $stage"
    exit 2
    ;;
  esac
done
log done
