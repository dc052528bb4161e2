#!/usr/bin/env bash
# Two hosts on one machine for the cluster tier (tests/test_two_hosts.py): network namespaces
# cz-hosta and cz-hostb, each with its own network stack and address (10.48.0.1, 10.48.0.2) and its
# own loopback, joined by a veth pair; each names both hosts in its /etc/hosts (`ip netns exec`
# mounts /etc/netns/NAME/hosts over /etc/hosts). A process started in one gets the host's name with
# `unshare --uts` (see the test). Idempotent; needs root (or sudo) and iproute2, installed if missing.
# On failure the exact error is in $TWO_HOSTS_DIR/error (default /tmp/councilzoo-two-hosts/error).
set -euo pipefail

DIR="${TWO_HOSTS_DIR:-/tmp/councilzoo-two-hosts}"
mkdir -p "$DIR"
rm -f "$DIR/error"
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO="sudo"; fi

fail() {
    echo "$1" | tee "$DIR/error" >&2
    exit 1
}

if ! command -v ip > /dev/null || ! command -v unshare > /dev/null; then
    { $SUDO apt-get update -q && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 util-linux; } \
        > "$DIR/apt.log" 2>&1 || fail "apt-get install iproute2 util-linux failed: $(tail -n 3 "$DIR/apt.log" | tr '\n' ' ')"
fi

declare -A ADDRESS=([hosta]=10.48.0.1 [hostb]=10.48.0.2)
for host in hosta hostb; do
    ns="cz-$host"
    if [[ " $($SUDO ip netns list | cut -d' ' -f1 | tr '\n' ' ') " != *" $ns "* ]]; then
        $SUDO ip netns add "$ns" 2> "$DIR/netns.err" || fail "ip netns add $ns: $(cat "$DIR/netns.err")"
    fi
    $SUDO ip -n "$ns" link set lo up
    $SUDO mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n10.48.0.1 hosta\n10.48.0.2 hostb\n' | $SUDO tee "/etc/netns/$ns/hosts" > /dev/null
done
if ! $SUDO ip -n cz-hosta link show veth-hosta > /dev/null 2>&1; then
    $SUDO ip link add veth-hosta netns cz-hosta type veth peer name veth-hostb netns cz-hostb \
        2> "$DIR/veth.err" || fail "ip link add veth: $(cat "$DIR/veth.err")"
fi
for host in hosta hostb; do
    ns="cz-$host"
    if [[ "$($SUDO ip -n "$ns" addr show "veth-$host")" != *"inet ${ADDRESS[$host]}/"* ]]; then
        $SUDO ip -n "$ns" addr add "${ADDRESS[$host]}/24" dev "veth-$host"
    fi
    $SUDO ip -n "$ns" link set "veth-$host" up
done
# reachable: a closed port on hostb answers "refused" (no answer would time out)
reply="$($SUDO ip netns exec cz-hosta timeout 5 bash -c 'exec 3<> /dev/tcp/10.48.0.2/9' 2>&1 || true)"
[[ "$reply" == *refused* ]] || fail "hosta cannot reach hostb (10.48.0.2) over the veth pair: $reply"
echo "two hosts: cz-hosta (hosta, 10.48.0.1) and cz-hostb (hostb, 10.48.0.2)"
