#!/bin/bash
# Issue 27, 2026-12-06 afternoon: prev = 4b27793, head = a8b9c31 (the copy kernel's loads in flight).
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
save() { tail -n +1 $O/sab*.txt > $R/sab-all.txt 2>/dev/null; }
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 "$Z/test_table_gpu" > "$O/test_table_gpu.log" 2>&1; echo "test_table_gpu (head + R=2/4 lengths) rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$O/test_table_gpu.log" | head -8
cp $O/test_table_gpu.log $R/tests.txt
for r in 1 2 3; do for b in prev head; do
  timeout 120 "$Z/sbs-$b" -C local --ranks 2 -c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 3 -w 1 > "$O/sabs-$b-small-$r.txt" 2>&1
  echo "$b small round $r rc=$? $(grep -E '^medians' "$O/sabs-$b-small-$r.txt")"
done; done; save
BINS="head prev" OS="512 2 64" ROUNDS=2 bash "$Z/sab.sh" $O; save
date -u
