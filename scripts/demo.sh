#!/usr/bin/env bash
# Sets up, builds and runs the main job. Until the shuffle exists this is the memory-layer
# demo: more data than the limits allow, spilled down the tiers and verified on the way back.
# Extra arguments go to spillway-spill-demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then preset=gpu; fi
cmake --preset "$preset" -DSPILLWAY_BUILD_TESTS=OFF -DSPILLWAY_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build --preset "$preset" --target spillway-spill-demo -j "$(nproc)"
exec "./build/$preset/examples/spillway-spill-demo" "$@"
