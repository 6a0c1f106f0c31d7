#!/usr/bin/env bash
# Sets up, builds and runs the main job (scripts/demo-run.sh: a 2-rank shuffle under a limit
# that forces spilling, on the GPU when there is one, else on the CPU; every run validated).
# Extra arguments go to spillway-bench-shuffle (-h).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then preset=gpu; fi
cmake --preset "$preset" -DSPILLWAY_BUILD_TESTS=OFF -DSPILLWAY_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build --preset "$preset" --target spillway-bench-shuffle -j "$(nproc)"
exec bash scripts/demo-run.sh "build/$preset" "$@"
