#!/usr/bin/env bash
# Sets up, builds and runs every test: formatting, the CPU build (-Werror) with its tests,
# AddressSanitizer+UBSan and ThreadSanitizer builds with their tests, the GPU build where nvcc
# exists (GPU tests skip without a GPU), and a find_package(spillway) consumer of the install.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
step() { printf '\n=== %s ===\n' "$*"; }

step "format (clang-format)"
bash scripts/format.sh --check

run_preset() {
  local preset=$1
  step "build + test: $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  ctest --preset "$preset" -j "$jobs" --timeout 300
}

run_preset cpu
run_preset asan
TSAN_OPTIONS="halt_on_error=1" run_preset tsan
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  run_preset gpu
else
  step "gpu: skipped (no nvcc on this machine)"
fi

step "install + find_package consumer"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build/cpu --prefix "$prefix/install" >/dev/null
cmake -S tests/install_consumer -B "$prefix/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix/install" >/dev/null
cmake --build "$prefix/consumer"
"$prefix/consumer/consumer"

step "demo smoke run"
./build/cpu/examples/spillway-spill-demo --data 128 --buffer 8 --host-limit 32 --cpu

echo
echo "all tests passed"
