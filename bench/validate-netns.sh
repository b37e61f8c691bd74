#!/usr/bin/env bash
# The bare reference of the many-host path (issue 11): UDP round trips between the
# network namespaces that bench/netns.sh makes (veth pairs and a bridge), and on
# loopback inside one of them, measured by a C ping-pong with no middleware
# (bench/c/udp_pingpong.c), and the same round trips through Zenoh peers
# (crates/ictus-net/examples/zping.rs) with their ratio to the bare UDP ones in the
# same run. Cell latency across hosts is reported against these figures. Then the
# main coordinator's tick published through Zenoh from host 1 and received on hosts 2
# and 3 (crates/ictus-net/examples/ztick.rs): arrival after the deadline per host.
#
#   sudo bench/validate-netns.sh
#
# Environment: COUNT (round trips per figure, default 20000), SIZES (datagram bytes,
# default "64 1024"), RATES ("none" for unshaped links and/or tc rates such as 10mbit,
# seed 003's Ethernet; default "none 10mbit"), TICKS (default "1ms 250us"),
# TICK_SECONDS (per tick, default 10), OUT_DIR (default
# target/validate-netns-DATE). Root only (namespaces); without it, says why and exits 3.
# Makes the namespaces, and removes them after, also on failure or Ctrl-C. Installs
# nothing; needs a C compiler and cargo. Timings are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ "${1:-}" = "--ticks" ]; then
  # Run by netns.sh `with` (3 hosts): the coordinator's tick from host 1, received on
  # hosts 2 and 3.
  shift
  ztick=$1 ictus=$2
  for tick in $TICKS; do
    count=$(python3 -c "import re,sys; t=sys.argv[1]; n=int(re.match(r'\d+',t).group()); u=t[len(str(n)):]; ns=n*{'us':1000,'ms':1000000,'s':1000000000}[u]; print(int(float(sys.argv[2])*1e9)//ns)" "$tick" "$TICK_SECONDS")
    for h in 2 3; do
      "$here/netns.sh" exec "$h" "$ztick" recv tcp/10.77.0.1:7447 "t$tick" >"$OUT_DIR/tick-$tick-h$h.json" &
    done
    # The sender as the coordinator's beat would be: FIFO 80 when the machine allows.
    "$here/netns.sh" exec 1 "$ictus" exec --class rt1 --priority 80 -q -- \
      "$ztick" send tcp/10.77.0.1:7447 "t$tick" "$tick" "$count" 2 >"$OUT_DIR/tick-$tick-send.json"
    wait
    python3 - "$OUT_DIR" "$tick" <<'EOF'
import json, sys
out, tick = sys.argv[1:3]
s = json.load(open(f"{out}/tick-{tick}-send.json"))["wake_late"]
us = lambda d, k: f"{d[k] / 1000:.1f}"
print(f"| sender (host 1) | {tick} | {s['count']} | - | {us(s, 'p50_ns')} | {us(s, 'p99_ns')} | {us(s, 'max_ns')} | | | |")
for h in (2, 3):
    r = json.load(open(f"{out}/tick-{tick}-h{h}.json"))
    a, p = r["after_deadline"], r["path"]
    print(f"| host {h} | {tick} | {r['received']} | {r['missing'] + r['dropped']} | {us(a, 'p50_ns')} | {us(a, 'p99_ns')} | {us(a, 'max_ns')} | {us(p, 'p50_ns')} | {us(p, 'p99_ns')} | {us(p, 'max_ns')} |")
EOF
  done
  exit 0
fi

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
export TICKS=${TICKS:-"1ms 250us"} TICK_SECONDS=${TICK_SECONDS:-10}
export OUT_DIR=${OUT_DIR:-$root/target/validate-netns-$(date +%Y%m%d-%H%M%S)}
if [ "$(id -u)" -ne 0 ]; then
  echo "validate-netns.sh: the hosts are network namespaces, which need root: run it with sudo" >&2
  exit 3
fi
need cc "validate-netns.sh: a C compiler (cc) is needed for the reference: apt-get install gcc"
need python3 "validate-netns.sh: python3 is needed to read the figures"
mkdir -p "$OUT_DIR"
bin="$OUT_DIR/udp_pingpong"
cc -O2 -Wall -Wextra -o "$bin" "$here/c/udp_pingpong.c"
(cd "$root" && cargo build --release --quiet -p ictus-net --example zping --example ztick)
(cd "$root" && cargo build --release --quiet -p ictus-cli)
zping="$root/target/release/examples/zping"
ztick="$root/target/release/examples/ztick"
ictus="$root/target/release/ictus"

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
echo "The coordinator's tick through Zenoh: sent from host 1 at each deadline (FIFO 80 via"
echo "ictus exec where allowed), received on hosts 2 and 3 for $TICK_SECONDS s; us. sender:"
echo "its wake-up after the deadline; hosts: arrival after the deadline (what a release"
echo "there would be late by) and arrival after sending (the path); lost = missing + dropped"
echo
echo "| where | tick | ticks | lost | late p50 | late p99 | late max | path p50 | path p99 | path max |"
echo "|---|---|---|---|---|---|---|---|---|---|"
RATE= HOSTS=3 "$here/netns.sh" with "$0" --ticks "$ztick" "$ictus"
echo
echo "records: $OUT_DIR"
