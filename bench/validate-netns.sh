#!/usr/bin/env bash
# The bare reference of the many-host path (issue 11): UDP round trips between the
# network namespaces that bench/netns.sh makes (veth pairs and a bridge), and on
# loopback inside one of them, measured by a C ping-pong with no middleware
# (bench/c/udp_pingpong.c). Zenoh's cell latency is reported against these figures
# (one way = round trip / 2, since all namespaces share one clock).
#
#   sudo bench/validate-netns.sh
#
# Environment: COUNT (round trips per figure, default 20000), SIZES (datagram bytes,
# default "64 1024"), RATES ("none" for unshaped links and/or tc rates such as 10mbit,
# seed 003's Ethernet; default "none 10mbit"), OUT_DIR (default
# target/validate-netns-DATE). Root only (namespaces); without it, says why and exits 3.
# Makes the namespaces, and removes them after, also on failure or Ctrl-C. Installs
# nothing; needs a C compiler. Timings are reported, never judged.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

if [ "${1:-}" = "--inside" ]; then
  # Run by netns.sh `with`: the namespaces exist.
  shift
  bin=$1 rate=$2
  port=7777
  for size in $SIZES; do
    for path in loopback bridge; do
      if [ "$path" = loopback ]; then server=127.0.0.1; else server=10.77.0.2; fi
      srv_host=2
      [ "$path" = loopback ] && srv_host=1
      "$here/netns.sh" exec "$srv_host" "$bin" server "$server" "$port" 30 &
      srv=$!
      sleep 0.2
      line=$("$here/netns.sh" exec 1 "$bin" client "$server" "$port" "$COUNT" "$size")
      wait "$srv" || true
      echo "$line" >"$OUT_DIR/udp-$path-$size-$rate.json"
      python3 - "$path" "$size" "$rate" "$line" <<'EOF'
import json, sys
path, size, rate, line = sys.argv[1:5]
r = json.loads(line)
us = lambda k: f"{r[k] / 1000:.1f}"
print(f"| {path} | {rate} | {size} | {r['count']} | {r['lost']} | {us('p50_ns')} | {us('p99_ns')} | {us('p999_ns')} | {us('max_ns')} |")
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

echo "UDP round trips, $COUNT per figure after 100 warm-up, client in host 1; bridge: server in host 2; us"
echo "kernel $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| path | rate | bytes | count | lost | p50 | p99 | p99.9 | max |"
echo "|---|---|---|---|---|---|---|---|---|"
for rate in $RATES; do
  if [ "$rate" = none ]; then
    RATE= HOSTS=2 "$here/netns.sh" with "$0" --inside "$bin" "$rate"
  else
    RATE=$rate HOSTS=2 "$here/netns.sh" with "$0" --inside "$bin" "$rate"
  fi
done
echo
echo "records: $OUT_DIR"
