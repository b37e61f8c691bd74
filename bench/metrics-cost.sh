#!/usr/bin/env bash
# What serving and scraping /metrics costs the executive's real-time threads (issue 24):
# seed 003's stress schedule (examples/stress: A, B, C, FIFO 80 on CPU 1, B in a process
# of its own) with wait = "nanosleep" (the kernel's timer wakes each release, as
# cyclictest's: with the schedule's own spinning wait the jitter is 0 and only the
# host's stalls show) run in alternation
#   plain    no metrics
#   scraped  --metrics 127.0.0.1:PORT, scraped every second by curl for the whole run
# Reports each subsystem's release jitter (p50, p99, max, with the sample count) and
# execution time p99, per run, and per round the worst subsystem's figures scraped
# against plain, with their ratios. The goal (issue 24): p99 moves by at most 1 us.
#
#   bench/metrics-cost.sh
#   SECONDS_PER=20 ROUNDS=3 TICK=1ms bench/metrics-cost.sh
#
# Environment: ICTUS (a built ictus; default: cargo build --release), SECONDS_PER
# (default 10), ROUNDS (default 3), TICK (default 1ms), WAIT (default nanosleep), OUT_DIR (default
# target/metrics-cost-DATE). Needs root for SCHED_FIFO (without, the records say what
# was refused) and curl. Every process it starts is ended by its PID. Timings are
# reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need python3 "python3 is needed to read the records."
need curl "curl scrapes /metrics."
SECONDS_PER=${SECONDS_PER:-10}
ROUNDS=${ROUNDS:-3}
TICK=${TICK:-1ms}
WAIT=${WAIT:-nanosleep}
OUT_DIR=${OUT_DIR:-$root/target/metrics-cost-$(date +%Y%m%dT%H%M%S)}
ictus_binary
mkdir -p "$OUT_DIR"
pid=
scraper=
cleanup() {
  if [ -n "$scraper" ]; then kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_one() {
  local label=$1 mode=$2 dir port
  dir=$OUT_DIR/$label
  mkdir -p "$dir"
  cp "$root/examples/stress/cells.toml" "$dir/"
  sed -e "s/^wait = .*/wait = \"$WAIT\"/" -e 's/^name = "stress"/name = "metrics-cost"/' \
    "$root/examples/stress/schedule.toml" >"$dir/schedule.toml"
  local args=(run "$dir/schedule.toml" --duration "${SECONDS_PER}s" --tick "$TICK" --quiet -o "$dir/record.json")
  if [ "$mode" = scraped ]; then
    port=$(free_port)
    args+=(--metrics "127.0.0.1:$port")
  fi
  "$ICTUS" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" &
  pid=$!
  if [ "$mode" = scraped ]; then
    (
      n=0 ok=0
      while kill -0 "$pid" 2>/dev/null; do
        n=$((n + 1))
        if curl -sf -o "$dir/last.metrics" "http://127.0.0.1:$port/metrics"; then ok=$((ok + 1)); fi
        echo "$n $ok" >"$dir/scrapes"
        sleep 1
      done
    ) &
    scraper=$!
  fi
  local rc=0
  wait "$pid" || rc=$?
  pid=
  if [ -n "$scraper" ]; then wait "$scraper" 2>/dev/null || true; scraper=; fi
  echo "$label mode=$mode exit=$rc scrapes(tried ok)=$(cat "$dir/scrapes" 2>/dev/null || echo -)" | tee -a "$OUT_DIR/runs.txt" >&2
}

for round in $(seq "$ROUNDS"); do
  for mode in plain scraped; do
    run_one "$round-$mode" "$mode"
  done
done

python3 - "$OUT_DIR" "$TICK" "$SECONDS_PER" "$WAIT" <<'PY' | tee "$OUT_DIR/summary.md"
import json, os, sys
out, tick, secs, wait = sys.argv[1:5]
labels = sorted((d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "record.json"))),
                key=lambda l: (int(l.split("-")[0]), l))
def us(v):
    return "-" if v is None else f"{v/1000:.1f}"
print(f"# /metrics scraped every second against no metrics: the stress schedule at {tick}, wait = {wait}, {secs} s per run, alternated\n")
print("| run | scrapes ok | subsystem | samples | jitter p50 us | p99 us | max us | exec p99 us | overruns | missed frames |")
print("|---|---|---|---|---|---|---|---|---|---|")
worst = {}
for label in labels:
    d = os.path.join(out, label)
    r = json.load(open(os.path.join(d, "record.json")))
    scrapes = open(os.path.join(d, "scrapes")).read().split()[1] if os.path.exists(os.path.join(d, "scrapes")) else "-"
    stress = next((m for m in r["measurements"] if m["name"] == "stress"), None)
    missed = int(stress["metrics"]["missed_frames"]) if stress else None
    execs = {m["labels"]["subsystem"]: m["latency"]["summary"] for m in r["measurements"]
             if m["name"] == "execution-time" and m.get("latency")}
    w = []
    for m in r["measurements"]:
        if m["name"] != "release-jitter" or not m.get("latency"):
            continue
        s = m["latency"]["summary"]
        w.append(s)
        sub = m["labels"]["subsystem"]
        e = execs.get(sub, {})
        print(f"| {label} | {scrapes} | {sub} | {s['count']} | {us(s['p50_ns'])} | {us(s['p99_ns'])} | {us(s['max_ns'])} | {us(e.get('p99_ns'))} | {int(m['metrics']['overruns'])} | {missed} |")
    if w:
        worst[label] = {k: max(s[k] or 0 for s in w) for k in ("p50_ns", "p99_ns", "max_ns")}
print()
print("| round | worst p50 scraped / plain us | worst p99 scraped / plain us | p99 difference us | ratio p99 | worst max scraped / plain us |")
print("|---|---|---|---|---|---|")
for rd in sorted({l.split("-")[0] for l in labels}, key=int):
    s, p = worst.get(f"{rd}-scraped"), worst.get(f"{rd}-plain")
    if not (s and p):
        continue
    print(f"| {rd} | {us(s['p50_ns'])} / {us(p['p50_ns'])} | {us(s['p99_ns'])} / {us(p['p99_ns'])} | {(s['p99_ns']-p['p99_ns'])/1000:+.1f} | {s['p99_ns']/p['p99_ns']:.2f} | {us(s['max_ns'])} / {us(p['max_ns'])} |")
PY
echo "records and summary: $OUT_DIR" >&2
