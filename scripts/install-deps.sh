#!/usr/bin/env bash
# Installs what spillway needs to build and test, when missing (Debian 12 packages).
# CUDA is optional: the GPU build is made only where nvcc exists (/usr/local/cuda or PATH).
set -euo pipefail

packages=(cmake ninja-build g++ libgtest-dev libbenchmark-dev libxxhash-dev clang-format python3
  clang libclang-rt-14-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python side (PyPI): pyarrow, the real Arrow implementation the Arrow C Data Interface tests
# exchange tables with.
if ! python3 -c "import pyarrow" >/dev/null 2>&1; then
  echo "install-deps: pip install pyarrow"
  python3 -m pip install --quiet --disable-pip-version-check pyarrow ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pyarrow
fi
