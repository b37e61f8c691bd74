#!/usr/bin/env bash
# Checks the probe suite's performance targets on this machine, each against a
# reference measured in the same run (nothing is installed):
#   - rendezvous, 2 threads: rate at least 0.8x the bare cache-line round-trip rate
#   - SPSC ring across CPUs: one-way at most 1.5x half the bare round trip, and at
#     32 KiB at least half the single-thread memcpy bandwidth
# Each probe runs ROUNDS times (default 3); the median ratio is judged.
#
#   bench/validate-probes.sh
#   ROUNDS=5 ICTUS=target/release/ictus bench/validate-probes.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ictus_binary
need python3 "python3 is needed to read the records."
ROUNDS=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$ROUNDS"); do
  "$ICTUS" probe rendezvous --threads 2 --spacing same-line,adjacent,5000 --payload 0,512 \
    --policy other --json > "$out/rendezvous-$i.json"
  "$ICTUS" probe throughput --transport spsc --placement cross-cpu --policy other \
    --json > "$out/throughput-$i.json"
  "$ICTUS" probe throughput --transport spsc --placement cross-cpu --mode stream \
    --sizes 32K --policy other --json > "$out/stream-$i.json"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
fails = 0
def load(name, i):
    return json.load(open(f"{out}/{name}-{i}.json"))
print("\n## rendezvous (2 threads, SCHED_OTHER) against the bare cache-line round trip\n")
print("| round | bare RT ns | same line 0 B ns | kHz | rate / RT rate | adjacent 0 B | 5000 B 0 B | same line 512 B |")
print("|---|---|---|---|---|---|---|---|")
ratios = []
for i in range(1, rounds + 1):
    r = load("rendezvous", i)
    rt = next(m for m in r["measurements"] if m["name"] == "cacheline-round-trip")["metrics"]["ns_per_round_trip"]
    pts = {(m["labels"]["spacing_bytes"], m["labels"]["payload_bytes"]): m["metrics"]
           for m in r["measurements"] if m["name"] == "rendezvous"}
    same = pts[(1, 0)]
    ratios.append(same["vs_cacheline_limit"])
    print(f"| {i} | {rt:.0f} | {same['ns_per_rendezvous']:.0f} | {same['rendezvous_per_s']/1e3:.0f} | "
          f"{same['vs_cacheline_limit']:.2f} | {pts[(64,0)]['ns_per_rendezvous']:.0f} ns | "
          f"{pts[(5000,0)]['ns_per_rendezvous']:.0f} ns | {pts[(1,512)]['ns_per_rendezvous']:.0f} ns |")
med = statistics.median(ratios)
ok = med >= 0.8
fails += not ok
print(f"\nmedian rate / round-trip rate: {med:.2f} (target >= 0.8: {'PASS' if ok else 'FAIL'})")

print("\n## SPSC ring across CPUs against the bare round trip and memcpy\n")
lat, bw, sbw = [], [], []
for i in range(1, rounds + 1):
    t = next(m for m in load("throughput", i)["measurements"] if m["name"] == "targets")["metrics"]
    s = next(m for m in load("stream", i)["measurements"] if m["name"] == "targets")["metrics"]
    print(f"round {i}: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(t.items())))
    print(f"  stream: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(s.items())))
    for key, acc, src in (("spsc_one_way_vs_half_round_trip", lat, t),
                          ("spsc_vs_memcpy", bw, t), ("spsc_vs_memcpy", sbw, s)):
        if key in src:
            acc.append(src[key])
if lat:
    m = statistics.median(lat); fails += m > 1.5
    print(f"\nmedian one-way / half round trip: {m:.2f} (target <= 1.5: {'PASS' if m <= 1.5 else 'FAIL'})")
if bw or sbw:
    m = statistics.median(bw) if bw else float("nan")
    s = statistics.median(sbw) if sbw else float("nan")
    best = max(x for x in (m, s) if x == x)
    fails += best < 0.5
    print(f"median 32 KiB bandwidth / memcpy: sync {m:.2f}, stream {s:.2f} (target >= 0.5: {'PASS' if best >= 0.5 else 'FAIL'})")
sys.exit(1 if fails else 0)
PY
