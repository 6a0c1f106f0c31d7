#!/usr/bin/env bash
# A shuffle of many small chunks stays within its HOST limit in resident memory, not only in
# what it charges. `-n 1048576 -p 8 -o 2048 --host-limit 12` (2 local ranks, 32 768 chunks of
# about 100 B) printed a host peak of 6.46 MiB at a maximum RSS of 749 MB (each chunk took a
# page, and each page-aligned block a heap header's page more). The bound: the same run with
# one output partition, plus both ranks' limits, plus 1.5 KiB of bookkeeping per chunk (its
# Buffer, metadata and queue entries, which are not HOST-tier memory).
#   bench_shuffle_rss.sh PATH-TO-spillway-bench-shuffle
set -euo pipefail
bench=${1:?usage: bench_shuffle_rss.sh BENCH}
rss_mib() {  # the "process max RSS" the benchmark prints, in MiB
  "$bench" -C local --ranks 2 -n 1048576 -p 8 -o "$1" --host-limit 12 --cpu -r 1 -w 0 |
    tee /dev/stderr | awk -F'process max RSS: ' '/process max RSS/ {
      split($2, a, " "); v = a[1]; u = a[2];
      if (u ~ /^KiB/) v /= 1024; else if (u ~ /^GiB/) v *= 1024; print v }'
}
one=$(rss_mib 1)
many=$(rss_mib 2048)
chunks=$((2 * 8 * 2048))
bound=$(awk -v a="$one" -v c="$chunks" 'BEGIN { print a + 2 * 12 + c * 1.5 / 1024 }')
echo "max RSS: $many MiB with 2048 output partitions, $one MiB with 1; bound $bound MiB"
awk -v m="$many" -v b="$bound" 'BEGIN { exit !(m <= b) }' || {
  echo "FAIL: resident memory beyond the HOST limits and the chunks' bookkeeping"
  exit 1
}
