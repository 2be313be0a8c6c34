#!/usr/bin/env bash
# Installs what HaloGNN needs to build and test on Debian 12 / Ubuntu 22.04+ (run as root or with
# sudo). The CUDA toolkit (nvcc, cuSPARSE, cuBLAS) and NCCL come from NVIDIA's packages; this
# script checks for them and, without them, tells how to build the CPU-only configuration.
set -euo pipefail
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin
  libmetis-dev
  libptscotch-dev libscotch-dev  # the scotch-int64 variant (64-bit SCOTCH_Num)
  libtbb-dev libsparsehash-dev  # KaMinPar, built from source (cmake/HaloKaMinPar.cmake)
  libhdf5-dev hdf5-tools
  libgtest-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  zlib1g-dev
  python3-numpy python3-h5py  # tools/export_pyg.py's torch-free path, its agreement test
  python3-scipy  # tools/train_numpy.py (trained models without PyTorch), test_train_numpy
  python3-venv  # scripts/pyg-venv.sh: torch + torch_geometric for the halognn PyG tests
  clang libclang-rt-dev libomp-dev  # libFuzzer targets (scripts/fuzz.sh, -DHALO_FUZZ=ON)
  slurm-wlm munge  # a one-node Slurm for the SLURM templates' test (tests/apps/test_slurm.sh)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: nvcc found at /usr/local/cuda/bin; add it to PATH (export PATH=/usr/local/cuda/bin:\$PATH)"
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no CUDA toolkit found; install it from NVIDIA, or configure with -DHALO_ENABLE_CUDA=OFF" >&2
fi
