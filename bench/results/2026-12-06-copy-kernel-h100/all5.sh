#!/bin/bash
# Issue 27, 2026-12-06 afternoon: the batched copy kernel with 32 KiB blocks and four loads in flight.
# prev = HEAD (batched local copies + one-width checksum + concat's one allocation), new = prev + copy kernel.
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
save() { tail -n +1 $O/sab*.txt > $R/sab-all.txt 2>/dev/null; tail -n +1 $O/old-*.txt $O/new-*.txt > $R/bench.txt 2>/dev/null; }
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_table_gpu test_table_pack test_shuffle_shuffler; do
  timeout 90 "$Z/$t" > "$O/$t.log" 2>&1; echo "$t rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$O/$t.log" | head -8
done
tail -n +1 $O/test_*.log > $R/tests.txt
BINS="prev new" OS="512 2 64" ROUNDS=1 bash "$Z/sab.sh" $O; save
TAG=b BINS="new prev" OS="512" ROUNDS=1 bash "$Z/sab.sh" $O; save
TESTS=none BINS="old new" ROUNDS=1 FILTER='BM_DeviceCopy|BM_PartitionAndPack/1024/' bash "$Z/go.sh" $O 2>&1 | grep -v "^none"; save
date -u
rm -f /tmp/ns-512*
SBS=sbs-new bash "$Z/ns.sh" $O 512; cp $O/ns-512.txt $R/ns-new-512.txt
date -u
# issue 19: libfabric shm / tcp at 64 KiB on this 16-core host (the build machine has 2 cores)
nproc; for i in 1 2 3; do for p in shm tcp; do
  LD_LIBRARY_PATH=$Z/fablib timeout 100 "$Z/sbt" --provider $p --chunk 64KiB --verify -r 21 --peer-chunks 256 > $O/fab-$p-$i.txt 2>&1; echo "$p $i rc=$?"; tail -1 $O/fab-$p-$i.txt
done; done
tail -n +1 $O/fab-*.txt > $R/fabric.txt
date -u
