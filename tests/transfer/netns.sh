#!/usr/bin/env bash
# spillway-bench-transfer over libfabric tcp between two network namespaces joined by a veth
# pair, which this script makes (and removes). Exits 77 (skipped) where namespaces cannot be
# made (no root, no iproute2, a sandbox that forbids them).
set -uo pipefail
bench="$1"
shift
source "$(dirname "$0")/../netns_pair.sh"
netns_pair_up
ip netns exec "$ns_b" "$bench" --provider tcp --address "$addr_b" --rendezvous "$dir" \
  --role target "$@" &
target_pid=$!
ip netns exec "$ns_a" "$bench" --provider tcp --address "$addr_a" --rendezvous "$dir" \
  --role initiator "$@"
rc=$?
wait "$target_pid"
trc=$?
target_pid=""
[ "$rc" -eq 0 ] && [ "$trc" -eq 0 ]
