#!/usr/bin/env bash
# The host-only tools load no CUDA library (docs/ARCHITECTURE.md, halo_kernels_host): ldd of
# halo-partition and halo-inspect lists no libcudart, libcusparse, libcublas(Lt), libcuda,
# libnccl or libnvJitLink. So that the check can fail, halo-infer is checked too: in a CUDA build
# (cuda_build = ON) it must list libcudart, in a CPU-only build nothing of CUDA either.
#   test_no_cuda_libraries.sh <bin dir> <cuda_build ON|OFF>
set -u
bin=$1
cuda_build=$2
pattern='lib(cudart|cusparse|cublas|cublasLt|cuda|nccl|nvJitLink)\.so'
status=0

command -v ldd >/dev/null || { echo "FAIL - ldd not found"; exit 1; }

# The CUDA libraries ldd lists for $1 (one a line; empty for none).
cuda_libraries() {
    local out
    if ! out=$(ldd "$1" 2>&1); then
        echo "FAIL - ldd $1: $out" >&2
        return 1
    fi
    grep -oE "$pattern[^ ]*" <<<"$out" | sort -u
}

for tool in halo-partition halo-inspect; do
    libs=$(cuda_libraries "$bin/$tool") || { status=1; continue; }
    if [[ -n $libs ]]; then
        echo "FAIL - $bin/$tool loads CUDA libraries:" $libs
        status=1
    else
        echo "ok   - $tool loads no CUDA library"
    fi
done

libs=$(cuda_libraries "$bin/halo-infer") || exit 1
if [[ $cuda_build =~ ^(ON|on|1|TRUE|true|YES|yes)$ ]]; then
    if ! grep -q '^libcudart' <<<"$libs"; then
        echo "FAIL - $bin/halo-infer of a CUDA build lists no libcudart: the check above sees nothing"
        status=1
    else
        echo "ok   - halo-infer of this CUDA build loads" $libs
    fi
elif [[ -n $libs ]]; then
    echo "FAIL - $bin/halo-infer of a CPU-only build loads CUDA libraries:" $libs
    status=1
else
    echo "ok   - halo-infer of this CPU-only build loads no CUDA library"
fi
exit $status
