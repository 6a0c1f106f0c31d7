#!/bin/bash
# Issue 27, 2026-12-06 afternoon: the GPU checksum's loads in flight for mid-size tables.
# head = a8b9c31; ckN = head + the checksum kernels' shared outer loop, batch = max(4, N / R)
# columns' loads issued together (ck4 = the refactor alone).
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
save() { tail -n +1 $O/sab*.txt > $R/sab-all.txt 2>/dev/null; tail -n +1 $O/head-*.txt $O/ck*-*.txt > $R/bench.txt 2>/dev/null; }
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 "$Z/test_table_gpu" > "$O/test_table_gpu.log" 2>&1; echo "test_table_gpu (ck16) rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$O/test_table_gpu.log" | head -8
cp $O/test_table_gpu.log $R/tests.txt
TESTS=none BINS="head ck4 ck8 ck16" ROUNDS=2 FILTER='BM_Checksum' bash "$Z/go.sh" $O 2>&1 | grep -v "^none"; save
BINS="head ck16 ck8" OS="512" ROUNDS=2 bash "$Z/sab.sh" $O; save
TAG=c BINS="head ck16" OS="2" ROUNDS=1 bash "$Z/sab.sh" $O; save
date -u
