#!/usr/bin/env bash
# Installs what spillway needs to build and test, when missing (Debian 12 packages).
# CUDA is optional: the GPU build is made only where nvcc exists (/usr/local/cuda or PATH).
set -euo pipefail

packages=(cmake ninja-build g++ libgtest-dev libbenchmark-dev libxxhash-dev clang-format python3
  clang libclang-rt-14-dev libopenmpi-dev openmpi-bin libfabric-dev pkg-config iproute2 ccache)
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

# Python side (PyPI): numpy (the DLPack tests' arrays); pyarrow, the real Arrow implementation
# the Arrow C Data Interface tests exchange tables with; nanobind and scikit-build-core, which build the Python package; pytest
# polars, duckdb and tpchgen-cli for its tests; mpi4py (a communicator spillway accepts) and
# tqdm (the optional progress bar) and ray (spillway.ray's actors) for theirs.
py_missing=()
for mod in numpy pyarrow nanobind scikit_build_core pytest polars duckdb mpi4py tqdm ray; do
  python3 -c "import $mod" >/dev/null 2>&1 || py_missing+=("${mod//_/-}")
done
command -v tpchgen-cli >/dev/null 2>&1 || py_missing+=(tpchgen-cli)
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "install-deps: pip install ${py_missing[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${py_missing[@]}" ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
      "${py_missing[@]}"
fi
