#!/usr/bin/env bash
# The spill sweep of the RapidsMPF article: spillway-bench-shuffle without a limit, then with
# device limits stepping down well below the input size; every run validates its output.
# Writes one JSON file per limit, then the table (Markdown) and a plot (PNG) of throughput
# against the limit (scripts/spill-sweep-report.py; matplotlib is installed if missing).
#
#   scripts/spill-sweep.sh OUTDIR                 # GPU: -l in MiB
#   SWEEP_TIER=host scripts/spill-sweep.sh OUTDIR # CPU path: --host-limit in MiB
# Settings (environment): BENCH (the binary), COMM (local|mpi), RANKS, ARGS, LIMITS (MiB,
# "none" for no limit), MPIRUN (for COMM=mpi).
set -euo pipefail
out=${1:?usage: spill-sweep.sh OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
BENCH=${BENCH:-$here/../build/gpu/tools/spillway-bench-shuffle}
COMM=${COMM:-local}
RANKS=${RANKS:-2}
tier=${SWEEP_TIER:-device}
if [ "$tier" = device ]; then
  ARGS=${ARGS:--c 10 -n 536870912 -p 10 -o 16 -g -s -m pool -r 5 -w 1}
  LIMITS=${LIMITS:-none 32768 28672 24576 20480 16384 12288}
  flag=-l
else
  ARGS=${ARGS:--c 4 -n 4000000 -p 16 -o 16 -g -s -r 3 -w 1 --cpu}
  LIMITS=${LIMITS:-none 64 48 32 16}
  flag=--host-limit
fi
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}
# The plot needs matplotlib (PyPI): install it where it is missing; a machine that cannot
# (no network) still gets the table.
python3 -c "import matplotlib" 2>/dev/null ||
  python3 -m pip install -q matplotlib >/dev/null 2>&1 ||
  echo "spill-sweep: matplotlib is missing and could not be installed: no plot"

status=0
for limit in $LIMITS; do
  json="$out/sweep-$tier-$limit.json"
  lim=()
  [ "$limit" = none ] || lim=("$flag" "$limit")
  echo "== limit $limit MiB: $ARGS ${lim[*]}" | tee "$out/sweep-$tier-$limit.log"
  if [ "$COMM" = mpi ]; then
    cmd=($MPIRUN -np "$RANKS" "$BENCH" -C mpi $ARGS "${lim[@]}" --json "$json")
  else
    cmd=("$BENCH" -C "$COMM" --ranks "$RANKS" $ARGS "${lim[@]}" --json "$json")
  fi
  if ! timeout "${SWEEP_TIMEOUT:-300}" "${cmd[@]}" >> "$out/sweep-$tier-$limit.log" 2>&1; then
    echo "limit $limit: FAILED (see $out/sweep-$tier-$limit.log)"; status=1
    tail -5 "$out/sweep-$tier-$limit.log"
  fi
  grep -E "^means|^medians" "$out/sweep-$tier-$limit.log" || true
done
python3 "$here/spill-sweep-report.py" "$out" "$tier" || status=1
exit $status
