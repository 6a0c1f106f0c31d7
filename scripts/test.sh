#!/usr/bin/env bash
# Sets up, builds and runs every test: formatting, the CPU build (-Werror) with its tests,
# AddressSanitizer+UBSan and ThreadSanitizer builds with their tests, the GPU build where nvcc
# exists (GPU tests skip without a GPU), a bounded libFuzzer run of unpack, and a
# find_package(spillway) consumer of the install.
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

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  # The GPU build's tests are the same sources in Release (-Werror), and run on the CPU paths
  # where there is no GPU; so the CPU build here only builds what the install and the demo
  # below use. ASan and TSan run every test with CUDA off.
  step "build: cpu (its tests run in the gpu build)"
  cmake --preset cpu -DSPILLWAY_BUILD_TESTS=OFF >/dev/null
  cmake --build --preset cpu -j "$jobs"
  run_preset gpu
else
  step "gpu: skipped (no nvcc on this machine)"
  run_preset cpu
fi
run_preset asan
run_preset tsan  # TSAN_OPTIONS in the preset: halt on error, tests/tsan.supp

step "fuzz: unpack (libFuzzer, ASan + UBSan, ${SPILLWAY_FUZZ_SECONDS:-30} s)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
fuzz_dir=$(mktemp -d)
if ! ./build/fuzz/fuzz/fuzz_unpack -max_total_time="${SPILLWAY_FUZZ_SECONDS:-30}" -max_len=65536 \
  -rss_limit_mb=4096 -print_final_stats=1 "$fuzz_dir" fuzz/corpus/unpack >"$fuzz_dir.log" 2>&1; then
  tail -60 "$fuzz_dir.log"
  echo "fuzz_unpack found a failing input (above)"
  exit 1
fi
grep -E "stat::number_of_executed_runs|Done" "$fuzz_dir.log" | tail -2
rm -rf "$fuzz_dir" "$fuzz_dir.log"

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
