#!/usr/bin/env bash
# Seed 003's total system stress test (Table 1) across three hosts, from one command:
# three network namespaces behind a bridge (bench/netns.sh), the main coordinator
# (`ictus run`) on host 1, and local coordinators (`ictus node`) on hosts 2 and 3.
# Test 1: A and C on host 2, B on host 3; test 2: A and B on host 2, C on host 3.
# Cells travel A -> B -> C -> A; one subsystem runs per minor frame, so
#   missed frames = frames in RUN - the largest final counter
# counts every transfer that did not arrive within its frame. Beside it, in the same
# run, the bare UDP round trip between hosts 2 and 3 (bench/c/udp_pingpong.c) with a
# datagram of a cell's size and a small one, back to back, and one of a cell's size
# per tick before each run, with the cell latency's ratio to its half.
#
#   sudo bench/stress-hosts.sh
#
# Each tick runs twice, alternated: on the run's trusted links (Zenoh's QUIC: mutual
# TLS 1.3 with keys from `ictus keys new`, and the access rules) and on plain TCP
# (--insecure); the table's links column says which, for the cost of trust.
#
# Environment: LINKS (default "quic insecure"), TICKS (default "16.67ms 13.33ms 12.35ms 11.11ms 8.33ms 6.67ms 1ms 250us",
# the seed's six and two of ours), SECONDS_PER (per run, default 120), TESTS (default
# "1 2"), TEST2_TICKS and TEST2_SECONDS (test 2 unshaped; default TICKS, SECONDS_PER), RATES ("none" and/or a tc rate such as 10mbit,
# seed 003's Ethernet; default "none 10mbit"), SHAPED_TICKS (ticks run on a shaped link,
# default the seed's six), SHAPED_SECONDS (default SECONDS_PER), COUNT (UDP round trips,
# default 5000), ICTUS_ARGS (options added to every ictus run and ictus node, e.g.
# "--explain off"), OUT_DIR (default target/stress-hosts-DATE), ICTUS (a built ictus
# binary to use; default: cargo build --release), RUN_NAME (the runs' names before the
# test's number, default "stress": namespaces of one machine share /dev/shm and /run, so
# two of these at once need two names and two netns.sh PREFIXes). Subsystems run FIFO 80 on
# CPU 1 where the machine allows (else the run says the class it got).
#
# Root only (namespaces): without it, says why and exits 3, having changed nothing.
# The namespaces are removed after, also on failure or Ctrl-C; every process it starts
# is ended by its PID. Installs nothing; needs cargo, a C compiler and python3.
# Timings are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ns() { "$here/netns.sh" exec "$@"; }

one() {
  local test=$1 tick=$2 secs=$3 rate=$4 links=$5
  local tag="t$test-$tick-$rate-$links" sched="$OUT_DIR/stress$test.toml"
  local trust=(--keys "$OUT_DIR/keys/bundles/hosts/{host}")  # each host its own bundle
  [ "$links" = insecure ] && trust=(--insecure)
  local extra=()
  # shellcheck disable=SC2206 # words on purpose: extra options for ictus run and node
  [ -n "${ICTUS_ARGS:-}" ] && extra=($ICTUS_ARGS)
  hosts_schedule "$test" "$sched" "${RUN_NAME:-stress}"
  # The bare reference at this tick: one UDP round trip of a cell's size per tick,
  # host 2 to host 3, for 10 s (200 to COUNT of them), both ends asleep in between.
  local interval count srv
  interval=$(python3 -c "import sys; t=sys.argv[1]; u=t.lstrip('0123456789.'); v=float(t[:len(t)-len(u)]); print(int(round(v*{'us':1,'ms':1000,'s':1000000}[u])))" "$tick")
  count=$(( 10000000 / interval ))
  (( count < 200 )) && count=200
  (( count > COUNT )) && count=$COUNT
  ns 3 "$bin" server 10.77.0.3 7800 60 &
  srv=$!
  sleep 0.2
  ns 2 "$bin" client 10.77.0.3 7800 "$count" 4900 "$interval" >"$OUT_DIR/$tag-udp.json" || true
  kill "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  local pids=()
  for h in 2 3; do
    ns "$h" "$ictus" node "$sched" --host "h$h" --tick "$tick" "${trust[@]}" "${extra[@]}" --quiet --json \
      -o "$OUT_DIR/$tag-h$h.json" >"$OUT_DIR/$tag-h$h.log" 2>&1 &
    pids+=($!)
  done
  local rc=0 h
  # The bytes each host's link carried, framing and all, from its own counters.
  for h in 1 2 3; do
    ns "$h" cat /sys/class/net/eth0/statistics/tx_bytes >"$OUT_DIR/$tag-tx0-h$h"
  done
  ns 1 "$ictus" run "$sched" --tick "$tick" "${trust[@]}" "${extra[@]}" --duration "${secs}s" --quiet --json \
    --ready-timeout 30s -o "$OUT_DIR/$tag-h1.json" >"$OUT_DIR/$tag-h1.log" 2>&1 || rc=$?
  for p in "${pids[@]}"; do
    # A node ends by itself once the main host has its outcome; one that does not
    # within 20 s is ended (by its PID) and said.
    for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
      echo "stress-hosts.sh: node $p still running 20 s after the run: ended" >&2
      kill "$p" 2>/dev/null || true
    fi
    wait "$p" 2>/dev/null || true
  done
  for h in 1 2 3; do
    ns "$h" cat /sys/class/net/eth0/statistics/tx_bytes >"$OUT_DIR/$tag-tx1-h$h"
  done
  python3 - "$OUT_DIR" "$tag" "$test" "$tick" "$rate" "$secs" "$rc" "$links" <<'EOF'
import json, sys, os
out, tag, test, tick, rate, secs, rc, links = sys.argv[1:9]
path = f"{out}/{tag}-h1.json"
if not os.path.exists(path):
    print(f"| {test} | {links} | {rate} | {tick} | {secs} | run failed (exit {rc}, see {tag}-h1.log) | | | | | | | | | |")
    sys.exit(0)
r = json.load(open(path))
m = {(x["name"], x["labels"].get("host")): x for x in r["measurements"]}
stress = next(x for x in r["measurements"] if x["name"] == "stress")["metrics"]
subs = [x for x in r["measurements"] if x["name"] == "release-jitter"]
overruns = sum(int(x["metrics"]["overruns"]) for x in subs)
lost = sum(int(x["metrics"]["lost_frames"]) for x in subs)
us = lambda x, k: "-" if not x or not x.get("latency") else f"{x['latency']['summary'][k] / 1000:.0f}"
pct = lambda x, p: us(x, f"p{p}_ns")
row = [test, links, rate, tick, secs, f"{int(stress['missed_frames'])} of {int(stress['run_frames'])}", f"{overruns}/{lost}"]
# The frames the hosts' copies were late, by sender and where the time went (the
# run's late-arrivals account, every host's).
late = {}
for x in r["measurements"]:
    if x["name"] == "late-arrivals":
        what = "tick" if x["labels"]["what"] == "tick" else x["labels"]["stage"]
        k = f"{x['labels']['from']} {what}"
        late[k] = late.get(k, 0) + int(x["metrics"]["frames"])
row.append(", ".join(f"{k} {v}" for k, v in sorted(late.items(), key=lambda kv: -kv[1])) or "none")
for h in ("h2", "h3"):
    t = m.get(("tick-arrival", h))
    row.append(f"{pct(t, 50)} / {us(t, 'max_ns')}")
cells = [m.get(("cell-latency", h)) for h in ("h1", "h2", "h3")]
row.append(" ".join(f"{pct(c, 50)}/{us(c, 'max_ns')}" for c in cells))
secs_f = float(secs)
bw = sum(m[("tick-arrival", h)]["metrics"]["bytes_sent"] for h in ("h1", "h2", "h3") if ("tick-arrival", h) in m)
row.append(f"{bw * 8 / secs_f / 1e6:.2f}")
wire = 0
for h in ("h1", "h2", "h3"):
    a = int(open(f"{out}/{tag}-tx0-{h}").read())
    b = int(open(f"{out}/{tag}-tx1-{h}").read())
    wire += b - a
# The wire counters run from before the start to after the hand-over: a few seconds
# more than the run, so this rate is a floor of the run's.
row.append(f"{wire * 8 / secs_f / 1e6:.2f}")
row.append(rc)
try:
    u = json.load(open(f"{out}/{tag}-udp.json"))
    worst50 = max(c["latency"]["summary"]["p50_ns"] for c in cells if c and c.get("latency"))
    worstmax = max(c["latency"]["summary"]["max_ns"] for c in cells if c and c.get("latency"))
    row.append(f"{u['p50_ns'] / 2000:.0f}/{u['max_ns'] / 2000:.0f}")
    row.append(f"{worst50 / (u['p50_ns'] / 2):.1f}x / {worstmax / (u['max_ns'] / 2):.1f}x")
except (OSError, ValueError, KeyError):
    row += ["-", "-"]
print("| " + " | ".join(str(c) for c in row) + " |")
# Where the time went, per host and stage (link-stage: wake, encode, put on the
# sender; transit, copy on the receiver), beside the cell latency it adds up to:
# to a file, printed after the table.
stages = {}
for x in r["measurements"]:
    if x["name"] == "link-stage":
        stages.setdefault(x["labels"]["host"], {})[x["labels"]["stage"]] = x
three = lambda x: "-" if not x or not x.get("latency") else "/".join(us(x, k) for k in ("p50_ns", "p99_ns", "max_ns"))
with open(f"{out}/stages-{rate}.md", "a") as f:
    for h in ("h1", "h2", "h3"):
        s = stages.get(h, {})
        cols = [three(s.get(k)) for k in ("wake", "encode", "put", "transit", "copy")]
        f.write("| " + " | ".join([test, links, tick, h] + cols + [three(m.get(("cell-latency", h)))]) + " |\n")
EOF
}

if [ "${1:-}" = "--inside" ]; then
  shift
  rate=$1 shift_ticks=$2 secs=$3
  # The bare reference over the same veths: host 2 to host 3, a small datagram and
  # one the size of a stress cell (4872 bytes, fragmented on the 1500-byte MTU as a
  # cell publication is segmented).
  port=7790
  for size in 64 4900; do
    ns 3 "$bin" server 10.77.0.3 "$port" 60 &
    srv=$!
    sleep 0.2
    ns 2 "$bin" client 10.77.0.3 "$port" "$COUNT" "$size" >"$OUT_DIR/udp-$size-$rate.json"
    kill "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    python3 - "$OUT_DIR/udp-$size-$rate.json" "$rate" "$size" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
us = lambda k: f"{r[k] / 1000:.1f}"
print(f"UDP round trip host 2 -> 3, {sys.argv[2]}, {sys.argv[3]} bytes: {r['count']} round trips, {r['lost']} lost; "
      f"p50 {us('p50_ns')} us, p99 {us('p99_ns')} us, max {us('max_ns')} us; half: p50 {r['p50_ns'] / 2000:.1f} us, max {r['max_ns'] / 2000:.1f} us")
EOF
    port=$((port + 1))
  done
  echo
  echo "| test | links | rate | tick | s | missed frames | overruns/lost | late copies (frames) by sender, stage | tick late h2 p50/max us | tick late h3 p50/max us | cell latency h1 h2 h3 p50/max us | payload Mbit/s | wire Mbit/s | exit | UDP RTT/2 p50/max us | worst cell / UDP RTT/2 p50, max |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for test in $TESTS; do
    ticks=$shift_ticks s=$secs
    [ "$test" = 2 ] && [ "$rate" = none ] && { ticks=$TEST2_TICKS; s=$TEST2_SECONDS; }
    for tick in $ticks; do
      # Alternated, at the same tick: the cost of authenticated, encrypted links.
      for links in $LINKS; do
        one "$test" "$tick" "$s" "$rate" "$links"
      done
    done
  done
  echo
  echo "Where the time went (p50/p99/max us; wake, encode, put on the sending host, transit and copy on the receiving one):"
  echo
  echo "| test | links | tick | host | wake | encode | put | transit | copy | cell latency |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  cat "$OUT_DIR/stages-$rate.md" 2>/dev/null || true
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "stress-hosts.sh: the three hosts are network namespaces, which need root (CAP_NET_ADMIN): run it with sudo; nothing was changed" >&2
  exit 3
fi
need cc "stress-hosts.sh: a C compiler (cc) is needed for the UDP reference: apt-get install gcc"
need python3 "stress-hosts.sh: python3 is needed to read the figures"
export TICKS=${TICKS:-"16.67ms 13.33ms 12.35ms 11.11ms 8.33ms 6.67ms 1ms 250us"}
export SECONDS_PER=${SECONDS_PER:-120} TESTS=${TESTS:-"1 2"} RATES=${RATES:-"none 10mbit"}
export TEST2_TICKS=${TEST2_TICKS:-$TICKS} TEST2_SECONDS=${TEST2_SECONDS:-$SECONDS_PER}
export SHAPED_TICKS=${SHAPED_TICKS:-"16.67ms 13.33ms 12.35ms 11.11ms 8.33ms 6.67ms"}
export SHAPED_SECONDS=${SHAPED_SECONDS:-$SECONDS_PER} COUNT=${COUNT:-5000}
export LINKS=${LINKS:-"quic insecure"}
export OUT_DIR=${OUT_DIR:-$root/target/stress-hosts-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
export bin="$OUT_DIR/udp_pingpong"
cc -O2 -Wall -Wextra -o "$bin" "$here/c/udp_pingpong.c"
# A binary given in ICTUS: built before (e.g. a copy, so the tree can change while
# this runs).
ictus_binary
export ictus=$ICTUS
# The run's keys (the same directory for every host: one machine here).
"$ictus" keys new "$OUT_DIR/keys" --hosts h1,h2,h3 >/dev/null
export -f ns hosts_schedule one
export here root RUN_NAME

echo "Seed 003's stress test across three hosts (network namespaces of one machine):"
echo "main coordinator on host 1; test 1: A, C on host 2, B on host 3; test 2: A, B on host 2,"
echo "C on host 3. Cells of 4872 bytes; FIFO 80 on CPU 1 where allowed; Zenoh peers over QUIC"
echo "with the run's keys (mutual TLS 1.3, access rules) and, alternated, over plain TCP (--insecure)."
echo "kernel $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
for rate in $RATES; do
  if [ "$rate" = none ]; then
    RATE= HOSTS=3 "$here/netns.sh" with "$0" --inside none "$TICKS" "$SECONDS_PER"
  else
    RATE=$rate HOSTS=3 "$here/netns.sh" with "$0" --inside "$rate" "$SHAPED_TICKS" "$SHAPED_SECONDS"
  fi
  echo
done
echo "missed frames: frames in RUN minus the largest final counter (seed 003 Table 1);"
echo "tick late: arrival of the main host's tick after the frame's deadline on that host;"
echo "cell latency: a subsystem's publication on one host to its copy in another's table"
echo "(one clock: namespaces of one machine); payload Mbit/s: sent by all hosts (ticks,"
echo "cells, status) over the run, without framing; wire Mbit/s: the hosts' eth0 tx bytes"
echo "(Zenoh, QUIC/UDP or TCP, IP, Ethernet framing included) from before the start to after the"
echo "hand-over, over the run's duration. UDP RTT/2: half the bare UDP round trip of a"
echo "cell-sized datagram (4900 bytes) from host 2 to host 3 at the same tick, just before"
echo "the run (bench/c/udp_pingpong.c paced, both ends asleep between round trips); the"
echo "last column divides the worst host's cell latency by it. The stages: wake (the"
echo "notice's stamp at a frame's end to the forwarder awake), encode (to the publication"
echo "encoded), put (to Zenoh's put returned), transit (encoded to the receiver's callback,"
echo "on clocks converted with the measured offset), copy (to the ranges in its cells);"
echo "cell latency runs from the stamp to the callback (wake + encode + transit)."
echo "records: $OUT_DIR"
