#!/usr/bin/env bash
# What the shield buys, in one run: the timer probe on the RT CPU under the same
# unpinned background load (hackbench, which the kernel spreads over every CPU it is
# allowed, plus a disk writer), first without a shield, then with
# `ictus shield apply --rt-cpus CPU`, the probe started with `ictus exec --class rt0`.
# Alternates ROUNDS times, resets the shield after each shielded round (also on Ctrl-C
# or failure), and prints p99, p99.99 and max per round and the ratios.
#
#   bench/validate-shield.sh                      # CPU 1, 20 s per phase, 2 rounds
#   CPU=3 DURATION=60 ROUNDS=3 bench/validate-shield.sh
#   ICTUS=/path/to/ictus bench/validate-shield.sh  # use a prebuilt binary
#
# Needs root (cpusets, IRQ affinity, SCHED_FIFO), hackbench (Debian's rt-tests) and python3.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need hackbench "hackbench is not installed: apt-get install rt-tests, then rerun."
need python3 "python3 is needed to read the records."
ictus_binary
CPU=${CPU:-1} DURATION=${DURATION:-20} ROUNDS=${ROUNDS:-2} INTERVAL=${INTERVAL:-1ms}
OUT_DIR=${OUT_DIR:-$root/target/validate-shield-$(date +%Y%m%d-%H%M%S)}
JOURNAL="$OUT_DIR/shield.journal"
mkdir -p "$OUT_DIR"

load_pids=()
stop_load() {
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${load_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  load_pids=()
}
cleanup() {
  stop_load
  if [ -e "$JOURNAL" ]; then "$ICTUS" shield reset --journal "$JOURNAL" >/dev/null || true; fi
}
trap cleanup EXIT INT TERM

start_load() {
  # Unpinned: the kernel places it wherever the process's cpuset allows.
  hackbench -P -g 4 -l 100000000 >/dev/null 2>&1 &
  load_pids+=($!)
  "$ICTUS" load disk --cpus "$(python3 -c "import os; c=sorted(os.sched_getaffinity(0)); c=[x for x in c if x!=$CPU]; print(c[0])")" \
    --duration "$((DURATION + 30))s" >/dev/null 2>&1 &
  load_pids+=($!)
  sleep 1
}

probe() { # $1: output file; rest: prefix command
  local out=$1
  shift
  "$@" "$ICTUS" probe timer --cpus "$CPU" --interval "$INTERVAL" --duration "${DURATION}s" \
    --policy fifo --priority 95 --mlock -o "$out" >/dev/null
}

echo "# validate-shield: CPU $CPU, $INTERVAL, ${DURATION}s per phase, $ROUNDS rounds; records in $OUT_DIR"
for round in $(seq 1 "$ROUNDS"); do
  start_load
  probe "$OUT_DIR/plain-$round.json"
  stop_load

  "$ICTUS" shield apply --rt-cpus "$CPU" --journal "$JOURNAL" >"$OUT_DIR/apply-$round.txt"
  start_load
  probe "$OUT_DIR/shielded-$round.json" "$ICTUS" exec --quiet --class rt0 --cpu "$CPU" --journal "$JOURNAL" --
  "$ICTUS" shield status --journal "$JOURNAL" >"$OUT_DIR/status-$round.txt" || true
  stop_load
  "$ICTUS" shield reset --journal "$JOURNAL" >/dev/null
done

python3 - "$OUT_DIR" "$ROUNDS" <<'EOF'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def summary(path):
    r = json.load(open(path))
    s = r["threads"][0]["latency"]["summary"]
    return s
us = lambda ns: f"{ns/1000:.1f}"
print("| round | placement | samples | p50 us | p99 us | p99.99 us | max us |")
print("|---|---|---|---|---|---|---|")
rows = []
for i in range(1, rounds + 1):
    a, b = summary(f"{out}/plain-{i}.json"), summary(f"{out}/shielded-{i}.json")
    for name, s in (("no shield", a), ("shield", b)):
        print(f"| {i} | {name} | {s['count']} | {us(s['p50_ns'])} | {us(s['p99_ns'])} | {us(s['p9999_ns'])} | {us(s['max_ns'])} |")
    rows.append((a, b))
print()
for i, (a, b) in enumerate(rows, 1):
    print(f"round {i}: shield/no-shield ratio p99 {b['p99_ns']/a['p99_ns']:.2f}, "
          f"p99.99 {b['p9999_ns']/a['p9999_ns']:.2f}, max {b['max_ns']/a['max_ns']:.2f}")
EOF
