#!/usr/bin/env bash
# What the CPU latency QoS and the miss sampler do to the executive: seed 003's stress
# schedule (examples/stress: A, B, C, FIFO 80 on CPU 1, B in a process of its own) with
# wait = "nanosleep" (the kernel's timer wakes each release, as cyclictest's), run in
# alternation so the machine's drift falls on every side:
#   held   --pm-qos 0 (the default: /dev/cpu_dma_latency held at 0 for the run)
#   off    --pm-qos off (the machine as it idles)
#   quiet  --pm-qos 0 --explain off (the same as held, without the miss sampler)
# Reports each subsystem's release jitter (p50, p99, p99.9, max, with the sample count),
# overruns and missed frames, the worst subsystem's p99 held against off per round, and
# the sampler's cost (held against quiet).
#
#   bench/executive-qos.sh
#   SECONDS_PER=20 ROUNDS=3 bench/executive-qos.sh
#
# Environment: ICTUS (a built ictus; default: cargo build --release), SECONDS_PER (per
# run, default 10), ROUNDS (default 3), TICK (default 1ms), WAIT (default nanosleep),
# MODES (default "held off quiet"), OUT_DIR (default target/executive-qos-DATE). Needs
# root for SCHED_FIFO and the QoS (without, the records say what was refused). Every
# process it starts is ended by its PID. Timings are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need python3 "python3 is needed to read the records."
SECONDS_PER=${SECONDS_PER:-10}
ROUNDS=${ROUNDS:-3}
TICK=${TICK:-1ms}
WAIT=${WAIT:-nanosleep}
MODES=${MODES:-"held off quiet"}
OUT_DIR=${OUT_DIR:-$root/target/executive-qos-$(date +%Y%m%dT%H%M%S)}
ictus_binary
mkdir -p "$OUT_DIR"
end_on_exit

run_one() {
  local label=$1 mode=$2 dir
  dir=$OUT_DIR/$label
  mkdir -p "$dir"
  stress_copy "$dir" "$WAIT" executive-qos
  local args=(run "$dir/schedule.toml" --duration "${SECONDS_PER}s" --tick "$TICK" --quiet -o "$dir/record.json")
  case $mode in
    held) args+=(--pm-qos 0) ;;
    off) args+=(--pm-qos off) ;;
    quiet) args+=(--pm-qos 0 --explain off) ;;
  esac
  "$ICTUS" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" &
  pid=$!
  local rc=0
  wait "$pid" || rc=$?
  pid=
  echo "$label mode=$mode exit=$rc" | tee -a "$OUT_DIR/runs.txt" >&2
}

for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    run_one "$round-$mode" "$mode"
  done
done

python3 - "$OUT_DIR" "$TICK" "$WAIT" "$SECONDS_PER" <<'PY' | tee "$OUT_DIR/summary.md"
import json, os, sys
out, tick, wait, secs = sys.argv[1:5]
labels = sorted((d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "record.json"))),
                key=lambda l: (int(l.split("-")[0]), l))
def us(v):
    return "-" if v is None else f"{v/1000:.1f}"
print(f"# The stress schedule at {tick}, wait = {wait}, {secs} s per run, alternated\n")
print("| run | QoS in force | explain | subsystem | samples | p50 us | p99 us | p99.9 us | max us | overruns | missed frames |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
worst = {}
for label in labels:
    r = json.load(open(os.path.join(out, label, "record.json")))
    text = json.dumps(r)
    stress = next((m for m in r["measurements"] if m["name"] == "stress"), None)
    missed = int(stress["metrics"]["missed_frames"]) if stress else None
    qos = (r.get("obtained") or {}).get("pm_qos") or {}
    held = qos.get("held_us")
    qword = f"held at {held} us" if held is not None else ("off" if qos.get("requested") == "off" else "refused or not recorded")
    explained = "on" if r.get("explanation") else "off"
    w = []
    for m in r["measurements"]:
        if m["name"] != "release-jitter" or not m.get("latency"):
            continue
        s = m["latency"]["summary"]
        w.append(s)
        print(f"| {label} | {qword} | {explained} | {m['labels']['subsystem']} | {s['count']} | {us(s['p50_ns'])} | {us(s['p99_ns'])} | {us(s['p999_ns'])} | {us(s['max_ns'])} | {int(m['metrics']['overruns'])} | {missed} |")
    if w:
        worst[label] = {k: max(s[k] or 0 for s in w) for k in ("p50_ns", "p99_ns", "p999_ns", "max_ns")}
    e = r.get("explanation")
    if e and e["breakdown"]["events"]:
        by = ", ".join(f"{n} {p}" for p, n in e["breakdown"]["by_cause"])
        print(f"| {label} | | why | {e['breakdown']['events']} misses: {by} | | | | | | | |")
print()
print("| round | worst p99 held / off us | ratio held/off | worst p99 held / quiet us | ratio held/quiet | worst max held / off us |")
print("|---|---|---|---|---|---|")
rounds = sorted({l.split("-")[0] for l in labels}, key=int)
for rd in rounds:
    h, o, q = worst.get(f"{rd}-held"), worst.get(f"{rd}-off"), worst.get(f"{rd}-quiet")
    def pair(a, b, k):
        return (f"{us(a[k])} / {us(b[k])}", f"{a[k]/b[k]:.2f}" if b and b[k] else "-") if a and b else ("-", "-")
    ho, hor = pair(h, o, "p99_ns")
    hq, hqr = pair(h, q, "p99_ns")
    hm, _ = pair(h, o, "max_ns")
    print(f"| {rd} | {ho} | {hor} | {hq} | {hqr} | {hm} |")
PY
echo "records and summary: $OUT_DIR" >&2
