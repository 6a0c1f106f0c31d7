#!/usr/bin/env bash
# The main job, in one place: an all-to-all shuffle between two ranks of the embedded default
# communicator (-C local: threads of one process) under a memory limit of a quarter of each
# rank's data, so that the shuffle must spill; every run checks its output against its input
# (per-partition checksums) and the statistics show what was spilled. On the GPU when the
# build has CUDA and a GPU is present (two ranks share one GPU where there is only one), else
# on the CPU. scripts/demo.sh (after building) and scripts/gpu-check.sh both run it.
#   scripts/demo-run.sh BUILD_DIR [extra spillway-bench-shuffle flags]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:?usage: scripts/demo-run.sh BUILD_DIR [flags]}
shift
S="$B/tools/spillway-bench-shuffle"
[ -x "$S" ] || { echo "demo-run: no $S (build it first: bash scripts/demo.sh)" >&2; exit 2; }
if nvidia-smi -L >/dev/null 2>&1 && [ -f "$B/CMakeCache.txt" ] &&
  grep -q '^SPILLWAY_BUILT_WITH_CUDA:INTERNAL=ON$' "$B/CMakeCache.txt"; then
  # 3.73 GiB per rank in 8 tables of 477 MiB, device limit 0.95 GiB: a table and its packed
  # copy fill the limit, so packed chunks go to pinned host memory and incoming chunks land
  # there; each output partition (477 MiB) is concatenated on the GPU.
  args=(-c 10 -n 100000000 -p 8 -o 8 -l 972)
else
  # 61 MiB per rank, host limit 15 MiB: the rest goes to disk.
  args=(-c 4 -n 4000000 -p 16 -o 16 --host-limit 15 --cpu)
fi
echo "+ $S -C local --ranks 2 ${args[*]} -s -r 3 -w 1 $*"
exec "$S" -C local --ranks 2 "${args[@]}" -s -r 3 -w 1 "$@"
