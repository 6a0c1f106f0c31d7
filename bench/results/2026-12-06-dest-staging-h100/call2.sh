#!/bin/bash
Z=$(cd "$(dirname "$0")" && pwd)
O=$OUT/c6; mkdir -p $O
nvidia-smi --query-gpu=name --format=csv,noheader; lscpu | grep -E "Model name"
SPILLWAY_BUILD=.carry/gpu-build.tar.xz OUT=/tmp/gc timeout 270 bash scripts/gpu-check.sh tests > $O/gpu-check.txt 2>&1; echo "gpu-check rc=$?"
grep -E "rc=[1-9]|failed=[1-9]|gpu-check:|table_gpu" $O/gpu-check.txt | cut -c1-100 | head -20
n=0; for f in /tmp/gc/test_*.log; do n=$((n+1)); grep -q "^\[  PASSED  \]" $f && ! grep -q "^\[  FAILED  \]" $f || echo "NOT PASSED: $(basename $f) $(tail -2 $f | tr '\n' ' ' | cut -c1-120)"; done; echo "$n test logs"
date -u
TESTS=none BINS="stg rel" ROUNDS=1 FILTER='BM_DeviceCopy|BM_PartitionAndPack/(1024|4096)/|BM_HashPartition/4096/|BM_PartitionAndPackOf/4096/' timeout 90 bash $Z/go.sh /tmp/ab > $O/ab.txt 2>&1
grep -E "== |fraction" $O/ab.txt | sed -E 's/min_time:0.500\/manual_time_median//; s/ copy_TB.s=[^ ]+//; s/TB\/s=[^ ]+ //; s/ +3 / /; s/peak_extra=[^ ]+//'
B=/tmp/spillway-gpu-build/build/gpu; export LD_LIBRARY_PATH=$B/lib
for r in 1 2 3; do
  timeout 30 $B/tools/spillway-bench-transfer --provider shm --chunk 4KiB,64KiB,1MiB --verify -r 21 --peer-chunks 256 > $O/shm-$r.txt 2>&1; echo "shm round $r rc=$?"
  grep -E "KiB|MiB" $O/shm-$r.txt | tail -3 | sed -E 's/ +/ /g'
done
timeout 100 $B/bench/bench_table --benchmark_filter='BM_HashPartition(1024)?/(1|16)/' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true > $O/cpu.txt 2>&1; echo "cpu rc=$?"
grep median $O/cpu.txt | sed -E 's/ +/ /g; s/min_time:1.000\/manual_time_median//'
date -u
