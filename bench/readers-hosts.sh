#!/usr/bin/env bash
# Slow readers against a run across hosts (issue 30, "no observer can slow a run"):
# seed 003's stress test, test 1 (bench/stress-hosts.sh's schedule: A and C on host 2,
# B on host 3, the main coordinator on host 1), on the trusted links, run without
# readers and with READERS Python readers (python/ictus_zenoh, a reader certificate
# each from `ictus keys new --readers`), alternated in each round. Each reader is a
# Zenoh client of one host (spread over the three), subscribed to the whole run
# (`ictus/RUN/**`) with a callback that sleeps SLEEP seconds per sample, as a plotting
# dashboard does; the readers come 3 s into the run and leave 3 s before its end.
# Reports per run: missed frames, overruns and lost frames, every host's exit code,
# the ticks' lateness p99 and max on hosts 2 and 3, the readers the hosts named, and
# the samples each reader took.
#
#   sudo bench/readers-hosts.sh
#   sudo READERS=10 TICK=4ms ROUNDS=3 SECONDS_PER=15 bench/readers-hosts.sh
#
# Environment: READERS (default 10), SLEEP (default 0.2), TICK (default 4ms, the
# issue's), SECONDS_PER (default 15, at least 8), ROUNDS (default 2), PYTHON (a Python
# with eclipse-zenoh 1.10.2; default target/py-zenoh/bin/python, which .ci/run makes),
# ICTUS (a built ictus; default: cargo build --release), OUT_DIR (default
# target/readers-hosts-DATE). Root only (namespaces): without it, says why and exits
# 3, having changed nothing. The namespaces are removed after, also on failure or
# Ctrl-C (bench/netns.sh); every process is ended by its PID. Timings are reported,
# never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ns() { "$here/netns.sh" exec "$@"; }

if [ "${1:-}" != "--inside" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "readers-hosts.sh: the hosts are network namespaces, which need root (CAP_NET_ADMIN): run it with sudo; nothing was changed" >&2
    exit 3
  fi
  export READERS=${READERS:-10} SLEEP=${SLEEP:-0.2} TICK=${TICK:-4ms}
  export SECONDS_PER=${SECONDS_PER:-15} ROUNDS=${ROUNDS:-2}
  export PYTHON=${PYTHON:-$root/target/py-zenoh/bin/python}
  export OUT_DIR=${OUT_DIR:-$root/target/readers-hosts-$(date +%Y%m%d-%H%M%S)}
  (( SECONDS_PER >= 8 )) || { echo "readers-hosts.sh: SECONDS_PER=$SECONDS_PER: at least 8" >&2; exit 2; }
  "$PYTHON" -c 'import zenoh' 2>/dev/null || {
    echo "readers-hosts.sh: $PYTHON has no zenoh: make it as .ci/run does (python3 -m venv target/py-zenoh; target/py-zenoh/bin/pip install eclipse-zenoh==1.10.2)" >&2
    exit 3
  }
  mkdir -p "$OUT_DIR"
  ictus_binary
  cp "$ICTUS" "$OUT_DIR/ictus"
  readers=$(seq -s, -f 'r%g' 1 "$READERS")
  "$OUT_DIR/ictus" keys new "$OUT_DIR/keys" --hosts h1,h2,h3 --readers "$readers" >/dev/null
  export ictus=$OUT_DIR/ictus here root
  HOSTS=3 "$here/netns.sh" with "$0" --inside
  exit 0
fi

# Inside the namespaces.
cat >"$OUT_DIR/reader.py" <<'EOF'
import sys, time
sys.path.insert(0, sys.argv[1])
from ictus_zenoh import connect
_, _, endpoint, keys, reader, run, sleep, stay = sys.argv
session = connect(endpoint, keys, reader, timeout=5.0)
seen = [0]
def slow(sample):
    seen[0] += 1
    time.sleep(float(sleep))
sub = session.declare_subscriber(f"ictus/{run}/**", slow)
time.sleep(float(stay))
print(f"{reader} {endpoint} {seen[0]}")
sub.undeclare()
session.close()
EOF

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

one() {
  local tag=$1 with=$2 dir=$OUT_DIR/$1
  mkdir -p "$dir"
  hosts_schedule 1 "$dir/schedule.toml" "rh$tag"
  cp -r "$OUT_DIR/keys" "$dir/keys"
  pids=()
  for h in 2 3; do
    ns "$h" "$ictus" node "$dir/schedule.toml" --host "h$h" --tick "$TICK" --keys "$dir/keys/bundles/hosts/h$h" --quiet --json \
      -o "$dir/h$h.json" >"$dir/h$h.log" 2>&1 &
    pids+=($!)
  done
  ns 1 "$ictus" run "$dir/schedule.toml" --tick "$TICK" --keys "$dir/keys/bundles/hosts/h1" --duration "${SECONDS_PER}s" --quiet --json \
    --ready-timeout 30s -o "$dir/h1.json" >"$dir/h1.log" 2>&1 &
  local main=$! readers=()
  pids+=($main)
  if [ "$with" -gt 0 ]; then
    sleep 3
    for i in $(seq "$with"); do
      local h=$(( (i - 1) % 3 + 1 ))
      ns "$h" "$PYTHON" "$OUT_DIR/reader.py" "$root/python" "quic/10.77.0.$h:7447" "$dir/keys" "r$i" "rh${tag}1" \
        "$SLEEP" "$(( SECONDS_PER - 6 ))" >>"$dir/readers.txt" 2>>"$dir/readers.err" &
      readers+=($!)
      pids+=($!)
    done
  fi
  local rc=0
  wait "$main" || rc=$?
  end_all "${pids[@]}"
  pids=()
  echo "$rc" >"$dir/h1.rc"
  python3 - "$dir" "$tag" "$with" <<'EOF'
import json, os, re, sys
d, tag, readers = sys.argv[1], sys.argv[2], int(sys.argv[3])
def rec(h):
    try:
        return json.load(open(f"{d}/{h}.json"))
    except (OSError, ValueError):
        return None
r = rec("h1")
if r is None:
    print(f"| {tag} | {readers} | run failed (see {d}/h1.log) | | | | | |")
    sys.exit(0)
ms = r["measurements"]
stress = next(x for x in ms if x["name"] == "stress")["metrics"]
subs = [x for x in ms if x["name"] == "release-jitter"]
over = sum(int(x["metrics"]["overruns"]) for x in subs)
lost = sum(int(x["metrics"]["lost_frames"]) for x in subs)
def tick(h):
    t = next((x for x in ms if x["name"] == "tick-arrival" and x["labels"].get("host") == h), None)
    if not t or not t.get("latency"):
        return "-"
    s = t["latency"]["summary"]
    return f"{s['p99_ns'] / 1000:.0f} / {s['max_ns'] / 1000:.0f}"
codes = [open(f"{d}/h1.rc").read().strip()]
for h in ("h2", "h3"):
    log = open(f"{d}/{h}.log").read()
    n = rec(h)
    codes.append("ok" if n is not None and n.get("complete") else "incomplete")
named = set()
for h in ("h1", "h2", "h3"):
    x = rec(h)
    for e in (x or {}).get("parameters", {}).get("events", []) or []:
        m = re.search(r"reader (\S+) linked", e)
        if m:
            named.add(m.group(1))
took = []
try:
    took = [int(l.split()[2]) for l in open(f"{d}/readers.txt")]
except OSError:
    pass
taken = f"{min(took)} to {max(took)}" if took else "-"
print(f"| {tag} | {readers} | {int(stress['missed_frames'])} of {int(stress['run_frames'])} | {over}/{lost} | "
      f"{' '.join(codes)} | {tick('h2')} | {tick('h3')} | {len(named)} of {readers} | {taken} |")
EOF
}

echo "Slow readers against seed 003's stress test, test 1, three hosts in network namespaces, QUIC with keys,"
echo "tick $TICK, ${SECONDS_PER} s a run; readers: $READERS, each sleeping ${SLEEP} s per sample, from 3 s to $(( SECONDS_PER - 3 )) s."
echo "kernel $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| run | readers | missed frames | overruns/lost | h1 exit, h2 h3 records | tick late h2 p99/max us | tick late h3 p99/max us | readers named | samples a reader took |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  one "$round-none" 0
  one "$round-readers" "$READERS"
done
echo
echo "records: $OUT_DIR"
