#!/usr/bin/env bash
# The link's publication options against each other (issue 30, "cells at the wire's
# pace"): seed 003's stress test across three hosts (bench/stress-hosts.sh, test 1: A
# and C on host 2, B on host 3, on the trusted links), one run per option set, tick and
# round, the option sets alternated in each round so the machine's drift falls on
# every side. The option sets (crates/ictus-net/src/options.rs):
#   default   express, cells and tick at real-time priority, drop on a full queue
#   batched   ICTUS_LINK_OPTIONS=express=off (Zenoh batches small messages)
#   flat      ICTUS_LINK_OPTIONS=cells=data,tick=data (no priority above the rest)
#   block     ICTUS_LINK_OPTIONS=congestion=block (wait on a full queue)
#   mixed     ICTUS_LINK_OPTIONS=quic=mixed (cells best effort, in QUIC datagrams;
#             the rest on the connection's reliable stream: Zenoh's mixed_rel=1)
#   multi     ICTUS_LINK_OPTIONS=quic=multistream (a QUIC stream per priority)
#   rx1       ZENOH_RUNTIME='(rx: (worker_threads: 1))': Zenoh's receiving runtime on
#             one thread instead of two (its other runtimes have one already; one
#             runtime for all, tried before, broke the hand-over: docs/executive.md)
# Reports, per option set and tick, each round's missed frames, the worst host's cell
# latency (p50, p99, max, with the count), its p50 against half the bare UDP round trip
# measured just before the run, and the sending (put) and transit stages' p50; then
# each option's median over the rounds against the default's.
#
#   sudo bench/link-options.sh
#   sudo OPTIONS="default batched" TICKS=1ms ROUNDS=3 SECONDS_PER=20 bench/link-options.sh
#
# Environment: OPTIONS (default "default mixed multi batched flat block rx1"), TICKS (default
# "1ms 6.67ms": ours and the seed's fastest), ROUNDS (default 2), SECONDS_PER (default
# 20), ICTUS (a built ictus; default: cargo build --release), OUT_DIR (default
# target/link-options-DATE). Root only (namespaces): without it, says why and exits 3,
# having changed nothing. The namespaces are removed after each run, also on failure
# or Ctrl-C (bench/netns.sh); every process is ended by its PID. Timings are
# reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
  echo "link-options.sh: the hosts are network namespaces, which need root (CAP_NET_ADMIN): run it with sudo; nothing was changed" >&2
  exit 3
fi
need python3 "link-options.sh: python3 is needed to read the records"
OPTIONS=${OPTIONS:-"default mixed multi batched flat block rx1"}
TICKS=${TICKS:-"1ms 6.67ms"}
ROUNDS=${ROUNDS:-2}
SECONDS_PER=${SECONDS_PER:-20}
OUT_DIR=${OUT_DIR:-$root/target/link-options-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
ictus_binary
# A copy: the tree may be rebuilt while this runs.
cp "$ICTUS" "$OUT_DIR/ictus"
ICTUS=$OUT_DIR/ictus

run_set() {
  local round=$1 set=$2 dir=$OUT_DIR/$1-$2
  local env=()
  case $set in
    default) ;;
    batched) env=(ICTUS_LINK_OPTIONS=express=off) ;;
    flat) env=(ICTUS_LINK_OPTIONS=cells=data,tick=data) ;;
    block) env=(ICTUS_LINK_OPTIONS=congestion=block) ;;
    mixed) env=(ICTUS_LINK_OPTIONS=quic=mixed) ;;
    multi) env=(ICTUS_LINK_OPTIONS=quic=multistream) ;;
    rx1) env=("ZENOH_RUNTIME=(rx: (worker_threads: 1))") ;;
    *) echo "link-options.sh: unknown option set '$set' (expected default, batched, flat, block, mixed, multi or rx1)" >&2; exit 2 ;;
  esac
  echo "round $round: $set ${env[*]:-}" >&2
  env "${env[@]}" ICTUS="$ICTUS" OUT_DIR="$dir" TESTS=1 LINKS=quic RATES=none \
    TICKS="$TICKS" SECONDS_PER="$SECONDS_PER" RUN_NAME="lo$round$set" \
    "$here/stress-hosts.sh" >"$dir.md" 2>"$dir.err" || echo "round $round: $set: stress-hosts.sh exit $?" >&2
}

for round in $(seq "$ROUNDS"); do
  for set in $OPTIONS; do
    run_set "$round" "$set"
  done
done

python3 - "$OUT_DIR" "$ROUNDS" "$OPTIONS" "$TICKS" "$SECONDS_PER" <<'EOF'
import json, os, statistics, sys
out, rounds, options, ticks, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5]

def figures(round_, opt, tick):
    d = f"{out}/{round_}-{opt}"
    path = f"{d}/t1-{tick}-none-quic-h1.json"
    if not os.path.exists(path):
        return None
    r = json.load(open(path))
    ms = r["measurements"]
    stress = next(x for x in ms if x["name"] == "stress")["metrics"]
    cells = [x for x in ms if x["name"] == "cell-latency" and x.get("latency")]
    worst = max(cells, key=lambda c: c["latency"]["summary"]["p50_ns"])
    s = worst["latency"]["summary"]
    stages = {}
    for x in ms:
        if x["name"] == "link-stage" and x.get("latency"):
            st = x["labels"]["stage"]
            stages[st] = max(stages.get(st, 0), x["latency"]["summary"]["p50_ns"])
    try:
        u = json.load(open(f"{d}/t1-{tick}-none-quic-udp.json"))
        half = u["p50_ns"] / 2
    except (OSError, ValueError, KeyError):
        half = None
    return {
        "missed": int(stress["missed_frames"]), "frames": int(stress["run_frames"]),
        "host": worst["labels"]["host"], "count": s["count"],
        "p50": s["p50_ns"], "p99": s["p99_ns"], "max": s["max_ns"],
        "ratio": s["p50_ns"] / half if half else None,
        "put": stages.get("put"), "transit": stages.get("transit"),
    }

us = lambda v: "-" if v is None else f"{v / 1000:.0f}"
print(f"Link options on seed 003's stress test, test 1, three hosts in network namespaces, QUIC with keys, {secs} s a run, {rounds} round(s) alternated.")
print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs")
print()
print("| tick | options | round | missed frames | worst host | cells | cell p50/p99/max us | p50 / UDP RTT/2 | put p50 us | transit p50 us |")
print("|---|---|---|---|---|---|---|---|---|---|")
med = {}
for tick in ticks:
    for opt in options:
        for rnd in range(1, rounds + 1):
            f = figures(rnd, opt, tick)
            if f is None:
                print(f"| {tick} | {opt} | {rnd} | run failed (see {rnd}-{opt}.md, .err) | | | | | | |")
                continue
            med.setdefault((tick, opt), []).append(f)
            ratio = "-" if f["ratio"] is None else f"{f['ratio']:.1f}x"
            print(f"| {tick} | {opt} | {rnd} | {f['missed']} of {f['frames']} | {f['host']} | {f['count']} | "
                  f"{us(f['p50'])}/{us(f['p99'])}/{us(f['max'])} | {ratio} | {us(f['put'])} | {us(f['transit'])} |")
print()
print("Medians over the rounds, and against the default at the same tick:")
print()
print("| tick | options | missed frames | cell p50 us | cell p99 us | p50 / UDP RTT/2 | p50 vs default |")
print("|---|---|---|---|---|---|---|")
for tick in ticks:
    base = med.get((tick, "default"))
    base_p50 = statistics.median(f["p50"] for f in base) if base else None
    for opt in options:
        fs = med.get((tick, opt))
        if not fs:
            continue
        p50 = statistics.median(f["p50"] for f in fs)
        p99 = statistics.median(f["p99"] for f in fs)
        missed = statistics.median(f["missed"] for f in fs)
        ratios = [f["ratio"] for f in fs if f["ratio"]]
        ratio = f"{statistics.median(ratios):.1f}x" if ratios else "-"
        vs = f"{p50 / base_p50:.2f}" if base_p50 else "-"
        print(f"| {tick} | {opt} | {missed:g} | {us(p50)} | {us(p99)} | {ratio} | {vs} |")
print()
print(f"records: {out}")
EOF
