#!/bin/bash
# Timeline and statistics of the GPU hashed shuffle at -o 2 / 64 / 512 (issue 27)
Z=$(cd "$(dirname "$0")" && pwd)
O=${1:-/tmp/o}; mkdir -p "$O"
export LD_LIBRARY_PATH=$Z/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for o in ${OS:-2 64 512}; do
  echo "===== -o $o"
  timeout 120 "$Z/${SBS:-spillway-bench-shuffle}" -C local --ranks 2 -c 10 -n 200000000 -p 1 -o $o -s -m pool -r 3 -w 1 --timeline $EXTRA > "$O/tl-$o.txt" 2>&1
  echo "rc=$?"; grep -E "^medians|^ - " "$O/tl-$o.txt"
  for rk in 0 1; do
    grep -E "^  rank $rk " "$O/tl-$o.txt" | awk -v rk=$rk '
      /inserted/ {ins=$3} /complete/ {n++; if (!fc) fc=$3; lc=$3; c[n]=$3} /concatenated/ {lcat=$3} /summed/ {ls=$3}
      /all partitions extracted/ {ax=$3} /done/ {d=$3}
      END {printf "rank %d: inserted %s | complete first %s, 25%% %s, 50%% %s, 75%% %s, last %s (%d) | last concat %s | last summed %s | extracted %s | done %s\n", rk, ins, fc, c[int(n/4)], c[int(n/2)], c[int(3*n/4)], lc, n, lcat, ls, ax, d}'
  done
done
date -u
