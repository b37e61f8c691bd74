#!/usr/bin/env bash
# Measures the cyclic executive (`ictus run`) on this machine, in one run:
#
#  (a+b) release jitter of a single 1 kHz in-process subsystem against the timer probe's
#        wake-up latency in the same configuration (same CPU, class, priority, wait
#        mode, interval and duration), alternating the two for ROUNDS rounds, once per
#        wait mode in WAITS; prints both distributions and the ratios executive / probe;
#  (c)   the seed 003 stress test (examples/stress/schedule.toml: A and C in-process, B
#        in a process of its own) at each tick in TICKS for DURATION seconds, with its
#        missed frames read from the run record's `stress` measurement;
#  (d)   the executive's overhead: schedules of 1, 2, 4 and 8 trivial (`idle`)
#        subsystems released together at 1 kHz on one CPU; prints the execution-time
#        and release-jitter medians and the marginal cost of one more subsystem.
#
#   bench/validate-executive.sh                     # CPU 1, FIFO 80 if permitted, the defaults below
#   CPU=0 DURATION=10 JITTER_DURATION=10 bench/validate-executive.sh   # a quicker pass
#   ICTUS=/path/to/ictus bench/validate-executive.sh   # a prebuilt binary (its examples/ next to it)
#
# Defaults: CPU=1 PRIORITY=80 ROUNDS=3 JITTER_DURATION=30 (seconds per tool and wait mode,
# split over the rounds) WAITS="nanosleep hybrid" MLOCK=1 (the probe's --mlock)
# DURATION=60 (per stress tick) TICKS="1ms 250us" OVERHEAD_DURATION=10 (per schedule)
# OVERHEAD_COUNTS="1 2 4 8" OVERHEAD_WAIT=nanosleep PARTS="jitter stress overhead".
#
# Needs root (or CAP_SYS_NICE) for SCHED_FIFO; without it everything runs in the
# normal class and the script says so. Needs python3. Installs nothing. Records go to
# OUT_DIR (default target/validate-executive-DATE). Exit status 1 if a run fails or a
# stress run reports an incoherent cell; timings are reported, never judged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need python3 "python3 is needed to read the records."

# The ictus binary (it hosts the stress test's subsystem B itself: process = "own").
ictus_binary
export ICTUS ROOT="$root"
export CPU=${CPU:-1} PRIORITY=${PRIORITY:-80} ROUNDS=${ROUNDS:-3}
export JITTER_DURATION=${JITTER_DURATION:-30} WAITS=${WAITS:-"nanosleep hybrid"} MLOCK=${MLOCK:-1}
export DURATION=${DURATION:-60} TICKS=${TICKS:-"1ms 250us"}
export OVERHEAD_DURATION=${OVERHEAD_DURATION:-10} OVERHEAD_COUNTS=${OVERHEAD_COUNTS:-"1 2 4 8"}
export OVERHEAD_WAIT=${OVERHEAD_WAIT:-nanosleep} PARTS=${PARTS:-"jitter stress overhead"}
export OUT_DIR=${OUT_DIR:-$root/target/validate-executive-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
exec python3 "$here/validate_executive.py"
