# Sourced by the tests that run two processes in two network namespaces joined by a veth pair
# (tests/transfer/netns.sh, tests/comm/netns.sh). After `netns_pair_up`, $ns_a (10.231.0.1)
# and $ns_b (10.231.0.2) exist and $dir is an empty directory both see; all of it goes at exit,
# with the pid in $target_pid if set. Exits 77 (skipped) where namespaces cannot be made (no
# root, no iproute2, a sandbox that forbids them).
ns_a="spw-a-$$"
ns_b="spw-b-$$"
addr_a=10.231.0.1
addr_b=10.231.0.2
dir="$(mktemp -d /tmp/spillway-netns-XXXXXX)"
netns_pair_cleanup() {
  [ -n "${target_pid:-}" ] && kill "$target_pid" 2>/dev/null
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$dir"
}
trap netns_pair_cleanup EXIT
netns_pair_up() {
  if ! command -v ip >/dev/null || ! ip netns add "$ns_a" 2>/dev/null; then
    echo "netns: cannot make network namespaces here: skipped"
    exit 77
  fi
  ip netns add "$ns_b" &&
    ip link add "veth-a-$$" type veth peer name "veth-b-$$" &&
    ip link set "veth-a-$$" netns "$ns_a" &&
    ip link set "veth-b-$$" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$addr_a/24" dev "veth-a-$$" &&
    ip -n "$ns_b" addr add "$addr_b/24" dev "veth-b-$$" &&
    ip -n "$ns_a" link set "veth-a-$$" up && ip -n "$ns_b" link set "veth-b-$$" up &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up || {
    echo "netns: cannot set up the veth pair: skipped"
    exit 77
  }
}
