#!/bin/bash
Z=$(cd "$(dirname "$0")" && pwd)
O=${1:-/tmp/o}; mkdir -p "$O"
export LD_LIBRARY_PATH=$Z/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
date -u +"%Y-%m-%dT%H:%M:%SZ UTC"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_shuffle_shuffler test_shuffle_shuffler_batches test_shuffle_soak test_shuffle_wire test_ops_hash_join; do
  timeout 300 "$Z/$t" > "$O/$t.log" 2>&1; echo "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$O/$t.log" | tr '\n' ' ')"
done
timeout 200 mpirun --oversubscribe --bind-to none -np 2 "$Z/test_shuffle_mpi" > "$O/mpi.log" 2>&1; echo "test_shuffle_mpi np2 rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$O/mpi.log" | head -2 | tr '\n' ' ')"
for r in $(seq "${ROUNDS:-2}"); do
  for o in 2 64 512; do
    for b in old new; do
      echo -n "round $r -o $o $b: "
      timeout 120 "$Z/sbs-$b" -C local --ranks 2 -c 10 -n 200000000 -p 1 -o $o -s -m pool -r 3 -w 1 > "$O/sh-$b-$o-$r.txt" 2>&1
      echo "rc=$? $(grep -E '^medians' "$O/sh-$b-$o-$r.txt")"
    done
  done
done
for b in old new; do
  echo -n "mpi -o 64 $b: "
  timeout 120 mpirun --oversubscribe --bind-to none -np 2 "$Z/sbs-$b" -C mpi -c 10 -n 200000000 -p 1 -o 64 -s -m pool -r 3 -w 1 > "$O/shm-$b.txt" 2>&1
  echo "rc=$? $(grep -E '^medians' "$O/shm-$b.txt" | head -1)"
done
date -u
