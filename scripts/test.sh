#!/usr/bin/env bash
# Sets up, builds and runs every test: formatting, the CPU build (-Werror) with its tests,
# AddressSanitizer+UBSan and ThreadSanitizer builds with their tests, the GPU build where nvcc
# exists (GPU tests skip without a GPU), a bounded run of every libFuzzer target with its
# regression inputs (scripts/fuzz.sh), the Python package (built in the build whose tests run)
# and its pytest suite, a find_package(spillway) consumer of the install, and the README's main
# job and C++ example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
# Every compile goes through ccache (CMake reads these variables from the environment), so a
# second run in another clone reuses the first one's objects: paths are taken relative to the
# checkout and the build folder is not hashed; the tests' shared precompiled header is cached
# with the sloppiness ccache's manual asks for (tests/CMakeLists.txt adds -fpch-preprocess).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS=pch_defines,time_macros
fi
step() { printf '\n=== %s (%s) ===\n' "$*" "$(date -u +%T)"; }

step "format (clang-format)"
bash scripts/format.sh --check

run_preset() {
  local preset=$1
  shift
  step "build + test: $preset"
  cmake --preset "$preset" "$@" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs" --timeout 300
}

# The Python extension is built in the build whose tests run (no second build of the library),
# and its pytest suite runs on it through PYTHONPATH.
python_module=(-DSPILLWAY_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)")
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  # The GPU build's tests are the same sources in Release (-Werror), and run on the CPU paths
  # where there is no GPU; so the CPU build here only builds what the install and the demo
  # below use. ASan and TSan run every test with CUDA off.
  step "build: cpu (its tests run in the gpu build)"
  cmake --preset cpu -DSPILLWAY_BUILD_TESTS=OFF >/dev/null
  cmake --build --preset cpu -j "$jobs"
  run_preset gpu "${python_module[@]}"
  pybuild=build/gpu
else
  step "gpu: skipped (no nvcc on this machine)"
  run_preset cpu "${python_module[@]}"
  pybuild=build/cpu
fi
run_preset asan
run_preset tsan  # TSAN_OPTIONS in the preset: halt on error, tests/tsan.supp

step "python: the package of $pybuild (PYTHONPATH), its pytest suite"
pypath="$PWD/$pybuild/python"
(cd tests/python && PYTHONPATH="$pypath" python3 -m pytest -q -p no:cacheprovider .)

step "fuzz: every target (libFuzzer, ASan + UBSan, ${SPILLWAY_FUZZ_SECONDS:-20} s each) and their regressions"
FUZZ_REBUILD=1 bash scripts/fuzz.sh --seconds "${SPILLWAY_FUZZ_SECONDS:-20}"

step "install + find_package consumer"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build/cpu --prefix "$prefix/install" >/dev/null
cmake -S tests/install_consumer -B "$prefix/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix/install" >/dev/null
cmake --build "$prefix/consumer"
"$prefix/consumer/consumer"

step "demo smoke run, the README's main job (scripts/demo-run.sh), its C++ example, a query network"
./build/cpu/examples/spillway-spill-demo --data 128 --buffer 8 --host-limit 32 --cpu
bash scripts/demo-run.sh build/cpu
python3 scripts/check-readme-example.py
./build/cpu/examples/spillway-readme-example
./build/cpu/examples/spillway-query-example

echo
echo "all tests passed"
