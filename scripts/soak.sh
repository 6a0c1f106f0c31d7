#!/usr/bin/env bash
# The soak: hundreds of shuffles of random rank counts, shapes, feeds, skew, HOST limits and
# spill injection on local ranks, then random shapes under mpirun -np 2 and 3; after each
# shuffle every tier's used bytes are back to zero and no spill file or directory is left, and
# over the run the resident memory does not grow (tests/shuffle/test_soak.cpp and the MPI
# soak in test_shuffler_mpi.cpp). The test command runs a short one (100 and 10 shuffles).
#   scripts/soak.sh [BUILD_DIR] [SHUFFLES]      (default build/gpu, 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/gpu}
n=${2:-1000}
export SPILLWAY_SOAK_SHUFFLES=$n
"$build/tests/test_shuffle_soak"
if command -v mpirun >/dev/null && [ -x "$build/tests/test_shuffle_mpi" ]; then
  for np in 2 3; do
    OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --allow-run-as-root --oversubscribe -np "$np" \
      "$build/tests/test_shuffle_mpi" --gtest_filter='*Soak*'
  done
fi
echo "soak: $n shuffles passed"
