#!/usr/bin/env bash
# spillway-run end to end, without MPI: the environment each rank gets, --tag-output, -x, a
# failing rank stopping the others (exit code passed on, promptly), bad flags (exit 2), and no
# bootstrap directory left behind. Usage: test_spillway_run.sh path/to/spillway-run
set -uo pipefail
run=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp
fail() { echo "FAIL: $*"; exit 1; }

# Every rank sees its place; lines are tagged with the rank; -x reaches every rank.
out=$("$run" -n 3 --tag-output -x GREETING=hello -- \
  sh -c 'echo "$GREETING rank=$SPILLWAY_RUN_RANK of $SPILLWAY_RUN_NRANKS token=${SPILLWAY_RUN_TOKEN:+set}"') \
  || fail "a clean run exited with $?"
for r in 0 1 2; do
  grep -qx "\[$r\] hello rank=$r of 3 token=set" <<<"$out" || fail "no tagged line of rank $r in: $out"
done
[ -z "$(ls -A "$tmp")" ] || fail "the bootstrap directory was left behind: $(ls -A "$tmp")"

# Rank 1 fails: the others (sleeping) are stopped and its exit code comes back, in seconds.
start=$(date +%s)
"$run" -n 3 -- sh -c 'if [ "$SPILLWAY_RUN_RANK" = 1 ]; then exit 3; fi; sleep 60' 2>"$tmp.err"
rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" -eq 3 ] || fail "a failing rank gave exit code $rc, expected 3"
[ "$took" -lt 20 ] || fail "stopping the other ranks took ${took} s"
grep -q "rank 1 exited with code 3" "$tmp.err" || fail "no message naming the failed rank: $(cat "$tmp.err")"
[ -z "$(ls -A "$tmp")" ] || fail "the bootstrap directory was left behind after a failure"

# A program that cannot be run fails the launch.
"$run" -n 2 -- /nonexistent/program 2>/dev/null
[ $? -eq 127 ] || fail "a missing program did not give exit code 127"

# Bad flags: a usage message and exit code 2.
for args in "-n 0 -- true" "-n x -- true" "--bind-to socket -- true" "-x NOVALUE -- true" \
            "--frobnicate -- true" "-n 2"; do
  # shellcheck disable=SC2086
  "$run" $args >/dev/null 2>"$tmp.err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "'spillway-run $args' exited with $rc, expected 2"
  grep -q "usage:" "$tmp.err" || fail "'spillway-run $args' printed no usage"
done
rm -f "$tmp.err"
echo "spillway-run: all checks passed"
