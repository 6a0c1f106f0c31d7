#!/bin/bash
# The GPU suite at cae8025, then the shuffle at -o 2 / 64 / 512 of the same build.
Z=$(cd "$(dirname "$0")" && pwd)
R=$1; mkdir -p $R
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
OUT=/tmp/gc SPILLWAY_BUILD=.carry/gpu-build.tar.xz timeout 330 bash scripts/gpu-check.sh tests > $R/tests.txt 2>&1; echo "gpu-check rc=$?"
grep -E "rc=[1-9]|failed=[1-9]|gpu-check|test_table_gpu " $R/tests.txt | head -20
cp /tmp/spillway-gpu-build/build/gpu/tools/spillway-bench-shuffle $Z/sbs-new
BINS="new" OS="2 64 512" ROUNDS=${ROUNDS:-3} bash $Z/sab.sh /tmp/o > $R/sab.txt 2>&1
cat $R/sab.txt
date -u
