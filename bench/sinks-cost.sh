#!/usr/bin/env bash
# What each of the run's data sinks costs the executive's real-time threads (issue 24),
# measured in the same run of this script, sinks on against off, alternated:
#   plain    no sink
#   record   --record FILE.mcap: every cell of every frame, every frame's timing
#   trace    --trace FILE.json: the Chrome/Perfetto timeline
#   scraped  --metrics 127.0.0.1:PORT, scraped every second by curl
#   all      the three together
# on two loops:
#   stress   seed 003's stress schedule (examples/stress: A, B, C, FIFO 80 on CPU 1, B in a
#            process of its own, 4,872-byte cells) at TICK (default 1 ms) through `ictus run`,
#            with wait = "nanosleep" (the kernel's timer wakes each release, as cyclictest's)
#   haptic   the 10 kHz haptic example (examples/haptic: two subsystems in a spin rendezvous,
#            CPUs 0 and 1) through its example binary, which takes --record and --trace (it
#            serves no /metrics: that lives in ictus-ui, above ictus-exec)
# Reports per run each subsystem's release jitter (p50, p99, max, with the sample count),
# execution time p99, overruns, the stress check's missed frames and the records the tap
# dropped; then per round the worst subsystem's p50/p99/max of each sink against plain,
# with the p99's difference. The goal (issue 24): p99 moves by at most 1 us.
#
#   bench/sinks-cost.sh
#   LOOPS=stress TICK=250us MODES="plain record" SECONDS_PER=30 bench/sinks-cost.sh
#
# Environment: ICTUS (a built ictus; default: cargo build --release), HAPTIC (the built
# haptic example; default: cargo build --release --example haptic), LOOPS (default
# "stress haptic"), MODES (default "plain record trace scraped"; haptic skips scraped),
# SECONDS_PER (default 10), ROUNDS (default 3), TICK (default 1ms, the stress loop's),
# WAIT (default nanosleep), OUT_DIR (default target/sinks-cost-DATE). Needs root for
# SCHED_FIFO (without, the records say what was refused), python3 and curl. Every process
# it starts is ended by its PID. Timings are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need python3 "python3 is needed to read the records."
need curl "curl scrapes /metrics."
SECONDS_PER=${SECONDS_PER:-10}
ROUNDS=${ROUNDS:-3}
TICK=${TICK:-1ms}
WAIT=${WAIT:-nanosleep}
LOOPS=${LOOPS:-stress haptic}
MODES=${MODES:-plain record trace scraped}
OUT_DIR=${OUT_DIR:-$root/target/sinks-cost-$(date +%Y%m%dT%H%M%S)}
ictus_binary
if [ -z "${HAPTIC:-}" ] && [[ " $LOOPS " == *" haptic "* ]]; then
  (cd "$root" && cargo build --release --quiet -p ictus-exec --example haptic)
  HAPTIC="$root/target/release/examples/haptic"
fi
mkdir -p "$OUT_DIR"
pid=
scraper=
cleanup() {
  if [ -n "$scraper" ]; then kill "$scraper" 2>/dev/null || true; wait "$scraper" 2>/dev/null || true; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run_one LOOP LABEL MODE: one run, its report in $OUT_DIR/LOOP/LABEL/report.json.
run_one() {
  local loop=$1 label=$2 mode=$3 dir port= args=()
  dir=$OUT_DIR/$loop/$label
  mkdir -p "$dir"
  case $mode in
    record) args+=(--record "$dir/run.mcap") ;;
    trace) args+=(--trace "$dir/run.json") ;;
    all) args+=(--record "$dir/run.mcap" --trace "$dir/run.json") ;;
  esac
  if [ "$loop" = stress ]; then
    stress_copy "$dir" "$WAIT" sinks-cost
    if [ "$mode" = scraped ] || [ "$mode" = all ]; then
      port=$(free_port)
      args+=(--metrics "127.0.0.1:$port")
    fi
    "$ICTUS" run "$dir/schedule.toml" --duration "${SECONDS_PER}s" --tick "$TICK" --quiet \
      -o "$dir/record.json" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" &
  else
    "$HAPTIC" "$root/examples/haptic/schedule.toml" --duration "${SECONDS_PER}s" \
      --report "$dir/report.json" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" &
  fi
  pid=$!
  if [ -n "$port" ]; then
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
  local size=-
  for f in "$dir/run.mcap" "$dir/run.json"; do
    [ -f "$f" ] && size="$size $(basename "$f")=$(stat -c %s "$f")"
  done
  echo "$loop $label mode=$mode exit=$rc files:$size scrapes(tried ok)=$(cat "$dir/scrapes" 2>/dev/null || echo -)" | tee -a "$OUT_DIR/runs.txt" >&2
}

for loop in $LOOPS; do
  for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
      if [ "$loop" = haptic ] && [ "$mode" = scraped ]; then continue; fi
      run_one "$loop" "$round-$mode" "$mode"
    done
  done
done

python3 "$here/sinks_cost.py" "$OUT_DIR" "$TICK" "$SECONDS_PER" "$WAIT" | tee "$OUT_DIR/summary.md"
echo "records and summary: $OUT_DIR" >&2
