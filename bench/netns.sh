#!/usr/bin/env bash
# Hosts on one machine, for the many-host executive (issue 11): network namespaces
# joined by veth pairs to a bridge that lives in a namespace of its own, so nothing
# is added to the machine's own network and no traffic leaves the namespaces.
#
#   bench/netns.sh up            make PREFIX-h1..hN and PREFIX-sw (the bridge)
#   bench/netns.sh down          remove them (also what `up` left half made)
#   bench/netns.sh exec HOST CMD run CMD in host HOST (1..N)
#   bench/netns.sh with CMD...   up, run CMD (ICTUS_HOSTS and ICTUS_NETNS in its
#                                environment), then down, also on failure or Ctrl-C
#   bench/netns.sh status        what exists now
#
# Environment: HOSTS (default 3), PREFIX (default ictus; at most 8 characters, so
# interface names stay under the kernel's 15), SUBNET (default 10.77.0: host i is
# SUBNET.i/24), RATE (e.g. 10mbit: each host's egress shaped with tc tbf, seed 003's
# 10 Mbit/s Ethernet; empty: unshaped). tbf is a token bucket (burst 4 KB): it shapes
# the rate, and only approximates a wire's per-packet delay; netem's rate, which models
# it exactly, is not in every kernel (not in ours), so it is not used.
#
# Root only: namespaces, veths and bridges need CAP_NET_ADMIN. Without it the script
# says so and exits 3, having changed nothing. Installs nothing.
set -euo pipefail

HOSTS=${HOSTS:-3}
PREFIX=${PREFIX:-ictus}
SUBNET=${SUBNET:-10.77.0}
RATE=${RATE:-}

die() { echo "netns.sh: $*" >&2; exit 2; }

[[ "$HOSTS" =~ ^[0-9]+$ ]] && (( HOSTS >= 1 && HOSTS <= 32 )) || die "HOSTS=$HOSTS: expected 1 to 32"
[[ "$PREFIX" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "PREFIX=$PREFIX: expected 1 to 8 lower-case letters or digits, starting with a letter"
[[ "$SUBNET" =~ ^(10|192\.168|172\.(1[6-9]|2[0-9]|3[01]))(\.[0-9]{1,3}){0,2}$ ]] || die "SUBNET=$SUBNET: expected a private prefix such as 10.77.0"
(( $(tr -cd . <<<"$SUBNET" | wc -c) == 2 )) || die "SUBNET=$SUBNET: expected three octets such as 10.77.0"
[[ -z "$RATE" || "$RATE" =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || die "RATE=$RATE: expected e.g. 10mbit"

sw="$PREFIX-sw"
host() { echo "$PREFIX-h$1"; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "netns.sh: network namespaces need root (CAP_NET_ADMIN): run it with sudo; nothing was changed" >&2
    exit 3
  fi
  command -v ip >/dev/null || { echo "netns.sh: the ip command (iproute2) is missing: apt-get install iproute2" >&2; exit 3; }
}

exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

down() {
  local i
  for i in $(seq 1 "$HOSTS"); do
    if exists "$(host "$i")"; then ip netns del "$(host "$i")"; fi
  done
  # The bridge and the switch-side veth ends go with their namespace.
  if exists "$sw"; then ip netns del "$sw"; fi
}

up() {
  local i h
  exists "$sw" && die "$sw exists: a run is up (bench/netns.sh down removes it)"
  # Whatever fails below, nothing half made is left.
  trap 'down; exit 1' ERR
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for i in $(seq 1 "$HOSTS"); do
    h=$(host "$i")
    ip netns add "$h"
    ip -n "$h" link set lo up
    # Made inside the host namespace, the switch end moved to the switch: neither
    # end ever appears in the machine's own namespace.
    ip -n "$h" link add eth0 type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$h" addr add "$SUBNET.$i/24" dev eth0
    ip -n "$h" link set eth0 up
    # Zenoh scouts by UDP multicast (224.0.0.224): send it on the host's link.
    ip -n "$h" route add 224.0.0.0/4 dev eth0
    if [ -n "$RATE" ]; then
      tc -n "$h" qdisc add dev eth0 root tbf rate "$RATE" burst 32kbit latency 50ms
    fi
  done
  trap - ERR
}

status() {
  local i
  for n in "$sw" $(for i in $(seq 1 "$HOSTS"); do host "$i"; done); do
    if exists "$n"; then
      echo "$n: $(ip -n "$n" -brief addr | tr -s ' ' | tr '\n' ';')"
    else
      echo "$n: absent"
    fi
  done
}

hosts_list() {
  local i out=""
  for i in $(seq 1 "$HOSTS"); do out+="${out:+ }$(host "$i")=$SUBNET.$i"; done
  echo "$out"
}

cmd=${1:-}
[ -n "$cmd" ] && shift
case "$cmd" in
  up) need_root; up; status ;;
  down) need_root; down ;;
  status) need_root; status ;;
  exec)
    need_root
    [ $# -ge 2 ] || die "exec HOST CMD...: expected a host number and a command"
    [[ "$1" =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= HOSTS )) || die "exec $1: expected a host from 1 to $HOSTS"
    h=$(host "$1"); shift
    exec ip netns exec "$h" "$@"
    ;;
  with)
    need_root
    [ $# -ge 1 ] || die "with CMD...: expected a command"
    up
    trap 'down' EXIT
    trap 'exit 130' INT TERM
    ICTUS_HOSTS=$(hosts_list) ICTUS_NETNS="$PREFIX" "$@"
    ;;
  *) die "expected up, down, status, exec HOST CMD or with CMD (see the head of this file)" ;;
esac
