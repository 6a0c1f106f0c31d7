#!/usr/bin/env bash
# The one script to run on a GPU machine, from the repo root with
# build/gpu carried (made by scripts/gpu-build.sh), or SPILLWAY_BUILD naming the archive of
# scripts/gpu-pack.sh (carried in .carry/): runs every GPU-build test, the spill demo,
# the README's main job (scripts/demo-run.sh) and its C++ example on the GPU, and the memory
# benchmarks; keeps full logs under $OUT and prints a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/spillway-gpu-check}
mkdir -p "$OUT"
source scripts/gpu-env.sh
export NCCL_NVLS_ENABLE=0
only=${1:-all}   # all | tests | bench | comm | shuffle | io
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="timeout 300 mpirun --oversubscribe --bind-to none"  # a hang costs 5 min, not the budget

{ gpu_machine; df -h "$SPILLWAY_BENCH_SPILL_DIR" | tail -1; } | tee "$OUT/machine.txt"

fail=0
summary=()
if [ "$only" = all ] || [ "$only" = tests ]; then
  for t in "$B"/tests/test_*; do
    name=$(basename "$t")
    [[ -f "$t" && -x "$t" && "$name" != *.* && "$name" != *_mpi && "$name" != *_mpi_* && "$name" != *_killed_rank ]] ||
      continue  # MPI programs: under mpirun (ctest runs the killed-rank ones so)
    timeout 300 "$t" > "$OUT/$name.log" 2>&1
    rc=$?
    passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/$name.log" | tail -1)
    skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+(?= test)' "$OUT/$name.log" | tail -1)
    failed=$(grep -oP '\[  FAILED  \] \K[0-9]+(?= test)' "$OUT/$name.log" | tail -1)
    summary+=("$(printf '%-40s rc=%d passed=%s skipped=%s failed=%s' "$name" "$rc" "${passed:-0}" "${skipped:-0}" "${failed:-0}")")
    [ "$rc" -eq 0 ] || { fail=1; tail -30 "$OUT/$name.log"; }
  done
  "$B"/examples/spillway-spill-demo --data 8192 --buffer 64 --device-limit 1024 --host-limit 2048 \
    --threads 4 > "$OUT/spill_demo.log" 2>&1 || { fail=1; tail -30 "$OUT/spill_demo.log"; }
  # The README's main job (scripts/demo.sh runs the same), then its C++ example.
  timeout 300 bash scripts/demo-run.sh "$B" > "$OUT/demo.log" 2>&1 || { fail=1; tail -30 "$OUT/demo.log"; }
  "$B"/examples/spillway-readme-example > "$OUT/readme_example.log" 2>&1 ||
    { fail=1; tail -30 "$OUT/readme_example.log"; }
fi
if [ "$only" = all ] || [ "$only" = bench ]; then
  "$B"/bench/bench_memory --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/bench_memory.json" --benchmark_out_format=json \
    > "$OUT/bench_memory.log" 2>&1 || { fail=1; tail -30 "$OUT/bench_memory.log"; }
  python3 scripts/bench-table.py "$OUT/bench_memory.json" > "$OUT/bench_table.md" || fail=1
  "$B"/bench/bench_table_gpu --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/bench_table_gpu.json" --benchmark_out_format=json \
    > "$OUT/bench_table_gpu.log" 2>&1 || { fail=1; tail -30 "$OUT/bench_table_gpu.log"; }
  python3 scripts/bench-table.py "$OUT/bench_table_gpu.json" | tail -n +3 >> "$OUT/bench_table.md" || fail=1
  # The transfer engine's cuda_ipc copies alone, then between two processes on this GPU.
  "$B"/bench/bench_ipc_copy > "$OUT/bench_ipc_copy.log" 2>&1 || { fail=1; tail -30 "$OUT/bench_ipc_copy.log"; }
  for dst in pinned device; do
    timeout 120 "$B"/tools/spillway-bench-transfer --backend cuda_ipc --src device --dst "$dst" \
      --verify -r 5 > "$OUT/bench_transfer_cuda_ipc_$dst.log" 2>&1 ||
      { fail=1; tail -30 "$OUT/bench_transfer_cuda_ipc_$dst.log"; }
  done
fi

if [ "$only" = all ] || [ "$only" = comm ]; then
  # The MPI suites (device buffers where the GPU tier is live), then spillway-bench-comm against
  # NCCL (device memory) and MPI_Alltoallv (host memory), 2 ranks, 64 KiB to 4 GiB messages.
  # Device buffers between the two processes go through CUDA IPC windows; the second run makes
  # the slots tiny (1 MiB, 4 of them) so that transfers take many pieces and wait for slots;
  # the third turns the windows off, for the staged path that ranks on other nodes take.
  for run in "default:" "small_slots:-x SPILLWAY_MPI_IPC_WINDOW=4MiB -x SPILLWAY_MPI_IPC_SLOT=1MiB" \
             "staged:-x SPILLWAY_MPI_IPC_WINDOW=0"; do
    for t in test_comm_mpi test_shuffle_mpi; do
      log="$OUT/${t}_np2_${run%%:*}.log"
      $MPIRUN -np 2 ${run#*:} "$B/tests/$t" --gtest_color=no > "$log" 2>&1
      rc=$?
      summary+=("$(printf '%-40s rc=%d passed=%s' "$t (mpirun -np 2, ${run%%:*})" "$rc" \
        "$(grep -oP '\[  PASSED  \] \K[0-9]+' "$log" | head -1)")")
      [ "$rc" -eq 0 ] || { fail=1; tail -30 "$log"; }
    done
  done
  for size in 64KiB 1MiB 16MiB 256MiB 1GiB 4GiB; do
    for how in "local device" "mpi device" "mpi host"; do
      set -- $how
      log="$OUT/bench_comm_$1_$2.log"
      echo "== -C $1 -t $2 -s $size" >> "$log"
      if [ "$1" = local ]; then
        timeout 120 "$B"/tools/spillway-bench-comm -C local --ranks 2 -t "$2" -s "$size" -r 10 -w 3 >> "$log" 2>&1
      else
        $MPIRUN -np 2 "$B"/tools/spillway-bench-comm -C mpi -t "$2" -s "$size" -r 10 -w 3 >> "$log" 2>&1
      fi || { fail=1; tail -20 "$log"; }
    done
  done
fi

if [ "$only" = all ] || [ "$only" = shuffle ]; then
  # The MPI shuffle suite with device buffers, then spillway-bench-shuffle at 20 GiB per rank
  # (20 GiB per rank, one rank per GPU): -C local pre-partitioned and hashed, each with direct
  # chunks (the default at -p 1) and with packed chunks (--no-direct), hashed also with every
  # partition packed before any is sent (--pack-first), -C mpi under mpirun; then the spill
  # sweep (kept as one archive).
  gpus=$(nvidia-smi -L | wc -l)
  $MPIRUN -np 2 "$B/tests/test_shuffle_mpi" --gtest_color=no > "$OUT/test_shuffle_mpi_np2.log" 2>&1 \
    || { fail=1; tail -40 "$OUT/test_shuffle_mpi_np2.log"; }
  summary+=("$(printf '%-40s passed=%s' "test_shuffle_mpi (mpirun -np 2)" \
    "$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/test_shuffle_mpi_np2.log" | head -1)")")
  S="$B/tools/spillway-bench-shuffle"
  A="-c 10 -n 536870912 -p 1 -o 2 -s -x -m pool -r 10 -w 3"
  for run in "local_g:-g" "local_g_packed:-g --no-direct" "local_hash:" \
             "local_hash_packed:--no-direct" "local_hash_pack_first:--pack-first"; do
    name=${run%%:*}
    timeout 300 "$S" -C local --ranks "$gpus" $A ${run#*:} --json "$OUT/shuffle_$name.json" \
      > "$OUT/shuffle_$name.log" 2>&1 || { fail=1; tail -20 "$OUT/shuffle_$name.log"; }
  done
  for run in "mpi_g:-g" "mpi_hash:"; do
    name=${run%%:*}
    $MPIRUN -np "$gpus" "$S" -C mpi $A ${run#*:} --json "$OUT/shuffle_$name.json" \
      > "$OUT/shuffle_$name.log" 2>&1 || { fail=1; tail -20 "$OUT/shuffle_$name.log"; }
  done
  RANKS=$gpus BENCH="$S" SWEEP_TIMEOUT=200 bash scripts/spill-sweep.sh "$OUT/sweep" \
    > "$OUT/sweep.log" 2>&1 || { fail=1; tail -30 "$OUT/sweep.log"; }
  cp "$OUT/sweep/sweep-device.md" "$OUT/sweep.md" 2>/dev/null
  tar czf "$OUT/sweep.tgz" -C "$OUT" sweep && rm -rf "$OUT/sweep"
fi

if [ "$only" = all ] || [ "$only" = io ]; then
  # spillway-readspeed on a 4 GiB file in the page cache: into device memory (sweep, then
  # --tune) beside the pinned H2D ceiling, the numpy + torch baseline, into host memory.
  f=${SPILLWAY_READ_FILE:-/tmp/spillway-read-4g.bin}
  [ -f "$f" ] || python3 -c "import numpy as np; np.random.default_rng(1).integers(0, 2**63, size=512 * 2**20, dtype=np.int64).tofile('$f')"
  cat "$f" > /dev/null
  R="$B/tools/spillway-readspeed"
  {
    timeout 120 "$R" --files "$f" --target device --threads 1,2,4,8,16,32 --runs 5
    timeout 200 "$R" --files "$f" --target device --tune --runs 3
    timeout 60 python3 bench/read_numpy_torch.py "$f" 5
    timeout 120 "$R" --files "$f" --target host --threads 1,2,4,8,16,32 --runs 5
  } > "$OUT/readspeed.log" 2>&1 || { fail=1; tail -20 "$OUT/readspeed.log"; }
fi

echo
echo "== tests =="
printf '%s\n' "${summary[@]}"
[ -f "$OUT/spill_demo.log" ] && { echo "== spill demo =="; grep -E "inserted|verified|^(DEVICE|PINNED_HOST|HOST|DISK) |directory" "$OUT/spill_demo.log"; }
[ -f "$OUT/demo.log" ] && { echo "== demo (scripts/demo-run.sh) =="; grep -E "^\+ |^spillway-bench-shuffle|^Memory|validated|INVALID|^means|pack-into|unpack-from|recv-into|spill-|copy-|cannot" "$OUT/demo.log"; }
[ -f "$OUT/bench_table.md" ] && { echo "== bench (medians of 5) =="; cat "$OUT/bench_table.md"; }
for log in "$OUT"/bench_comm_*.log; do
  [ -f "$log" ] || continue
  echo "== $(basename "$log" .log) (medians of 10) =="
  grep -E "^== |median|ratio" "$log"
done
for log in "$OUT"/shuffle_*.log; do
  [ -f "$log" ] || continue
  echo "== $(basename "$log" .log) =="
  grep -E "^spillway-bench-shuffle|^means|^medians|INVALID|FAILED" "$log"
done
[ -f "$OUT/sweep.md" ] && { echo "== spill sweep =="; cat "$OUT/sweep.md"; }
[ -f "$OUT/readspeed.log" ] && { echo "== readspeed =="; cat "$OUT/readspeed.log"; }
echo "gpu-check: $([ $fail -eq 0 ] && echo OK || echo FAILED)"
exit $fail
