#!/usr/bin/env bash
# Injected causes, named: runs `ictus probe timer` on the last CPU while one known cause
# disturbs it, and prints how many of the misses that cause made were named as its
# reason, how many of those with a time within 0.5x to 1.5x of their lateness (issue
# 32's bound), and the misses' accounted shares (what the guest's counters account for):
#
#   burner     a SCHED_FIFO 99 process burning 5 ms every 500 ms on the measured CPU
#   throttle   a busy SCHED_FIFO 50 spinner on the measured CPU (RT throttling)
#   faults     a SCHED_FIFO 99 process on the measured CPU touching 2,000 fresh pages
#              (a minor fault each, about 5 ms) every 500 ms: another process's faults
#   irq        direct disk writes, their interrupt on the measured CPU
#              (--explain-threshold 50us: an interrupt delays by tens of us, not a period)
#   irq-away   the same writes, their interrupt on another CPU: the control, whose
#              misses are the writes' other costs (on a VM the host serving them)
#   none       nothing injected (what the machine does by itself)
#
#   bench/validate-explain.sh                      # 8 s per cause
#   DURATION=20 CAUSES="burner throttle" bench/validate-explain.sh
#
# Needs root (SCHED_FIFO, IRQ affinity), python3, chrt and taskset. Restores what it
# changes (the IRQ's affinity) and ends what it starts, by pid, also on failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need python3 "python3 is needed to run the injected loads and read the records."
need chrt "chrt (util-linux) is needed to run the injected loads at SCHED_FIFO."
[ "$(id -u)" = 0 ] || { echo "run as root: the injected loads need SCHED_FIFO" >&2; exit 3; }

ictus_binary
export ICTUS
export DURATION=${DURATION:-8} CAUSES=${CAUSES:-"none burner throttle faults irq irq-away"}
export OUT_DIR=${OUT_DIR:-$root/target/validate-explain-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
exec python3 "$here/validate_explain.py"
