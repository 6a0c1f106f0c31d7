#!/usr/bin/env bash
# The GPU shuffle with its output kept (no -s) under device limits down to 0.4 of each rank's
# input: 2 ranks (-C local; -C mpi under mpirun and under spillway-run), -o 4 and -o 16, every
# run validated. Prints one line per run set: the limit, the median time, the peak device
# memory beside the limit, and whether every run validated. Run on the GPU machine from the
# repo root (SPILLWAY_BUILD as for scripts/gpu-check.sh); logs under $OUT.
#   scripts/kept-output.sh [ROWS]   (rows per rank, default 100000000: 3.73 GiB of -c 10)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/spillway-kept-output}
mkdir -p "$OUT"
source scripts/gpu-env.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rows=${1:-100000000}
input_mib=$((rows * 40 / 1048576))
S="$B/tools/spillway-bench-shuffle"
gpu_machine
echo "input per rank: $input_mib MiB (-c 10 -n $rows)"
printf '%-10s %-4s %-12s %-10s %-28s %s\n' comm -o limit seconds "peak device / limit" verdict
status=0
run() {  # comm, out_parts, limit ("none" or MiB), command...
  local comm=$1 o=$2 limit=$3
  shift 3
  local log="$OUT/kept-$comm-o$o-$limit.log"
  timeout 240 "$@" > "$log" 2>&1
  local rc=$?
  local verdict=validated
  if [ "$rc" -ne 0 ] || grep -qE "INVALID|FAILED|rror" "$log"; then verdict="FAILED rc=$rc"; status=1; fi
  [ "$(grep -c '| validated' "$log")" -ge 3 ] || { verdict="FAILED (runs not validated)"; status=1; }
  printf '%-10s %-4s %-12s %-10s %-28s %s\n' "$comm" "$o" "$limit" \
    "$(grep -oP '^medians: elapsed \K[0-9.]+' "$log")" \
    "$(grep -oP 'device memory peak: \K[^|]+' "$log" | head -1) / $limit" "$verdict"
  [ "$verdict" = validated ] || tail -5 "$log"
}
args=(-c 10 -n "$rows" -r 3 -w 1)
for o in 4 16; do
  for f in none 0.8 0.6 0.4; do
    lim=()
    limit=none
    if [ "$f" != none ]; then
      limit=$(python3 -c "print(int($input_mib * $f))")
      lim=(-l "$limit")
    fi
    run local "$o" "$limit" "$S" -C local --ranks 2 -p 4 -o "$o" "${args[@]}" "${lim[@]}"
  done
done
limit=$(python3 -c "print(int($input_mib * 0.4))")
run mpirun 4 "$limit" mpirun --oversubscribe --bind-to none -np 2 "$S" -C mpi -p 4 -o 4 \
  "${args[@]}" -l "$limit"
run spw-run 4 "$limit" "$B/tools/spillway-run" -n 2 -g 0 -- "$S" -C mpi -p 4 -o 4 "${args[@]}" \
  -l "$limit"
exit $status
