#!/bin/bash
# Issue 27: nsys of head (a8b9c31) at -o 2 and -o 64, to compare the GPU work per run.
Z=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O; R=$1; mkdir -p $R
export LD_LIBRARY_PATH=$Z/lib
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -f /tmp/ns-*
SBS=sbs-head bash "$Z/ns.sh" $O 2 64
tail -n +1 $O/ns-*.txt > $R/ns.txt
date -u
