#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/fuzz_*.cpp, one per trust boundary), each for the given
# time, from its corpus in fuzz/corpus/<target>/ (new inputs go to a scratch folder, not the
# repository), then replays each target's regression inputs (fuzz/regressions/<target>/:
# every input a fuzz run ever failed on). Prints per target the executions, the coverage and
# the findings, and exits 1 if any target found anything or any regression fails.
#   scripts/fuzz.sh [MINUTES]             # default 1 minute per target
#   scripts/fuzz.sh --seconds N           # N seconds per target (the test command's run)
#   scripts/fuzz.sh ... --merge           # also merge new coverage into fuzz/corpus (minimised)
#   scripts/fuzz.sh ... --seed            # first remake the seeds (make_corpus) into the corpora
#   scripts/fuzz.sh ... -- TARGET...      # only these targets (unpack wire bootstrap spill arrow options)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
merge=0
seed=0
targets=(unpack wire bootstrap spill arrow options)
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --merge) merge=1; shift ;;
    --seed) seed=1; shift ;;
    --) shift; targets=("$@"); break ;;
    *[!0-9]*) echo "fuzz.sh: unknown argument '$1' (see the comment at the top)" >&2; exit 2 ;;
    *) seconds=$(( $1 * 60 )); shift ;;
  esac
done
if [ ! -x build/fuzz/fuzz/fuzz_unpack ] || [ "${FUZZ_REBUILD:-1}" = 1 ]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$(nproc)" >/dev/null
fi
if [ $seed = 1 ]; then
  ./build/fuzz/fuzz/make_corpus fuzz/corpus
fi
max_len() {
  case "$1" in unpack|spill) echo 70000 ;; *) echo 4096 ;; esac
}
status=0
rows=()
for t in "${targets[@]}"; do
  bin=build/fuzz/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz.sh: no target '$t'" >&2; exit 2; }
  work=$(mktemp -d)
  art=$(mktemp -d)
  log=$work.log
  mkdir -p "fuzz/corpus/$t"
  rc=0
  # An input slower than 20 s is a finding (a timeout); slower than libFuzzer's default 10 s
  # alone is not, so that a loaded machine cannot fail the run.
  "$bin" -max_total_time="$seconds" -max_len="$(max_len "$t")" -rss_limit_mb=4096 -timeout=20 \
    -report_slow_units=20 \
    -print_final_stats=1 -artifact_prefix="$art/" "$work" "fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" | tail -1 || true)
  cov=$(grep -oP 'cov: \K[0-9]+' "$log" | tail -1 || true)
  findings=$(find "$art" -type f | wc -l)
  if [ $rc -ne 0 ] || [ "$findings" -ne 0 ]; then
    status=1
    echo "=== fuzz_$t FAILED (rc $rc, $findings finding(s) in $art; add each to fuzz/regressions/$t/) ==="
    grep -E "ERROR|runtime error|SUMMARY|deadly|Test unit written" "$log" | head -20
  fi
  regress=0
  if compgen -G "fuzz/regressions/$t/*" >/dev/null; then
    if ! "$bin" -rss_limit_mb=4096 -timeout=20 fuzz/regressions/"$t"/* >"$log.regress" 2>&1; then
      status=1
      regress=FAILED
      echo "=== fuzz_$t: a regression input fails again ==="
      grep -E "ERROR|runtime error|SUMMARY|Running:" "$log.regress" | tail -10
    else
      regress=$(ls fuzz/regressions/"$t" | wc -l)
    fi
  fi
  if [ $merge = 1 ] && [ $rc -eq 0 ]; then
    merged=$(mktemp -d)
    "$bin" -merge=1 -max_len="$(max_len "$t")" -rss_limit_mb=4096 "$merged" "fuzz/corpus/$t" "$work" \
      >/dev/null 2>&1
    rm -rf "fuzz/corpus/$t" && mv "$merged" "fuzz/corpus/$t"
  fi
  rows+=("$(printf '| fuzz_%-9s | %4s s | %10s | %6s | %8s | %3s | %s |' "$t" "$seconds" \
    "${execs:-?}" "${cov:-?}" "$(ls "fuzz/corpus/$t" | wc -l)" "$findings" "$regress")")
  rm -rf "$work" "$log" "$log.regress"
  [ "$findings" -eq 0 ] && rm -rf "$art"
done
echo
echo "| target          |  time  | executions | coverage | corpus | findings | regressions replayed |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
[ $status -eq 0 ] && echo "fuzz: every target ran clean" || echo "fuzz: FAILED"
exit $status
