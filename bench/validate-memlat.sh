#!/usr/bin/env bash
# Validates `ictus probe memlat --mode chase` against an independent C pointer chase
# (bench/c/chase.c, gcc -O2) on this machine, in one run: the two tools alternate,
# round after round, at 16 KiB (inside L1) and 256 MiB (DRAM), in the same
# configuration (same CPU, SCHED_FIFO 95 when permitted, 4 KiB pages, 5 repetitions of
# 20 ms, median). Prints every round, then the median of the rounds of each tool and
# their ratio (ictus / C). The target is agreement within 15 % at L1 and in DRAM.
#
#   bench/validate-memlat.sh                  # CPU 1, 5 rounds
#   CPU=0 ROUNDS=9 PAGES=thp bench/validate-memlat.sh
#   ICTUS=/path/to/ictus bench/validate-memlat.sh   # use a prebuilt binary
#
# Needs gcc and python3. Without root (CAP_SYS_NICE) both tools run as SCHED_OTHER.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need gcc "gcc is needed to build bench/c/chase.c."
need python3 "python3 is needed to read the records."

CPU=${CPU:-1} ROUNDS=${ROUNDS:-5} PAGES=${PAGES:-4k} REPEAT=${REPEAT:-5} POINT_MS=${POINT_MS:-20}
SIZES=${SIZES:-"16384 268435456"}
out=$root/target/validate-memlat
mkdir -p "$out"
gcc -O2 -Wall -o "$out/chase" "$here/c/chase.c"
ictus_binary

policy=fifo
if ! "$ICTUS" probe memlat --mode chase --sizes 4K --repeat 1 --point-time 1ms \
     --cpus "$CPU" --policy fifo --json 2>/dev/null |
     python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(any(w["id"]=="policy-refused" for w in r["warnings"]))'; then
  echo "SCHED_FIFO refused: both tools run as SCHED_OTHER (expect more noise)." >&2
  policy=other
fi

results=$out/results.txt
: >"$results"
printf '%-6s %-10s %12s %12s\n' round size "C ns/load" "ictus ns/load"
for round in $(seq 1 "$ROUNDS"); do
  for size in $SIZES; do
    c=$("$out/chase" "$size" "$REPEAT" "$POINT_MS" "$CPU" "$PAGES" "$policy" | awk '{print $4}')
    i=$("$ICTUS" probe memlat --mode chase --sizes "$size" --repeat "$REPEAT" \
          --point-time "${POINT_MS}ms" --pages "$PAGES" --cpus "$CPU" --policy "$policy" --json |
        python3 -c '
import json, sys
r = json.load(sys.stdin)
print(next(m["metrics"]["ns_per_load"] for m in r["measurements"]
           if m["name"] == "chase" and m["labels"]["thread"] == "all"))')
    printf '%-6s %-10s %12.3f %12.3f\n' "$round" "$size" "$c" "$i"
    echo "$size $c $i" >>"$results"
  done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print()
print(f"{'working set':>12} {'C median':>10} {'ictus median':>13} {'ictus / C':>10}  verdict (within 15 %)")
worst = 0.0
for size in dict.fromkeys(r[0] for r in rows):
    c = statistics.median(float(r[1]) for r in rows if r[0] == size)
    i = statistics.median(float(r[2]) for r in rows if r[0] == size)
    ratio = i / c
    worst = max(worst, abs(ratio - 1))
    n = int(size)
    label = f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
    print(f"{label:>12} {c:10.3f} {i:13.3f} {ratio:10.3f}  {'ok' if abs(ratio - 1) <= 0.15 else 'OUTSIDE'}")
sys.exit(0 if worst <= 0.15 else 1)
PY
