#!/usr/bin/env bash
# The bare reference of the many-host path (issue 11): UDP round trips between the
# network namespaces that bench/netns.sh makes (veth pairs and a bridge), and on
# loopback inside one of them, measured by a C ping-pong with no middleware
# (bench/c/udp_pingpong.c), and the same round trips through Zenoh peers
# (crates/ictus-net/examples/zping.rs) with their ratio to the bare UDP ones in the
# same run. Cell latency across hosts is reported against these figures.
#
#   sudo bench/validate-netns.sh
#
# Environment: COUNT (round trips per figure, default 20000), SIZES (datagram bytes,
# default "64 1024"), RATES ("none" for unshaped links and/or tc rates such as 10mbit,
# seed 003's Ethernet; default "none 10mbit"), OUT_DIR (default
# target/validate-netns-DATE). Root only (namespaces); without it, says why and exits 3.
# Makes the namespaces, and removes them after, also on failure or Ctrl-C. Installs
# nothing; needs a C compiler and cargo. Timings are reported, never judged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

if [ "${1:-}" = "--inside" ]; then
  # Run by netns.sh `with`: the namespaces exist.
  shift
  bin=$1 zping=$2 rate=$3
  port=7777
  for size in $SIZES; do
    for path in loopback bridge zenoh; do
      case $path in
        loopback) srv_host=1 server=127.0.0.1 ;;
        *) srv_host=2 server=10.77.0.2 ;;
      esac
      if [ "$path" = zenoh ]; then
        "$here/netns.sh" exec 2 "$zping" pong "tcp/$server:$port" 30 &
        srv=$!
        line=$("$here/netns.sh" exec 1 "$zping" ping "tcp/$server:$port" "$COUNT" "$size")
      else
        "$here/netns.sh" exec "$srv_host" "$bin" server "$server" "$port" 30 &
        srv=$!
        sleep 0.2
        line=$("$here/netns.sh" exec 1 "$bin" client "$server" "$port" "$COUNT" "$size")
      fi
      wait "$srv" || true
      echo "$line" >"$OUT_DIR/$path-$size-$rate.json"
      python3 - "$path" "$size" "$rate" "$line" "$OUT_DIR/bridge-$size-$rate.json" <<'EOF'
import json, sys
path, size, rate, line, ref = sys.argv[1:6]
r = json.loads(line)
us = lambda k: f"{r[k] / 1000:.1f}"
ratio = ""
if path == "zenoh":
    u = json.load(open(ref))
    ratio = f"{r['p50_ns'] / u['p50_ns']:.2f}x p50, {r['max_ns'] / u['max_ns']:.2f}x max"
print(f"| {path} | {rate} | {size} | {r['count']} | {r['lost']} | {us('p50_ns')} | {us('p99_ns')} | {us('p999_ns')} | {us('max_ns')} | {ratio} |")
EOF
      port=$((port + 1))
    done
  done
  exit 0
fi

export COUNT=${COUNT:-20000} SIZES=${SIZES:-"64 1024"} RATES=${RATES:-"none 10mbit"}
export OUT_DIR=${OUT_DIR:-$root/target/validate-netns-$(date +%Y%m%d-%H%M%S)}
if [ "$(id -u)" -ne 0 ]; then
  echo "validate-netns.sh: the hosts are network namespaces, which need root: run it with sudo" >&2
  exit 3
fi
command -v cc >/dev/null || { echo "validate-netns.sh: a C compiler (cc) is needed for the reference: apt-get install gcc" >&2; exit 3; }
command -v python3 >/dev/null || { echo "validate-netns.sh: python3 is needed to read the figures" >&2; exit 3; }
mkdir -p "$OUT_DIR"
bin="$OUT_DIR/udp_pingpong"
cc -O2 -Wall -Wextra -o "$bin" "$here/c/udp_pingpong.c"
(cd "$root" && cargo build --release --quiet -p ictus-net --example zping)
zping="$root/target/release/examples/zping"

echo "Round trips, $COUNT per figure after 100 warm-up, client in host 1, us. loopback: bare UDP"
echo "inside host 1; bridge: bare UDP to host 2; zenoh: Zenoh peers (tcp, no router) host 1 to"
echo "host 2, sample handed from Zenoh's thread to the timing one; ratio to the bridge row"
echo "kernel $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| path | rate | bytes | count | lost | p50 | p99 | p99.9 | max | Zenoh / UDP |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rate in $RATES; do
  if [ "$rate" = none ]; then
    RATE= HOSTS=2 "$here/netns.sh" with "$0" --inside "$bin" "$zping" "$rate"
  else
    RATE=$rate HOSTS=2 "$here/netns.sh" with "$0" --inside "$bin" "$zping" "$rate"
  fi
done
echo
echo "records: $OUT_DIR"
