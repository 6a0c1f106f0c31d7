#!/bin/bash
# 32 rows a partition in the staged scatter's tiles at 512-1024 partitions: tests, bench_table_gpu and the shuffle A/B.
Z=$(cd "$(dirname "$0")" && pwd)
R=$1; mkdir -p $R /tmp/o
TESTS=test_table_gpu ROUNDS=2 BINS="prev new" FILTER='BM_DeviceCopy|BM_PartitionAndPack/(2|512|1024|2048)/|BM_HashPartition/1024/' bash $Z/go.sh /tmp/o > $R/go.txt 2>&1
cat $R/go.txt
BINS="prev new" OS="512 2" ROUNDS=3 bash $Z/sab.sh /tmp/o > $R/sab.txt 2>&1
cat $R/sab.txt
