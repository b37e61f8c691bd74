#!/usr/bin/env bash
# Validates `ictus probe pingpong` against the reference tools on this machine, in one
# run, alternating the tools round by round, and prints both figures with their ratio:
#
#   1. pipe, same CPU, SCHED_OTHER: `perf bench sched pipe -T` (two threads, one int
#      each way per round trip) against `ictus probe pingpong --primitive pipe`.
#      Compared: microseconds per round trip (perf's usecs/op; ictus's elapsed time over
#      round trips, and its mean round trip). Target: within 15 %.
#   2. futex, SCHED_FIFO 90: rt-tests `ptsematest` (pthread mutex hand-off, one pinned
#      pair, one-way latency) against `ictus probe pingpong --primitive futex`, whose
#      hand-off latency is the same one-way figure. ptsematest sleeps --interval between
#      hand-offs (so every hand-off starts from an idle CPU), ictus runs them back to back:
#      the ratio shows what that costs, it is not expected to be 1.
#
#   bench/validate-pingpong.sh                  # CPU 1, 3 rounds
#   CPU=0 ROUNDS=5 LOOPS=500000 bench/validate-pingpong.sh
#   ICTUS=/path/to/ictus bench/validate-pingpong.sh   # use a prebuilt binary
#
# Installs nothing: without perf, ptsematest or jq it says which is missing and stops.
# Needs root (or CAP_SYS_NICE) for SCHED_FIFO.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

CPU=${CPU:-1}                   # the CPU of the same-CPU comparisons
ROUNDS=${ROUNDS:-3}             # alternating rounds per comparison
LOOPS=${LOOPS:-200000}          # round trips per pipe run (perf bench -l)
PRIO=${PRIO:-90}                # SCHED_FIFO priority of the futex comparison
PTS_LOOPS=${PTS_LOOPS:-5000}    # ptsematest hand-offs per run
PTS_INTERVAL=${PTS_INTERVAL:-1000} # ptsematest interval between hand-offs, us
FUTEX_LOOPS=${FUTEX_LOOPS:-100000} # ictus futex round trips per run
PERF=${PERF:-/usr/bin/perf}

missing=()
[ -x "$PERF" ] || missing+=("perf ($PERF; Debian: linux-perf)")
command -v ptsematest >/dev/null || missing+=("ptsematest (Debian: rt-tests)")
command -v jq >/dev/null || missing+=("jq")
command -v taskset >/dev/null || missing+=("taskset (util-linux)")
if [ ${#missing[@]} -gt 0 ]; then
  printf 'missing: %s\n' "${missing[@]}" >&2
  echo "install them and rerun; this script installs nothing." >&2
  exit 3
fi

ictus_binary
OUT_DIR=${OUT_DIR:-$root/target/validate-pingpong-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"

# ratio A B: A / B with 3 decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }
# median of the arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# smallest of the arguments.
smallest() { printf '%s\n' "$@" | sort -g | head -n 1; }

echo "ictus probe pingpong validation, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs"
echo "ictus: $ICTUS; records and raw outputs in $OUT_DIR"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the CPUs disturbs both tools)"
echo

echo "== 1. pipe, same CPU ($CPU), SCHED_OTHER, $LOOPS round trips: perf bench sched pipe -T against ictus =="
printf '%-6s %14s %16s %16s %10s %10s\n' round "perf us/op" "ictus us/op" "ictus mean us" "ratio op" "ratio mean"
perf_ops=() ictus_ops=() ictus_means=() round_ratios=()
for r in $(seq 1 "$ROUNDS"); do
  taskset -c "$CPU" "$PERF" bench sched pipe -T -l "$LOOPS" >"$OUT_DIR/perf-pipe-$r.txt" 2>&1
  p=$(awk '/usecs\/op/ { print $1 }' "$OUT_DIR/perf-pipe-$r.txt")
  "$ICTUS" probe pingpong --primitive pipe --placement same-cpu --cpus "$CPU" --policy other \
    --loops "$LOOPS" --json >"$OUT_DIR/ictus-pipe-$r.json"
  i=$(jq -r '.measurements[0].metrics | .elapsed_ns / .round_trips / 1000' "$OUT_DIR/ictus-pipe-$r.json")
  m=$(jq -r '.measurements[0].metrics.round_trip_mean_ns / 1000' "$OUT_DIR/ictus-pipe-$r.json")
  perf_ops+=("$p") ictus_ops+=("$i") ictus_means+=("$m") round_ratios+=("$(ratio "$i" "$p")")
  printf '%-6s %14.3f %16.3f %16.3f %10s %10s\n' "$r" "$p" "$i" "$m" "$(ratio "$i" "$p")" "$(ratio "$m" "$p")"
done
p=$(median "${perf_ops[@]}") i=$(median "${ictus_ops[@]}") m=$(median "${ictus_means[@]}")
pipe_ratio=$(ratio "$i" "$p")
printf '%-6s %14.3f %16.3f %16.3f %10s %10s\n' median "$p" "$i" "$m" "$pipe_ratio" "$(ratio "$m" "$p")"
best_ratio=$(ratio "$(smallest "${ictus_ops[@]}")" "$(smallest "${perf_ops[@]}")")
echo "median of the per-round ratios: $(median "${round_ratios[@]}"); best (least disturbed) run of each: ratio $best_ratio"
verdict=$(awk -v r="$pipe_ratio" 'BEGIN { d = r - 1; if (d < 0) d = -d; print (d <= 0.15) ? "PASS" : "FAIL" }')
echo "target: ictus within 15 % of perf bench per round trip (ratio of medians): $verdict (ratio $pipe_ratio)"
echo

echo "== 2. futex hand-off, same CPU ($CPU), SCHED_FIFO $PRIO: ptsematest (one pinned pair, interval ${PTS_INTERVAL} us) against ictus (back to back) =="
printf '%-6s %10s %10s %10s %12s %12s %12s %10s\n' round "pts min" "pts avg" "pts max" "ictus min" "ictus mean" "ictus max" "ratio avg"
pts_avgs=() futex_means=()
for r in $(seq 1 "$ROUNDS"); do
  ptsematest -a "$CPU" -p "$PRIO" -i "$PTS_INTERVAL" -l "$PTS_LOOPS" -q \
    --json="$OUT_DIR/ptsematest-$r.json" >"$OUT_DIR/ptsematest-$r.txt" 2>&1
  read -r pmin pavg pmax < <(jq -r '.thread["0"].receiver | "\(.min) \(.avg) \(.max)"' "$OUT_DIR/ptsematest-$r.json")
  "$ICTUS" probe pingpong --primitive futex --placement same-cpu --cpus "$CPU" --policy fifo \
    --priority "$PRIO" --loops "$FUTEX_LOOPS" --json >"$OUT_DIR/ictus-futex-$r.json"
  read -r imin imean imax < <(jq -r '.measurements[0].latency.summary | "\(.min_ns / 1000) \(.mean_ns / 1000) \(.max_ns / 1000)"' "$OUT_DIR/ictus-futex-$r.json")
  pts_avgs+=("$pavg") futex_means+=("$imean")
  printf '%-6s %10s %10.2f %10s %12.2f %12.2f %12.1f %10s\n' "$r" "$pmin" "$pavg" "$pmax" "$imin" "$imean" "$imax" "$(ratio "$imean" "$pavg")"
done
pa=$(median "${pts_avgs[@]}") fm=$(median "${futex_means[@]}")
printf '%-6s %10s %10.2f %10s %12s %12.2f %12s %10s\n' median "" "$pa" "" "" "$fm" "" "$(ratio "$fm" "$pa")"
policy=$(jq -r '.threads[0].config.policy.policy' "$OUT_DIR/ictus-futex-$ROUNDS.json")
[ "$policy" = fifo ] || echo "note: ictus ran with policy $policy, not fifo (no permission?)"
echo "(ptsematest reports whole microseconds for min and max, from gettimeofday.)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
