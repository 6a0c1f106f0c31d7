#!/bin/bash
# The GPU hashed shuffle, binaries A/B alternating: BINS="old new" OS="2 64 512" ROUNDS=n bash sab.sh OUT
Z=$(cd "$(dirname "$0")" && pwd)
O=${1:-/tmp/o}; mkdir -p "$O"
export LD_LIBRARY_PATH=$Z/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for r in $(seq "${ROUNDS:-2}"); do
  for o in ${OS:-2 64 512}; do
    for b in ${BINS:-old new}; do
      timeout 120 "$Z/sbs-$b" -C local --ranks 2 -c 10 -n 200000000 -p 1 -o $o -s -m pool -r 3 -w 1 $EXTRA > "$O/sab${TAG}-$b-o$o-$r.txt" 2>&1
      echo "$b -o $o round $r rc=$? $(grep -E '^medians' "$O/sab${TAG}-$b-o$o-$r.txt")"
    done
  done
done
