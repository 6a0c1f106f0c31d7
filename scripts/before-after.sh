#!/usr/bin/env bash
# Before/after figures of two builds on the same machine, one right after the other and
# alternating (A B A B ...): spillway-readspeed --target device, the shuffle on local ranks
# and a small spill sweep (the shuffle at device limits that force spilling). Prints each
# run's figure; medians and ratios are for the reader (bench/results/ keeps the curated ones).
# Usage: [LIMITS="none 2000 1200"] scripts/before-after.sh BUILD_A BUILD_B [REPEATS]
# (each BUILD has tools/; run it again with the builds swapped to see the order's effect)
set -uo pipefail
A=$1
B=$2
N=${3:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
f=${SPILLWAY_READ_FILE:-/tmp/spillway-read-4g.bin}
[ -f "$f" ] || head -c $((4 << 30)) /dev/urandom > "$f"
cat "$f" > /dev/null
for i in $(seq "$N"); do
  for build in "$A" "$B"; do
    gbs=$(timeout 120 "$build/tools/spillway-readspeed" --files "$f" --target device \
      --threads 8 --runs 3 2>&1 | awk '$1 == 8 {$1 = ""; print; exit}')
    echo "readspeed device 8 threads  $build  run $i: $gbs"
  done
done
for limit in ${LIMITS:-none 2000 1200}; do
  lim=()
  [ "$limit" = none ] || lim=(-l "$limit")
  for i in $(seq "$N"); do
    for build in "$A" "$B"; do
      out=$(timeout 120 "$build/tools/spillway-bench-shuffle" -C local --ranks 2 -c 10 \
        -n 100000000 -p 4 -o 4 "${lim[@]}" -s -r 3 -w 1 2>&1)
      gibs=$(grep -oP 'medians:.*?global throughput: \K[0-9.]+ [A-Za-z/]+' <<<"$out" | head -1)
      ok=$(grep -c validated <<<"$out")
      echo "shuffle -l $limit  $build  run $i: ${gibs:-?} (validated lines: $ok)"
      [ -n "$gibs" ] || tail -5 <<<"$out"
    done
  done
done
