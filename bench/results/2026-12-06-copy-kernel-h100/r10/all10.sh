#!/bin/bash
# HEAD (44d3914): the GPU tests that go through the copy kernel, concat, pack and the Shuffler.
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in $(ls $Z/t); do
  timeout 150 "$Z/t/$t" > "$O/$t.log" 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' $O/$t.log | tr '\n' ' ')"
done
tail -n +1 $O/*.log > $R/tests.txt
date -u
