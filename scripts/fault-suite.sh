#!/usr/bin/env bash
# The transfer engine's fault suite at scale: test_transfer_faults with ROUNDS rounds per
# provider (default 200): a peer process killed at a random point of 10 000-chunk batches,
# a live peer transferring throughout, every byte checked, and no run may hang (each provider
# has ROUNDS * 15 s at most). Prints the seed, the rounds and how the killed peers' batches
# ended.
#   scripts/fault-suite.sh [BUILD_DIR] [ROUNDS]   (default build/gpu, else build/cpu)
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-$([ -d build/gpu ] && echo build/gpu || echo build/cpu)}
rounds=${2:-200}
status=0
for provider in tcp shm; do
  index=$([ "$provider" = tcp ] && echo 0 || echo 1)
  log=$(mktemp)
  start=$(date +%s)
  SPILLWAY_FAULT_ROUNDS=$rounds timeout $((rounds * 15)) "$B/tests/test_transfer_faults" \
    --gtest_filter="Providers/FaultSuite.*/$index" > "$log" 2>&1
  rc=$?
  echo "$provider: rc=$rc in $(($(date +%s) - start)) s | $(grep -E '^fault suite' "$log")" \
    "| $(grep -E 'batches to the killed' "$log")" \
    "| lanes left behind: $(grep -c 'not come back from the provider' "$log")"
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E "Failure|Which is|round [0-9]+" "$log" | head -20
  fi
  rm -f "$log"
done
exit $status
