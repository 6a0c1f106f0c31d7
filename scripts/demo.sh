#!/usr/bin/env bash
# Sets up, builds and runs the main job: an all-to-all shuffle between two ranks of the
# embedded default communicator (-C local: threads of this process), on the GPU when there is
# one, else on the CPU, under a memory limit of a quarter of each rank's data, so the shuffle
# must spill (to host memory, or to disk on the CPU). Every run checks its output against
# its input (per-partition checksums). Extra arguments go to spillway-bench-shuffle (-h).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
preset=cpu
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then preset=gpu; fi
cmake --preset "$preset" -DSPILLWAY_BUILD_TESTS=OFF -DSPILLWAY_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build --preset "$preset" --target spillway-bench-shuffle -j "$(nproc)"
if nvidia-smi -L >/dev/null 2>&1 && [ "$preset" = gpu ]; then
  # 3.73 GiB per rank, device limit 0.95 GiB.
  limit=(-c 10 -n 100000000 -p 8 -o 8 -l 972)
else
  # 61 MiB per rank, host limit 15 MiB: the rest goes to disk.
  limit=(-c 4 -n 4000000 -p 16 -o 16 --host-limit 15)
fi
exec "./build/$preset/tools/spillway-bench-shuffle" -C local --ranks 2 "${limit[@]}" -s -r 3 -w 1 "$@"
