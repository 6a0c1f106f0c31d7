#!/bin/bash
Z=$(cd "$(dirname "$0")" && pwd)
O=$OUT/c5; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader
TESTS=none BINS="rel stg new" ROUNDS=2 FILTER='BM_DeviceCopy|BM_PartitionAndPack/(2|8|64|256|1024|4096)/|BM_HashPartition/(64|4096)/|BM_PartitionAndPackOf/4096/' timeout 230 bash $Z/go.sh /tmp/ab > $O/ab.txt 2>&1
grep -E "== |fraction" $O/ab.txt | sed -E 's/min_time:0.500\/manual_time_median//; s/ copy_TB.s=[^ ]+//; s/TB\/s=[^ ]+ //; s/ +3 / /'
SPILLWAY_BUILD=.carry/gpu-build.tar.xz OUT=/tmp/gc timeout 300 bash scripts/gpu-check.sh tests > $O/gpu-check.txt 2>&1; echo "gpu-check rc=$?"
grep -E "rc=[1-9]|failed=[1-9]|gpu-check|table_gpu|shuffle" $O/gpu-check.txt | cut -c1-120 | head -30
n=0; for f in /tmp/gc/test_*.log; do n=$((n+1)); grep -q "^\[  PASSED  \]" $f && ! grep -q "^\[  FAILED  \]" $f || echo "NOT PASSED: $(basename $f) $(tail -3 $f | tr '\n' ' ' | cut -c1-200)"; done; echo "$n test logs"
grep -h "^\[  PASSED" /tmp/gc/test_table_gpu_*.log
date -u
