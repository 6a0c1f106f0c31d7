#!/usr/bin/env bash
# spillway-bench-transfer over libfabric tcp between two network namespaces joined by a veth
# pair, which this script makes (and removes). Exits 77 (skipped) where namespaces cannot be
# made (no root, no iproute2, a sandbox that forbids them).
set -uo pipefail
bench="$1"
shift
ns_a="spw-a-$$"
ns_b="spw-b-$$"
dir="$(mktemp -d /tmp/spillway-netns-XXXXXX)"
cleanup() {
  [ -n "${target_pid:-}" ] && kill "$target_pid" 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
if ! command -v ip >/dev/null || ! ip netns add "$ns_a" 2>/dev/null; then
  echo "netns: cannot make network namespaces here: skipped"
  exit 77
fi
ip netns add "$ns_b" &&
  ip link add "veth-a-$$" type veth peer name "veth-b-$$" &&
  ip link set "veth-a-$$" netns "$ns_a" &&
  ip link set "veth-b-$$" netns "$ns_b" &&
  ip -n "$ns_a" addr add 10.231.0.1/24 dev "veth-a-$$" &&
  ip -n "$ns_b" addr add 10.231.0.2/24 dev "veth-b-$$" &&
  ip -n "$ns_a" link set "veth-a-$$" up && ip -n "$ns_b" link set "veth-b-$$" up &&
  ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || {
  echo "netns: cannot set up the veth pair: skipped"
  exit 77
}
ip netns exec "$ns_b" "$bench" --provider tcp --address 10.231.0.2 --rendezvous "$dir" \
  --role target "$@" &
target_pid=$!
ip netns exec "$ns_a" "$bench" --provider tcp --address 10.231.0.1 --rendezvous "$dir" \
  --role initiator "$@"
rc=$?
wait "$target_pid"
trc=$?
target_pid=""
[ "$rc" -eq 0 ] && [ "$trc" -eq 0 ]
