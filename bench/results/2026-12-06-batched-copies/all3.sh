#!/bin/bash
# Issue 27, 2026-12-06 morning: tests, checksum A/B, the shuffle A/B (old = a0d9bfb, mid = d04e334
# batched local copies, chk = + the one-width checksum kernel, new = + concat's one allocation),
# the direct variants at -o 512, the many-small-chunks command, and nsys of new at -o 512.
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
save() { tail -n +1 $O/sab*.txt > $R/sab-all.txt 2>/dev/null; tail -n +1 $O/small-*.txt $O/old-*.txt $O/new-*.txt > $R/small-and-bench.txt 2>/dev/null; }
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_table_gpu test_comm_local; do
  timeout 200 "$Z/$t" > "$O/$t.log" 2>&1; echo "$t rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]" "$O/$t.log" | head -8
done
tail -n +1 $O/test_*.log > $R/tests.txt
BINS="old mid chk new" OS="2 512" ROUNDS=2 bash "$Z/sab.sh" $O; save
BINS="old new" OS="64" ROUNDS=2 bash "$Z/sab.sh" $O; save
TESTS=none BINS="old new" ROUNDS=2 FILTER='BM_DeviceCopy|BM_Checksum|BM_SmallParts' bash "$Z/go.sh" $O 2>&1 | grep -v "^none"; save
TAG=x BINS="new newd newpd" OS="512" ROUNDS=1 bash "$Z/sab.sh" $O; save
for r in 1 2; do for b in old new; do
  timeout 120 "$Z/sbs-$b" -C local --ranks 2 -c 4 -n 50000000 -g -p 64 -o 64 -l 3000 -s -r 2 -w 1 > $O/small-$b-$r.txt 2>&1
  echo "small $b round $r rc=$? $(grep -E '^medians' $O/small-$b-$r.txt)"
done; done; save
date -u
rm -f /tmp/ns-512*; SBS=sbs-new bash "$Z/ns.sh" $O/nsn 512
grep -v "^  rank" $O/nsn/ns-512.txt | grep -v "^Processing\|^Generat\|^Saved\|^Collect\|^+--\|^\s*$" | cut -c1-230 > $R/ns-new-512.txt
date -u
