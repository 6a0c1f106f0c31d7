#!/usr/bin/env bash
# Runs a command N times and counts the runs that fail (exit code not 0, or past the time limit),
# for the cases that passed once and failed now and then: limits that fit depending on the
# run, reused op ids, peers failing. Prints each failure's last lines and a summary; exits 1 if
# any run failed.
#   scripts/repeat.sh [-n N] [-t SECONDS] [--name NAME] -- command [args...]
# Or the named cases of the shuffle under load and at tight limits (see `cases` below):
#   scripts/repeat.sh [-n N] --cases BUILD_DIR
set -uo pipefail
n=20
limit=300
name=""
cases=""
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    -t) limit=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "repeat.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
case $n in '' | *[!0-9]* | 0) echo "repeat.sh: -n takes a whole number > 0, got '$n'" >&2; exit 2 ;; esac

repeat() {  # repeat NAME command...: N runs, one summary line
  local what=$1 failed=0 out rc start
  shift
  start=$(date +%s.%N)
  for i in $(seq "$n"); do
    out=$(timeout "$limit" "$@" 2>&1)
    rc=$?
    if [ $rc -ne 0 ]; then
      failed=$((failed + 1))
      echo "--- $what: run $i of $n failed (exit $rc):"
      echo "$out" | tail -5
    fi
  done
  local secs
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "$what: $((n - failed)) of $n passed ($secs s)"
  [ $failed -eq 0 ]
}

if [ -z "$cases" ]; then
  [ $# -gt 0 ] || { echo "repeat.sh: no command (after --) and no --cases" >&2; exit 2; }
  repeat "${name:-$*}" "$@"
  exit
fi

# The cases that once failed now and then, each at the limits that showed it (4194304 rows, 16 x 16 partitions,
# spilling on): they failed 10 of 70, 10 of 20 and 5 of 40 runs.
bench=$cases/tools/spillway-bench-shuffle
run=$cases/tools/spillway-run
flags=(-n 4194304 -p 16 -o 16 -s --cpu -r 1 -w 0)
status=0
repeat "2 local ranks, --host-limit 4" "$bench" -C local --ranks 2 "${flags[@]}" --host-limit 4 || status=1
repeat "3 local ranks, --host-limit 5" "$bench" -C local --ranks 3 "${flags[@]}" --host-limit 5 || status=1
if command -v mpirun >/dev/null && [ -x "$run" ]; then
  repeat "mpirun -np 3, --host-limit 5" mpirun --allow-run-as-root --oversubscribe -np 3 \
    "$bench" -C mpi "${flags[@]}" --host-limit 5 || status=1
  repeat "spillway-run -n 3, --host-limit 6" "$run" -n 3 -- \
    "$bench" -C mpi "${flags[@]}" --host-limit 6 || status=1
fi
# 500 shuffles on one op id, local ranks and MPI (the tests; one run each per repetition).
tests=$cases/tests
repeat "500 shuffles on one op id, 2 and 3 local ranks" \
  "$tests/test_shuffle_shuffler" --gtest_filter='*ReusedOpId*' || status=1
if command -v mpirun >/dev/null && [ -x "$tests/test_shuffle_mpi" ]; then
  repeat "500 shuffles on one op id, mpirun -np 3" mpirun --allow-run-as-root --oversubscribe \
    -np 3 "$tests/test_shuffle_mpi" --gtest_filter='*FiveHundred*' || status=1
fi
exit $status
