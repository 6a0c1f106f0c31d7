#!/usr/bin/env bash
# spillway-bench-shuffle refuses bad flags with exit code 2, before any run: unknown flags,
# numbers that are not, MiB values that would wrap (2^44 MiB is 2^64 bytes, which wrapped to
# 0 B, and 2^44 + 1 to 1 MiB), --ranks with -C single (it ignored them), a --json file that
# cannot be written (reported only after every run before).
#   bench_shuffle_bad_flags.sh PATH-TO-spillway-bench-shuffle
set -u
bench=${1:?usage: bench_shuffle_bad_flags.sh BENCH}
status=0
while IFS= read -r flags; do
  # shellcheck disable=SC2086  # the flags are words
  out=$("$bench" --cpu -n 1000 $flags 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 2 ]; then
    echo "'$flags' exited $rc, not 2"
    status=1
  else
    echo "'$flags': ${out%%$'\n'*}"
  fi
done <<'FLAGS'
-n lots
--frobnicate
--host-limit 17592186044416
--host-limit 17592186044417
--disk-limit 17592186044416
--pinned-reserve 17592186044416
-l 17592186044416
-C single --ranks 3
--json /nonexistent-dir/x.json
FLAGS
exit $status
