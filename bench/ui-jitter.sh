#!/usr/bin/env bash
# Does the live page disturb the real-time threads? Seed 003's stress schedule
# (examples/stress: A, B, C, FIFO 80 on CPU 1, B in a process of its own) run three
# ways, in alternation so the machine's drift falls on both sides:
#   off   no --ui
#   page  --ui 127.0.0.1:0 with the page open in a headless Chromium on this machine
#         (the browser's threads compete for the CPUs as a user's browser would)
#   idle  --ui with no page open (once per wait mode)
# for each wait mode (the example's hybrid wait, and nanosleep, whose wake-up is the
# kernel's timer, as cyclictest's). Reports each subsystem's release jitter (p50, p99,
# p99.9, max, with the sample count), the stress test's missed frames, and the ratio
# page/off of the worst p99.9 and max over subsystems, per pair.
#
#   bench/ui-jitter.sh
#
# Environment: ICTUS (a built ictus; default: cargo build --release), SECONDS_PER
# (per run, default 60), PAIRS (off/page pairs per wait mode, default 2), WAITS
# (default "hybrid nanosleep"), TICK (default 1ms), CHROMIUM (default: chromium on
# PATH), OUT_DIR (default target/ui-jitter-DATE). Without root the subsystems get
# the class the machine gives (the record says which). Every process it starts is
# ended by its PID; the browser's profile is removed. Timings are reported, never
# judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SECONDS_PER=${SECONDS_PER:-60}
PAIRS=${PAIRS:-2}
WAITS=${WAITS:-"hybrid nanosleep"}
TICK=${TICK:-1ms}
OUT_DIR=${OUT_DIR:-$root/target/ui-jitter-$(date +%Y%m%dT%H%M%S)}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$CHROMIUM" ]; then
  echo "ui-jitter: no chromium on PATH (apt-get install chromium); nothing was run" >&2
  exit 3
fi
ictus_binary
mkdir -p "$OUT_DIR"
pids=()
profile=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$profile" ]; then rm -rf "$profile"; fi
}
trap cleanup EXIT INT TERM

# One run: LABEL WAIT MODE (off | idle | page).
run_one() {
  local label=$1 wait=$2 mode=$3 dir schedule ictus_pid browser_pid= url=
  dir=$OUT_DIR/$label
  mkdir -p "$dir"
  stress_copy "$dir" "$wait" ui-jitter
  local args=(run "$dir/schedule.toml" --duration "${SECONDS_PER}s" --tick "$TICK" --quiet -o "$dir/record.json")
  [ "$mode" != off ] && args+=(--ui 127.0.0.1:0)
  "$ICTUS" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" &
  ictus_pid=$!
  pids+=("$ictus_pid")
  if [ "$mode" = page ]; then
    for _ in $(seq 200); do
      url=$(sed -n 's/^live page: \([^ ]*\).*/\1/p' "$dir/stderr" | head -1)
      [ -n "$url" ] && break
      sleep 0.05
    done
    [ -n "$url" ] || { echo "ui-jitter: no live page URL from $label" >&2; exit 1; }
    profile=$(mktemp -d /tmp/ictus-ui-jitter-profile.XXXXXX)
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
      --remote-debugging-port=0 --user-data-dir="$profile" --window-size=1400,1100 "$url" \
      >/dev/null 2>"$dir/chromium.log" &
    browser_pid=$!
    pids+=("$browser_pid")
    # The page is open once its websocket is (an established connection to the port).
    local port=${url##*:}; port=${port%%/*}
    local opened=
    for _ in $(seq 600); do
      if ss -Htn state established "( sport = :$port )" | grep -q .; then opened=1; break; fi
      sleep 0.05
    done
    if [ -n "$opened" ]; then echo "page open" >>"$dir/stderr"; else echo "page NOT seen open" >>"$dir/stderr"; fi
    # The browser's CPU time over the run (every process of its profile), sampled 2 s
    # before the run ends.
    (
      sleep $((SECONDS_PER - 2))
      ticks=0
      for p in $(pgrep -f -- "--user-data-dir=$profile" || true); do
        t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
        ticks=$((ticks + t))
      done
      echo "browser cpu s: $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", t/hz}')" >>"$dir/stderr"
    ) &
    pids+=("$!")
  fi
  local rc=0
  wait "$ictus_pid" || rc=$?
  if [ -n "$browser_pid" ]; then
    kill "$browser_pid" 2>/dev/null || true
    wait "$browser_pid" 2>/dev/null || true
    rm -rf "$profile"; profile=
  fi
  pids=()
  echo "$label wait=$wait mode=$mode exit=$rc" | tee -a "$OUT_DIR/runs.txt"
}

for wait in $WAITS; do
  for pair in $(seq "$PAIRS"); do
    run_one "$wait-off-$pair" "$wait" off
    run_one "$wait-page-$pair" "$wait" page
  done
  run_one "$wait-idle" "$wait" idle
done

python3 - "$OUT_DIR" <<'EOF' | tee "$OUT_DIR/summary.md"
import json, os, sys
out = sys.argv[1]
labels = sorted(d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "record.json")))
def fig(v):
    return "-" if v is None else f"{v/1000:.1f}"
print("| run | page open (browser CPU s) | subsystem | samples | p50 us | p99 us | p99.9 us | max us | overruns | missed frames |")
print("|---|---|---|---|---|---|---|---|---|---|")
worst = {}
for label in labels:
    r = json.load(open(os.path.join(out, label, "record.json")))
    stress = next((m for m in r["measurements"] if m["name"] == "stress"), None)
    missed = stress["metrics"]["missed_frames"] if stress else None
    err = open(os.path.join(out, label, "stderr")).read()
    opened = "page open" in err
    cpu = next((l.split(": ")[1] for l in err.splitlines() if l.startswith("browser cpu s:")), None)
    w = []
    for m in r["measurements"]:
        if m["name"] != "release-jitter" or not m.get("latency"):
            continue
        s = m["latency"]["summary"]
        w.append((s["p999_ns"], s["max_ns"]))
        print(f"| {label} | {('yes (' + cpu + ')') if opened and cpu else 'yes' if opened else 'no'} | {m['labels']['subsystem']} | {s['count']} | {fig(s['p50_ns'])} | {fig(s['p99_ns'])} | {fig(s['p999_ns'])} | {fig(s['max_ns'])} | {int(m['metrics']['overruns'])} | {missed} |")
    worst[label] = (max(x[0] for x in w), max(x[1] for x in w)) if w else None
print()
print("| pair | worst p99.9 off / page us | ratio | worst max off / page us | ratio |")
print("|---|---|---|---|---|")
for label in labels:
    if "-off-" not in label:
        continue
    page = label.replace("-off-", "-page-")
    if page not in worst or not worst[label] or not worst[page]:
        continue
    if "page open" not in open(os.path.join(out, page, "stderr")).read():
        print(f"| {label.replace('-off', '')} | the page was not seen open: pair left out | | | |")
        continue
    (a9, am), (b9, bm) = worst[label], worst[page]
    r9 = f"{b9/a9:.2f}" if a9 else "-"
    rm = f"{bm/am:.2f}" if am else "-"
    print(f"| {label.replace('-off', '')} | {fig(a9)} / {fig(b9)} | {r9} | {fig(am)} / {fig(bm)} | {rm} |")
EOF
echo "records and summary: $OUT_DIR" >&2
