#!/usr/bin/env bash
# expect_output.sh PATTERN COMMAND [ARGS...]: runs the command, prints its output, and fails
# when it fails or when its output has no line matching PATTERN (grep -E).
set -uo pipefail
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || { echo "expect_output: the command failed with exit code $rc"; exit 1; }
grep -qE -- "$pattern" <<<"$out" || { echo "expect_output: no line matches '$pattern'"; exit 1; }
