#!/bin/bash
# Issue 27: the Shuffler's own direct pieces by kernel below 16 MiB (own16) against head (4 MiB).
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 "$Z/test_shuffle_shuffler" > "$O/t.log" 2>&1; echo "test_shuffle_shuffler (own16) rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$O/t.log" | head -8
cp $O/t.log $R/tests.txt
BINS="head own16" OS="64 2" ROUNDS=3 bash "$Z/sab.sh" $O; tail -n +1 $O/sab*.txt > $R/sab-all.txt
date -u
