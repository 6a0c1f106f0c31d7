#!/usr/bin/env bash
# The headline GPU figures of bench/results/, each beside its ceiling or peer in the same run,
# in one call of under ten minutes. Run on a GPU machine from the repo root, with build/gpu
# there or SPILLWAY_BUILD naming scripts/gpu-pack.sh's archive:
#   SPILLWAY_BUILD=.carry/gpu-build.tar.xz bash scripts/headline-figures.sh [all|partition|shuffle|transfer|cpu]
# Keeps every output under $OUT/headline (or OUT_DIR) and prints the lines that hold figures:
# - partition: bench_table_gpu, partition_and_pack at 2-4096 partitions, hash_partition, the
#   int64-key, string and Zipf tables, as fractions of a device copy (two rounds of 3 repetitions);
# - shuffle: the hashed shuffle at -o 2 / 64 / 512 in turn (two rounds; -o 64 and -o 512 read
#   as fractions of -o 2), and the many-small-chunks command;
# - transfer: cuda_ipc device -> pinned (the target copies), device -> shared (pinned memory of
#   a memfd, written one-sided by the initiator) and device -> device, 4 KiB / 64 KiB / 1 MiB
#   chunks, as fractions of one contiguous write of the same bytes (three invocations each
#   with the writes waited by Ticket::wait and by Ticket::spin_wait);
# - cpu: hash_partition at 64 and 1024 partitions on 1 and all cores, as fractions of a memcpy
#   by the same threads.
set -uo pipefail
cd "$(dirname "$0")/.."
only=${1:-all}
case $only in all | partition | shuffle | transfer | cpu) ;; *)
  echo "headline-figures: unknown section '$only' (all, partition, shuffle, transfer or cpu)" >&2
  exit 2 ;;
esac
source scripts/gpu-env.sh
O=${OUT_DIR:-${OUT:-/tmp}/headline}
mkdir -p "$O"
gpu_machine | tee "$O/machine.txt"

# run NAME LIMIT command...: its output in $O/NAME.txt, a line with its exit status.
run() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$O/$name.txt" 2>&1
  echo "-- $name rc=$?"
}
medians() { grep -E "_median" "$1" | sed -E 's/ +/ /g; s/min_time:[0-9.]+\/manual_time_median//'; }
want() { [ "$only" = all ] || [ "$only" = "$1" ]; }

if want partition; then
  f='BM_DeviceCopy|BM_PartitionAndPack/(2|4|8|16|64|256|1024|4096)/|BM_HashPartition/(64|1024|4096)/'
  f+='|BM_PartitionAndPackOf/4096/'
  for r in 1 2; do
    run "partition-$r" 200 "$B/bench/bench_table_gpu" --benchmark_filter="$f" \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
    medians "$O/partition-$r.txt" | sed -E 's/ (TB\/s|bytes_per_second)=[^ ]+//g'
  done
fi

if want shuffle; then
  for r in 1 2; do
    for o in 2 64 512; do
      run "shuffle-o$o-$r" 60 "$B/tools/spillway-bench-shuffle" -C local --ranks 2 -c 10 \
        -n 200000000 -p 1 -o "$o" -s -m pool -r 3 -w 1
      grep -E "^medians" "$O/shuffle-o$o-$r.txt"
    done
  done
  run small-chunks 90 "$B/tools/spillway-bench-shuffle" -C local --ranks 2 -c 4 -n 50000000 -g \
    -p 64 -o 64 -l 3000 -s -r 2 -w 1
  grep -E "^medians|shuffle-chunks:" "$O/small-chunks.txt"
fi

if want transfer; then
  for r in 1 2 3; do
    for dst in pinned shared device; do
      for w in sleep spin; do
        run "cuda-ipc-$dst-$w-$r" 60 "$B/tools/spillway-bench-transfer" --backend cuda_ipc \
          --src device --dst "$dst" --chunk 4KiB,64KiB,1MiB --verify -r 5 --wait "$w"
        grep -E "KiB|MiB" "$O/cuda-ipc-$dst-$w-$r.txt" | tail -3 | sed -E 's/ +/ /g'
      done
    done
  done
fi

if want cpu; then
  run cpu 150 "$B/bench/bench_table" --benchmark_filter="BM_HashPartition(1024)?/(1|$(nproc))/" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  medians "$O/cpu.txt"
fi
date -u +"done: %Y-%m-%dT%H:%M:%SZ"
