#!/usr/bin/env bash
# Shuffle tests on the GPU, the shuffle old/new, CPU bench_table on 16 cores, partition A/B.
set -u
Z=$(cd "$(dirname "$0")" && pwd)
O=${1:-/tmp/out}; mkdir -p "$O"
export LD_LIBRARY_PATH=$Z/lib OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=name --format=csv,noheader; date -u; nproc
for t in test_shuffle_shuffler test_shuffle_shuffler_batches test_shuffle_soak; do
  timeout 150 "$Z/$t" > "$O/$t.log" 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$O/$t.log" | tr '\n' ' ')"
done
for r in 1 2 3; do for b in old new; do for a in "-c 10 -n 200000000 -p 1 -o 64 -s -m pool -r 5 -w 2" "-c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 2 -w 1"; do
  echo "$b $a: $(timeout 120 "$Z/shuffle-$b" -C local --ranks 2 $a 2>&1 | grep -E '^medians' | cut -c1-110)"
done; done; done
for r in 1 2 3; do
  "$Z/bench_table" --benchmark_filter='BM_HashPartition(1024)?/(1|16)/' 2>&1 | grep -E '^BM_' | awk '{print $1, $NF, $(NF-1)}'
done
