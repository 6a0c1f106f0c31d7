#!/usr/bin/env bash
# spillway-run end to end, without MPI: the environment each rank gets, --tag-output, -x, a
# failing rank stopping the others (exit code passed on, promptly), bad flags (exit 2), and no
# bootstrap directory, rank, ompi-server or spill directory left behind however the launch
# ends (SIGKILL or SIGHUP to the launcher, a failed pipe()). With spillway-bench-shuffle as
# the second argument, also an MPI launch where a rank exits 0 without joining: the others
# fail at once instead of waiting forever.
# Usage: test_spillway_run.sh path/to/spillway-run [path/to/spillway-bench-shuffle]
set -uo pipefail
run=$1
bench=${2:-}
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

# Nothing of a launch outlives it: its directory, its ranks (sleep 37), its ompi-server (whose
# arguments name the directory; zombies waiting for init to reap them do not count).
left_behind() {
  ls -A "$tmp"
  ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -F -e "$tmp/spillway-run" -e "sleep 37" | grep -v grep
}
expect_nothing_left() {
  for _ in $(seq 100); do
    [ -z "$(left_behind)" ] && return 0
    sleep 0.1
  done
  fail "$1: left behind: $(left_behind)"
}
for sig in KILL HUP; do
  "$run" -n 3 -- sleep 37 2>/dev/null &
  pid=$!
  sleep 1
  kill -$sig $pid
  wait $pid 2>/dev/null
  rc=$?
  [ "$sig" != HUP ] || [ "$rc" -eq 129 ] || fail "SIGHUP to the launcher gave exit code $rc, expected 129"
  expect_nothing_left "SIGKILL to the launcher"
done

# A pipe that cannot be made (too few file descriptors for 40 ranks' output) fails the launch
# with a message, stopping the ranks already started.
(ulimit -n 24; "$run" -n 40 --tag-output -- sleep 37 >/dev/null 2>"$tmp.err")
rc=$?
[ "$rc" -eq 1 ] || fail "a failed pipe gave exit code $rc, expected 1"
grep -q "Too many open files" "$tmp.err" || fail "no message for the failed pipe: $(cat "$tmp.err")"
rm -f "$tmp.err"
expect_nothing_left "a failed pipe"

# A rank killed outright leaves its (empty) spill directory; the library links it into the
# launch directory and the launcher removes it. The link is made before the directory here:
# the first rank's death stops the other (SIGTERM), which may land between the two steps.
mkdir "$tmp.spill"
"$run" -n 2 -- sh -c 'd='"$tmp.spill"'/spillway-$$-test;
  ln -s "$d" "$SPILLWAY_RUN_DIR/spill-spillway-$$-test" && mkdir "$d" && kill -9 $$' 2>/dev/null
[ -z "$(ls -A "$tmp.spill")" ] || fail "a killed rank's spill directory was left: $(ls -A "$tmp.spill")"
rmdir "$tmp.spill"
expect_nothing_left "a killed rank"

# MPI: a rank that exits 0 without joining makes the others fail at once (they waited forever
# in MPI_Comm_accept), and the error names it.
if [ -n "$bench" ]; then
  start=$(date +%s)
  SPILLWAY_COMM_TIMEOUT=120 "$run" -n 3 -- sh -c \
    'if [ "$SPILLWAY_RUN_RANK" = 2 ]; then exit 0; fi; exec '"$bench"' -C mpi -n 1000 -r 1' \
    >/dev/null 2>"$tmp.err"
  rc=$?
  took=$(( $(date +%s) - start ))
  [ "$rc" -ne 0 ] || fail "the ranks that joined passed without rank 2"
  [ "$took" -lt 60 ] || fail "the ranks noticed rank 2 was gone after ${took} s"
  grep -q "rank 2 exited with code 0 before it published" "$tmp.err" ||
    fail "no message naming rank 2: $(cat "$tmp.err")"
  rm -f "$tmp.err"
  expect_nothing_left "a rank that left before joining"
fi
echo "spillway-run: all checks passed"
