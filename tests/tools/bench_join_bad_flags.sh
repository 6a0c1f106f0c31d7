#!/usr/bin/env bash
# spillway-bench-join refuses bad flags with exit code 2 and a message naming the flag.
#   bench_join_bad_flags.sh PATH-TO-spillway-bench-join
set -u
bench=${1:?usage: bench_join_bad_flags.sh BENCH}
status=0
while IFS='|' read -r flags want; do
  # shellcheck disable=SC2086  # the flags are words
  out=$("$bench" $flags 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 2 ] || [[ "$out" != *"$want"* ]]; then
    echo "'$flags' exited $rc with '${out%%$'\n'*}', want 2 and '$want'"
    status=1
  else
    echo "'$flags': ${out%%$'\n'*}"
  fi
done <<'FLAGS'
--type full|--type takes inner
-b 0|-b takes a whole number
--skew 2|--skew takes a fraction
--frobnicate|unknown option
-p lots|-p takes a whole number
--device-limit 64|--device-limit needs --gpu
--match 0|--match takes a fraction above 0
--match 1.5|--match takes a fraction above 0
--zipf -1|--zipf takes an exponent
--zipf 1.1 --skew 0.1|--zipf and --skew are two key distributions
--payloads 0|--payloads takes a whole number from 1 to 16
--chunk 0|--chunk takes a whole number
--pageable|--pageable stages pieces
FLAGS
exit $status
