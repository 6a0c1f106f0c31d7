#!/usr/bin/env bash
# Two ranks of a program on the transfer communicator (libfabric tcp), one in each of two
# network namespaces joined by a veth pair, which this script makes (and removes): ranks on
# two hosts, as far as the communicator can tell. They meet as spillway-run's ranks do, through
# files in a directory both see. Exits 77 (skipped) where namespaces cannot be made.
# Usage: netns.sh PROGRAM [ARGS...]
set -uo pipefail
source "$(dirname "$0")/../netns_pair.sh"
netns_pair_up
rank() {  # rank, namespace, address
  ip netns exec "$2" env SPILLWAY_RUN_RANK="$1" SPILLWAY_RUN_NRANKS=2 SPILLWAY_RUN_DIR="$dir" \
    SPILLWAY_RUN_TOKEN=netns SPILLWAY_TEST_COMM=transfer \
    SPILLWAY_TRANSFER_BACKEND=libfabric SPILLWAY_TRANSFER_PROVIDER=tcp \
    SPILLWAY_TRANSFER_ADDRESS="$3" "${@:4}"
}
rank 1 "$ns_b" "$addr_b" "$@" &
target_pid=$!
rank 0 "$ns_a" "$addr_a" "$@"
rc=$?
wait "$target_pid"
trc=$?
target_pid=""
echo "netns: rank 0 exited $rc, rank 1 $trc"
[ "$rc" -eq 0 ] && [ "$trc" -eq 0 ]
