#!/usr/bin/env bash
# The one script to run on the GPU machine (see shared/GPU.md), from the repo root with
# build/gpu carried (made by scripts/gpu-build.sh): runs every GPU-build test, the spill demo
# on the GPU and the memory benchmarks, keeps full logs under $OUT and prints a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${SPILLWAY_BUILD:-build/gpu}
OUT=${OUT:-/tmp/spillway-gpu-check}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
export SPILLWAY_BENCH_SPILL_DIR=${SPILLWAY_BENCH_SPILL_DIR:-/tmp}
only=${1:-all}   # all | tests | bench

{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "cpus: $(nproc)"; df -h "$SPILLWAY_BENCH_SPILL_DIR" | tail -1
} | tee "$OUT/machine.txt"

fail=0
summary=()
if [ "$only" != bench ]; then
  for t in "$B"/tests/test_*; do
    name=$(basename "$t")
    [[ -f "$t" && -x "$t" && "$name" != *.* ]] || continue
    "$t" > "$OUT/$name.log" 2>&1
    rc=$?
    passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/$name.log" | tail -1)
    skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+(?= test)' "$OUT/$name.log" | tail -1)
    failed=$(grep -oP '\[  FAILED  \] \K[0-9]+(?= test)' "$OUT/$name.log" | tail -1)
    summary+=("$(printf '%-40s rc=%d passed=%s skipped=%s failed=%s' "$name" "$rc" "${passed:-0}" "${skipped:-0}" "${failed:-0}")")
    [ "$rc" -eq 0 ] || { fail=1; tail -30 "$OUT/$name.log"; }
  done
  "$B"/examples/spillway-spill-demo --data 8192 --buffer 64 --device-limit 1024 --host-limit 2048 \
    --threads 4 > "$OUT/demo.log" 2>&1 || { fail=1; tail -30 "$OUT/demo.log"; }
fi
if [ "$only" != tests ]; then
  "$B"/bench/bench_memory --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/bench_memory.json" --benchmark_out_format=json \
    > "$OUT/bench_memory.log" 2>&1 || { fail=1; tail -30 "$OUT/bench_memory.log"; }
  python3 scripts/bench-table.py "$OUT/bench_memory.json" > "$OUT/bench_table.md" || fail=1
  "$B"/bench/bench_table_gpu --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/bench_table_gpu.json" --benchmark_out_format=json \
    > "$OUT/bench_table_gpu.log" 2>&1 || { fail=1; tail -30 "$OUT/bench_table_gpu.log"; }
  python3 scripts/bench-table.py "$OUT/bench_table_gpu.json" | tail -n +3 >> "$OUT/bench_table.md" || fail=1
fi

echo
echo "== tests =="
printf '%s\n' "${summary[@]}"
[ -f "$OUT/demo.log" ] && { echo "== demo =="; grep -E "inserted|verified|^(DEVICE|PINNED_HOST|HOST|DISK) |directory" "$OUT/demo.log"; }
[ -f "$OUT/bench_table.md" ] && { echo "== bench (medians of 5) =="; cat "$OUT/bench_table.md"; }
echo "gpu-check: $([ $fail -eq 0 ] && echo OK || echo FAILED)"
exit $fail
