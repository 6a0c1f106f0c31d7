#!/bin/bash
# test_table_gpu_groupby at 4b27793 (prev) and HEAD, repeated.
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in prev head; do
  timeout 100 "$Z/t/gb-$b" --gtest_repeat=8 --gtest_filter='*EveryOp*' > "$O/gb-$b.log" 2>&1; echo "$b rc=$? passed $(grep -c '^\[       OK \]' $O/gb-$b.log) failed $(grep -c '^\[  FAILED  \] GpuGroupBy.*ms)' $O/gb-$b.log)"
  grep "test_gpu_groupby.cpp:114" $O/gb-$b.log | sort | uniq -c
done
tail -n +1 $O/gb-*.log > $R/gb.txt
