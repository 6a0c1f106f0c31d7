#!/bin/bash
Z=$(cd "$(dirname "$0")" && pwd)
O=${1:-/tmp/o}; mkdir -p "$O"
TESTS="test_table_gpu test_table_pack test_shuffle_shuffler test_shuffle_shuffler_batches" BINS="old new" ROUNDS=2 FILTER='BM_DeviceCopy|BM_PartitionAndPack/(64|1024|2048|4096)/|BM_HashPartition/(1024|4096)/' bash "$Z/go.sh" "$O"
SBS=sbs-new OS="2 64 512" bash "$Z/tl.sh" "$O"
export LD_LIBRARY_PATH=$Z/lib
timeout 100 "$Z/bench_table" --benchmark_filter='BM_HashPartition(1024)?/(1|16)/' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > "$O/cpu-1.txt" 2>&1
grep -E "median" "$O/cpu-1.txt" | sed -E 's/ +/ /g'
date -u
