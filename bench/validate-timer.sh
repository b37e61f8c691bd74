#!/usr/bin/env bash
# Validates `ictus probe timer` against cyclictest (Debian's rt-tests) on this machine,
# in one run, alternating the two tools in the same configuration, and prints both
# summaries side by side with their ratios. Then compares ictus's nanosleep and hybrid
# modes at a 100 us interval. Installs nothing: without cyclictest it says so and stops.
#
#   bench/validate-timer.sh                 # CPU 1, 20 s per tool in 2 alternating rounds
#   CPU=0 DURATION=60 ROUNDS=3 bench/validate-timer.sh
#   ICTUS=/path/to/ictus bench/validate-timer.sh   # use a prebuilt binary
#   PM_QOS=held bench/validate-timer.sh     # only the CPU latency QoS held (default: held off)
#
# Both tools always run at the same CPU latency QoS setting, and each table says which:
# "held" (/dev/cpu_dma_latency at 0, cyclictest's default and ictus's) and "off"
# (cyclictest --laptop, ictus --pm-qos off). A last table measures what ictus's miss
# sampler costs the measuring thread (--explain off against on, alternated).
#
# Needs root (or CAP_SYS_NICE and CAP_IPC_LOCK) for SCHED_FIFO and mlockall, and python3.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need cyclictest "cyclictest is not installed: install Debian's rt-tests (apt-get install rt-tests), then rerun."
need python3 "python3 is needed to compare the records."

ictus_binary
export ICTUS
export CPU=${CPU:-1} DURATION=${DURATION:-20} ROUNDS=${ROUNDS:-2} HYBRID_DURATION=${HYBRID_DURATION:-10}
export OUT_DIR=${OUT_DIR:-$root/target/validate-timer-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
exec python3 "$here/validate_timer.py"
